//! The network tools (`probe_tcp`, `probe_dns`, `probe_http`, `web_fetch`,
//! `web_search`, `cve_lookup`): their plan, decoded strictly from the model's arguments,
//! and their execution by `sysward-net`, one confined process per
//! connection. The broker itself opens no socket and parses no HTTP: it
//! hands each executor one [`NetSpec`] and reads back one [`NetReport`].
//!
//! Redirects are followed here, one new executor per hop (its Landlock
//! ruleset allows that hop's port only), at most [`MAX_REDIRECTS`] of them
//! and never from https to http; each hop's destination is checked again by
//! its executor against the internal ranges and `NETWORK_ALLOW`.

use crate::action::Runner;
use crate::cancel::CancelToken;
use crate::redact::Redactor;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::agent::{ToolResult, ToolStatus};
use sysward_ipc::cve::{is_cve_id, is_package_name, CveLookupArgs, TrackerQuery};
use sysward_ipc::net::{
    DnsKind, HttpPurpose, NetAllow, NetOp, NetReport, NetRequest, NetSpec, ProbeDnsArgs,
    ProbeHttpArgs, ProbeTcpArgs, WebFetchArgs, WebSearchArgs, MAX_SEARCH_RESULTS, MAX_URL_LEN,
    NET_REPORT_MAX, NET_SPEC_MAX,
};
use sysward_ipc::tools::Tool;
use sysward_ipc::Channel;

/// The executor binary, beside `sysward-exec`.
pub const NET_BINARY: &str = "sysward-net";

/// Redirects followed for one request.
pub const MAX_REDIRECTS: usize = 5;

/// Largest body `web_fetch` reads (the text shown is cut further).
pub const FETCH_MAX_BODY: u64 = 4 << 20;
/// Largest answer read from the search service.
pub const SEARCH_MAX_BODY: u64 = 1 << 20;

/// Largest NVD answer read (one CVE is a few KiB).
pub const NVD_MAX_BODY: u64 = 4 << 20;
/// Largest Debian tracker answer read: its whole JSON is tens of MiB and
/// grows; the executor keeps it in memory only while walking it.
pub const TRACKER_MAX_BODY: u64 = 128 << 20;
/// NVD records fetched for one package or host lookup (NVD answers one CVE
/// per request and limits clients without a key to a few a minute).
pub const MAX_NVD_LOOKUPS: usize = 3;

/// The services `cve_lookup` asks when init.conf names no other.
pub const DEFAULT_NVD_URL: &str = "https://services.nvd.nist.gov/rest/json/cves/2.0";
pub const DEFAULT_TRACKER_URL: &str = "https://security-tracker.debian.org/tracker/data/json";

/// A probe's wait (at most the policy's command timeout).
const DEFAULT_PROBE_SECS: u64 = 10;
/// A fetch or search's wait when the policy's command timeout is longer.
const MAX_FETCH_SECS: u64 = 60;

/// The account the network executor drops to.
const NOBODY: &str = "nobody";
const NOBODY_ID: u32 = 65534;

/// Where the system's trust roots are (Debian's ca-certificates bundle; it
/// includes the local CAs in /usr/local/share/ca-certificates).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The bundle is refused beyond this size.
const MAX_ROOTS: u64 = 4 << 20;

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

/// An http(s) URL of printable ASCII without spaces, within the length cap.
/// The executor parses it fully; this keeps the broker's records and the
/// approval text honest.
fn check_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("the URL is longer than {MAX_URL_LEN} bytes"));
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "a URL must be printable ASCII without spaces (percent-encode the rest)".into(),
        );
    }
    let lower = url.to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        return Err("only http:// and https:// URLs are fetched".into());
    }
    Ok(())
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
                    query: cve_query(&a)?,
                },
                a.reason,
                None,
            )
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
            format!("web_search {}", crate::tools::shell_quote(query))
        }
        NetTool::CveLookup { query } => match query {
            TrackerQuery::Cve(id) => format!("cve_lookup {id}"),
            TrackerQuery::Package(p) => format!("cve_lookup package {p}"),
            TrackerQuery::Installed => "cve_lookup installed packages".to_string(),
        },
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

