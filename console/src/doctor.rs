//! `sysward doctor`: one row per prerequisite, its state, and the fix.

use anyhow::Result;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};
use sysward_broker::config::{ApiUrl, InitConf};
use sysward_broker::project::{Layout, Project};

struct Row {
    name: &'static str,
    ok: bool,
    state: String,
    fix: String,
}

fn row(name: &'static str, ok: bool, state: impl Into<String>, fix: impl Into<String>) -> Row {
    Row {
        name,
        ok,
        state: state.into(),
        fix: fix.into(),
    }
}

fn landlock_abi() -> Row {
    match sysward_sandbox::landlock::probe_abi() {
        Ok(abi) if abi >= 4 => row("landlock", true, format!("ABI {abi}"), ""),
        Ok(abi) => row(
            "landlock",
            false,
            format!("ABI {abi} (TCP rules need 4, signal scopes 6)"),
            "use a kernel ≥ 6.7 for full confinement",
        ),
        Err(why) => row(
            "landlock",
            false,
            "not available",
            format!("{why}; actions are refused without it"),
        ),
    }
}

fn seccomp() -> Row {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let has = status.lines().any(|l| l.starts_with("Seccomp:"));
    let actions =
        std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
    if has && actions.contains("errno") {
        row(
            "seccomp",
            true,
            format!("filter mode available ({})", actions.trim()),
            "",
        )
    } else {
        row(
            "seccomp",
            false,
            "not available",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        )
    }
}

fn namespaces() -> Row {
    let ok = Path::new("/proc/self/ns/net").exists();
    let userns = std::fs::read_to_string("/proc/sys/user/max_net_namespaces").unwrap_or_default();
    if ok && userns.trim() != "0" {
        row("namespaces", true, "network namespaces available", "")
    } else {
        row(
            "namespaces",
            false,
            "network namespaces unavailable",
            "enable CONFIG_NET_NS and user.max_net_namespaces > 0",
        )
    }
}

fn cgroup() -> Row {
    match sysward_broker::cgroup::actions_root() {
        Some(p) => row("cgroup", true, format!("v2 with cgroup.kill at {}", p.display()), ""),
        None => row("cgroup", false, "no cgroup v2 with cgroup.kill", "mount cgroup2 (kernel ≥ 5.14); without it daemonized children of an action can survive it"),
    }
}

fn user(name: &str, what: &'static str) -> Row {
    match sysward_broker::spawn::account(name) {
        Ok(a) => row(
            what,
            true,
            format!("{name} (uid {} gid {})", a.uid, a.gid),
            "",
        ),
        Err(e) => row(
            what,
            false,
            sysward_broker::error::chain(&e),
            format!("useradd --system --no-create-home --shell /usr/sbin/nologin {name}"),
        ),
    }
}

fn group() -> Row {
    match sysward_broker::control::operator_gid() {
        Ok(g) => row("operator group", true, format!("sysward (gid {g})"), ""),
        Err(_) => row(
            "operator group",
            false,
            "missing",
            "groupadd --system sysward; usermod -aG sysward <operator>",
        ),
    }
}

fn socket_path() -> Row {
    let path = Path::new(sysward_broker::control::SOCKET_PATH);
    match sysward_broker::control::check_path_components(path) {
        Err(e) => row("control socket", false, sysward_broker::error::chain(&e), "fix the ownership/mode of the path components"),
        Ok(()) => match std::fs::symlink_metadata(path) {
            Ok(m) => row("control socket", true, format!("{} (mode {:o}, owner {}:{})", path.display(), m.mode() & 0o777, m.uid(), m.gid()), ""),
            Err(_) => row("control socket", true, format!("{} not present (the daemon is not running; `sysward run --root DIR` works without it)", path.display()), ""),
        },
    }
}

fn binaries() -> Row {
    let mut problems = Vec::new();
    for b in [
        "sysward-broker",
        "sysward-agent",
        "sysward-exec",
        "sysward-gateway",
        "sysward-classify",
        "sysward-net",
    ] {
        if let Err(e) = sysward_broker::spawn::sibling(b) {
            problems.push(sysward_broker::error::chain(&e));
        }
    }
    if problems.is_empty() {
        row(
            "binaries",
            true,
            "agent, executor, gateway, classifier and network executor installed beside sysward, root-owned",
            "",
        )
    } else {
        row(
            "binaries",
            false,
            problems.join("; "),
            "install all of sysward's binaries in one root-owned directory (reinstall the package)",
        )
    }
}

