//! `probe_tcp` and `probe_dns`.

use crate::{address, confine, resolve, runtime, Stop};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use sysward_ipc::net::{DnsKind, NetReport, NetSpec};

/// Most addresses of one name a TCP probe tries.
const MAX_PROBED: usize = 4;

/// Connects to each admitted address of `host` on `port`: open (with the
/// connect time), closed (refused) or filtered (no answer in time).
pub fn tcp(spec: &NetSpec, host: &str, port: u16) -> Result<NetReport, Stop> {
    confine::before_resolving(
        spec.uid,
        spec.gid,
        sysward_ipc::net::NET_CHANNEL_FD,
        &[port],
        &[],
    )?;
    let started = Instant::now();
    let addrs = resolve::host(host)?;
    let resolved_ms = started.elapsed().as_millis();
    let admitted = address::admit(host, &addrs, port, &spec.allow)?;
    confine::before_connecting(port)?;
    let rt = runtime()?;
    let budget = Duration::from_millis(spec.timeout_ms.max(100));
    let per_address = budget / admitted.len().clamp(1, MAX_PROBED) as u32;
    let mut out = format!("probe_tcp {host} port {port} (resolved in {resolved_ms} ms)\n");
    for addr in admitted.iter().take(MAX_PROBED) {
        let line = rt.block_on(connect_once(*addr, per_address));
        let _ = writeln!(out, "{addr}: {line}");
    }
    Ok(NetReport::Done {
        output: out,
        url: None,
    })
}

async fn connect_once(addr: SocketAddr, limit: Duration) -> String {
    let start = Instant::now();
    match tokio::time::timeout(limit, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => format!("open ({:.1} ms)", start.elapsed().as_secs_f64() * 1000.0),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => format!(
            "closed (refused in {:.1} ms)",
            start.elapsed().as_secs_f64() * 1000.0
        ),
        Ok(Err(e)) => format!("filtered or unreachable ({e})"),
        Err(_) => format!("filtered (no answer in {} ms)", limit.as_millis()),
    }
}

/// Most records shown for one lookup.
const MAX_RECORDS: usize = 50;

/// Looks up `name`'s records of `kind` through the host's resolver or
/// `server`.
pub fn dns(
    spec: &NetSpec,
    name: &str,
    kind: DnsKind,
    server: Option<(IpAddr, u16)>,
) -> Result<NetReport, Stop> {
    use hickory_resolver::config::{ConnectionConfig, NameServerConfig, ResolverConfig};
    use hickory_resolver::net::runtime::TokioRuntimeProvider;
    use hickory_resolver::proto::rr::RecordType;
    use hickory_resolver::Resolver;
    if !sysward_ipc::net::is_host_name(name) {
        return Err(Stop::Failed(format!("{name:?} is not a DNS name")));
    }
    let mut ports = vec![53];
    if let Some((ip, port)) = server {
        address::admit(&ip.to_string(), &[ip], port, &spec.allow)?;
        ports.push(port);
    }
    confine::before_resolving(
        spec.uid,
        spec.gid,
        sysward_ipc::net::NET_CHANNEL_FD,
        &ports,
        &[],
    )?;
    let record_type = match kind {
        DnsKind::A => RecordType::A,
        DnsKind::Aaaa => RecordType::AAAA,
        DnsKind::Mx => RecordType::MX,
        DnsKind::Txt => RecordType::TXT,
        DnsKind::Cname => RecordType::CNAME,
    };
    let rt = runtime()?;
    // The resolver spawns its background tasks on this runtime.
    let _inside = rt.enter();
    let provider = TokioRuntimeProvider::default();
    let builder = match server {
        Some((ip, port)) => {
            let mut udp = ConnectionConfig::udp();
            udp.port = port;
            let mut tcp = ConnectionConfig::tcp();
            tcp.port = port;
            let ns = NameServerConfig::new(ip, true, vec![udp, tcp]);
            Resolver::builder_with_config(ResolverConfig::from_name_servers(vec![ns]), provider)
        }
        None => Resolver::builder(provider).map_err(|e| {
            Stop::Failed(format!(
                "cannot read the host's resolver configuration: {e}"
            ))
        })?,
    };
    let resolver = builder
        .build()
        .map_err(|e| Stop::Failed(format!("cannot set up the resolver: {e}")))?;
    let via = match server {
        Some((ip, port)) => format!("{}", SocketAddr::new(ip, port)),
        None => "the host's resolver".to_string(),
    };
    let limit = Duration::from_millis(spec.timeout_ms.max(100));
    let started = Instant::now();
    let answer = rt
        .block_on(async { tokio::time::timeout(limit, resolver.lookup(name, record_type)).await });
    let took = started.elapsed().as_millis();
    let mut out = format!("probe_dns {name} {} via {via} ({took} ms)\n", kind.as_str());
    match answer {
        Err(_) => {
            return Err(Stop::Failed(format!(
                "no DNS answer for {name} within {} ms via {via}",
                limit.as_millis()
            )))
        }
        Ok(Err(e)) => {
            let _ = writeln!(out, "no {} records: {e}", kind.as_str());
        }
        Ok(Ok(lookup)) => {
            let answers = lookup.answers();
            if answers.is_empty() {
                let _ = writeln!(out, "no {} records", kind.as_str());
            }
            for r in answers.iter().take(MAX_RECORDS) {
                let data = crate::render::clean_line(&r.data.to_string(), 1024);
                let _ = writeln!(out, "{} {} {} {data}", r.name, r.ttl, r.record_type());
            }
        }
    }
    Ok(NetReport::Done {
        output: out,
        url: None,
    })
}
