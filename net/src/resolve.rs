//! Host names to addresses, through the host's resolver (glibc's
//! getaddrinfo: /etc/hosts, /etc/resolv.conf, as every program on the host).

use std::net::{IpAddr, ToSocketAddrs};

/// Most addresses kept for one name.
const MAX_ADDRESSES: usize = 16;

/// The addresses of `host` (an IP literal is its own address).
pub fn host(host: &str) -> Result<Vec<IpAddr>, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    if !sysward_ipc::net::is_host_name(host) {
        return Err(format!("{host:?} is not a host name"));
    }
    let found = (host, 0u16)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?;
    let mut addrs: Vec<IpAddr> = Vec::new();
    for a in found {
        if !addrs.contains(&a.ip()) {
            addrs.push(a.ip());
        }
        if addrs.len() == MAX_ADDRESSES {
            break;
        }
    }
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    Ok(addrs)
}