/// Ownership and modes of the project, by the rule `run` applies
/// ([`sysward_broker::project::strict_modes`]), listing every path that breaks it.
fn file_modes(layout: &Layout) -> Row {
    let problems = sysward_broker::project::strict_mode_problems(layout);
    if problems.is_empty() {
        row(
            "file modes",
            true,
            format!(
                "{} and the directories above it: root-owned, not writable by group or others",
                layout.config_dir.display()
            ),
            "",
        )
    } else {
        row(
            "file modes",
            false,
            problems.join("; "),
            "as each message says (sysward refuses files and directories not owned by root or writable by group or others, as sshd's StrictModes does)",
        )
    }
}

/// How long doctor waits to connect to one address of the model server.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long doctor waits for the whole `GET {API_URL}/models` reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest models list doctor reads; a bigger one is not checked.
const MODELS_BODY_MAX: usize = 1 << 20;
/// The largest reply header doctor reads.
const HEAD_MAX: usize = 64 << 10;
/// At most this many served ids are shown when MODEL is not among them.
const SHOWN_IDS: usize = 10;
const ENDPOINT: &str = "model endpoint";

fn model_endpoint(project: &Result<Project>) -> Row {
    match project {
        Ok(p) => check_model_server(&p.conf),
        Err(e) => row(
            ENDPOINT,
            false,
            format!("project does not load: {e:#}"),
            "fix init.conf / agent.md as the message says",
        ),
    }
}

enum ConnectError {
    Resolve,
    Refused,
}

/// Connects from this process, as the check always has: the first address of
/// API_URL's host that accepts a TCP connection.
fn connect(url: &ApiUrl) -> Result<TcpStream, ConnectError> {
    let addrs: Vec<SocketAddr> = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(|_| ConnectError::Resolve)?
        .collect();
    if addrs.is_empty() {
        return Err(ConnectError::Resolve);
    }
    addrs
        .iter()
        .find_map(|a| TcpStream::connect_timeout(a, CONNECT_TIMEOUT).ok())
        .ok_or(ConnectError::Refused)
}

/// `key sk-2f1...8a9` or `no API_KEY`; never the key itself.
fn key_note(conf: &InitConf) -> String {
    if conf.api_key.is_empty() {
        "no API_KEY".to_string()
    } else {
        format!("key {}", conf.masked_key())
    }
}

/// Connects to API_URL's server and, for http://, asks it for `GET
/// {API_URL}/models` (with the Bearer key) and checks that MODEL is listed.
fn check_model_server(conf: &InitConf) -> Row {
    let url = &conf.api_url;
    let stream = match connect(url) {
        Ok(s) => s,
        Err(ConnectError::Refused) => {
            return row(
                ENDPOINT,
                false,
                format!("{} refuses connections", url.raw),
                "start the model server or fix API_URL in init.conf",
            )
        }
        Err(ConnectError::Resolve) => {
            return row(
                ENDPOINT,
                false,
                format!("cannot resolve {}", url.host),
                "fix API_URL's host in init.conf",
            )
        }
    };
    if url.https {
        return row(
            ENDPOINT,
            true,
            format!(
                "{} accepts connections ({}); https: only the TCP connection was checked \
                 (doctor has no TLS client), not the API path, API_KEY or MODEL",
                url.raw,
                key_note(conf)
            ),
            "",
        );
    }
    if !conf.api_key.bytes().all(|b| b.is_ascii_graphic()) {
        return row(
            ENDPOINT,
            false,
            format!(
                "{} accepts connections, but API_KEY contains spaces, control or non-ASCII characters",
                url.raw
            ),
            "check API_KEY in init.conf",
        );
    }
    let target = format!("{}/models", api_path(&url.raw));
    let shown = format!("{}/models", url.raw);
    match http_get(stream, url, &target, &conf.api_key) {
        Ok(reply) => judge(conf, &shown, &reply),
        Err(e) => row(
            ENDPOINT,
            false,
            format!(
                "{} accepts connections, but GET {shown} failed: {}",
                url.raw,
                clean(&e, &conf.api_key, 200)
            ),
            "API_URL must name the model server's HTTP API (an https server needs https://)",
        ),
    }
}

