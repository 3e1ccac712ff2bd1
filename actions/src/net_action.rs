//! The network tools (`probe_tcp`, `probe_dns`, `probe_http`, `web_fetch`,
//! `web_search`, `cve_lookup`, `download`): their plan, decoded strictly
//! from the model's arguments, and their execution by `sysward-net`, one
//! confined process per connection ([`crate::net_hops`], which also follows
//! redirects; `cve_lookup`'s several requests are [`crate::cve_action`], a
//! download's checksum file, file and placement [`crate::download_action`]).
//! The broker itself opens no socket and parses no HTTP: it hands each
//! executor one spec and reads back one report.

use crate::net_hops::{account, check_url, encode_query, Hops};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use sysward_ipc::agent::{ToolResult, ToolStatus};
use sysward_ipc::cve::{CveLookupArgs, TrackerQuery};
use sysward_ipc::net::{
    DnsKind, DownloadArgs, HttpPurpose, NetOp, NetReport, ProbeDnsArgs, ProbeHttpArgs,
    ProbeTcpArgs, WebFetchArgs, WebSearchArgs, MAX_SEARCH_RESULTS,
};
use sysward_ipc::tools::Tool;

pub use crate::net_hops::{check_redirect, NetRun, MAX_REDIRECTS, NET_BINARY};

/// Largest body `web_fetch` reads (the text shown is cut further).
pub const FETCH_MAX_BODY: u64 = 4 << 20;
/// Largest answer read from the search service.
pub const SEARCH_MAX_BODY: u64 = 1 << 20;

/// A probe's wait (at most the policy's command timeout).
const DEFAULT_PROBE_SECS: u64 = 10;
/// A fetch or search's wait when the policy's command timeout is longer.
const MAX_FETCH_SECS: u64 = 60;

/// What a network tool will do, decoded from the model's arguments.
#[derive(Debug, Clone)]
pub enum NetTool {
    ProbeTcp {
        host: String,
        port: u16,
    },
    ProbeDns {
        name: String,
        kind: DnsKind,
        server: Option<(std::net::IpAddr, u16)>,
    },
    ProbeHttp {
        url: String,
    },
    WebFetch {
        url: String,
    },
    WebSearch {
        query: String,
        max_results: u32,
    },
    CveLookup {
        query: TrackerQuery,
    },
    Download(crate::download::DownloadPlan),
}

/// The broker's plan of one network tool call.
#[derive(Debug, Clone)]
pub struct NetPlan {
    pub tool: Tool,
    pub what: NetTool,
    pub display: String,
    pub reason: String,
    pub cwd: PathBuf,
    pub timeout_secs: Option<u64>,
}

fn decode<T: serde::de::DeserializeOwned>(tool: Tool, arguments: &str) -> Result<T, String> {
    serde_json::from_str(arguments)
        .map_err(|e| format!("invalid arguments for {}: {e}", tool.name()))
}

fn check_host(host: &str) -> Result<(), String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_ok() || sysward_ipc::net::is_host_name(host) {
        Ok(())
    } else {
        Err(format!(
            "{:?} is not a host name or IP address",
            crate::sanitize::one_line(host, 80)
        ))
    }
}

/// `IP`, `IP:PORT` or `[IPv6]:PORT`.
fn parse_server(s: &str) -> Result<(std::net::IpAddr, u16), String> {
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Ok((ip, 53));
    }
    s.parse::<std::net::SocketAddr>()
        .ok()
        .filter(|a| a.port() != 0)
        .map(|a| (a.ip(), a.port()))
        .ok_or_else(|| {
            format!(
                "server {:?}: expected IP, IP:PORT or [IPv6]:PORT",
                crate::sanitize::one_line(s, 80)
            )
        })
}

