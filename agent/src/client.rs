//! The OpenAI-compatible model client, over typed requests to the broker (which
//! hands them to the model gateway). Builds no HTTP: it chooses an endpoint,
//! writes the JSON body and reads the reply, with retries and clear errors.

use crate::conversation::Call;
use crate::link::{Link, Stop};
use serde_json::Value;
use std::time::Duration;
use sysward_ipc::model::{ModelEndpoint, ModelFailure, ModelReply, ModelRequest};

/// The largest model response the agent accepts.
pub const RESPONSE_MAX: usize = 64 << 20;
/// Largest model request body the broker channel carries (40 MiB frame).
pub const MODEL_BODY_MAX: usize = (40 << 20) - (64 << 10);
/// Backoff before retry 1, 2, 3.
pub const BACKOFF_SECS: [u64; 3] = [1, 2, 4];
/// Largest Retry-After honoured.
pub const RETRY_AFTER_MAX: u32 = 120;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Completion {
    pub content: String,
    pub calls: Vec<Call>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<String>,
}

impl Completion {
    /// The server stopped the reply at `max_tokens` (or its own limit).
    pub fn truncated(&self) -> bool {
        self.finish_reason.as_deref() == Some("length")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Stop(#[from] Stop),
    /// The server refuses the `tools` field.
    #[error("the model server does not accept native tools: {0}")]
    ToolsUnsupported(String),
    /// The request does not fit the server's context.
    #[error("context exceeded: {0}")]
    ContextExceeded(String),
    /// Anything else; the text says what to do.
    #[error("{0}")]
    Failed(String),
}

/// The `error.message` (or the whole body) of an error reply, one line.
pub fn error_text(body: &[u8]) -> String {
    let raw = String::from_utf8_lossy(body);
    let msg = match serde_json::from_slice::<Value>(body) {
        Ok(v) => match &v["error"] {
            Value::String(s) => s.clone(),
            Value::Object(o) => o
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| v["error"].to_string()),
            _ => v
                .get("message")
                .or_else(|| v.get("detail"))
                .map(|m| {
                    m.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| m.to_string())
                })
                .unwrap_or_else(|| raw.to_string()),
        },
        Err(_) => raw.to_string(),
    };
    let one: String = msg.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 500 {
        one.chars().take(500).collect::<String>() + "…"
    } else {
        one
    }
}

fn is_context_error(status: u16, text: &str, body: &[u8]) -> bool {
    let low = text.to_ascii_lowercase();
    let raw = String::from_utf8_lossy(body).to_ascii_lowercase();
    (status == 400 || status == 413 || status == 422 || status == 500)
        && (low.contains("context length")
            || low.contains("context_length")
            || low.contains("maximum context")
            || low.contains("context size")
            || low.contains("context window")
            || low.contains("too many tokens")
            || low.contains("prompt is too long")
            || low.contains("exceeds the")
            || raw.contains("exceed_context_size")
            || raw.contains("context_length_exceeded"))
}

fn is_tools_error(status: u16, text: &str) -> bool {
    let low = text.to_ascii_lowercase();
    (400..500).contains(&status)
        && status != 429
        && status != 401
        && status != 403
        && (low.contains("tool") || low.contains("function"))
        && (low.contains("support")
            || low.contains("jinja")
            || low.contains("not allowed")
            || low.contains("unrecognized")
            || low.contains("unexpected")
            || low.contains("invalid")
            || low.contains("enable-auto-tool-choice")
            || low.contains("unknown"))
        || (status == 500 && low.contains("tools param requires"))
}

/// What an HTTP status means for the caller.
pub fn http_error(status: u16, endpoint: ModelEndpoint, body: &[u8]) -> ModelError {
    let text = error_text(body);
    if is_context_error(status, &text, body) {
        // The size a server states only in its JSON (llama-server's n_ctx)
        // rides in the message, where the session reads it back.
        let stated = match context_from_error(&text, body) {
            Some(n) if context_from_error(&text, b"").is_none() => {
                format!(" (the server's context: {n} tokens)")
            }
            _ => String::new(),
        };
        return ModelError::ContextExceeded(format!("HTTP {status}: {text}{stated}"));
    }
    if endpoint == ModelEndpoint::ChatCompletions && is_tools_error(status, &text) {
        return ModelError::ToolsUnsupported(format!("HTTP {status}: {text}"));
    }
    let hint = match status {
        404 => " — API_URL must end with the API prefix, usually /v1, and MODEL must name a model the server has",
        401 | 403 => " — check API_KEY in init.conf",
        400 | 422 => " — the server refused the request as invalid",
        429 => " — rate limited; try again later",
        s if s >= 500 => " — the model server failed; check its logs",
        _ => "",
    };
    ModelError::Failed(format!(
        "model server: HTTP {status} on {}: {text}{hint}",
        endpoint.path()
    ))
}

