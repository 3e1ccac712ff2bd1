//! The scenario file: global settings and the ordered replies.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which real server the scripted one imitates for `GET /v1/models`, `GET /props`, the
/// "tools rejected" error, the context-exceeded error and unknown paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavor {
    /// api.openai.com: no context length anywhere.
    #[default]
    Openai,
    /// vLLM: `data[].max_model_len`.
    Vllm,
    /// llama.cpp `llama-server`: `data[].meta.n_ctx_train`, `/props` `n_ctx`.
    Llamacpp,
    /// Ollama's OpenAI-compatible API: no context length.
    Ollama,
    /// OpenRouter-like: `data[].context_length`.
    Openrouter,
}

impl Flavor {
    /// Lower-case name, as in the scenario file.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Openai => "openai",
            Flavor::Vllm => "vllm",
            Flavor::Llamacpp => "llamacpp",
            Flavor::Ollama => "ollama",
            Flavor::Openrouter => "openrouter",
        }
    }
}

/// A string or a list of strings (all must match).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One needle.
    One(String),
    /// Several needles.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The needles as a slice-like list.
    pub fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(s) => vec![s.as_str()],
            OneOrMany::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

/// `require_api_key`: `true` (any non-empty bearer token) or the exact key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ApiKeyRule {
    /// `true`: any non-empty `Authorization: Bearer …`; `false`: none required.
    Any(bool),
    /// Exactly this key.
    Exact(String),
}

/// `reject_tools`: `true` (the flavor's recorded error) or a custom reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RejectTools {
    /// `true` = the flavor's error; `false` = tools accepted.
    Flag(bool),
    /// A custom error.
    Custom(HttpReply),
}

/// A fixed HTTP reply: status, body (JSON value or raw string), extra headers.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpReply {
    /// HTTP status (default 500 for errors, 200 for routes).
    #[serde(default)]
    pub status: Option<u16>,
    /// A JSON value (sent as JSON) or a string (sent as is). Default: an OpenAI-style
    /// error object naming the status.
    #[serde(default)]
    pub body: Option<Value>,
    /// Content-Type; default `application/json` for JSON bodies, `text/plain` otherwise.
    #[serde(default)]
    pub content_type: Option<String>,
    /// Extra response headers, e.g. `{"Retry-After": "1"}`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Steps only, streaming requests only: send the body inside a 200 SSE stream
    /// (`data: BODY`, no `[DONE]`), as llama.cpp does for errors raised mid-stream.
    #[serde(default)]
    pub in_stream: bool,
}

/// One native tool call in a scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Call id; default `call_<step>_<index>`.
    #[serde(default)]
    pub id: Option<String>,
    /// Function name.
    pub name: String,
    /// A JSON object (serialized for the wire) or a raw string sent verbatim, so malformed
    /// JSON can be scripted. Default `{}`.
    #[serde(default)]
    pub arguments: Option<Value>,
}

impl ToolCall {
    /// The `arguments` string as it goes on the wire.
    pub fn arguments_string(&self) -> String {
        match &self.arguments {
            None => "{}".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
        }
    }
}

/// Token usage override.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// `usage.prompt_tokens`; default estimated from the request.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`; default estimated from the reply.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// Checks on the request a step answers. All given checks must hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The last message's text contains each needle.
    #[serde(default)]
    pub last_message_contains: Option<OneOrMany>,
    /// Some message (content or tool-call arguments) contains each needle.
    #[serde(default)]
    pub any_message_contains: Option<OneOrMany>,
    /// No message, and not the raw request body, contains any needle.
    #[serde(default)]
    pub none_contains: Option<OneOrMany>,
    /// The system message(s) contain each needle.
    #[serde(default)]
    pub system_contains: Option<OneOrMany>,
    /// Some `role: tool` message contains each needle.
    #[serde(default)]
    pub tool_result_contains: Option<OneOrMany>,
    /// The request has (true) or has not (false) a non-empty `tools` array.
    #[serde(default)]
    pub has_tools: Option<bool>,
    /// Role of the last message (`user`, `tool`, `assistant`, `system`).
    #[serde(default)]
    pub role_of_last: Option<String>,
    /// The request asked (true) or did not ask (false) for streaming.
    #[serde(default)]
    pub stream: Option<bool>,
    /// At least this many messages.
    #[serde(default)]
    pub min_messages: Option<usize>,
    /// At most this many messages.
    #[serde(default)]
    pub max_messages: Option<usize>,
}