/// Decodes a network tool's arguments into its plan.
pub fn plan(tool: Tool, arguments: &str, cwd: &Path) -> Result<NetPlan, String> {
    let (what, reason, timeout_secs) = match tool {
        Tool::ProbeTcp => {
            let a: ProbeTcpArgs = decode(tool, arguments)?;
            check_host(&a.host)?;
            if a.port == 0 {
                return Err("probe_tcp: port must be 1 to 65535".into());
            }
            let t = Some(DEFAULT_PROBE_SECS);
            (
                NetTool::ProbeTcp {
                    host: a.host,
                    port: a.port,
                },
                a.reason,
                t,
            )
        }
        Tool::ProbeDns => {
            let a: ProbeDnsArgs = decode(tool, arguments)?;
            if !sysward_ipc::net::is_host_name(&a.name) {
                return Err(format!(
                    "probe_dns: {:?} is not a DNS name",
                    crate::sanitize::one_line(&a.name, 80)
                ));
            }
            let kind = match a.record_type.as_deref() {
                None => DnsKind::A,
                Some(t) => DnsKind::parse(t).ok_or_else(|| {
                    format!(
                        "probe_dns: type {:?} is not one of A, AAAA, MX, TXT, CNAME",
                        crate::sanitize::one_line(t, 20)
                    )
                })?,
            };
            let server = a.server.as_deref().map(parse_server).transpose()?;
            (
                NetTool::ProbeDns {
                    name: a.name,
                    kind,
                    server,
                },
                a.reason,
                Some(DEFAULT_PROBE_SECS),
            )
        }
        Tool::ProbeHttp => {
            let a: ProbeHttpArgs = decode(tool, arguments)?;
            check_url(&a.url)?;
            let t = Some(DEFAULT_PROBE_SECS);
            (NetTool::ProbeHttp { url: a.url }, a.reason, t)
        }
        Tool::WebFetch => {
            let a: WebFetchArgs = decode(tool, arguments)?;
            check_url(&a.url)?;
            (NetTool::WebFetch { url: a.url }, a.reason, None)
        }
        Tool::WebSearch => {
            let a: WebSearchArgs = decode(tool, arguments)?;
            let query = a.query.trim().to_string();
            if query.is_empty()
                || query.chars().count() > 400
                || query.chars().any(char::is_control)
            {
                return Err("web_search: the query must be 1 to 400 characters on one line".into());
            }
            let max_results = a
                .max_results
                .unwrap_or(MAX_SEARCH_RESULTS)
                .clamp(1, MAX_SEARCH_RESULTS);
            (NetTool::WebSearch { query, max_results }, a.reason, None)
        }
        Tool::CveLookup => {
            let a: CveLookupArgs = decode(tool, arguments)?;
            (
                NetTool::CveLookup {
                    query: crate::cve_action::query(&a)?,
                },
                a.reason,
                None,
            )
        }
        Tool::Download => {
            let a: DownloadArgs = decode(tool, arguments)?;
            let (d, reason, timeout) = crate::download::plan(a, cwd, check_url)?;
            (NetTool::Download(d), reason, timeout)
        }
        other => return Err(format!("{} is not a network tool", other.name())),
    };
    let display = match &what {
        NetTool::ProbeTcp { host, port } => format!("probe_tcp {host} {port}"),
        NetTool::ProbeDns { name, kind, server } => match server {
            Some((ip, port)) => format!(
                "probe_dns {name} {} @{}",
                kind.as_str(),
                std::net::SocketAddr::new(*ip, *port)
            ),
            None => format!("probe_dns {name} {}", kind.as_str()),
        },
        NetTool::ProbeHttp { url } => format!("probe_http {url}"),
        NetTool::WebFetch { url } => format!("web_fetch {url}"),
        NetTool::WebSearch { query, .. } => {
            format!("web_search {}", crate::command_plan::shell_quote(query))
        }
        NetTool::CveLookup { query } => match query {
            TrackerQuery::Cve(id) => format!("cve_lookup {id}"),
            TrackerQuery::Package(p) => format!("cve_lookup package {p}"),
            TrackerQuery::Installed => "cve_lookup installed packages".to_string(),
        },
        NetTool::Download(d) => crate::download_action::display(d),
    };
    Ok(NetPlan {
        tool,
        what,
        display,
        reason: reason.unwrap_or_default(),
        cwd: cwd.to_path_buf(),
        timeout_secs,
    })
}

/// The search request for `query` at the operator's `SEARCH_URL`.
pub fn search_url(base: &str, query: &str) -> Result<String, String> {
    check_url(base).map_err(|e| format!("SEARCH_URL in init.conf: {e}"))?;
    if base.contains('#') {
        return Err("SEARCH_URL in init.conf must not contain a fragment (#)".into());
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}q={}&format=json", encode_query(query)))
}