/// Exactly one of `cve`, `package`, `installed: true`, each checked.
fn cve_query(a: &CveLookupArgs) -> Result<TrackerQuery, String> {
    let shown = |s: &str| crate::sanitize::one_line(s, 80);
    match (&a.cve, &a.package, a.installed.unwrap_or(false)) {
        (Some(id), None, false) => {
            let id = id.trim().to_ascii_uppercase();
            if !is_cve_id(&id) {
                return Err(format!(
                    "cve_lookup: {:?} is not a CVE id (CVE-YYYY-NNNN)",
                    shown(&id)
                ));
            }
            Ok(TrackerQuery::Cve(id))
        }
        (None, Some(p), false) => {
            if !is_package_name(p) {
                return Err(format!(
                    "cve_lookup: {:?} is not a Debian source package name (lower case, digits, + - .)",
                    shown(p)
                ));
            }
            Ok(TrackerQuery::Package(p.clone()))
        }
        (None, None, true) => Ok(TrackerQuery::Installed),
        _ => Err("cve_lookup needs exactly one of cve, package or installed: true".into()),
    }
}

/// The NVD request for one CVE at `base` (init.conf's `NVD_URL`).
pub fn nvd_url(base: &str, cve: &str) -> Result<String, String> {
    check_url(base).map_err(|e| format!("NVD_URL in init.conf: {e}"))?;
    if base.contains('#') {
        return Err("NVD_URL in init.conf must not contain a fragment (#)".into());
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}cveId={}", encode_query(cve)))
}

/// Percent-encodes a query string value (RFC 3986 unreserved kept).
fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

/// Whether a redirect from `current` to `location` may be followed after
/// `hops` requests: at most [`MAX_REDIRECTS`], only to http(s), and never
/// from https down to plain http.
pub fn check_redirect(
    current: &str,
    location: &str,
    status: u16,
    hops: usize,
) -> Result<(), String> {
    let shown = crate::sanitize::one_line(location, 300);
    if hops > MAX_REDIRECTS {
        return Err(format!(
            "refused: more than {MAX_REDIRECTS} redirects (the last, HTTP {status}, to {shown}); fetch the final URL directly if it is the right one"
        ));
    }
    check_url(location).map_err(|e| format!("refused: HTTP {status} redirect to {shown}: {e}"))?;
    if current.to_ascii_lowercase().starts_with("https://")
        && location.to_ascii_lowercase().starts_with("http://")
    {
        return Err(format!(
            "refused: HTTP {status} redirect from https to plain http ({shown}); a downgrade is never followed"
        ));
    }
    Ok(())
}

/// What a network action needs from its session.
pub struct NetRun<'a> {
    pub runner: &'a Runner,
    pub audit: &'a crate::audit::Audit,
    pub cancel: &'a CancelToken,
    pub redactor: Arc<Redactor>,
    /// The policy's `NETWORK_ALLOW`.
    pub allow: Vec<NetAllow>,
    /// init.conf's `SEARCH_URL`.
    pub search_url: Option<String>,
    /// init.conf's `NVD_URL` and `DEBIAN_TRACKER_URL` (None: the real
    /// services).
    pub nvd_url: Option<String>,
    pub tracker_url: Option<String>,
    /// The policy's `NETWORK_EXTRA_ROOTS` (a PEM file).
    pub extra_roots: Option<String>,
    pub action_id: String,
}

/// The result, whether anything was sent, and each hop's URL (for the audit).
pub struct NetOutcome {
    pub result: ToolResult,
    pub ran: bool,
    pub hops: Vec<String>,
}

fn account() -> (u32, u32) {
    match nix::unistd::User::from_name(NOBODY) {
        Ok(Some(u)) if u.uid.as_raw() != 0 && u.gid.as_raw() != 0 => {
            (u.uid.as_raw(), u.gid.as_raw())
        }
        _ => (NOBODY_ID, NOBODY_ID),
    }
}

