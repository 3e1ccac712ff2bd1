//! What the broker asks of `sysward-net`, the one-shot confined network
//! executor, and what it answers: one [`NetSpec`] in (as [`NetRequest::Run`]), one [`NetReport`] out,
//! on an inherited SEQPACKET socket (fd [`NET_CHANNEL_FD`]).
//!
//! One spec is one connection: an HTTP redirect comes back as
//! [`NetReport::Redirect`], and the broker decides whether to follow it with a
//! new executor whose Landlock ruleset allows the new port only.
//!
//! The `*Args` structs are the model's tool arguments exactly as the tools
//! declare them (`deny_unknown_fields`).

use crate::impl_message;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

/// The fd number the network executor finds its channel on.
pub const NET_CHANNEL_FD: i32 = 3;

/// The fd a `download` executor finds the broker's temporary file on (open
/// for writing; the executor never learns its path).
pub const NET_DOWNLOAD_FD: i32 = 4;

/// Longest URL accepted anywhere (request, redirect, search endpoint).
pub const MAX_URL_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeTcpArgs {
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeDnsArgs {
    pub name: String,
    /// A, AAAA, MX, TXT or CNAME (default A).
    #[serde(default, rename = "type")]
    pub record_type: Option<String>,
    /// `IP` or `IP:PORT` of a name server; default: the host's resolver.
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeHttpArgs {
    pub url: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    pub url: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `download`: at most one of `sha256`, `sha512`, `checksum_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DownloadArgs {
    pub url: String,
    /// The file to create; default `.agent/downloads/NAME` (NAME from the
    /// URL). A path ending in `/` is a directory the URL's name goes into.
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub sha256: Option<String>,
    #[serde(default)]
    pub sha512: Option<String>,
    /// A sha256sum/sha512sum-format file listing the download's name.
    #[serde(default)]
    pub checksum_url: Option<String>,
    /// Replace an existing file (kept as a backup).
    #[serde(default)]
    pub overwrite: Option<bool>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    pub query: String,
    /// At most this many results (default and cap: [`MAX_SEARCH_RESULTS`]).
    #[serde(default)]
    pub max_results: Option<u32>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The most search results a model gets from one search.
pub const MAX_SEARCH_RESULTS: u32 = 10;

/// DNS record types `probe_dns` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DnsKind {
    A,
    Aaaa,
    Mx,
    Txt,
    Cname,
}

impl DnsKind {
    pub fn parse(s: &str) -> Option<DnsKind> {
        Some(match s.to_ascii_uppercase().as_str() {
            "A" => DnsKind::A,
            "AAAA" => DnsKind::Aaaa,
            "MX" => DnsKind::Mx,
            "TXT" => DnsKind::Txt,
            "CNAME" => DnsKind::Cname,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DnsKind::A => "A",
            DnsKind::Aaaa => "AAAA",
            DnsKind::Mx => "MX",
            DnsKind::Txt => "TXT",
            DnsKind::Cname => "CNAME",
        }
    }
}

/// What an HTTP exchange is for: how the executor reads and renders the
/// response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HttpPurpose {
    /// Status, selected headers, TLS certificate, timings; the body is not
    /// kept.
    Probe,
    /// The body as text (HTML converted), marked as untrusted web content.
    Fetch,
    /// A SearXNG-compatible JSON answer rendered as a result list.
    Search { max_results: u32 },
    /// An NVD CVE API 2.0 answer for one CVE, read into an
    /// [`crate::cve::NvdRecord`].
    Nvd { cve: String },
    /// The Debian security tracker's JSON: the entries `query` asks for,
    /// judged against the host's dpkg database and release, as
    /// [`crate::cve::TrackerFindings`].
    DebianTracker(crate::cve::TrackerQuery),
    /// The body written as it comes to the file on [`NET_DOWNLOAD_FD`]
    /// (a 2xx answer only); the broker hashes and places it.
    Download,
}

/// One network operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetOp {
    ProbeTcp {
        host: String,
        port: u16,
    },
    ProbeDns {
        name: String,
        kind: DnsKind,
        /// A name server other than the host's resolver.
        server: Option<(IpAddr, u16)>,
    },
    /// One GET of `url` (http or https); redirects are reported, not followed.
    Http {
        url: String,
        purpose: HttpPurpose,
    },
}

/// Where a destination the operator listed in `NETWORK_ALLOW` may be.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NetDest {
    /// An address range (`10.0.0.0/8`, `127.0.0.1`, `fd00::/8`).
    Range { addr: IpAddr, prefix: u8 },
    /// A host name as requested (lower case): its addresses are accepted
    /// whatever range they fall in.
    Host(String),
}

/// One `NETWORK_ALLOW` entry: a destination and optionally one port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NetAllow {
    pub dest: NetDest,
    pub port: Option<u16>,
}

impl NetAllow {
    /// Parses `10.0.0.0/8`, `127.0.0.1:8080`, `[::1]:443`, `fd00::/8`,
    /// `intranet.example:443`. Strict: anything else is an error saying what
    /// is expected.
    pub fn parse(item: &str) -> Result<NetAllow, String> {
        let item = item.trim();
        let expected = "an address, a range (10.0.0.0/8, fd00::/8) or a host name, each optionally with :PORT ([::1]:443 for IPv6)";
        if item.is_empty() || item.len() > 255 || item.contains(char::is_whitespace) {
            return Err(expected.to_string());
        }
        let port_of = |p: &str| -> Result<u16, String> {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{p:?} is not a port (1 to 65535)"))
        };
        // [v6]:port or [v6/len]:port
        if let Some(rest) = item.strip_prefix('[') {
            let (inside, after) = rest.split_once(']').ok_or_else(|| expected.to_string())?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(port_of(p)?),
                None if after.is_empty() => None,
                None => return Err(expected.to_string()),
            };
            let dest = range_of(inside).ok_or_else(|| expected.to_string())?;
            if !matches!(
                dest,
                NetDest::Range {
                    addr: IpAddr::V6(_),
                    ..
                }
            ) {
                return Err("brackets are for IPv6 addresses".to_string());
            }
            return Ok(NetAllow { dest, port });
        }
        // A bare IPv6 address or range has more than one colon and no port.
        if item.matches(':').count() > 1 {
            let dest = range_of(item).ok_or_else(|| expected.to_string())?;
            return Ok(NetAllow { dest, port: None });
        }
        let (host, port) = match item.rsplit_once(':') {
            Some((h, p)) => (h, Some(port_of(p)?)),
            None => (item, None),
        };
        if let Some(dest) = range_of(host) {
            return Ok(NetAllow { dest, port });
        }
        if host.contains('/') {
            return Err(format!("{host:?} is not an address range"));
        }
        if !is_host_name(host) {
            return Err(expected.to_string());
        }
        Ok(NetAllow {
            dest: NetDest::Host(host.to_ascii_lowercase()),
            port,
        })
    }

    /// Whether this entry lets `host` (as requested) reach `ip` on `port`.
    pub fn permits(&self, host: &str, ip: IpAddr, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match &self.dest {
            NetDest::Host(h) => h.eq_ignore_ascii_case(host.trim_end_matches('.')),
            NetDest::Range { addr, prefix } => in_range(ip, *addr, *prefix),
        }
    }
}

impl fmt::Display for NetAllow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dest = match &self.dest {
            NetDest::Host(h) => h.clone(),
            NetDest::Range { addr, prefix } => {
                let full = if addr.is_ipv4() { 32 } else { 128 };
                if *prefix == full {
                    addr.to_string()
                } else {
                    format!("{addr}/{prefix}")
                }
            }
        };
        match (self.port, &self.dest) {
            (
                Some(p),
                NetDest::Range {
                    addr: IpAddr::V6(_),
                    ..
                },
            ) => write!(f, "[{dest}]:{p}"),
            (Some(p), _) => write!(f, "{dest}:{p}"),
            (None, _) => f.write_str(&dest),
        }
    }
}

/// `ADDR` or `ADDR/LEN`, with no host bits set beyond the prefix.
fn range_of(s: &str) -> Option<NetDest> {
    let (addr, prefix) = match s.split_once('/') {
        Some((a, l)) => {
            if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) || l.len() > 3 {
                return None;
            }
            (a.parse::<IpAddr>().ok()?, Some(l.parse::<u8>().ok()?))
        }
        None => (s.parse::<IpAddr>().ok()?, None),
    };
    let full = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = prefix.unwrap_or(full);
    if prefix > full || !in_range(addr, addr, prefix) || masked(addr, prefix) != addr {
        return None;
    }
    Some(NetDest::Range { addr, prefix })
}

fn masked(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let mask = if prefix == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(prefix))
            };
            IpAddr::V4((bits & mask).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = if prefix == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(prefix))
            };
            IpAddr::V6((bits & mask).into())
        }
    }
}

/// Whether `ip` lies in `net/prefix` (same family only).
pub fn in_range(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(_), IpAddr::V4(_)) if prefix <= 32 => masked(ip, prefix) == net,
        (IpAddr::V6(_), IpAddr::V6(_)) if prefix <= 128 => masked(ip, prefix) == net,
        _ => false,
    }
}

/// A DNS host name: labels of letters, digits, `-` and `_`, dots between,
/// the last not all digits (`127.1` or `0x7f.1` are IPv4 shorthands to
/// getaddrinfo, not names).
pub fn is_host_name(s: &str) -> bool {
    let s = s.strip_suffix('.').unwrap_or(s);
    !s.is_empty()
        && s.len() <= 253
        && !s
            .rsplit('.')
            .next()
            .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()))
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// One request to the network executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetSpec {
    pub op: NetOp,
    /// The unprivileged account it drops to (never root).
    pub uid: u32,
    pub gid: u32,
    /// The operator's `NETWORK_ALLOW` list: the only loopback, private,
    /// link-local or otherwise internal destinations it may reach.
    pub allow: Vec<NetAllow>,
    /// The whole exchange (resolution, connection, body) ends by then.
    pub timeout_ms: u64,
    /// Largest response body read; a longer one is an error.
    pub max_body: u64,
    /// PEM trust roots for https (the system bundle and any extra roots the
    /// broker read); the executor reads no certificate store itself.
    pub roots_pem: Vec<u8>,
}

/// The executor's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetReport {
    /// The operation's rendered result (`url`: where it was fetched from).
    Done { output: String, url: Option<String> },
    /// An HTTP redirect, not followed: `location` is absolute.
    Redirect { status: u16, location: String },
    /// It failed; `error` says why and what to do.
    Failed { error: String },
    /// One CVE from NVD.
    Nvd(Box<crate::cve::NvdRecord>),
    /// What the Debian tracker says about the host.
    Tracker(crate::cve::TrackerFindings),
    /// Confinement could not be applied in full: nothing was sent.
    ConfinementFailed { step: String, error: String },
    /// The spec itself was refused.
    Refused { error: String },
    /// A download's body is in the broker's file: `bytes` written, the
    /// server's content type (cleaned, possibly empty).
    Downloaded {
        url: String,
        bytes: u64,
        content_type: String,
    },
}

/// A spec carries up to a few MiB of trust roots.
pub const NET_SPEC_MAX: usize = 8 << 20;
/// A report carries up to the rendered (capped) body.
pub const NET_REPORT_MAX: usize = 8 << 20;

/// The one message the broker sends (an enum, as every message is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NetRequest {
    Run(NetSpec),
}

impl_message!(NetRequest, "network spec", NET_SPEC_MAX, { Run = 1 });
impl_message!(NetReport, "network report", NET_REPORT_MAX, {
    Done = 1, Redirect = 2, Failed = 3, ConfinementFailed = 4, Refused = 5, Nvd = 6,
    Tracker = 7, Downloaded = 8,
});

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED))
    }

    #[test]
    fn allow_entries_parse_strictly_and_render_back() {
        for (text, shown) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("[::1]:443", "[::1]:443"),
            ("fd00::/8", "fd00::/8"),
            ("Intranet.Example:443", "intranet.example:443"),
            ("192.168.1.5", "192.168.1.5"),
        ] {
            let parsed = NetAllow::parse(text);
            assert_eq!(
                parsed.as_ref().map(|a| a.to_string()),
                Ok(shown.to_string()),
                "{text}"
            );
            assert_eq!(NetAllow::parse(shown), parsed, "{shown} parses back");
        }
        for bad in [
            "",
            "10.0.0.1/8",
            "10.0.0.0/33",
            "10.0.0.0/",
            "127.0.0.1:0",
            "127.0.0.1:70000",
            "[127.0.0.1]:80",
            "a b",
            "exa mple.com",
            "-bad.example",
            "host:port",
            "::1:443x",
            "1.2.3",
            "127.1",
            "0x7f.1",
            "*.example.com",
            "http://x",
        ] {
            assert!(NetAllow::parse(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn an_entry_permits_only_its_range_port_or_host() {
        let net = NetAllow::parse("10.0.0.0/8").unwrap_or_else(|e| panic!("{e}"));
        assert!(net.permits("x", ip("10.1.2.3"), 80));
        assert!(!net.permits("x", ip("11.0.0.1"), 80));
        assert!(
            !net.permits("x", ip("::ffff:10.1.2.3"), 80),
            "families never mix"
        );
        let one = NetAllow::parse("127.0.0.1:8080").unwrap_or_else(|e| panic!("{e}"));
        assert!(one.permits("localhost", ip("127.0.0.1"), 8080));
        assert!(!one.permits("localhost", ip("127.0.0.1"), 8081));
        let host = NetAllow::parse("intranet.example").unwrap_or_else(|e| panic!("{e}"));
        assert!(host.permits("INTRANET.example.", ip("10.9.9.9"), 443));
        assert!(!host.permits("evil.example", ip("10.9.9.9"), 443));
    }
}
