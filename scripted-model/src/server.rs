//! The server: accept loop, routing, scripted replies, recording.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::http::{self, ReadError, Request};
use crate::scenario::{ApiKeyRule, Expect, Flavor, HttpReply, RejectTools, Scenario, Step};
use crate::shapes::{self, ShapeReply, Vars};

/// Most connections served at once; more are closed on accept.
const MAX_CONNECTIONS: usize = 256;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// 1-based arrival number.
    pub seq: u64,
    /// Milliseconds since the server started.
    pub at_ms: u64,
    /// `GET`, `POST`, …
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Query string, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Headers, names lower-cased, in arrival order (Authorization included).
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON, when it was JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The body as (lossy UTF-8) text, when it was not empty and not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_body: Option<String>,
    /// Index in `steps` of the reply used, if a step answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// What the server did: `models`, `props`, `health`, `route`, `reply`, `stream`,
    /// `error`, `garbage`, `truncated`, `hang`, `close_connection`, `context_exceeded`,
    /// `tools_rejected`, `unauthorized`, `expectation_failed`, `exhausted`, `not_found`,
    /// `bad_request`.
    pub outcome: String,
    /// Details, e.g. the failed expectation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl RecordedRequest {
    /// First header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `Authorization` header.
    pub fn authorization(&self) -> Option<&str> {
        self.header("authorization")
    }

    /// Whether this was a chat-completions request.
    pub fn is_chat(&self) -> bool {
        self.method == "POST" && self.path.ends_with("/chat/completions")
    }

    /// The request's `messages` (empty when none).
    pub fn messages(&self) -> Vec<Value> {
        self.body
            .as_ref()
            .and_then(|b| b.get("messages"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    /// All the text the model would read: every message's content, reasoning and
    /// tool-call names/arguments, joined by newlines.
    pub fn message_text(&self) -> String {
        self.messages()
            .iter()
            .map(message_text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Whether `needle` appears anywhere in the request: the body as sent (JSON text)
    /// or the decoded message text, or the raw non-JSON body.
    pub fn contains(&self, needle: &str) -> bool {
        if let Some(raw) = &self.raw_body {
            if raw.contains(needle) {
                return true;
            }
        }
        if let Some(b) = &self.body {
            if b.to_string().contains(needle) {
                return true;
            }
        }
        self.message_text().contains(needle)
    }
}

/// Text of one message: content (string or parts), reasoning, tool calls.
pub fn message_text(m: &Value) -> String {
    let mut out = String::new();
    match m.get("content") {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Array(parts)) => {
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    out.push_str(t);
                    out.push('\n');
                }
            }
        }
        _ => {}
    }
    for key in ["reasoning_content", "name"] {
        if let Some(s) = m.get(key).and_then(Value::as_str) {
            out.push('\n');
            out.push_str(s);
        }
    }
    if let Some(calls) = m.get("tool_calls").and_then(Value::as_array) {
        for c in calls {
            let f = c.get("function");
            for key in ["name", "arguments"] {
                if let Some(s) = f.and_then(|f| f.get(key)).and_then(Value::as_str) {
                    out.push('\n');
                    out.push_str(s);
                }
            }
        }
    }
    out
}

/// Where to listen and what to record.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to bind (default `127.0.0.1:0`).
    pub listen: SocketAddr,
    /// Append every request to this file as JSON lines.
    pub record: Option<PathBuf>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            record: None,
        }
    }
}

/// Entry point.
pub struct ScriptedServer;

impl ScriptedServer {
    /// Start on `127.0.0.1:<any free port>`, recording in memory only.
    pub fn start(scenario: Scenario) -> io::Result<Handle> {
        Self::start_with(scenario, ServerOptions::default())
    }

