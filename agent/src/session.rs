//! One agent session: handshake, state, model calls, compaction, and the
//! dispatch to tasks or CLI mode.

use crate::client::{self, Client, Completion, ModelError};
use crate::context::{self, Estimator};
use crate::conversation::{self, Msg, Role};
use crate::link::{Link, Stop};
use crate::prompt::{self, PromptParts};
use crate::state::{ContextFile, RecentMsg};
use crate::toolcall::strip_think;
use crate::tools;
use serde_json::{json, Value};
use std::time::Duration;
use sysward_ipc::agent::{
    AgentEvent, SessionMode, SessionSetup, StateFile, ToolCalling, ToolSchema,
};

/// Under this context size TOOL_SCHEMA=auto describes tools compactly.
pub const COMPACT_BELOW: u64 = 8192;
use sysward_ipc::Channel;

/// Knobs of the harness (defaults suit production; tests shorten the sleeps).
pub struct Options {
    pub build: String,
    pub sleep: Box<dyn FnMut(Duration)>,
    /// Ask the server to stream (the gateway collects the stream).
    pub stream: bool,
    /// Observation cap per step, characters.
    pub per_step_chars: usize,
    /// Observation cap per task or message, characters.
    pub per_task_chars: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            build: sysward_ipc::BUILD_VERSION.to_string(),
            sleep: Box::new(std::thread::sleep),
            stream: false,
            per_step_chars: 12_000,
            per_task_chars: 48_000,
        }
    }
}

/// How the session ended, for the process exit status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionEnd {
    pub exit_code: i32,
    pub reason: String,
    /// Observation characters sent to the model, per step that ran tools.
    pub step_observations: Vec<usize>,
    /// Credential-like values the agent's redactor masked.
    pub redactions: u64,
}

impl SessionEnd {
    pub fn new(exit_code: i32, reason: impl Into<String>) -> Self {
        SessionEnd {
            exit_code,
            reason: reason.into(),
            step_observations: Vec::new(),
            redactions: 0,
        }
    }
}

/// An error that ends a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TurnError {
    #[error(transparent)]
    Stop(#[from] Stop),
    #[error("model error: {0}")]
    Model(String),
}

impl From<ModelError> for TurnError {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::Stop(s) => TurnError::Stop(s),
            other => TurnError::Model(other.to_string()),
        }
    }
}

pub struct Session {
    pub link: Link,
    pub setup: SessionSetup,
    pub client: Client,
    pub opts_per_step: usize,
    pub opts_per_task: usize,
    /// Native tool calling right now (auto may switch it off for the session).
    pub native: bool,
    pub msgs: Vec<Msg>,
    pub memory: String,
    pub state: ContextFile,
    /// Messages of the previous session not yet folded into the summary.
    pub previous: Vec<RecentMsg>,
    pub est: Estimator,
    pub context_size: Option<u64>,
    /// The task or message being worked on (repeated after a compaction).
    pub current_input: String,
    pub call_seq: u64,
    /// Observation characters per step, for the overhead report.
    pub step_observations: Vec<usize>,
    pub redactions: u64,
    pub tools_json_bytes: usize,
    /// Whether the first native reply was checked for a server that drops `tools`.
    pub tools_checked: bool,
    /// Compact rules and tool descriptions (TOOL_SCHEMA, or a small context).
    pub compact: bool,
    /// Model steps of the turn in progress (or the last one), for a turn
    /// that ends in an error.
    pub turn_steps: u32,
    /// `CONFLICT:` lines the model wrote during the current task.
    pub turn_conflicts: Vec<String>,
    /// Successful actions of the last unfinished run of the task about to
    /// start (its evidence), taken by the next turn.
    pub prior_successes: u32,
}

impl Session {
    pub fn tasks_mode(&self) -> bool {
        matches!(self.setup.mode, SessionMode::Tasks { .. })
    }

    pub fn system_prompt(&self) -> String {
        prompt::build(&PromptParts {
            setup: &self.setup,
            native_tools: self.native,
            memory: &self.memory,
            summary: &self.state.summary,
            previous: &self.previous,
            context_size: self.context_size,
            compact: self.compact,
        })
    }

    /// Bytes of the next request (system prompt, history, tool schemas).
    pub fn request_bytes(&self) -> usize {
        self.system_prompt().len()
            + self.msgs.iter().map(Msg::weight).sum::<usize>()
            + if self.native {
                self.tools_json_bytes
            } else {
                0
            }
    }

