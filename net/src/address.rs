//! Which destinations are internal: the host itself, its neighbours and the
//! networks behind it. The network tools reach none of them unless the
//! operator listed it in `NETWORK_ALLOW`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use sysward_ipc::net::{in_range, NetAllow};

/// Why an IPv4 address is internal, or None for a public one.
fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u8, &str)] = &[
        ([0, 0, 0, 0], 8, "\"this network\" (0.0.0.0/8)"),
        ([127, 0, 0, 0], 8, "loopback (the host itself)"),
        ([10, 0, 0, 0], 8, "private (RFC 1918)"),
        ([172, 16, 0, 0], 12, "private (RFC 1918)"),
        ([192, 168, 0, 0], 16, "private (RFC 1918)"),
        (
            [100, 64, 0, 0],
            10,
            "shared address space (CGNAT, 100.64.0.0/10)",
        ),
        (
            [169, 254, 0, 0],
            16,
            "link-local (169.254.0.0/16, where cloud metadata services answer)",
        ),
        (
            [192, 0, 0, 0],
            24,
            "IETF protocol assignments (192.0.0.0/24)",
        ),
        ([192, 0, 2, 0], 24, "documentation (192.0.2.0/24)"),
        ([198, 51, 100, 0], 24, "documentation (198.51.100.0/24)"),
        ([203, 0, 113, 0], 24, "documentation (203.0.113.0/24)"),
        ([198, 18, 0, 0], 15, "benchmarking (198.18.0.0/15)"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([240, 0, 0, 0], 4, "reserved or broadcast (240.0.0.0/4)"),
    ];
    RANGES.iter().find_map(|(net, prefix, why)| {
        in_range(IpAddr::V4(ip), IpAddr::V4(Ipv4Addr::from(*net)), *prefix).then_some(*why)
    })
}

/// Why an IPv6 address is internal, or None for a public one. Forms that
/// carry an IPv4 address (mapped, compatible, NAT64, 6to4) are judged by it.
fn internal_v6(ip: Ipv6Addr) -> Option<String> {
    let seg = ip.segments();
    let embedded = |a: u16, b: u16| Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8);
    if ip.is_unspecified() {
        return Some("the unspecified address (::)".into());
    }
    if ip.is_loopback() {
        return Some("loopback (the host itself)".into());
    }
    let v6 = IpAddr::V6(ip);
    let net = |s: &str| {
        s.parse::<IpAddr>()
            .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
    };
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated).
    if in_range(v6, net("::ffff:0:0"), 96) || in_range(v6, net("::"), 96) {
        let inner = embedded(seg[6], seg[7]);
        return Some(match internal_v4(inner) {
            Some(why) => format!("an IPv6 form of {inner}, {why}"),
            None => format!("an IPv6 form of {inner} (use the IPv4 address itself)"),
        });
    }
    if in_range(v6, net("64:ff9b::"), 96) || in_range(v6, net("64:ff9b:1::"), 48) {
        let inner = embedded(seg[6], seg[7]);
        return internal_v4(inner).map(|why| format!("NAT64 of {inner}, {why}"));
    }
    if in_range(v6, net("2002::"), 16) {
        let inner = embedded(seg[1], seg[2]);
        return internal_v4(inner).map(|why| format!("6to4 of {inner}, {why}"));
    }
    const RANGES: &[(&str, u8, &str)] = &[
        ("fc00::", 7, "unique local (fc00::/7)"),
        ("fe80::", 10, "link-local (fe80::/10)"),
        ("fec0::", 10, "site-local (fec0::/10)"),
        ("ff00::", 8, "multicast"),
        ("100::", 64, "discard-only (100::/64)"),
        ("2001:db8::", 32, "documentation (2001:db8::/32)"),
        ("2001::", 32, "Teredo tunnel (2001::/32)"),
    ];
    RANGES
        .iter()
        .find(|(n, prefix, _)| in_range(v6, net(n), *prefix))
        .map(|(_, _, why)| (*why).to_string())
}

/// Why `ip` is internal, or None when it is a public address.
pub fn internal(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => internal_v4(v4).map(str::to_string),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

/// The addresses of `host` the tools may connect to on `port`: public ones,
/// and internal ones the operator listed. An error (saying what to list)
/// when none is left.
pub fn admit(
    host: &str,
    addrs: &[IpAddr],
    port: u16,
    allow: &[NetAllow],
) -> Result<Vec<SocketAddr>, String> {
    let mut admitted = Vec::new();
    let mut refused = Vec::new();
    for ip in addrs {
        match internal(*ip) {
            Some(why) if !allow.iter().any(|a| a.permits(host, *ip, port)) => {
                refused.push(format!("{ip} is {why}"));
            }
            _ => admitted.push(SocketAddr::new(*ip, port)),
        }
    }
    if admitted.is_empty() {
        if refused.is_empty() {
            return Err(format!("{host} has no address"));
        }
        return Err(format!(
            "refused: {host} port {port} is an internal destination ({}); the operator can allow it with NETWORK_ALLOW in agent.md's policy block (an address, range or host name, optionally with :PORT)",
            refused.join("; ")
        ));
    }
    Ok(admitted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn internal_addresses_in_every_spelling_are_internal() {
        for s in [
            "127.0.0.1",
            "127.255.0.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "169.254.169.254",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::1",
        ] {
            assert!(internal(ip(s)).is_some(), "{s} must be internal");
        }
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(internal(ip(s)), None, "{s} is public");
        }
        // A mapped public address is still not reached through its v6 form.
        assert!(internal(ip("::ffff:8.8.8.8")).is_some());
    }

    #[test]
    fn only_listed_internal_destinations_are_admitted() {
        let none: Vec<NetAllow> = Vec::new();
        let refused = admit("localhost", &[ip("127.0.0.1")], 8080, &none);
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("NETWORK_ALLOW") && e.contains("loopback")),
            "{refused:?}"
        );
        let allow = vec![NetAllow::parse("127.0.0.1:8080").unwrap_or_else(|e| panic!("{e}"))];
        assert_eq!(
            admit("localhost", &[ip("127.0.0.1")], 8080, &allow),
            Ok(vec!["127.0.0.1:8080"
                .parse()
                .unwrap_or_else(|e| panic!("{e}"))])
        );
        assert!(admit("localhost", &[ip("127.0.0.1")], 8081, &allow).is_err());
        // A name resolving to a public and an internal address keeps only the
        // public one.
        let mixed = admit("x.example", &[ip("127.0.0.1"), ip("1.1.1.1")], 443, &none);
        assert_eq!(mixed.map(|v| v.len()), Ok(1));
    }
}