/// The path part of a (trailing-slash-trimmed) API_URL: `/v1`, or `` for none.
fn api_path(raw: &str) -> &str {
    let rest = raw.split_once("://").map_or(raw, |(_, r)| r);
    rest.find('/').map_or("", |i| &rest[i..])
}

/// A reply to `GET models`, its body bounded by [`MODELS_BODY_MAX`].
#[derive(Debug)]
struct Reply {
    status: u16,
    reason: String,
    location: Option<String>,
    body: Vec<u8>,
    /// The body is larger than [`MODELS_BODY_MAX`] (and `body` is empty).
    truncated: bool,
}

fn http_get(mut stream: TcpStream, url: &ApiUrl, target: &str, key: &str) -> Result<Reply, String> {
    let mut host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    if url.port != 80 {
        host = format!("{host}:{}", url.port);
    }
    let mut request = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sysward-doctor\r\n\
         Accept: application/json\r\nConnection: close\r\n"
    );
    if !key.is_empty() {
        request.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    request.push_str("\r\n");
    let timed_out = || {
        format!(
            "no complete HTTP reply within {} s",
            REPLY_TIMEOUT.as_secs()
        )
    };
    let deadline = Instant::now() + REPLY_TIMEOUT;
    stream
        .set_write_timeout(Some(REPLY_TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("sending the request: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out());
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|e| e.to_string())?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out())
            }
            Err(e) => return Err(format!("reading the reply: {e}")),
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(reply) = parse_reply(&buf, n == 0)? {
            return Ok(reply);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

enum Body {
    Incomplete,
    Done(Vec<u8>),
    TooLarge,
}

/// Decodes a chunked body (trailers are ignored).
fn decode_chunked(data: &[u8]) -> Result<Body, String> {
    let malformed = || "the reply's chunked body is malformed".to_string();
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let Some(line_len) = find(&data[pos..], b"\r\n") else {
            return Ok(Body::Incomplete);
        };
        let line = std::str::from_utf8(&data[pos..pos + line_len]).map_err(|_| malformed())?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| malformed())?;
        pos += line_len + 2;
        if size == 0 {
            return Ok(Body::Done(out));
        }
        if size > MODELS_BODY_MAX || out.len() + size > MODELS_BODY_MAX {
            return Ok(Body::TooLarge);
        }
        if data.len() < pos + size + 2 {
            return Ok(Body::Incomplete);
        }
        if &data[pos + size..pos + size + 2] != b"\r\n" {
            return Err(malformed());
        }
        out.extend_from_slice(&data[pos..pos + size]);
        pos += size + 2;
    }
}

/// Parses what has been read of a reply: `Ok(None)` while more is needed.
fn parse_reply(buf: &[u8], eof: bool) -> Result<Option<Reply>, String> {
    if buf.is_empty() && eof {
        return Err("the server closed the connection without replying".to_string());
    }
    let prefix = &buf[..buf.len().min(5)];
    if !b"HTTP/".starts_with(prefix) {
        return Err(
            "the reply is not HTTP (if the server speaks TLS, API_URL must start with https://)"
                .to_string(),
        );
    }
    let Some(head_len) = find(buf, b"\r\n\r\n") else {
        if buf.len() > HEAD_MAX {
            return Err(format!("the reply's header exceeds {} KiB", HEAD_MAX >> 10));
        }
        if eof {
            return Err("the reply ended inside its header".to_string());
        }
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&buf[..head_len]);
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let _version = parts.next();
    let status: u16 = parts
        .next()
        .filter(|c| c.len() == 3)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| "the reply's status line is malformed".to_string())?;
    let reason = parts.next().unwrap_or("").trim().to_string();
    let mut length = None;
    let mut chunked = false;
    let mut location = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| "the reply's Content-Length is malformed".to_string())?,
                )
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            "location" => location = Some(value.to_string()),
            _ => {}
        }
    }
    let raw = &buf[head_len + 4..];
    if (100..200).contains(&status) && status != 101 {
        // An interim reply (100 Continue): the real one follows.
        return parse_reply(raw, eof);
    }
    let done = |body: Vec<u8>, truncated: bool| {
        Ok(Some(Reply {
            status,
            reason: reason.clone(),
            location: location.clone(),
            body,
            truncated,
        }))
    };
    if status == 204 || status == 304 {
        return done(Vec::new(), false);
    }
    if chunked {
        return match decode_chunked(raw)? {
            Body::Done(body) => done(body, false),
            Body::TooLarge => done(Vec::new(), true),
            Body::Incomplete if raw.len() > MODELS_BODY_MAX + HEAD_MAX => done(Vec::new(), true),
            Body::Incomplete if eof => Err("the reply ended inside its chunked body".to_string()),
            Body::Incomplete => Ok(None),
        };
    }
    match length {
        Some(n) if n > MODELS_BODY_MAX => done(Vec::new(), true),
        Some(n) if raw.len() >= n => done(raw[..n].to_vec(), false),
        Some(_) if eof => Err("the reply is shorter than its Content-Length".to_string()),
        Some(_) => Ok(None),
        None if raw.len() > MODELS_BODY_MAX => done(Vec::new(), true),
        None if eof => done(raw.to_vec(), false),
        None => Ok(None),
    }
}