fn failure_text(kind: ModelFailure, message: &str) -> String {
    match kind {
        ModelFailure::Connect => format!(
            "cannot connect to the model server ({message}): is it running, and is API_URL right?"
        ),
        ModelFailure::Timeout => format!(
            "the model server did not answer within REQUEST_TIMEOUT ({message}); raise REQUEST_TIMEOUT or use a faster model"
        ),
        ModelFailure::TooLarge => format!("the model response exceeded the size cap ({message})"),
        ModelFailure::Refused => format!("model request refused by sysward: {message}"),
        ModelFailure::GatewayLost => format!("the model gateway stopped: {message}"),
        ModelFailure::Protocol => format!("model server protocol error: {message}"),
        ModelFailure::Cancelled => "cancelled".to_string(),
    }
}

/// Parses a chat completion, plain JSON or an SSE stream.
pub fn parse_completion(content_type: &str, body: &[u8]) -> Result<Completion, String> {
    if body.len() > RESPONSE_MAX {
        return Err(format!(
            "model response of {} bytes exceeds 64 MiB",
            body.len()
        ));
    }
    let text = String::from_utf8_lossy(body);
    let looks_sse = content_type.contains("event-stream")
        || text.trim_start().starts_with("data:")
        || text.trim_start().starts_with("event:");
    if looks_sse {
        return parse_sse(&text);
    }
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("the model server's reply is not JSON ({e})"))?;
    parse_json(&v)
}

fn content_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

fn arguments_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_string(),
        other => other.to_string(),
    }
}

fn usage_into(c: &mut Completion, v: &Value) {
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        c.prompt_tokens = u
            .get("prompt_tokens")
            .and_then(Value::as_u64)
            .or(c.prompt_tokens);
        c.completion_tokens = u
            .get("completion_tokens")
            .and_then(Value::as_u64)
            .or(c.completion_tokens);
    }
}

pub fn parse_json(v: &Value) -> Result<Completion, String> {
    if v.get("error").is_some_and(|e| !e.is_null()) {
        return Err(format!(
            "model server error: {}",
            error_text(v.to_string().as_bytes())
        ));
    }
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or("the model reply has no choices")?;
    let msg = choice
        .get("message")
        .ok_or("the model reply has no message")?;
    let mut c = Completion {
        content: content_of(msg.get("content").unwrap_or(&Value::Null)),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Completion::default()
    };
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        for tc in calls {
            let f = tc.get("function").unwrap_or(tc);
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            c.calls.push(Call {
                id: tc
                    .get("id")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .unwrap_or_default(),
                tool: name,
                arguments: arguments_of(f.get("arguments").unwrap_or(&Value::Null)),
            });
        }
    }
    usage_into(&mut c, v);
    Ok(c)
}

/// Folds an SSE stream of chunks into one completion.
pub fn parse_sse(text: &str) -> Result<Completion, String> {
    let mut c = Completion::default();
    // index → (id, name, arguments)
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut saw_data = false;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            break;
        }
        if data.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(data).map_err(|e| format!("bad SSE chunk ({e})"))?;
        if v.get("error").is_some_and(|e| !e.is_null()) {
            return Err(format!(
                "model server error: {}",
                error_text(data.as_bytes())
            ));
        }
        saw_data = true;
        usage_into(&mut c, &v);
        let Some(choice) = v.get("choices").and_then(|c| c.get(0)) else {
            continue;
        };
        if let Some(fr) = choice.get("finish_reason").and_then(Value::as_str) {
            c.finish_reason = Some(fr.to_string());
        }
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            continue;
        };
        c.content
            .push_str(&content_of(delta.get("content").unwrap_or(&Value::Null)));
        if let Some(tcs) = delta.get("tool_calls").and_then(Value::as_array) {
            for tc in tcs {
                let idx = tc
                    .get("index")
                    .and_then(Value::as_u64)
                    .map(|i| i as usize)
                    .unwrap_or(calls.len().saturating_sub(1));
                if idx > 1024 {
                    return Err("SSE tool call index out of range".into());
                }
                while calls.len() <= idx {
                    calls.push(Default::default());
                }
                let slot = &mut calls[idx];
                if let Some(id) = tc.get("id").and_then(Value::as_str) {
                    slot.0 = id.to_string();
                }
                if let Some(f) = tc.get("function") {
                    if let Some(n) = f.get("name").and_then(Value::as_str) {
                        slot.1.push_str(n);
                    }
                    match f.get("arguments") {
                        Some(Value::String(a)) => slot.2.push_str(a),
                        Some(Value::Null) | None => {}
                        Some(other) => slot.2.push_str(&other.to_string()),
                    }
                }
            }
        }
    }
    if !saw_data {
        return Err("the SSE stream carried no data".into());
    }
    c.calls = calls
        .into_iter()
        .filter(|(_, n, _)| !n.is_empty())
        .map(|(id, tool, arguments)| Call {
            id,
            tool,
            arguments: if arguments.trim().is_empty() {
                "{}".into()
            } else {
                arguments
            },
        })
        .collect();
    Ok(c)
}