/// The result, whether anything was sent, and each hop's URL (for the audit).
pub struct NetOutcome {
    pub result: ToolResult,
    pub ran: bool,
    pub hops: Vec<String>,
    /// A download's outcome for the audit (path, size, hashes, verified).
    pub download: Option<Value>,
}

/// Runs one network tool call. The start record is written first (nothing
/// is sent before it is on disk).
pub fn execute(
    run: &NetRun<'_>,
    plan: &NetPlan,
    timeout: Duration,
    mut start_record: Value,
    call_id: &str,
) -> NetOutcome {
    let refused = |status, msg: String| NetOutcome {
        result: ToolResult::refused(call_id, status, msg),
        ran: false,
        hops: Vec::new(),
        download: None,
    };
    run.redactor.redact_json(&mut start_record);
    if let Err(e) = run.audit.record(start_record) {
        return refused(
            ToolStatus::Error,
            format!(
                "the audit log cannot be written, so nothing was sent: {}",
                crate::error::chain(&e)
            ),
        );
    }
    let started = Instant::now();
    let limit = match plan.timeout_secs {
        Some(t) => timeout.min(Duration::from_secs(t)),
        None => timeout.min(Duration::from_secs(MAX_FETCH_SECS)),
    }
    .max(Duration::from_secs(1));
    let net_path = match run
        .runner
        .exec_path
        .parent()
        .ok_or_else(|| "the executor has no directory".to_string())
        .and_then(|dir| crate::spawn::checked(dir, NET_BINARY).map_err(|e| crate::error::chain(&e)))
    {
        Ok(p) => p,
        Err(e) => return refused(ToolStatus::Error, format!("{e}; nothing was sent")),
    };
    let mut hops = Hops {
        run,
        net_path,
        account: account(),
        deadline: started + limit,
        limit,
        urls: Vec::new(),
        ran: false,
    };
    let report = match &plan.what {
        NetTool::CveLookup { query } => crate::cve_action::lookup(&mut hops, query),
        NetTool::Download(d) => {
            let (result, audit) = crate::download_action::download(&mut hops, d, call_id, started);
            return NetOutcome {
                result,
                ran: hops.ran,
                hops: hops.urls,
                download: Some(audit),
            };
        }
        what => match simple_op(run, what) {
            Ok((op, https_only_after, max_body)) => {
                hops.fetch(op, https_only_after, max_body, None)
            }
            Err(e) => return refused(ToolStatus::Error, e),
        },
    };
    let mut result = ToolResult::message(call_id, ToolStatus::Ok, String::new());
    result.duration_ms = started.elapsed().as_millis() as u64;
    match report {
        NetReport::Done { output, .. } => {
            result.stdout = output;
            if hops.urls.len() > 1 && !matches!(plan.what, NetTool::CveLookup { .. }) {
                result.message = format!(
                    "followed {} redirect(s): {}",
                    hops.urls.len() - 1,
                    hops.urls.join(" -> ")
                );
            }
        }
        NetReport::Redirect { .. }
        | NetReport::Nvd(_)
        | NetReport::Tracker(_)
        | NetReport::Downloaded { .. } => {
            result.status = ToolStatus::Error;
            result.message = "an unexpected answer from the network executor".into();
        }
        NetReport::Failed { error } => {
            result.status = if error.contains("time cap") {
                ToolStatus::Timeout
            } else {
                ToolStatus::Error
            };
            result.message = error;
        }
        NetReport::ConfinementFailed { step, error } => {
            result.status = ToolStatus::Error;
            result.message = format!("confinement failed at {step}: {error}; nothing was sent");
        }
        NetReport::Refused { error } => {
            result.status = ToolStatus::Error;
            result.message = format!("the network executor refused the request: {error}");
        }
    }
    crate::redact::redact_tool_result(&run.redactor, &mut result);
    NetOutcome {
        result,
        ran: hops.ran,
        hops: hops.urls,
        download: None,
    }
}