/// Text from the server made safe to print: the key masked, control and
/// direction-changing characters replaced, at most `max` characters.
fn clean(text: &str, key: &str, max: usize) -> String {
    let text = if key.len() >= 4 {
        text.replace(key, &sysward_broker::config::mask_secret(key))
    } else {
        text.to_string()
    };
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_control()
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
            {
                ' '
            } else {
                c
            }
        })
        .take(max)
        .collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out.trim().to_string()
}

/// The message of an error reply: OpenAI's `error.message`, or `error`,
/// `message`, `detail`, or the first line of a plain-text body.
fn server_message(body: &[u8]) -> Option<String> {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        let text = v
            .get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .and_then(serde_json::Value::as_str)
            .or_else(|| v.get("message").and_then(serde_json::Value::as_str))
            .or_else(|| v.get("detail").and_then(serde_json::Value::as_str))?;
        return Some(text.to_string());
    }
    let text = std::str::from_utf8(body).ok()?.trim();
    if text.is_empty() || text.starts_with('<') {
        return None;
    }
    text.lines().next().map(str::to_string)
}

/// What a models list names.
#[derive(Debug)]
struct Served {
    ids: Vec<String>,
    /// One model, owned by `llamacpp`: llama-server answers with its loaded
    /// model whatever a request names.
    llamacpp_single: bool,
}

/// `data[].id` (OpenAI, vLLM, llama.cpp, Ollama, OpenRouter), else
/// `models[].id|model|name`; None when the body is not such a list.
fn served_models(body: &[u8]) -> Option<Served> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let (list, fields): (&Vec<serde_json::Value>, &[&str]) =
        match v.get("data").and_then(serde_json::Value::as_array) {
            Some(list) => (list, &["id"]),
            None => (
                v.get("models").and_then(serde_json::Value::as_array)?,
                &["id", "model", "name"],
            ),
        };
    let ids: Vec<String> = list
        .iter()
        .filter_map(|m| {
            fields
                .iter()
                .find_map(|f| m.get(*f).and_then(serde_json::Value::as_str))
                .map(str::to_string)
        })
        .collect();
    if ids.len() != list.len() {
        return None;
    }
    let llamacpp_single = list.len() == 1
        && list[0].get("owned_by").and_then(serde_json::Value::as_str) == Some("llamacpp");
    Some(Served {
        ids,
        llamacpp_single,
    })
}

/// MODEL names a served id (Ollama also serves `name` as `name:latest`).
fn serves(model: &str, ids: &[String]) -> bool {
    ids.iter().any(|id| {
        id == model || (!model.contains(':') && id.strip_suffix(":latest") == Some(model))
    })
}