/// Context size from a `GET models` reply: vLLM `max_model_len`, others
/// `context_length`, llama.cpp `meta.n_ctx_train` (training context, the
/// weakest: returned separately).
pub fn context_from_models(v: &Value, model: &str) -> (Option<u64>, Option<u64>) {
    let list: Vec<&Value> = match v.get("data").and_then(Value::as_array) {
        Some(a) => a.iter().collect(),
        None => match v.get("models").and_then(Value::as_array) {
            Some(a) => a.iter().collect(),
            None => vec![v],
        },
    };
    let pick = list
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| list.first())
        .copied();
    let Some(m) = pick else { return (None, None) };
    let direct = m
        .get("max_model_len")
        .or_else(|| m.get("context_length"))
        .or_else(|| m.get("context_window"))
        .or_else(|| m.get("meta").and_then(|x| x.get("n_ctx")))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0);
    let train = m
        .get("meta")
        .and_then(|x| x.get("n_ctx_train"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0);
    (direct, train)
}

/// Context size from llama.cpp's `GET /props`.
pub fn context_from_props(v: &Value) -> Option<u64> {
    v.get("default_generation_settings")
        .and_then(|d| d.get("n_ctx"))
        .or_else(|| v.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
}

/// Whether llama.cpp's `GET /props` says the chat template can render tools
/// (`chat_template_caps.supports_tools`); None when it does not say.
pub fn tools_from_props(v: &Value) -> Option<bool> {
    v.get("chat_template_caps")
        .and_then(|c| c.get("supports_tools"))
        .and_then(Value::as_bool)
}

/// The context size a server states in its overflow error, when it states
/// one: llama-cpp-python "exceed context window of 2048", llama-server
/// `"n_ctx": 4096`, vLLM and OpenAI "maximum context length is 8192 tokens".
pub fn context_from_error(text: &str, body: &[u8]) -> Option<u64> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let n = v
            .get("error")
            .and_then(|e| e.get("n_ctx"))
            .or_else(|| v.get("n_ctx"))
            .and_then(Value::as_u64);
        if let Some(n) = n.filter(|n| *n > 0) {
            return Some(n);
        }
    }
    let low = text.to_ascii_lowercase();
    for marker in [
        "the server's context:",
        "context window of",
        "maximum context length is",
        "context length is",
        "context size of",
        "context size (",
        "n_ctx =",
        "n_ctx:",
    ] {
        if let Some(i) = low.find(marker) {
            let digits: String = low[i + marker.len()..]
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse::<u64>() {
                if n > 0 {
                    return Some(n);
                }
            }
        }
    }
    None
}

/// What the server says about itself at the start of a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerFacts {
    /// Context size, when the server reports it.
    pub context: Option<u64>,
    /// From `/props`: whether the chat template renders tools.
    pub supports_tools: Option<bool>,
    /// Why the models list could not be read (for the warning), if it could not.
    pub models_error: Option<String>,
}

/// The model client. `sleep` is injected so tests do not wait.
pub struct Client {
    pub sleep: Box<dyn FnMut(Duration)>,
    pub stream: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("stream", &self.stream)
            .finish()
    }
}

impl Default for Client {
    fn default() -> Self {
        Client {
            sleep: Box::new(std::thread::sleep),
            stream: false,
        }
    }
}