/// The operation of a one-request tool, whether its redirects may need trust
/// roots, and its body cap.
fn simple_op(run: &NetRun<'_>, what: &NetTool) -> Result<(NetOp, bool, u64), String> {
    Ok(match what {
        NetTool::ProbeTcp { host, port } => (
            NetOp::ProbeTcp {
                host: host.clone(),
                port: *port,
            },
            false,
            0,
        ),
        NetTool::ProbeDns { name, kind, server } => (
            NetOp::ProbeDns {
                name: name.clone(),
                kind: *kind,
                server: *server,
            },
            false,
            0,
        ),
        NetTool::ProbeHttp { url } => (
            NetOp::Http {
                url: url.clone(),
                purpose: HttpPurpose::Probe,
            },
            false,
            0,
        ),
        NetTool::WebFetch { url } => (
            NetOp::Http {
                url: url.clone(),
                purpose: HttpPurpose::Fetch,
            },
            true,
            FETCH_MAX_BODY,
        ),
        NetTool::WebSearch { query, max_results } => {
            let Some(base) = &run.search_url else {
                return Err("web_search needs SEARCH_URL in init.conf (a SearXNG-compatible endpoint, e.g. https://search.example/search); nothing was sent".into());
            };
            (
                NetOp::Http {
                    url: search_url(base, query)?,
                    purpose: HttpPurpose::Search {
                        max_results: *max_results,
                    },
                },
                true,
                SEARCH_MAX_BODY,
            )
        }
        NetTool::CveLookup { .. } => {
            return Err("cve_lookup makes several requests".into());
        }
        NetTool::Download(_) => {
            return Err("a download is not a plain request".into());
        }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_decoded_strictly() {
        let cwd = Path::new("/");
        assert!(plan(Tool::WebFetch, r#"{"url":"https://example.org/"}"#, cwd).is_ok());
        for good in [
            r#"{"cve":"cve-2014-6271"}"#,
            r#"{"package":"bash"}"#,
            r#"{"installed":true,"reason":"audit"}"#,
        ] {
            assert!(plan(Tool::CveLookup, good, cwd).is_ok(), "{good}");
        }
        for (tool, bad) in [
            (
                Tool::WebFetch,
                r#"{"url":"https://example.org/","follow":true}"#,
            ),
            (Tool::WebFetch, r#"{"url":"file:///etc/passwd"}"#),
            (Tool::WebFetch, r#"{"url":"gopher://x/"}"#),
            (Tool::WebFetch, r#"{"url":"https://exa mple.org/"}"#),
            (Tool::ProbeTcp, r#"{"host":"a b","port":22}"#),
            (Tool::ProbeTcp, r#"{"host":"example.org","port":0}"#),
            (Tool::ProbeTcp, r#"{"host":"example.org","port":70000}"#),
            (Tool::ProbeDns, r#"{"name":"example.org","type":"ANY"}"#),
            (Tool::ProbeDns, r#"{"name":"example.org","server":"ns1"}"#),
            (Tool::WebSearch, r#"{"query":""}"#),
            (Tool::CveLookup, r#"{}"#),
            (
                Tool::CveLookup,
                r#"{"cve":"CVE-2014-6271","package":"bash"}"#,
            ),
            (
                Tool::CveLookup,
                r#"{"cve":"CVE-2014-6271","installed":true}"#,
            ),
            (Tool::CveLookup, r#"{"installed":false}"#),
            (Tool::CveLookup, r#"{"cve":"CVE-2014-6271&x=1"}"#),
            (Tool::CveLookup, r#"{"package":"bash;id"}"#),
            (Tool::CveLookup, r#"{"package":"../etc"}"#),
            (
                Tool::CveLookup,
                r#"{"cve":"CVE-2014-6271","severity":"low"}"#,
            ),
            (Tool::Exec, r#"{}"#),
        ] {
            assert!(plan(tool, bad, cwd).is_err(), "{bad}");
        }
    }

    #[test]
    fn search_urls_are_built_with_an_encoded_query() {
        assert_eq!(
            search_url("http://127.0.0.1:8888/search", "nginx 1.2 & co").unwrap(),
            "http://127.0.0.1:8888/search?q=nginx%201.2%20%26%20co&format=json"
        );
        assert_eq!(
            search_url("https://s.example/search?lang=en", "x").unwrap(),
            "https://s.example/search?lang=en&q=x&format=json"
        );
        assert!(search_url("ftp://x", "q").is_err());
    }
}