    /// Start with explicit options.
    pub fn start_with(scenario: Scenario, opts: ServerOptions) -> io::Result<Handle> {
        scenario
            .validate()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.0))?;
        let record_file = match &opts.record {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        let listener = TcpListener::bind(opts.listen)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            scenario,
            addr,
            started: Instant::now(),
            stopping: AtomicBool::new(false),
            state: Mutex::new(State {
                step: 0,
                used_in_step: 0,
                replies: 0,
                seq: 0,
                records: Vec::new(),
                record_file,
                last_activity: Instant::now(),
                in_flight: 0,
            }),
            conns: Mutex::new(Conns::default()),
        });
        let s2 = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("scripted-accept".into())
            .spawn(move || accept_loop(&s2, &listener))?;
        Ok(Handle {
            shared,
            accept: Some(accept),
        })
    }
}

/// A running server. Dropping it stops the server.
pub struct Handle {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Handle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT/v1` — the value for `API_URL`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.shared.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().records.clone()
    }

    /// Only the `POST …/chat/completions` requests.
    pub fn chat_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.is_chat())
            .collect()
    }

    /// Requests answered with an `expectation_failed` error (including `never_contains`).
    pub fn expectation_failures(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.outcome == "expectation_failed")
            .collect()
    }

    /// Replies taken from `steps` so far (each repetition counts).
    pub fn replies_used(&self) -> usize {
        self.shared.lock().replies
    }

    /// Replies left in `steps` (counting repetitions).
    pub fn replies_remaining(&self) -> usize {
        self.shared
            .scenario
            .total_replies()
            .saturating_sub(self.replies_used())
    }

    /// Time since the last request started or finished; zero while one is in flight.
    pub fn idle_for(&self) -> Duration {
        let st = self.shared.lock();
        if st.in_flight > 0 {
            Duration::ZERO
        } else {
            st.last_activity.elapsed()
        }
    }

    /// Wait until at least `n` requests were recorded, or `timeout`. True if reached.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            if self.shared.lock().records.len() >= n {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop accepting, close every connection (hanging ones included) and join threads.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.shared.addr, Duration::from_millis(500));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let (streams, threads) = {
            let mut c = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut c.streams),
                std::mem::take(&mut c.threads),
            )
        };
        for (_, s) in streams {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Default)]
struct Conns {
    next_id: u64,
    streams: Vec<(u64, TcpStream)>,
    threads: Vec<JoinHandle<()>>,
}

struct State {
    step: usize,
    used_in_step: u32,
    replies: usize,
    seq: u64,
    records: Vec<RecordedRequest>,
    record_file: Option<File>,
    last_activity: Instant,
    in_flight: usize,
}

struct Shared {
    scenario: Scenario,
    addr: SocketAddr,
    started: Instant,
    stopping: AtomicBool,
    state: Mutex<State>,
    conns: Mutex<Conns>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Sleep up to `d`, waking early when the server stops. False if stopping.
    fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if self.stopping() {
                return false;
            }
            thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
        }
        !self.stopping()
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for conn in listener.incoming() {
        if shared.stopping() {
            break;
        }
        let Ok(stream) = conn else {
            // EMFILE and friends: back off instead of spinning.
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        let mut conns = shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        conns.threads.retain(|t| !t.is_finished());
        if conns.streams.len() >= MAX_CONNECTIONS {
            drop(stream);
            continue;
        }
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        conns.next_id += 1;
        let id = conns.next_id;
        conns.streams.push((id, clone));
        let s2 = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("scripted-conn-{id}"))
            .spawn(move || {
                serve_connection(&s2, stream);
                let mut c = s2.conns.lock().unwrap_or_else(|e| e.into_inner());
                c.streams.retain(|(i, _)| *i != id);
            });
        match spawned {
            Ok(t) => conns.threads.push(t),
            Err(_) => conns.streams.retain(|(i, _)| *i != id),
        }
    }
}

/// What to do with the connection after a reply.
#[derive(PartialEq)]
enum Flow {
    KeepAlive,
    Close,
}

fn serve_connection(shared: &Arc<Shared>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = http::buffered(read_half);
    let mut writer = stream;
    loop {
        if shared.stopping() {
            return;
        }
        let mut w2 = match writer.try_clone() {
            Ok(w) => w,
            Err(_) => return,
        };
        let req = http::read_request(&mut reader, || {
            w2.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            w2.flush()
        });
        let req = match req {
            Ok(r) => r,
            Err(ReadError::Closed) | Err(ReadError::Io) => return,
            Err(ReadError::Bad(status, msg)) => {
                let body = openai_error(&msg, "invalid_request_error", Value::Null);
                let _ = http::write_response(
                    &mut writer,
                    status,
                    "application/json",
                    body.to_string().as_bytes(),
                    &[],
                    false,
                );
                return;
            }
        };
        {
            let mut st = shared.lock();
            st.in_flight += 1;
            st.last_activity = Instant::now();
        }
        let flow = handle_request(shared, &req, &mut writer);
        {
            let mut st = shared.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
            st.last_activity = Instant::now();
        }
        if flow == Flow::Close || !req.keep_alive() {
            let _ = writer.shutdown(Shutdown::Both);
            return;
        }
    }
}

fn openai_error(message: &str, kind: &str, code: Value) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Rough prompt size: serialized messages and tools, 4 bytes a token.
fn estimate_prompt_tokens(body: Option<&Value>) -> u64 {
    let Some(b) = body else { return 1 };
    let mut bytes = 0usize;
    for key in ["messages", "tools"] {
        if let Some(v) = b.get(key) {
            bytes += v.to_string().len();
        }
    }
    (bytes as u64).div_ceil(4).max(1)
}

fn estimate_completion_tokens(step: &Step) -> u64 {
    let mut bytes = step.content.as_deref().map_or(0, str::len);
    bytes += step.reasoning_content.as_deref().map_or(0, str::len);
    for c in &step.tool_calls {
        bytes += c.name.len() + c.arguments_string().len();
    }
    (bytes as u64).div_ceil(4).max(1)
}

/// Outcome of the decision made under the state lock.
enum Action {
    /// A fixed reply.
    Fixed {
        status: u16,
        content_type: String,
        body: Vec<u8>,
        headers: Vec<(String, String)>,
    },
    /// A step to play.
    Play {
        step: Box<Step>,
        index: Option<usize>,
        reply_no: usize,
    },
}

fn fixed_json(status: u16, body: &Value) -> Action {
    Action::Fixed {
        status,
        content_type: "application/json".into(),
        body: body.to_string().into_bytes(),
        headers: Vec::new(),
    }
}

fn fixed_shape(r: ShapeReply) -> Action {
    Action::Fixed {
        status: r.status,
        content_type: r.content_type,
        body: r.body,
        headers: Vec::new(),
    }
}

fn fixed_http(r: &HttpReply, default_status: u16) -> Action {
    let status = r.status.unwrap_or(default_status);
    let (ct, body) = match &r.body {
        None => (
            "application/json".to_string(),
            openai_error(
                &format!("scripted error: HTTP {status} {}", http::reason(status)),
                if status >= 500 {
                    "server_error"
                } else {
                    "invalid_request_error"
                },
                Value::from(status),
            )
            .to_string()
            .into_bytes(),
        ),
        Some(Value::String(s)) => (
            "text/plain; charset=utf-8".to_string(),
            s.clone().into_bytes(),
        ),
        Some(v) => ("application/json".to_string(), v.to_string().into_bytes()),
    };
    Action::Fixed {
        status,
        content_type: r.content_type.clone().unwrap_or(ct),
        body,
        headers: r
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

fn is_chat_path(flavor: Flavor, path: &str) -> bool {
    path == "/v1/chat/completions" || (flavor == Flavor::Llamacpp && path == "/chat/completions")
}

fn is_models_path(flavor: Flavor, path: &str) -> bool {
    path == "/v1/models" || (flavor == Flavor::Llamacpp && path == "/models")
}

fn check_key(rule: &ApiKeyRule, req: &Request) -> bool {
    let token = req
        .header("authorization")
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .unwrap_or("");
    match rule {
        ApiKeyRule::Any(false) => true,
        ApiKeyRule::Any(true) => !token.is_empty(),
        ApiKeyRule::Exact(k) => token == k,
    }
}

fn handle_request(shared: &Arc<Shared>, req: &Request, w: &mut TcpStream) -> Flow {
    let sc = &shared.scenario;
    let body_json: Option<Value> = if req.body.is_empty() {
        None
    } else {
        serde_json::from_slice(&req.body).ok()
    };
    let raw_body = if !req.body.is_empty() && body_json.is_none() {
        Some(String::from_utf8_lossy(&req.body).into_owned())
    } else {
        None
    };
    let prompt_tokens = estimate_prompt_tokens(body_json.as_ref());
    let vars = Vars {
        model: sc.model_id(),
        context_size: sc.context(),
        n_ctx_train: sc.n_ctx_train.unwrap_or(sc.context()),
        prompt_tokens,
        method: &req.method,
        path: &req.path,
    };
    let route_key = format!("{} {}", req.method, req.path);

    let mut st = shared.lock();
    let mut record = RecordedRequest {
        seq: st.seq + 1,
        at_ms: u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        method: req.method.clone(),
        path: req.path.clone(),
        query: req.query.clone(),
        headers: req.headers.clone(),
        body: body_json.clone(),
        raw_body,
        step: None,
        outcome: String::new(),
        detail: None,
    };
    st.seq += 1;

    let (outcome, action): (&str, Action) = if !check_key(&sc.require_api_key, req) {
        let msg = match req.header("authorization") {
            None => "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).".to_string(),
            Some(_) => "Incorrect API key provided.".to_string(),
        };
        (
            "unauthorized",
            fixed_json(
                401,
                &openai_error(&msg, "invalid_request_error", json!("invalid_api_key")),
            ),
        )
    } else if let Some(r) = sc.routes.get(&route_key) {
        ("route", fixed_http(r, 200))
    } else if req.method == "GET" && is_models_path(sc.flavor, &req.path) {
        ("models", fixed_json(200, &shapes::models(sc.flavor, &vars)))
    } else if req.method == "GET" && req.path == "/props" {
        if sc.flavor == Flavor::Llamacpp {
            ("props", fixed_json(200, &shapes::props(&vars)))
        } else {
            (
                "not_found",
                fixed_shape(shapes::not_found(sc.flavor, &vars)),
            )
        }
    } else if req.method == "GET" && req.path == "/health" && sc.flavor == Flavor::Llamacpp {
        ("health", fixed_json(200, &json!({"status": "ok"})))
    } else if req.method == "POST" && is_chat_path(sc.flavor, &req.path) {
        decide_chat(shared, &mut st, &mut record, body_json.as_ref(), &vars)
    } else {
        let msg = format!(
            "Unknown request URL: {} {}. The scripted model serves GET /v1/models, POST /v1/chat/completions{}.",
            req.method,
            req.path,
            if sc.flavor == Flavor::Llamacpp { " and GET /props" } else { "" }
        );
        (
            "not_found",
            fixed_json(
                404,
                &openai_error(&msg, "invalid_request_error", json!("unknown_url")),
            ),
        )
    };
    record.outcome = if record.outcome.is_empty() {
        outcome.to_string()
    } else {
        record.outcome.clone()
    };
    append_record(&mut st, record);
    drop(st);

    match action {
        Action::Fixed {
            status,
            content_type,
            body,
            headers,
        } => {
            if req.method == "HEAD" {
                // No body after a HEAD response; close so framing cannot go wrong.
                let head = http::response_head(status, &content_type, body.len(), &headers, false);
                let _ = w.write_all(&head);
                let _ = w.flush();
                return Flow::Close;
            }
            match http::write_response(w, status, &content_type, &body, &headers, req.keep_alive())
            {
                Ok(()) => Flow::KeepAlive,
                Err(_) => Flow::Close,
            }
        }
        Action::Play {
            step,
            index,
            reply_no,
        } => play_step(
            shared,
            req,
            body_json.as_ref(),
            &step,
            index,
            reply_no,
            &vars,
            w,
        ),
    }
}

fn append_record(st: &mut State, record: RecordedRequest) {
    if let Some(f) = st.record_file.as_mut() {
        if let Ok(mut line) = serde_json::to_string(&record) {
            line.push('\n');
            let _ = f.write_all(line.as_bytes());
            let _ = f.flush();
        }
    }
    st.records.push(record);
}

fn decide_chat(
    shared: &Shared,
    st: &mut State,
    record: &mut RecordedRequest,
    body: Option<&Value>,
    vars: &Vars<'_>,
) -> (&'static str, Action) {
    let sc = &shared.scenario;
    let Some(body) = body.filter(|b| b.get("messages").is_some_and(Value::is_array)) else {
        let msg =
            "scripted-model: the request body must be a JSON object with a \"messages\" array";
        return (
            "bad_request",
            fixed_json(
                400,
                &openai_error(msg, "invalid_request_error", Value::Null),
            ),
        );
    };
    let view = ChatView::new(body);
    // Global never_contains.
    let leaked: Vec<&String> = sc
        .never_contains
        .iter()
        .filter(|n| !n.is_empty() && view.anywhere(n))
        .collect();
    if !leaked.is_empty() {
        let detail = format!(
            "never_contains: the request contains {}",
            leaked
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return expectation_failed(sc.expectation_status.unwrap_or(500), record, detail);
    }
    let reject = match &sc.reject_tools {
        RejectTools::Flag(false) => None,
        RejectTools::Flag(true) => Some(fixed_shape(shapes::tools_rejected(sc.flavor, vars))),
        RejectTools::Custom(r) => Some(fixed_http(r, 400)),
    };
    if let Some(a) = reject {
        if view.has_tools() {
            return ("tools_rejected", a);
        }
    }
    if sc.enforce_context && vars.prompt_tokens > vars.context_size {
        record.detail = Some(format!(
            "estimated prompt {} tokens > context_size {}",
            vars.prompt_tokens, vars.context_size
        ));
        return (
            "context_exceeded",
            fixed_shape(shapes::context_exceeded(sc.flavor, vars)),
        );
    }
    // Pass over the steps whose `when` does not hold for this request.
    while let Some(when) = sc.steps.get(st.step).and_then(|s| s.when.as_ref()) {
        if check_expect(when, &view).is_empty() {
            break;
        }
        st.step += 1;
        st.used_in_step = 0;
    }
    let (step, index) = match sc.steps.get(st.step) {
        Some(s) => (s.clone(), Some(st.step)),
        None => match &sc.exhausted {
            Some(s) => (s.clone(), None),
            None => {
                let msg = format!(
                    "scripted-model: scenario exhausted: all {} scripted replies were used (chat request #{})",
                    sc.total_replies(),
                    st.replies + 1
                );
                return (
                    "exhausted",
                    fixed_json(
                        500,
                        &openai_error(&msg, "scenario_exhausted", json!("scenario_exhausted")),
                    ),
                );
            }
        },
    };
    if let Some(exp) = &step.expect {
        let failures = check_expect(exp, &view);
        if !failures.is_empty() {
            let label = match (index, &step.name) {
                (Some(i), Some(n)) => format!("steps[{i}] ({n})"),
                (Some(i), None) => format!("steps[{i}]"),
                (None, _) => "exhausted".to_string(),
            };
            record.step = index;
            return expectation_failed(
                sc.expectation_status.unwrap_or(500),
                record,
                format!("{label}: {}", failures.join("; ")),
            );
        }
    }
    record.step = index;
    let reply_no = st.replies + 1;
    if index.is_some() {
        st.replies += 1;
        st.used_in_step += 1;
        if st.used_in_step >= step.repeat.unwrap_or(1) {
            st.step += 1;
            st.used_in_step = 0;
        }
    } else {
        record.outcome = "exhausted".into();
    }
    let stream = view.stream();
    let outcome = if step.close_connection {
        "close_connection"
    } else if step.hang {
        "hang"
    } else if step.error.is_some() {
        "error"
    } else if step.context_exceeded {
        "context_exceeded"
    } else if step.garbage.is_some() {
        "garbage"
    } else if step.truncated {
        "truncated"
    } else if stream {
        "stream"
    } else {
        "reply"
    };
    (
        outcome,
        Action::Play {
            step: Box::new(step),
            index,
            reply_no,
        },
    )
}

fn expectation_failed(
    status: u16,
    record: &mut RecordedRequest,
    detail: String,
) -> (&'static str, Action) {
    let msg = format!("scripted-model: expectation failed: {detail}");
    record.detail = Some(detail);
    (
        "expectation_failed",
        fixed_json(
            status,
            &openai_error(&msg, "expectation_failed", json!("expectation_failed")),
        ),
    )
}

/// Read-only helpers over a chat request body.
struct ChatView<'a> {
    body: &'a Value,
    messages: Vec<&'a Value>,
    raw: String,
}

impl<'a> ChatView<'a> {
    fn new(body: &'a Value) -> ChatView<'a> {
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        ChatView {
            body,
            messages,
            raw: body.to_string(),
        }
    }

    fn has_tools(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    }

    fn stream(&self) -> bool {
        self.body
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    fn include_usage(&self) -> bool {
        self.body
            .get("stream_options")
            .and_then(|o| o.get("include_usage"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    fn anywhere(&self, needle: &str) -> bool {
        self.raw.contains(needle)
            || self
                .messages
                .iter()
                .any(|m| message_text(m).contains(needle))
    }

    fn role(m: &Value) -> &str {
        m.get("role").and_then(Value::as_str).unwrap_or("")
    }
}

fn check_expect(e: &Expect, v: &ChatView<'_>) -> Vec<String> {
    let mut fails = Vec::new();
    let texts: Vec<String> = v.messages.iter().map(|m| message_text(m)).collect();
    if let Some(n) = &e.last_message_contains {
        let last = texts.last().cloned().unwrap_or_default();
        for s in n.items() {
            if !last.contains(s) {
                fails.push(format!("last message does not contain {s:?}"));
            }
        }
    }
    if let Some(n) = &e.any_message_contains {
        for s in n.items() {
            if !texts.iter().any(|t| t.contains(s)) {
                fails.push(format!("no message contains {s:?}"));
            }
        }
    }
    if let Some(n) = &e.none_contains {
        for s in n.items() {
            if !s.is_empty() && v.anywhere(s) {
                fails.push(format!("the request contains {s:?}"));
            }
        }
    }
    let by_role = |role: &str| -> Vec<&String> {
        v.messages
            .iter()
            .zip(texts.iter())
            .filter(|(m, _)| ChatView::role(m) == role)
            .map(|(_, t)| t)
            .collect()
    };
    if let Some(n) = &e.system_contains {
        let sys = by_role("system");
        for s in n.items() {
            if !sys.iter().any(|t| t.contains(s)) {
                fails.push(format!("no system message contains {s:?}"));
            }
        }
    }
    if let Some(n) = &e.tool_result_contains {
        let tools = by_role("tool");
        for s in n.items() {
            if !tools.iter().any(|t| t.contains(s)) {
                fails.push(format!("no tool message contains {s:?}"));
            }
        }
    }
    if let Some(want) = e.has_tools {
        if v.has_tools() != want {
            fails.push(if want {
                "the request has no tools".to_string()
            } else {
                "the request has tools".to_string()
            });
        }
    }
    if let Some(role) = &e.role_of_last {
        let got = v.messages.last().map(|m| ChatView::role(m)).unwrap_or("");
        if got != role {
            fails.push(format!("last message role is {got:?}, expected {role:?}"));
        }
    }
    if let Some(want) = e.stream {
        if v.stream() != want {
            fails.push(format!("stream is {}, expected {want}", v.stream()));
        }
    }
    if let Some(min) = e.min_messages {
        if v.messages.len() < min {
            fails.push(format!(
                "{} messages, expected at least {min}",
                v.messages.len()
            ));
        }
    }
    if let Some(max) = e.max_messages {
        if v.messages.len() > max {
            fails.push(format!(
                "{} messages, expected at most {max}",
                v.messages.len()
            ));
        }
    }
    fails
}

fn tool_call_id(c: &crate::scenario::ToolCall, reply_no: usize, i: usize) -> String {
    c.id.clone()
        .unwrap_or_else(|| format!("call_{reply_no}_{i}"))
}

fn completion_json(step: &Step, model: &str, reply_no: usize, usage: &Value) -> Value {
    let mut message = serde_json::Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert(
        "content".into(),
        step.content.clone().map_or(Value::Null, Value::String),
    );
    if let Some(r) = &step.reasoning_content {
        message.insert("reasoning_content".into(), json!(r));
    }
    if !step.tool_calls.is_empty() {
        let calls: Vec<Value> = step
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "id": tool_call_id(c, reply_no, i),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments_string()}
                })
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    json!({
        "id": format!("chatcmpl-scripted-{reply_no}"),
        "object": "chat.completion",
        "created": now_secs(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": Value::Object(message),
            "logprobs": null,
            "finish_reason": finish_reason(step),
        }],
        "usage": usage,
    })
}

fn finish_reason(step: &Step) -> String {
    step.finish_reason.clone().unwrap_or_else(|| {
        if step.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    })
}

/// Split on char boundaries into pieces of at most `n` chars.
fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn stream_events(
    step: &Step,
    model: &str,
    reply_no: usize,
    usage: &Value,
    include_usage: bool,
    chunk_chars: usize,
) -> Vec<String> {
    let id = format!("chatcmpl-scripted-{reply_no}");
    let created = now_secs();
    let chunk = |delta: Value, finish: Value| -> String {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
        .to_string()
    };
    let mut ev = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(r) = &step.reasoning_content {
        for p in pieces(r, chunk_chars) {
            ev.push(chunk(json!({"reasoning_content": p}), Value::Null));
        }
    }
    if let Some(c) = &step.content {
        for p in pieces(c, chunk_chars) {
            ev.push(chunk(json!({"content": p}), Value::Null));
        }
    }
    for (i, c) in step.tool_calls.iter().enumerate() {
        ev.push(chunk(
            json!({"tool_calls": [{
                "index": i,
                "id": tool_call_id(c, reply_no, i),
                "type": "function",
                "function": {"name": c.name, "arguments": ""}
            }]}),
            Value::Null,
        ));
        for p in pieces(&c.arguments_string(), chunk_chars) {
            ev.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                Value::Null,
            ));
        }
    }
    ev.push(chunk(json!({}), json!(finish_reason(step))));
    if include_usage {
        ev.push(
            json!({
                "id": id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            })
            .to_string(),
        );
    }
    ev
}

/// Hold the connection until the peer closes it or the server stops.
fn hang(shared: &Shared, w: &mut TcpStream) {
    let mut buf = [0u8; 1];
    while !shared.stopping() {
        if w.set_nonblocking(true).is_err() {
            return;
        }
        let r = w.peek(&mut buf);
        let _ = w.set_nonblocking(false);
        match r {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return,
        }
        thread::sleep(Duration::from_millis(25));
    }
}

#[allow(clippy::too_many_arguments)]
fn play_step(
    shared: &Shared,
    req: &Request,
    body: Option<&Value>,
    step: &Step,
    _index: Option<usize>,
    reply_no: usize,
    vars: &Vars<'_>,
    w: &mut TcpStream,
) -> Flow {
    let sc = &shared.scenario;
    if step.delay_ms > 0 && !shared.sleep(Duration::from_millis(step.delay_ms)) {
        return Flow::Close;
    }
    let keep = req.keep_alive();
    let write = |w: &mut TcpStream, a: Action| -> Flow {
        if let Action::Fixed {
            status,
            content_type,
            body,
            headers,
        } = a
        {
            if http::write_response(w, status, &content_type, &body, &headers, keep).is_ok() {
                return Flow::KeepAlive;
            }
        }
        Flow::Close
    };
    if step.close_connection {
        let _ = w.shutdown(Shutdown::Both);
        return Flow::Close;
    }
    if step.hang {
        hang(shared, w);
        return Flow::Close;
    }
    if let Some(e) = &step.error {
        let streaming = body.map(ChatView::new).is_some_and(|v| v.stream());
        if e.in_stream && streaming {
            if let Action::Fixed { body, .. } = fixed_http(e, 500) {
                let Ok(mut out) = http::Chunked::start(w, 200, "text/event-stream", false) else {
                    return Flow::Close;
                };
                let mut event = b"data: ".to_vec();
                event.extend_from_slice(&body);
                event.extend_from_slice(b"\n\n");
                let _ = out.chunk(&event).and_then(|()| out.finish());
            }
            return Flow::Close;
        }
        return write(w, fixed_http(e, 500));
    }
    if step.context_exceeded {
        return write(w, fixed_shape(shapes::context_exceeded(sc.flavor, vars)));
    }
    if let Some(g) = &step.garbage {
        let text = match g {
            Value::String(s) => s.clone(),
            _ => "<html><body><h1>502 Bad Gateway</h1></body></html>\n{\"choices\": [".to_string(),
        };
        return write(
            w,
            Action::Fixed {
                status: 200,
                content_type: "application/json".into(),
                body: text.into_bytes(),
                headers: Vec::new(),
            },
        );
    }
    let view = body.map(ChatView::new);
    let stream = view.as_ref().is_some_and(ChatView::stream);
    let include_usage = view.as_ref().is_some_and(ChatView::include_usage);
    let usage_override = step.usage.unwrap_or_default();
    let pt = usage_override.prompt_tokens.unwrap_or(vars.prompt_tokens);
    let ct = usage_override
        .completion_tokens
        .unwrap_or_else(|| estimate_completion_tokens(step));
    let usage = json!({"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt.saturating_add(ct)});
    let model = sc.model_id();
    if !stream {
        let text = completion_json(step, model, reply_no, &usage).to_string();
        if step.truncated {
            let bytes = text.as_bytes();
            let head = http::response_head(200, "application/json", bytes.len(), &[], false);
            let _ = w.write_all(&head);
            let _ = w.write_all(&bytes[..bytes.len() / 2]);
            let _ = w.flush();
            let _ = w.shutdown(Shutdown::Both);
            return Flow::Close;
        }
        return write(
            w,
            Action::Fixed {
                status: 200,
                content_type: "application/json".into(),
                body: text.into_bytes(),
                headers: Vec::new(),
            },
        );
    }
    let events = stream_events(
        step,
        model,
        reply_no,
        &usage,
        include_usage,
        sc.stream_chunk_chars.unwrap_or(8),
    );
    let Ok(mut out) = http::Chunked::start(w, 200, "text/event-stream", keep && !step.truncated)
    else {
        return Flow::Close;
    };
    let send_n = if step.truncated {
        (events.len() / 2).max(1)
    } else {
        events.len()
    };
    for (i, e) in events.iter().take(send_n).enumerate() {
        if i > 0
            && step.chunk_delay_ms > 0
            && !shared.sleep(Duration::from_millis(step.chunk_delay_ms))
        {
            return Flow::Close;
        }
        if out.chunk(format!("data: {e}\n\n").as_bytes()).is_err() {
            return Flow::Close;
        }
        if step.stall_after_chunks == Some(i + 1) {
            hang(shared, out.stream);
            return Flow::Close;
        }
    }
    if step.truncated {
        let _ = out.stream.shutdown(Shutdown::Both);
        return Flow::Close;
    }
    if out.chunk(b"data: [DONE]\n\n").is_err() || out.finish().is_err() {
        return Flow::Close;
    }
    Flow::KeepAlive
}