/// The system bundle (missing: none) and the operator's extra roots (an
/// error when named but unreadable: the operator meant them to be used).
fn trust_roots(extra: Option<&str>) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(SYSTEM_ROOTS) {
        let _ = f.take(MAX_ROOTS).read_to_end(&mut buf);
    }
    if let Some(path) = extra {
        let mut roots = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_ROOTS).read_to_end(&mut roots))
            .map_err(|e| {
                format!("cannot read NETWORK_EXTRA_ROOTS {path}: {e}; nothing was sent")
            })?;
        buf.push(b'\n');
        buf.extend_from_slice(&roots);
    }
    Ok(buf)
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
    };
    run.redactor.redact_json(&mut start_record);
    if let Err(e) = run.audit.record(start_record) {
        return refused(
            ToolStatus::Error,
            format!("the audit log cannot be written, so nothing was sent: {e:#}"),
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
        .ok_or_else(|| anyhow::anyhow!("the executor has no directory"))
        .and_then(|dir| crate::spawn::checked(dir, NET_BINARY))
    {
        Ok(p) => p,
        Err(e) => return refused(ToolStatus::Error, format!("{e:#}; nothing was sent")),
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
        NetTool::CveLookup { query } => cve_lookup(&mut hops, query),
        what => match simple_op(run, what) {
            Ok((op, https_only_after, max_body)) => hops.fetch(op, https_only_after, max_body),
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
        NetReport::Redirect { .. } | NetReport::Nvd(_) | NetReport::Tracker(_) => {
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
    })
}

/// The requests of one tool call, each with its own executor, within one
/// deadline; the URLs asked (for the audit) and whether anything was sent.
struct Hops<'r, 'a> {
    run: &'r NetRun<'a>,
    net_path: PathBuf,
    account: (u32, u32),
    deadline: Instant,
    limit: Duration,
    urls: Vec<String>,
    ran: bool,
}

impl Hops<'_, '_> {
    /// One operation, following its redirects (each a new executor).
    fn fetch(&mut self, op: NetOp, https_only_after: bool, max_body: u64) -> NetReport {
        let run = self.run;
        let needs_roots =
            matches!(&op, NetOp::Http { url, .. } if url.starts_with("https")) || https_only_after;
        let roots = if needs_roots {
            match trust_roots(run.extra_roots.as_deref()) {
                Ok(r) => r,
                Err(error) => return NetReport::Failed { error },
            }
        } else {
            Vec::new()
        };
        let mut spec = NetSpec {
            op,
            uid: self.account.0,
            gid: self.account.1,
            allow: run.allow.clone(),
            timeout_ms: 0,
            max_body,
            roots_pem: roots,
        };
        let mut redirects = 0;
        loop {
            if let NetOp::Http { url, .. } = &spec.op {
                self.urls.push(crate::sanitize::one_line(url, MAX_URL_LEN));
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left < Duration::from_millis(200) {
                return NetReport::Failed {
                    error: format!("no answer within the {} s time cap", self.limit.as_secs()),
                };
            }
            spec.timeout_ms = left.as_millis() as u64;
            let hop = self.urls.len().max(1);
            let report = one_hop(
                run,
                &self.net_path,
                &spec,
                left,
                &format!("{}-{hop}", run.action_id),
            );
            self.ran |= !matches!(
                report,
                NetReport::Refused { .. } | NetReport::ConfinementFailed { .. }
            );
            let NetReport::Redirect { status, location } = &report else {
                return report;
            };
            let NetOp::Http {
                url: current,
                purpose,
            } = &spec.op
            else {
                return NetReport::Failed {
                    error: "a redirect answered a request that was not HTTP".into(),
                };
            };
            redirects += 1;
            if let Err(error) = check_redirect(current, location, *status, redirects) {
                return NetReport::Failed { error };
            }
            if location.to_ascii_lowercase().starts_with("https://") && spec.roots_pem.is_empty() {
                match trust_roots(run.extra_roots.as_deref()) {
                    Ok(r) => spec.roots_pem = r,
                    Err(error) => return NetReport::Failed { error },
                }
            }
            spec.op = NetOp::Http {
                url: location.clone(),
                purpose: purpose.clone(),
            };
        }
    }
}

/// `cve_lookup`: the Debian tracker's entries for the query, judged by the
/// executor against the host's dpkg database, then NVD's record of the CVE
/// asked for (or of the first few affected ones), rendered together.
fn cve_lookup(hops: &mut Hops<'_, '_>, query: &TrackerQuery) -> NetReport {
    let run = hops.run;
    let tracker_base = run.tracker_url.as_deref().unwrap_or(DEFAULT_TRACKER_URL);
    let nvd_base = run.nvd_url.as_deref().unwrap_or(DEFAULT_NVD_URL);
    if let Err(e) = check_url(tracker_base) {
        return NetReport::Failed {
            error: format!("DEBIAN_TRACKER_URL in init.conf: {e}"),
        };
    }
    let mut failures = Vec::new();
    let tracker_op = NetOp::Http {
        url: tracker_base.to_string(),
        purpose: HttpPurpose::DebianTracker(query.clone()),
    };
    let tracker = match hops.fetch(tracker_op, true, TRACKER_MAX_BODY) {
        NetReport::Tracker(f) => match f.check() {
            Ok(()) => Some(f),
            Err(e) => {
                failures.push(format!(
                    "Debian security tracker: an answer out of bounds ({e})"
                ));
                None
            }
        },
        NetReport::Failed { error } | NetReport::Refused { error } => {
            failures.push(format!("Debian security tracker: {error}"));
            None
        }
        NetReport::ConfinementFailed { step, error } => {
            return NetReport::ConfinementFailed { step, error };
        }
        _ => {
            failures.push("Debian security tracker: an unexpected answer".into());
            None
        }
    };
    let wanted: Vec<String> = match query {
        TrackerQuery::Cve(id) => vec![id.clone()],
        _ => {
            let Some(t) = &tracker else {
                return NetReport::Failed {
                    error: failures.join("; "),
                };
            };
            let mut ids: Vec<String> = Vec::new();
            for r in t.records.iter().filter(|r| {
                matches!(
                    r.verdict,
                    sysward_ipc::cve::HostVerdict::Affected
                        | sysward_ipc::cve::HostVerdict::FixedIn(_)
                )
            }) {
                if ids.len() < MAX_NVD_LOOKUPS && !ids.contains(&r.id) {
                    ids.push(r.id.clone());
                }
            }
            ids
        }
    };
    let mut nvd = Vec::new();
    for id in &wanted {
        let url = match nvd_url(nvd_base, id) {
            Ok(u) => u,
            Err(e) => {
                failures.push(e);
                break;
            }
        };
        let op = NetOp::Http {
            url,
            purpose: HttpPurpose::Nvd { cve: id.clone() },
        };
        match hops.fetch(op, true, NVD_MAX_BODY) {
            NetReport::Nvd(r) if r.id == *id => match r.check() {
                Ok(()) => nvd.push(*r),
                Err(e) => failures.push(format!("NVD {id}: an answer out of bounds ({e})")),
            },
            NetReport::Failed { error } | NetReport::Refused { error } => {
                failures.push(format!("NVD {id}: {error}"));
            }
            NetReport::ConfinementFailed { step, error } => {
                return NetReport::ConfinementFailed { step, error };
            }
            _ => failures.push(format!("NVD {id}: an unexpected answer")),
        }
    }
    if tracker.is_none() && nvd.is_empty() {
        return NetReport::Failed {
            error: failures.join("; "),
        };
    }
    let cve = match query {
        TrackerQuery::Cve(id) => Some(id.as_str()),
        _ => None,
    };
    let output = crate::cve_render::render(&crate::cve_render::Gathered {
        cve,
        tracker: tracker.as_ref(),
        nvd: &nvd,
        nvd_asked: &wanted,
        failures: &failures,
    });
    NetReport::Done { output, url: None }
}

/// One executor for one connection: spawned into the action's cgroup, given
/// its spec, killed (with everything in its cgroup) when it overruns.
fn one_hop(
    run: &NetRun<'_>,
    net_path: &Path,
    spec: &NetSpec,
    limit: Duration,
    id: &str,
) -> NetReport {
    let failed = |error: String| NetReport::Refused { error };
    let cgroup = run.runner.cgroup_for(&format!("n{id}"));
    let (ours, theirs) = match Channel::pair() {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot make the executor's channel: {e}")),
    };
    if let Err(e) = ours
        .force_send_buffer(NET_SPEC_MAX)
        .and_then(|()| theirs.force_send_buffer(NET_REPORT_MAX))
    {
        return failed(format!("cannot size the executor's channel: {e}"));
    }
    let mut child = match crate::spawn::spawn_with_channel(
        net_path,
        &[],
        theirs.into_fd(),
        Stdio::null(),
        Stdio::null(),
    ) {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start {NET_BINARY}: {e:#}")),
    };
    let pid = Pid::from_raw(child.id() as i32);
    let stop = |child: &mut std::process::Child| {
        if let Some(cg) = &cgroup {
            cg.kill_if_populated();
        }
        let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
    };
    if let Some(cg) = &cgroup {
        if let Err(e) = std::fs::write(cg.dir().join("cgroup.procs"), child.id().to_string()) {
            stop(&mut child);
            return failed(format!(
                "cannot move {NET_BINARY} into {}: {e}",
                cg.dir().display()
            ));
        }
    }
    if let Err(e) = ours.send(&NetRequest::Run(spec.clone())) {
        stop(&mut child);
        return failed(format!("cannot hand the spec to {NET_BINARY}: {e}"));
    }
    let mut ours = ours;
    // Its own time cap ends it first; this one is for an executor that hangs.
    let deadline = Instant::now() + limit + Duration::from_secs(2);
    let report = loop {
        let now = Instant::now();
        if now >= deadline {
            break NetReport::Failed {
                error: format!(
                    "no answer within the {} s time cap; the network executor was killed",
                    limit.as_secs().max(1)
                ),
            };
        }
        if run.cancel.is_cancelled() {
            break NetReport::Failed {
                error: "cancelled by the operator".into(),
            };
        }
        let wait = deadline
            .saturating_duration_since(now)
            .as_millis()
            .clamp(1, 500) as i32;
        let mut fds = [
            PollFd::new(ours.fd(), PollFlags::POLLIN),
            PollFd::new(run.cancel.fd(), PollFlags::POLLIN),
        ];
        match poll(
            &mut fds,
            PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => break failed(format!("poll: {e}")),
        }
        let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
        if readable {
            break match ours.recv::<NetReport>() {
                Ok(r) => r,
                Err(e) => NetReport::Failed {
                    error: format!("the network executor ended without a readable report ({e})"),
                },
            };
        }
    };
    stop(&mut child);
    if let Some(cg) = cgroup {
        run.runner.release_cgroup(cg);
    }
    report
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
    fn redirects_are_bounded_and_never_downgrade() {
        let ok = |from: &str, to: &str, hops| check_redirect(from, to, 302, hops);
        assert!(ok("http://a/", "https://b/", 1).is_ok());
        assert!(ok("http://a/", "http://b/", 5).is_ok());
        assert!(ok("https://a/", "https://b/x", 1).is_ok());
        let down = ok("https://a/", "http://a/", 1).unwrap_err();
        assert!(down.contains("https to plain http"), "{down}");
        assert!(ok("HTTPS://a/", "HTTP://a/", 1).is_err(), "any case");
        assert!(ok("http://a/", "http://b/", 6)
            .unwrap_err()
            .contains("more than 5"));
        assert!(ok("http://a/", "file:///etc/shadow", 1).is_err());
        assert!(ok("http://a/", "gopher://a/", 1).is_err());
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
        assert_eq!(
            nvd_url(DEFAULT_NVD_URL, "CVE-2014-6271").unwrap(),
            "https://services.nvd.nist.gov/rest/json/cves/2.0?cveId=CVE-2014-6271"
        );
        assert!(nvd_url("http://127.0.0.1:1/x#f", "CVE-2014-6271").is_err());
    }
}