/// One scripted reply. Exactly one "kind" applies, in this order of precedence:
/// `close_connection`, `hang`, `error`, `context_exceeded`, `garbage`, then a normal
/// assistant reply (`content` / `tool_calls`, optionally `truncated`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Free-form note, shown in expectation failures.
    #[serde(default)]
    pub name: Option<String>,
    /// Assistant content (may hold `<think>`, ```tool blocks, `<tool_call>` text).
    #[serde(default)]
    pub content: Option<String>,
    /// `reasoning_content` field, as vLLM/llama.cpp reasoning parsers send it.
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Native tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Default: `tool_calls` when there are tool calls, else `stop`.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// Usage override.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// An HTTP error reply instead of a completion.
    #[serde(default)]
    pub error: Option<HttpReply>,
    /// A 200 reply whose body is this raw text (not JSON). `true` = a fixed garbage text.
    #[serde(default)]
    pub garbage: Option<Value>,
    /// Send the normal reply with its full Content-Length but only half the bytes (for
    /// streaming: stop mid-stream, no `[DONE]`), then close.
    #[serde(default)]
    pub truncated: bool,
    /// Never answer: hold the connection until the client gives up or the server stops.
    #[serde(default)]
    pub hang: bool,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: u64,
    /// Streaming only: wait this long between chunks.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// Streaming only: after this many SSE events, stop sending and hold the connection
    /// open (a stream that stalls mid-way; the client must time out or cancel).
    #[serde(default)]
    pub stall_after_chunks: Option<usize>,
    /// The flavor's context-exceeded error.
    #[serde(default)]
    pub context_exceeded: bool,
    /// Close the connection without any response.
    #[serde(default)]
    pub close_connection: bool,
    /// Checks on the request; a failure answers HTTP 500 and does not consume the step.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// A condition on the request (the same checks as `expect`): when it does not
    /// hold the step is passed over, unused, and the next step is tried. A scripted
    /// model can so answer according to what a tool returned (the reference steps
    /// of a task: "DONE" after one result, "BLOCKED" after another).
    #[serde(default)]
    pub when: Option<Expect>,
    /// This step answers this many consecutive requests (default 1).
    #[serde(default)]
    pub repeat: Option<u32>,
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free-form description.
    #[serde(default)]
    pub description: Option<String>,
    /// Which server to imitate.
    #[serde(default)]
    pub flavor: Flavor,
    /// Model id reported by `/v1/models` and in completions (default `scripted-model`).
    #[serde(default)]
    pub model: Option<String>,
    /// Context size reported by flavors that report one (vLLM, llama.cpp `/props`,
    /// OpenRouter). Default 8192. Ignored by `openai` and `ollama`.
    #[serde(default)]
    pub context_size: Option<u64>,
    /// llama.cpp only: `meta.n_ctx_train` in `/v1/models` (default: `context_size`).
    #[serde(default)]
    pub n_ctx_train: Option<u64>,
    /// When set, a chat request whose estimated prompt exceeds `context_size` gets the
    /// context-exceeded error without consuming a step.
    #[serde(default)]
    pub enforce_context: bool,
    /// Answer any chat request carrying `tools` with the flavor's rejection.
    #[serde(default = "default_reject")]
    pub reject_tools: RejectTools,
    /// Require `Authorization: Bearer …` on every path (401 otherwise).
    #[serde(default = "default_key")]
    pub require_api_key: ApiKeyRule,
    /// Strings that must never appear in any chat request (e.g. a secret): checked on
    /// every request like a failed `expect`.
    #[serde(default)]
    pub never_contains: Vec<String>,
    /// HTTP status of an `expectation_failed` answer (default 500; a 4xx makes a client
    /// that retries 5xx fail fast).
    #[serde(default)]
    pub expectation_status: Option<u16>,
    /// Streaming: characters of content / arguments per chunk (default 8).
    #[serde(default)]
    pub stream_chunk_chars: Option<usize>,
    /// Fixed replies for `"METHOD /path"` (e.g. `"GET /props"`), overriding the flavor.
    #[serde(default)]
    pub routes: BTreeMap<String, HttpReply>,
    /// The replies, in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The reply once `steps` is used up (default: HTTP 500 "scenario exhausted").
    #[serde(default)]
    pub exhausted: Option<Step>,
}