    pub fn estimated_tokens(&self) -> u64 {
        self.est.estimate(self.request_bytes())
    }

    pub fn usage_line(&self) -> String {
        let used = self.estimated_tokens();
        match self.context_size {
            Some(n) => format!(
                "context: ~{used} of {n} tokens ({:.0} %), {}{}",
                used as f64 * 100.0 / n.max(1) as f64,
                self.est.label(),
                self.est
                    .reported
                    .map(|r| format!("; last prompt reported by server: {r}"))
                    .unwrap_or_default()
            ),
            None => format!("context: ~{used} tokens of UNKNOWN, {}", self.est.label()),
        }
    }

    /// Gives every native call without a result a placeholder result, so the
    /// history stays valid after a cancelled or interrupted turn.
    pub fn repair_history(&mut self) {
        let mut i = 0;
        while i < self.msgs.len() {
            if self.msgs[i].role == Role::Assistant && !self.msgs[i].calls.is_empty() {
                let ids: Vec<String> = self.msgs[i].calls.iter().map(|c| c.id.clone()).collect();
                let mut j = i + 1;
                let mut answered = Vec::new();
                while j < self.msgs.len() && self.msgs[j].role == Role::Tool {
                    answered.extend(self.msgs[j].call_id.clone());
                    j += 1;
                }
                for id in ids.iter().filter(|id| !answered.contains(id)) {
                    self.msgs.insert(
                        j,
                        Msg::tool(id, format!("<tool_result id=\"{id}\" status=\"cancelled\">\nNOT RUN: the turn was interrupted.\n</tool_result>")),
                    );
                    j += 1;
                }
                i = j;
            } else {
                i += 1;
            }
        }
    }

    /// Whether a native call id already appears in the history.
    pub fn call_id_used(&self, id: &str) -> bool {
        self.msgs.iter().any(|m| m.calls.iter().any(|c| c.id == id))
    }

    pub fn next_call_id(&mut self) -> String {
        self.call_seq += 1;
        format!("sw{}", self.call_seq)
    }

    pub fn save_context(&mut self) -> Result<(), Stop> {
        let mut recent: Vec<RecentMsg> = self.previous.clone();
        recent.extend(self.msgs.iter().map(|m| RecentMsg {
            role: match m.role {
                Role::User if m.is_result => "tool".into(),
                Role::User => "user".into(),
                Role::Assistant => "assistant".into(),
                Role::Tool => "tool".into(),
            },
            content: crate::redact::redact(&m.as_text()).text,
        }));
        self.state.set_recent(recent);
        let mut bytes = self.state.to_bytes();
        // Stay under the broker's cap for a state file, dropping the least
        // useful first: a kept corrupt copy, the oldest recent messages, the
        // journal's oldest events.
        let max = sysward_ipc::agent::STATE_FILE_MAX - (16 << 10);
        while bytes.len() > max {
            if let Some(c) = &mut self.state.corrupt_previous {
                if c.len() > 1024 {
                    let keep = c.len().saturating_sub(bytes.len() - max + 1024).max(1024);
                    *c = crate::link::clip_text(c, keep);
                    bytes = self.state.to_bytes();
                    continue;
                }
            }
            if !self.state.recent.is_empty() {
                self.state.recent.remove(0);
            } else if !self.state.journal.is_empty() {
                self.state.journal.remove(0);
            } else {
                self.state.summary = crate::link::clip_text(&self.state.summary, max / 2);
            }
            bytes = self.state.to_bytes();
        }
        self.link.save_state(StateFile::Context, bytes)
    }

    pub fn save_memory(&mut self) -> Result<(), Stop> {
        let bytes = self.memory.clone().into_bytes();
        self.link.save_state(StateFile::Memory, bytes)
    }

    pub fn reload_memory(&mut self) -> Result<(), Stop> {
        let m = self.link.load_state(StateFile::Memory)?;
        self.memory = m
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        Ok(())
    }

    /// The `max_tokens` of a conversation request: `MAX_REPLY_TOKENS`, else
    /// an eighth of the context (256 to 4096), else 1024. Without it, small
    /// servers generate until the context is full (a minute or more a reply).
    pub fn reply_tokens(&self) -> u32 {
        if let Some(n) = self.setup.model.max_reply_tokens {
            return n;
        }
        match self.context_size {
            Some(ctx) => (ctx / 8).clamp(256, 4096) as u32,
            None => 1024,
        }
    }