/// The fix for a 404: API_URL lacks (or has a wrong) API prefix.
fn fix_for_404(raw: &str) -> String {
    let path = api_path(raw);
    let origin = &raw[..raw.len() - path.len()];
    if let Some(base) = path.strip_suffix("/chat/completions") {
        format!(
            "API_URL must end with the API prefix, usually /v1, not with /chat/completions (try API_URL={origin}{base})"
        )
    } else if !path.ends_with("/v1") {
        format!("API_URL must end with the API prefix, usually /v1 (try API_URL={raw}/v1)")
    } else {
        format!(
            "API_URL must end with the API prefix, usually /v1, but this server has no {path}/models: check the prefix in its documentation"
        )
    }
}

/// The row for a reply to `GET {API_URL}/models`.
fn judge(conf: &InitConf, shown: &str, r: &Reply) -> Row {
    let key = &conf.api_key;
    let status = format!("HTTP {} {}", r.status, clean(&r.reason, key, 40))
        .trim_end()
        .to_string();
    let said = server_message(&r.body)
        .map(|m| clean(&m, key, 160))
        .filter(|m| !m.is_empty())
        .map(|m| format!(": \"{m}\""))
        .unwrap_or_default();
    let model = clean(&conf.model, key, 120);
    match r.status {
        200..=299 => {}
        401 | 403 => {
            let sent = if key.is_empty() {
                "without a key (API_KEY is not set)".to_string()
            } else {
                format!("with key {}", conf.masked_key())
            };
            return row(
                ENDPOINT,
                false,
                format!("GET {shown}: {status} {sent}{said}"),
                "check API_KEY in init.conf",
            );
        }
        404 => {
            return row(
                ENDPOINT,
                false,
                format!("GET {shown}: {status}{said}"),
                fix_for_404(&conf.api_url.raw),
            )
        }
        300..=399 => {
            let to = r
                .location
                .as_deref()
                .map(|l| format!(" to {}", clean(l, key, 200)))
                .unwrap_or_default();
            return row(
                ENDPOINT,
                false,
                format!("GET {shown}: {status}, redirected{to}"),
                "set API_URL to the API's own address (doctor and the gateway do not follow redirects)",
            );
        }
        _ => {
            return row(
                ENDPOINT,
                false,
                format!("GET {shown}: {status}{said}"),
                "the model server answered with an error: check its log and API_URL",
            )
        }
    }
    if r.truncated {
        return row(
            ENDPOINT,
            true,
            format!(
                "GET {shown}: {status}, but the list exceeds {} MiB, so MODEL {model} was not checked ({})",
                MODELS_BODY_MAX >> 20,
                key_note(conf)
            ),
            "",
        );
    }
    let Some(served) = served_models(&r.body) else {
        let what = match std::str::from_utf8(&r.body).map(str::trim) {
            Ok("") => "an empty body".to_string(),
            Ok(t) if t.starts_with('<') => "an HTML page".to_string(),
            Ok(t) => format!("\"{}\"", clean(t, key, 80)),
            Err(_) => "binary data".to_string(),
        };
        return row(
            ENDPOINT,
            false,
            format!(
                "GET {shown}: {status}, but the body is not the expected JSON {{\"data\":[{{\"id\":…}}]}}: {what}"
            ),
            "API_URL must name an OpenAI-compatible API, usually ending in /v1",
        );
    };
    if serves(&conf.model, &served.ids) {
        return row(
            ENDPOINT,
            true,
            format!(
                "GET {shown}: {status}, serves MODEL {model} ({})",
                key_note(conf)
            ),
            "",
        );
    }
    if served.ids.is_empty() {
        return row(
            ENDPOINT,
            false,
            format!("GET {shown}: {status}, but the server lists no models"),
            "load a model in the server, then set MODEL in init.conf to its id",
        );
    }
    let mut ids: Vec<String> = served
        .ids
        .iter()
        .take(SHOWN_IDS)
        .map(|id| clean(id, key, 80))
        .collect();
    if served.ids.len() > SHOWN_IDS {
        ids.push(format!("and {} more", served.ids.len() - SHOWN_IDS));
    }
    let ids = ids.join(", ");
    if served.llamacpp_single {
        return row(
            ENDPOINT,
            true,
            format!(
                "GET {shown}: {status}, llama.cpp serves its one loaded model ({ids}) whatever MODEL ({model}) says ({})",
                key_note(conf)
            ),
            "",
        );
    }
    row(
        ENDPOINT,
        false,
        format!("GET {shown}: {status}, but MODEL {model} is not served; the server lists: {ids}"),
        "MODEL in init.conf must name one of the served ids",
    )
}