fn default_reject() -> RejectTools {
    RejectTools::Flag(false)
}

fn default_key() -> ApiKeyRule {
    ApiKeyRule::Any(false)
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            description: None,
            flavor: Flavor::default(),
            model: None,
            context_size: None,
            n_ctx_train: None,
            enforce_context: false,
            reject_tools: default_reject(),
            require_api_key: default_key(),
            never_contains: Vec::new(),
            expectation_status: None,
            stream_chunk_chars: None,
            routes: BTreeMap::new(),
            steps: Vec::new(),
            exhausted: None,
        }
    }
}

/// A scenario that could not be loaded.
#[derive(Debug)]
pub struct ScenarioError(pub String);

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

impl std::str::FromStr for Scenario {
    type Err = ScenarioError;

    fn from_str(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::from_str(text)
    }
}

impl Scenario {
    /// Parse a scenario from JSON text.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Scenario, ScenarioError> {
        let sc: Scenario = serde_json::from_str(text)
            .map_err(|e| ScenarioError(format!("invalid scenario: {e}")))?;
        sc.validate()?;
        Ok(sc)
    }

    /// Read and parse a scenario file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Scenario, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError(format!("cannot read {}: {e}", path.display())))?;
        Scenario::from_str(&text).map_err(|e| ScenarioError(format!("{}: {}", path.display(), e.0)))
    }

    /// Model id used in replies.
    pub fn model_id(&self) -> &str {
        self.model.as_deref().unwrap_or("scripted-model")
    }

    /// Context size reported (default 8192).
    pub fn context(&self) -> u64 {
        self.context_size.unwrap_or(8192)
    }

    /// Check the combinations serde cannot.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let all = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("steps[{i}]"), s))
            .chain(self.exhausted.iter().map(|s| ("exhausted".to_string(), s)));
        for (label, s) in all {
            let kinds = [
                s.close_connection,
                s.hang,
                s.error.is_some(),
                s.context_exceeded,
                s.garbage.is_some(),
            ]
            .iter()
            .filter(|b| **b)
            .count();
            if kinds > 1 {
                return Err(ScenarioError(format!(
                    "{label}: choose one of close_connection, hang, error, context_exceeded, garbage"
                )));
            }
            if kinds == 1 && (s.content.is_some() || !s.tool_calls.is_empty()) {
                return Err(ScenarioError(format!(
                    "{label}: content/tool_calls cannot be combined with an error kind"
                )));
            }
            if s.repeat == Some(0) {
                return Err(ScenarioError(format!("{label}: repeat must be at least 1")));
            }
            if let Some(g) = &s.garbage {
                if !matches!(g, Value::String(_) | Value::Bool(true)) {
                    return Err(ScenarioError(format!(
                        "{label}: garbage must be a string or true"
                    )));
                }
            }
        }
        for key in self.routes.keys() {
            let ok = key
                .split_once(' ')
                .is_some_and(|(m, p)| !m.is_empty() && p.starts_with('/'));
            if !ok {
                return Err(ScenarioError(format!(
                    "routes: key {key:?} must look like \"GET /props\""
                )));
            }
        }
        if let Some(s) = self.expectation_status {
            if !(100..=599).contains(&s) {
                return Err(ScenarioError(format!(
                    "expectation_status {s} is not an HTTP status"
                )));
            }
        }
        for (label, r) in self.routes.iter().map(|(k, r)| (k.clone(), r)).chain(
            self.steps
                .iter()
                .enumerate()
                .filter_map(|(i, s)| s.error.as_ref().map(|r| (format!("steps[{i}].error"), r))),
        ) {
            if let Some(s) = r.status {
                if !(100..=599).contains(&s) {
                    return Err(ScenarioError(format!(
                        "{label}: status {s} is not an HTTP status"
                    )));
                }
            }
        }
        if self.stream_chunk_chars == Some(0) {
            return Err(ScenarioError(
                "stream_chunk_chars must be at least 1".into(),
            ));
        }
        Ok(())
    }

    /// Total replies the steps provide, counting `repeat`.
    pub fn total_replies(&self) -> usize {
        self.steps
            .iter()
            .map(|s| s.repeat.unwrap_or(1) as usize)
            .sum()
    }
}