    /// The `max_tokens` of a compaction request: the summary has eight
    /// sections, so twice a reply, but never more than a third of the context.
    pub fn summary_tokens(&self) -> u32 {
        let twice = self.reply_tokens().saturating_mul(2);
        match self.context_size {
            Some(ctx) => twice.min((ctx / 3).max(256) as u32),
            None => twice,
        }
    }

    fn chat_body(&self, system: &str, msgs: &[Msg], with_tools: bool, max_tokens: u32) -> Value {
        let mut body = json!({
            "model": self.setup.model.model,
            "messages": conversation::render(system, msgs, self.native),
            "stream": self.client.stream,
            "max_tokens": max_tokens,
        });
        if self.client.stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if with_tools && self.native {
            body["tools"] = tools::native_tools_with(self.compact, self.tasks_mode(), &self.setup);
            // Said outright: OpenAI's default with tools, but llama-cpp-python's
            // function-calling format renders no tools without it, and vLLM
            // refuses it when auto tool choice is not enabled (then the text
            // protocol is used).
            body["tool_choice"] = json!("auto");
        }
        body
    }

    /// One model call for the conversation: switches to the text protocol when
    /// the server rejects tools or silently drops them (auto), compacts and
    /// retries once when the server says the context is exceeded (adopting
    /// the size it states), and refuses to send a prompt whose fixed part
    /// alone cannot fit the known context.
    pub fn complete(&mut self) -> Result<Completion, TurnError> {
        let mut compacted_retry = false;
        loop {
            let system = self.system_prompt();
            self.check_fixed_prompt_fits(&system)?;
            let body = self.chat_body(&system, &self.msgs, true, self.reply_tokens());
            let bytes = self.request_bytes();
            match self.client.chat(&mut self.link, &body) {
                Ok(c) => {
                    if let Some(p) = c.prompt_tokens {
                        self.est.calibrate(bytes, p);
                        self.link.event(AgentEvent::Usage {
                            prompt_tokens: p,
                            completion_tokens: c.completion_tokens.unwrap_or(0),
                        })?;
                    }
                    if self.native
                        && !self.tools_checked
                        && self.setup.model.tool_calling == ToolCalling::Auto
                    {
                        self.tools_checked = true;
                        if let Some(p) = c.prompt_tokens {
                            if self.tools_dropped(&body, p, bytes)? {
                                continue;
                            }
                        }
                    }
                    return Ok(c);
                }
                Err(ModelError::ToolsUnsupported(msg))
                    if self.native && self.setup.model.tool_calling == ToolCalling::Auto =>
                {
                    self.native = false;
                    self.link.warn(format!(
                        "{msg}: switching to the text tool protocol for the rest of the session"
                    ))?;
                    self.state
                        .journal("warning", "native tools rejected: text protocol");
                }
                Err(ModelError::ToolsUnsupported(msg)) => {
                    return Err(TurnError::Model(format!(
                        "{msg} — set TOOL_CALLING=json (or auto) in init.conf"
                    )));
                }
                Err(ModelError::ContextExceeded(msg)) if !compacted_retry => {
                    compacted_retry = true;
                    if let Some(n) = client::context_from_error(&msg, msg.as_bytes()) {
                        if self.context_size.is_none_or(|c| n < c) {
                            self.context_size = Some(n);
                            self.choose_schema();
                            self.link.warn(format!(
                                "the server states a context of {n} tokens: using it (set CONTEXT_SIZE={n} in init.conf to skip this)"
                            ))?;
                            self.state.journal(
                                "warning",
                                &format!("context adopted from the server: {n}"),
                            );
                        }
                    }
                    self.link
                        .warn(format!("{msg}: compacting the context and retrying once"))?;
                    if !self.compact(true)? {
                        let keep = self.msgs.len().saturating_sub(2);
                        let n = context::mark_old_outputs(&mut self.msgs, keep);
                        self.link
                            .warn(format!("replaced {n} old tool output(s) with a marker"))?;
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Compact or full descriptions for the context known now (TOOL_SCHEMA
    /// decides when set; auto is compact under COMPACT_BELOW).
    pub fn choose_schema(&mut self) {
        self.compact = match self.setup.model.tool_schema {
            ToolSchema::Compact => true,
            ToolSchema::Full => false,
            ToolSchema::Auto => self.context_size.is_some_and(|n| n < COMPACT_BELOW),
        };
        self.tools_json_bytes =
            tools::native_tools_with(self.compact, self.tasks_mode(), &self.setup)
                .to_string()
                .len();
    }

    /// Tokens of the part of every request that no compaction can shrink:
    /// the system prompt, the tool schemas and the reply.
    pub fn fixed_tokens(&self, system: &str) -> (u64, u64, u64) {
        let tools = if self.native {
            Estimator::raw(self.tools_json_bytes)
        } else {
            0
        };
        (
            Estimator::raw(system.len()),
            tools,
            u64::from(self.reply_tokens()),
        )
    }

    fn check_fixed_prompt_fits(&self, system: &str) -> Result<(), TurnError> {
        let Some(ctx) = self.context_size else {
            return Ok(());
        };
        let (sys, tools, reply) = self.fixed_tokens(system);
        if sys + tools + reply <= ctx {
            return Ok(());
        }
        Err(TurnError::Model(format!(
            "the prompt needs ~{} tokens before any history (system prompt ~{sys}, tool schemas ~{tools}, reply {reply}); CONTEXT_SIZE is {ctx}: give the server a larger context (llama-server -c, --n_ctx), set TOOL_SCHEMA=compact or TOOL_CALLING=json, or shorten agent.md and memoria.md",
            sys + tools + reply
        )))
    }

    /// A server that accepts `tools` but never shows them to the model (a
    /// chat template without tool support) answers as if there were none.
    /// When the reported prompt is under half our estimate, the same
    /// request is sent once without tools (one token of reply): if the prompt
    /// did not grow by at least an eighth of the schemas' bytes, the tools
    /// were dropped and the session switches to the text protocol.
    fn tools_dropped(
        &mut self,
        body: &Value,
        with_tools: u64,
        bytes: usize,
    ) -> Result<bool, TurnError> {
        // Our estimate counts 3 bytes a token; real tokenizers take 3 to 5,
        // so an honest prompt is 60 % or more of it. Below half, ask.
        if (with_tools as f64) >= 0.5 * Estimator::raw(bytes) as f64 {
            return Ok(false);
        }
        let mut probe = body.clone();
        if let Some(o) = probe.as_object_mut() {
            o.remove("tools");
            o.remove("tool_choice");
            o.insert("max_tokens".into(), json!(1));
        }
        let without = match self.client.chat(&mut self.link, &probe) {
            Ok(c) => c.prompt_tokens,
            Err(ModelError::Stop(s)) => return Err(s.into()),
            Err(_) => None,
        };
        let Some(without) = without else {
            return Ok(false);
        };
        let grew = with_tools.saturating_sub(without);
        if grew >= (self.tools_json_bytes / 8) as u64 {
            return Ok(false);
        }
        self.native = false;
        self.link.warn(format!(
            "the server accepted `tools` but ignored them ({with_tools} prompt tokens with the tool schemas, {without} without; the schemas alone are ~{} tokens): switching to the text tool protocol for the rest of the session",
            Estimator::raw(self.tools_json_bytes)
        ))?;
        self.state
            .journal("warning", "server ignores native tools: text protocol");
        Ok(true)
    }

    /// Compacts when the estimate reaches 80 % (or 95 %: markers) of a known context.
    pub fn maybe_compact(&mut self) -> Result<(), TurnError> {
        let Some(ctx) = self.context_size else {
            return Ok(());
        };
        let used = self.estimated_tokens() as f64;
        if used < context::COMPACT_AT * ctx as f64 {
            return Ok(());
        }
        let _ = self.compact(false)?;
        let used = self.estimated_tokens() as f64;
        if used >= context::MARKER_AT * ctx as f64 {
            let keep = self.msgs.len().saturating_sub(2);
            let n = context::mark_old_outputs(&mut self.msgs, keep);
            self.link.warn(format!(
                "context still at {:.0} % after compaction: {n} old tool output(s) replaced by a marker",
                used * 100.0 / ctx as f64
            ))?;
        }
        Ok(())
    }

    /// Folds the old part of the history (and the previous session's messages)
    /// into the summary. Returns whether anything was compacted.
    pub fn compact(&mut self, forced: bool) -> Result<bool, TurnError> {
        let ctx_bytes = self
            .context_size
            .map(|n| (n as f64 * context::BYTES_PER_TOKEN) as usize);
        let total: usize = self.msgs.iter().map(Msg::weight).sum();
        let recent_bytes = match ctx_bytes {
            Some(b) => (b as f64 * context::RECENT_SHARE) as usize,
            None => total / 4,
        };
        let split = context::split_point(&self.msgs, recent_bytes);
        if split.is_none() && self.previous.is_empty() {
            if forced {
                self.link.info("nothing to compact yet")?;
            }
            return Ok(false);
        }
        let k = split.unwrap_or(0);
        let mut history: String = self
            .previous
            .iter()
            .map(|m| format!("{}: {}", m.role, m.content))
            .collect::<Vec<_>>()
            .join("\n");
        for m in &self.msgs[..k] {
            history.push('\n');
            history.push_str(&crate::redact::redact(&m.as_text()).text);
        }
        let chunk_max = ctx_bytes.map(|b| b / 2).unwrap_or(96 << 10);
        // The newest journal events that fit in ~15 % of the context.
        let journal = {
            let full = self.state.unsummarized_journal();
            let max = ctx_bytes.map(|b| b * 15 / 100).unwrap_or(32 << 10);
            if full.len() > max {
                let mut start = full.len() - max;
                while !full.is_char_boundary(start) {
                    start += 1;
                }
                let cut = full[start..]
                    .find('\n')
                    .map(|i| start + i + 1)
                    .unwrap_or(start);
                full[cut..].to_string()
            } else {
                full
            }
        };
        let mut summary = self.state.summary.clone();
        let system = context::summary_system();
        let chunks = context::chunks(&history, chunk_max);
        let n_chunks = chunks.len();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let user = context::summary_user(&summary, if i == 0 { &journal } else { "" }, &chunk);
            let body = self.chat_body(&system, &[Msg::user(user)], false, self.summary_tokens());
            let c = match self.client.chat(&mut self.link, &body) {
                Ok(c) => c,
                Err(ModelError::Stop(s)) => return Err(s.into()),
                Err(e) => {
                    self.link.warn(format!("context compaction failed: {e}"))?;
                    return Ok(false);
                }
            };
            if c.truncated() {
                self.link.warn(format!(
                    "context compaction failed: the summary was cut at {} tokens (max_tokens); old tool outputs will be trimmed instead",
                    self.summary_tokens()
                ))?;
                return Ok(false);
            }
            let text = strip_think(&c.content);
            if let Err(missing) = context::summary_valid(&text) {
                self.link.warn(format!(
                    "context compaction failed: {} missing sections ({}); old tool outputs will be trimmed instead",
                    missing.len(),
                    missing.join(", ")
                ))?;
                return Ok(false);
            }
            summary = text;
            if n_chunks > 1 {
                self.link
                    .info(format!("compaction: part {}/{n_chunks} summarized", i + 1))?;
            }
        }
        self.state.summary = crate::redact::redact(&summary).text;
        self.state.compactions += 1;
        self.state.mark_journal_summarized();
        self.previous.clear();
        self.msgs.drain(..k);
        let starts_with_user = self
            .msgs
            .first()
            .is_some_and(|m| m.role == Role::User && !m.is_result);
        if !starts_with_user && !self.current_input.is_empty() {
            self.msgs.insert(
                0,
                Msg::user(format!(
                    "[sysward] Earlier steps were summarized in CONTEXTO HISTÓRICO. Current task, repeated:\n{}",
                    self.current_input
                )),
            );
        }
        self.state.journal(
            "compaction",
            &format!(
                "compaction {} ({} messages folded)",
                self.state.compactions, k
            ),
        );
        self.link.info(format!(
            "context compacted ({} so far); {}",
            self.state.compactions,
            self.usage_line()
        ))?;
        self.save_context()?;
        Ok(true)
    }
}

/// Runs a whole session over `chan`: the library entry point.
pub fn run(chan: Channel, opts: Options) -> SessionEnd {
    let mut link = Link::new(chan);
    let setup = match link.hello(&opts.build) {
        Ok(s) => s,
        Err(e) => return SessionEnd::new(1, format!("handshake: {e}")),
    };
    let native = setup.model.tool_calling != ToolCalling::Json;
    let mut s = Session {
        link,
        client: Client {
            sleep: opts.sleep,
            stream: opts.stream,
        },
        opts_per_step: opts.per_step_chars,
        opts_per_task: opts.per_task_chars,
        native,
        msgs: Vec::new(),
        memory: String::new(),
        state: ContextFile::fresh(),
        previous: Vec::new(),
        est: Estimator::default(),
        context_size: None,
        current_input: String::new(),
        call_seq: 0,
        step_observations: Vec::new(),
        redactions: 0,
        tools_json_bytes: 0,
        tools_checked: false,
        compact: false,
        turn_steps: 0,
        turn_conflicts: Vec::new(),
        prior_successes: 0,
        setup,
    };
    let result = start(&mut s).and_then(|()| match s.setup.mode {
        SessionMode::Tasks { rerun } => crate::tasks::run_tasks(&mut s, rerun),
        SessionMode::Cli => crate::cli::run_cli(&mut s),
    });
    let mut end = finish(&mut s, result);
    end.step_observations = std::mem::take(&mut s.step_observations);
    end.redactions = s.redactions;
    end
}

fn start(s: &mut Session) -> Result<(), Stop> {
    s.reload_memory()?;
    let ctx = s.link.load_state(StateFile::Context)?;
    let (state, warnings) = ContextFile::load(ctx.as_deref());
    s.state = state;
    s.previous = std::mem::take(&mut s.state.recent);
    let corrupt = s.state.corrupt_previous.is_some();
    for w in warnings {
        s.link.warn(w)?;
    }
    if corrupt {
        s.save_context()?;
    }
    let configured = s.setup.model.context_size.filter(|n| *n > 0);
    s.context_size = configured;
    let want_caps = s.native && s.setup.model.tool_calling == ToolCalling::Auto;
    let idle = s.tasks_mode() && s.setup.tasks.is_empty();
    if (configured.is_none() || want_caps) && !idle {
        let model = s.setup.model.model.clone();
        let facts = s
            .client
            .discover(&mut s.link, &model, configured.is_none(), want_caps)?;
        if configured.is_none() {
            match (&facts.context, &facts.models_error) {
                (Some(_), _) => {}
                (None, Some(e)) => s.link.warn(format!(
                    "context size UNKNOWN: the model server did not answer ({e}); set CONTEXT_SIZE in init.conf"
                ))?,
                (None, None) => s.link.warn(
                    "context size UNKNOWN: the server does not report it; set CONTEXT_SIZE in init.conf",
                )?,
            }
            s.context_size = facts.context;
        }
        if want_caps && facts.supports_tools == Some(false) {
            s.native = false;
            s.link.warn(
                "the server's chat template cannot render tools (/props: supports_tools false): using the text tool protocol",
            )?;
            s.state
                .journal("warning", "template without tool support: text protocol");
        }
    }
    s.choose_schema();
    let mode = if s.tasks_mode() { "tasks" } else { "cli" };
    s.state.journal(
        "session",
        &format!("session {} start ({mode})", s.setup.session_id),
    );
    // The previous session's messages must fit in ~20 % of the context. A
    // tasks run with nothing to do (every task DONE and unchanged) makes no
    // model call at all.
    if let (Some(n), false) = (s.context_size, idle) {
        let prev: usize = s
            .previous
            .iter()
            .map(|m| m.content.len() + 16)
            .sum::<usize>()
            + s.state.summary.len();
        if Estimator::raw(prev) as f64 > 0.20 * n as f64 {
            match s.compact(false) {
                Ok(_) => {}
                Err(TurnError::Stop(st)) => return Err(st),
                Err(TurnError::Model(m)) => {
                    s.link.warn(format!("context compaction failed: {m}"))?
                }
            }
        }
    }
    Ok(())
}

fn finish(s: &mut Session, result: Result<SessionEnd, Stop>) -> SessionEnd {
    match result {
        Ok(end) => {
            s.state
                .journal("session", &format!("session end: {}", end.reason));
            let _ = s.save_context();
            // "done" is the broker's word for a normal end.
            let reason = if end.exit_code == 5 {
                end.reason.as_str()
            } else {
                "done"
            };
            s.link.shutdown(reason);
            end
        }
        Err(Stop::Goodbye(reason)) => {
            // The broker ends the session: save what we can, then go.
            s.state
                .journal("session", &format!("session ended by the broker: {reason}"));
            let _ = s.save_context();
            SessionEnd::new(0, format!("goodbye: {reason}"))
        }
        Err(Stop::Cancelled) => {
            s.state
                .journal("session", "session cancelled by the operator");
            let _ = s.save_context();
            s.link.shutdown("cancelled by the operator");
            SessionEnd::new(130, "cancelled by the operator")
        }
        Err(e) => SessionEnd::new(1, e.to_string()),
    }
}