/// A successful HTTP exchange.
#[derive(Debug)]
pub struct HttpOk {
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Client {
    /// One request with up to `retries` retries (1, 2, 4 s; Retry-After
    /// honoured; at most three) on connection errors, 5xx and 429; none on
    /// other 4xx.
    pub fn request(
        &mut self,
        link: &mut Link,
        endpoint: ModelEndpoint,
        body: Vec<u8>,
        stream: bool,
        retries: usize,
    ) -> Result<HttpOk, ModelError> {
        if body.len() > MODEL_BODY_MAX {
            // The channel would refuse it and end the session: treat it as a
            // context problem, which compaction can solve.
            return Err(ModelError::ContextExceeded(format!(
                "the request of {} bytes exceeds the {} MiB limit of a model request",
                body.len(),
                MODEL_BODY_MAX >> 20
            )));
        }
        let mut attempt = 0usize;
        loop {
            let reply = link.model(ModelRequest::new(endpoint, body.clone(), stream))?;
            let (retryable, retry_after, err) = match reply {
                ModelReply::Http {
                    status,
                    content_type,
                    body,
                    ..
                } if (200..300).contains(&status) => {
                    return Ok(HttpOk { content_type, body });
                }
                ModelReply::Http {
                    status,
                    retry_after,
                    body,
                    ..
                } => {
                    let e = http_error(status, endpoint, &body);
                    let retry = (status >= 500 || status == 429)
                        && !matches!(
                            e,
                            ModelError::ContextExceeded(_) | ModelError::ToolsUnsupported(_)
                        );
                    (retry, retry_after, e)
                }
                ModelReply::Failed { kind, message } => {
                    if kind == ModelFailure::Cancelled {
                        return Err(ModelError::Stop(Stop::Cancelled));
                    }
                    (
                        kind == ModelFailure::Connect,
                        None,
                        ModelError::Failed(failure_text(kind, &message)),
                    )
                }
            };
            if !retryable || attempt >= retries.min(BACKOFF_SECS.len()) {
                return Err(err);
            }
            let wait = match retry_after {
                Some(s) => u64::from(s.min(RETRY_AFTER_MAX)),
                None => BACKOFF_SECS[attempt],
            };
            attempt += 1;
            link.warn(format!(
                "{err}; retry {attempt}/{} in {wait} s",
                BACKOFF_SECS.len()
            ))?;
            (self.sleep)(Duration::from_secs(wait));
        }
    }

    /// `POST chat/completions` and the parsed completion.
    pub fn chat(&mut self, link: &mut Link, body: &Value) -> Result<Completion, ModelError> {
        let bytes = serde_json::to_vec(body).map_err(|e| ModelError::Failed(e.to_string()))?;
        let ok = self.request(
            link,
            ModelEndpoint::ChatCompletions,
            bytes,
            self.stream,
            BACKOFF_SECS.len(),
        )?;
        parse_completion(&ok.content_type, &ok.body).map_err(|e| {
            if is_context_error(400, &e, &ok.body) {
                ModelError::ContextExceeded(e)
            } else {
                ModelError::Failed(e)
            }
        })
    }

    /// What the server reports: the context size from `GET models`, then
    /// `GET /props` (never invented), and from `/props` whether its template
    /// renders tools. `want_context` false skips the context (CONTEXT_SIZE
    /// is set); `/props` is read when either is wanted.
    pub fn discover(
        &mut self,
        link: &mut Link,
        model: &str,
        want_context: bool,
        want_caps: bool,
    ) -> Result<ServerFacts, Stop> {
        let mut facts = ServerFacts::default();
        let mut train = None;
        if want_context {
            // No retries: a server that is down must not cost seven seconds
            // of backoff per endpoint before the session can say so.
            match self.request(link, ModelEndpoint::Models, Vec::new(), false, 0) {
                Ok(ok) => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&ok.body) {
                        let (direct, t) = context_from_models(&v, model);
                        facts.context = direct;
                        train = t;
                    }
                }
                Err(ModelError::Stop(s)) => return Err(s),
                Err(e) => facts.models_error = Some(e.to_string()),
            }
        }
        let need_props = want_caps || (want_context && facts.context.is_none());
        // A server that did not answer `models` will not answer `/props`.
        if need_props && facts.models_error.is_none() {
            match self.request(link, ModelEndpoint::Props, Vec::new(), false, 0) {
                Ok(ok) => {
                    if let Ok(v) = serde_json::from_slice::<Value>(&ok.body) {
                        if want_context && facts.context.is_none() {
                            facts.context = context_from_props(&v);
                        }
                        facts.supports_tools = tools_from_props(&v);
                    }
                }
                Err(ModelError::Stop(s)) => return Err(s),
                Err(_) => {}
            }
        }
        if facts.context.is_none() {
            facts.context = train;
        }
        Ok(facts)
    }
}

/// How a chat-completions error reply is classified.
pub fn classify(status: u16, body: &[u8]) -> ModelError {
    http_error(status, ModelEndpoint::ChatCompletions, body)
}