/// The configuration itself: init.conf and agent.md load (modes, owners,
/// syntax), or the error that `run` would refuse with.
fn configuration(layout: &Layout, project: &Result<Project>) -> Row {
    match project {
        Ok(p) => row(
            "configuration",
            true,
            format!(
                "{} and {} load{}",
                layout.init_conf().display(),
                p.agent_md_path.display(),
                if p.warnings.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} warning(s): {})",
                        p.warnings.len(),
                        p.warnings.join("; ")
                    )
                }
            ),
            "",
        ),
        Err(e) => row(
            "configuration",
            false,
            format!("{e:#}"),
            "fix the file named above; `sysward init` writes commented templates where none exist",
        ),
    }
}

pub fn run(layout: &Layout, as_json: bool) -> Result<i32> {
    // Through anyhow: `{e:#}` below shows the causes too.
    let project = Project::load(layout.clone()).map_err(anyhow::Error::from);
    let mut rows = vec![
        configuration(layout, &project),
        landlock_abi(),
        seccomp(),
        namespaces(),
        cgroup(),
        binaries(),
        group(),
        socket_path(),
        file_modes(layout),
        model_endpoint(&project),
    ];
    match &project {
        Ok(p) => {
            rows.insert(5, user(&p.conf.agent_user, "agent user"));
            rows.insert(6, user(&p.conf.model_user, "gateway user"));
        }
        Err(_) => {
            rows.insert(
                5,
                user(sysward_broker::config::DEFAULT_AGENT_USER, "agent user"),
            );
            rows.insert(
                6,
                user(sysward_broker::config::DEFAULT_MODEL_USER, "gateway user"),
            );
        }
    }
    let failed = rows.iter().filter(|r| !r.ok).count();
    if as_json {
        let list: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::json!({"check": r.name, "ok": r.ok, "state": r.state, "fix": r.fix}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"ok": failed == 0, "checks": list}))?
        );
        return Ok(if failed == 0 { 0 } else { 1 });
    }
    for r in &rows {
        println!(
            "{:<16} {:<4} {}",
            r.name,
            if r.ok { "ok" } else { "FAIL" },
            r.state
        );
        if !r.ok {
            println!("{:<16}      fix: {}", "", r.fix);
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn conf(url: &str, model: &str, key: &str) -> InitConf {
        let text = format!("API_URL={url}\nMODEL={model}\nAPI_KEY={key}\n");
        sysward_broker::config::parse(&text).unwrap().0
    }

    fn reply(status: u16, body: &str) -> Reply {
        Reply {
            status,
            reason: "Reason".into(),
            location: None,
            body: body.as_bytes().to_vec(),
            truncated: false,
        }
    }

    #[test]
    fn api_paths() {
        assert_eq!(api_path("http://127.0.0.1:8080/v1"), "/v1");
        assert_eq!(api_path("http://127.0.0.1:8080"), "");
        assert_eq!(api_path("https://h/api/v1"), "/api/v1");
        assert_eq!(api_path("http://[::1]:9/v1"), "/v1");
    }

    #[test]
    fn replies_are_framed_by_length_chunks_or_eof() {
        let r = parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx", false)
            .unwrap()
            .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        assert!(
            parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}", false)
                .unwrap()
                .is_none()
        );
        assert!(parse_reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}", true).is_err());
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\":1}\r\n0\r\n\r\n";
        let r = parse_reply(chunked, false).unwrap().unwrap();
        assert_eq!(r.body, b"{\"a\":1}");
        assert!(parse_reply(&chunked[..chunked.len() - 7], false)
            .unwrap()
            .is_none());
        let r = parse_reply(b"HTTP/1.0 404 Not Found\r\n\r\nnope", true)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.status, r.reason.as_str(), r.body.as_slice()),
            (404, "Not Found", &b"nope"[..])
        );
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MODELS_BODY_MAX + 1
        );
        assert!(
            parse_reply(big.as_bytes(), false)
                .unwrap()
                .unwrap()
                .truncated
        );
        let r = parse_reply(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.status, 204);
    }

    #[test]
    fn non_http_and_empty_replies_are_errors() {
        assert!(parse_reply(b"\x15\x03\x01\x00\x02\x02\x46", false)
            .unwrap_err()
            .contains("https://"));
        assert!(parse_reply(b"", true)
            .unwrap_err()
            .contains("without replying"));
        assert!(parse_reply(b"HT", false).unwrap().is_none());
        assert!(parse_reply(b"HTTP/1.1 2000 OK\r\n\r\n", true).is_err());
    }

    #[test]
    fn model_lists() {
        let s = served_models(br#"{"object":"list","data":[{"id":"a"},{"id":"b"}]}"#).unwrap();
        assert_eq!(s.ids, ["a", "b"]);
        assert!(!s.llamacpp_single);
        let s = served_models(br#"{"models":[{"name":"llama3:latest"}]}"#).unwrap();
        assert_eq!(s.ids, ["llama3:latest"]);
        assert!(served_models(br#"{"data":[{"name":"x"}]}"#).is_none());
        assert!(served_models(b"<html>").is_none());
        assert!(serves("llama3", &["llama3:latest".to_string()]));
        assert!(!serves("llama3:8b", &["llama3:latest".to_string()]));
        assert!(!serves("gpt", &["gpt-4o".to_string()]));
    }

    #[test]
    fn verdicts() {
        let key = "sk-test-0123456789abcdef";
        let c = conf("http://127.0.0.1:8080/v1", "qwen", key);
        let shown = "http://127.0.0.1:8080/v1/models";
        let ok = judge(&c, shown, &reply(200, r#"{"data":[{"id":"qwen"}]}"#));
        assert!(ok.ok, "{}", ok.state);
        assert!(ok.state.contains("sk-tes...def") && !ok.state.contains(key));

        let many: Vec<String> = (0..12).map(|i| format!("{{\"id\":\"m{i}\"}}")).collect();
        let body = format!("{{\"data\":[{}]}}", many.join(","));
        let bad = judge(&c, shown, &reply(200, &body));
        assert!(!bad.ok);
        assert!(bad.state.contains("m9, and 2 more"), "{}", bad.state);
        assert!(!bad.state.contains("m10"), "{}", bad.state);
        assert!(bad.fix.contains("MODEL"));

        let nf = judge(
            &conf("http://127.0.0.1:8080", "qwen", key),
            "http://127.0.0.1:8080/models",
            &reply(404, r#"{"error":{"message":"Unknown request URL"}}"#),
        );
        assert!(!nf.ok);
        assert!(nf.state.contains("404") && nf.state.contains("Unknown request URL"));
        assert!(
            nf.fix
                .contains("usually /v1 (try API_URL=http://127.0.0.1:8080/v1)"),
            "{}",
            nf.fix
        );
        let full = fix_for_404("http://h:1/v1/chat/completions");
        assert!(full.contains("try API_URL=http://h:1/v1)"), "{full}");

        let echo = format!(r#"{{"error":{{"message":"bad key {key}"}}}}"#);
        let denied = judge(&c, shown, &reply(401, &echo));
        assert!(!denied.ok && denied.fix.contains("check API_KEY"));
        assert!(!denied.state.contains(key), "{}", denied.state);

        let html = judge(&c, shown, &reply(200, "<!DOCTYPE html><html></html>"));
        assert!(
            !html.ok && html.state.contains("not the expected JSON"),
            "{}",
            html.state
        );

        let llama = judge(
            &c,
            shown,
            &reply(
                200,
                r#"{"data":[{"id":"/models/q.gguf","owned_by":"llamacpp"}]}"#,
            ),
        );
        assert!(llama.ok, "{}", llama.state);
    }

    #[test]
    fn server_text_is_made_printable() {
        assert_eq!(clean("a\x1b[2Jb\u{202e}c", "", 80), "a [2Jb c");
        assert_eq!(clean("abcdef", "", 3), "abc…");
        assert_eq!(
            clean(
                "key=sk-test-0123456789abcdef",
                "sk-test-0123456789abcdef",
                80
            ),
            "key=sk-tes...def"
        );
    }
}
