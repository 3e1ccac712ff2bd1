//! agent ↔ broker. Strictly request → answer: the agent sends one request and
//! waits for its answer; the broker never sends unprompted. Operator input reaches
//! the agent as the answer to `NextInput`, a cancel as the answer `Cancelled` to
//! whatever request was outstanding.

use crate::impl_message;
use crate::model::{ModelReply, ModelRequest};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionMode {
    /// Run the task files, then end.
    Tasks { rerun: bool },
    /// Interactive dialogue with the operator.
    Cli,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolCalling {
    Auto,
    Native,
    Json,
}

/// How much the tool descriptions say (`TOOL_SCHEMA`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolSchema {
    /// Compact under 8,192 tokens of context, full otherwise.
    Auto,
    Full,
    Compact,
}

/// Model settings the agent needs (never the key, never the URL's host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSettings {
    pub model: String,
    /// `CONTEXT_SIZE`; None means ask the server, then UNKNOWN.
    pub context_size: Option<u64>,
    pub request_timeout_secs: u32,
    pub tool_calling: ToolCalling,
    /// `MAX_REPLY_TOKENS`; None means sized from the context.
    pub max_reply_tokens: Option<u32>,
    /// `TOOL_SCHEMA`.
    pub tool_schema: ToolSchema,
    /// `API_URL` with the key masked, for `/status` only.
    pub api_display: String,
}

/// One task file as the broker read it from the project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub name: String,
    pub content: String,
    /// SHA-256 of the content, hex.
    pub sha256: String,
}

/// Everything the agent learns about its session, in the answer to `Hello`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSetup {
    pub session_id: String,
    pub mode: SessionMode,
    /// The whole agent.md text (instructions and policy block).
    pub instructions: String,
    /// The effective policy as printable text (for the prompt and `/policy`).
    pub policy_text: String,
    pub execution_mode: String,
    pub max_steps: u32,
    pub dry_run: bool,
    pub hostname: String,
    /// The project directory as the operator named it (display only).
    pub project_display: String,
    pub model: ModelSettings,
    /// Task files in run order (empty in CLI mode).
    pub tasks: Vec<TaskSpec>,
    /// Warnings the broker produced while loading (shown to the model too).
    pub warnings: Vec<String>,
    /// The tools of the operator's skill packs, as the broker loaded them.
    pub skills: Vec<SkillTool>,
    /// Tools not described to the model: the policy denies every call of
    /// them this session (`tools::withheld`).
    pub withheld_tools: Vec<String>,
    /// Project tools (`tools/NAME/`) waiting for a person's approval: not
    /// described to the model; a call of one goes to the broker, which
    /// refuses it with how to approve it (and audits the refusal).
    pub unapproved_tools: Vec<String>,
    /// Where `register_tool` puts a tool, as memoria.md names it: `tools`
    /// (the project's, relative) or the installed layout's absolute
    /// directory.
    pub tools_dir: String,
}

/// A tool from an operator's skill pack, described to the model from its
/// manifest. The broker decides and runs a call to it from its own copy of
/// the manifest, never from this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillTool {
    pub name: String,
    pub description: String,
    pub params: Vec<SkillParam>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillParam {
    pub name: String,
    pub ty: crate::tools::Ty,
    pub required: bool,
    pub description: String,
}

/// A tool call as the model asked for it. The broker resolves the effect from
/// its own catalog by `tool`; nothing in here is trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolRequest {
    pub call_id: String,
    pub tool: String,
    /// The JSON arguments exactly as the model wrote them (≤ 40 MiB).
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToolStatus {
    Ok,
    /// Ran and failed (non-zero exit, file error).
    Error,
    Denied,
    Timeout,
    Cancelled,
    /// Needs a person's approval that is not available now (unattended run).
    PendingApproval,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
            ToolStatus::Denied => "denied",
            ToolStatus::Timeout => "timeout",
            ToolStatus::Cancelled => "cancelled",
            ToolStatus::PendingApproval => "pending approval",
        }
    }
}

/// What a tool produced, with every part a distinct field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub status: ToolStatus,
    /// Exit code of a command, when it exited.
    pub exit_code: Option<i32>,
    /// Signal that ended a command, when one did.
    pub signal: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Output of a non-command tool, or the denial/error explanation.
    pub message: String,
    /// Full output saved here when it was cut for the model.
    pub saved_output: Option<String>,
    pub duration_ms: u64,
    /// Secrets masked by the broker in this result.
    pub redactions: u32,
}

impl ToolResult {
    /// A refusal: a status and the reason, nothing ran.
    pub fn refused(call_id: &str, status: ToolStatus, message: impl Into<String>) -> Self {
        ToolResult::message(call_id, status, message)
    }

    /// A result with a message and no output yet: the answer of a step that
    /// ran nothing (a dry run, a stored secret), or one being filled in.
    pub fn message(call_id: &str, status: ToolStatus, message: impl Into<String>) -> Self {
        ToolResult {
            call_id: call_id.to_string(),
            status,
            exit_code: None,
            signal: None,
            stdout: String::new(),
            stderr: String::new(),
            message: message.into(),
            saved_output: None,
            duration_ms: 0,
            redactions: 0,
        }
    }
}

/// The agent's persistent files, kept by the broker for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateFile {
    /// `memoria.md`
    Memory,
    /// `contexto.mem`
    Context,
}

impl StateFile {
    pub fn file_name(self) -> &'static str {
        match self {
            StateFile::Memory => "memoria.md",
            StateFile::Context => "contexto.mem",
        }
    }
}

/// Largest state file the broker stores for the agent.
pub const STATE_FILE_MAX: usize = 8 << 20;

/// Progress the operator sees. Text in here is sanitized by the broker before it
/// reaches a terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentEvent {
    Info(String),
    Warning(String),
    /// A model step started (`step 3/40`).
    Step {
        task: Option<String>,
        step: u32,
        max: u32,
    },
    ToolStart {
        call_id: String,
        summary: String,
    },
    ToolEnd {
        call_id: String,
        status: ToolStatus,
        duration_ms: u64,
    },
    /// The model's answer text (think blocks already stripped).
    Answer(String),
    TaskStart {
        name: String,
    },
    /// A task file skipped (DONE and unchanged).
    TaskSkipped {
        name: String,
        reason: String,
    },
    Usage {
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// A call the agent refused itself, without asking the broker (for the
    /// audit; the broker bounds every field).
    CallRefused {
        call_id: String,
        /// The tool as the model named it (empty when the call could not
        /// be read at all).
        tool: String,
        /// The arguments as the model wrote them (the agent cuts them).
        arguments: String,
        kind: RefusalKind,
        message: String,
    },
    /// A `remember`/`forget` call, done by the agent (the broker records
    /// the resulting memoria.md change itself when the file is saved).
    MemoryEdit {
        call_id: String,
        tool: String,
        arguments: String,
        status: ToolStatus,
        message: String,
    },
    /// What an action produced, from the broker to the operator's console
    /// (an agent sending it is refused): the exit, the tail of stderr and,
    /// for `--verbose`, the head of the output.
    ToolOutput {
        call_id: String,
        status: ToolStatus,
        exit_code: Option<i32>,
        signal: Option<i32>,
        /// The broker's explanation (denial, error, notes), cut.
        message: String,
        /// The last lines of stderr, cut.
        stderr_tail: String,
        /// The head of stdout, cut.
        stdout_head: String,
    },
}

/// Why the agent refused a call itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RefusalKind {
    /// Unreadable: bad JSON, a text-protocol block that does not parse, or
    /// arguments that do not match the tool's schema.
    Malformed,
    UnknownTool,
    /// Arguments over the size limit.
    TooLarge,
    /// Over the calls-per-step limit.
    TooManyCalls,
    /// The same call already failed the same way twice.
    Loop,
    /// The step budget ran out with the call pending.
    StepBudget,
}

impl RefusalKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::Malformed => "malformed",
            RefusalKind::UnknownTool => "unknown tool",
            RefusalKind::TooLarge => "too large",
            RefusalKind::TooManyCalls => "too many calls in one step",
            RefusalKind::Loop => "loop",
            RefusalKind::StepBudget => "step budget exhausted",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskStatus {
    Done,
    Blocked,
    Failed,
    /// Step budget exhausted: never DONE.
    Incomplete,
    /// Model error or cancellation stopped it.
    Error,
    Skipped,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Done => "DONE",
            TaskStatus::Blocked => "BLOCKED",
            TaskStatus::Failed => "FAILED",
            TaskStatus::Incomplete => "INCOMPLETE",
            TaskStatus::Error => "ERROR",
            TaskStatus::Skipped => "SKIPPED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskOutcome {
    pub name: String,
    pub sha256: String,
    pub status: TaskStatus,
    pub summary: String,
    pub steps: u32,
    pub conflicts: Vec<String>,
}

/// What the operator said next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatorInput {
    Line(String),
    /// No more input: end the session.
    End,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentRequest {
    Hello { build: String },
    NextInput,
    Model(ModelRequest),
    Tool(ToolRequest),
    LoadState(StateFile),
    SaveState { file: StateFile, content: Vec<u8> },
    Event(AgentEvent),
    TaskFinished(TaskOutcome),
    Shutdown { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AgentAnswer {
    Welcome(Box<SessionSetup>),
    Input(OperatorInput),
    Model(ModelReply),
    Tool(ToolResult),
    State(Option<Vec<u8>>),
    Ack,
    /// The operator cancelled the turn: the outstanding request did not complete.
    Cancelled,
    /// The broker ends the session; `reason` says why.
    Goodbye {
        reason: String,
    },
}

/// Tool arguments may reach 40 MiB (seed); the rest of a request is small.
pub const AGENT_REQUEST_MAX: usize = (40 << 20) + (256 << 10);
/// Answers carry model replies (64 MiB cap) and capped tool output.
pub const AGENT_ANSWER_MAX: usize = (64 << 20) + (256 << 10);

impl_message!(AgentRequest, "agent request", AGENT_REQUEST_MAX, {
    Hello = 1, NextInput = 2, Model = 3, Tool = 4, LoadState = 5, SaveState = 6,
    Event = 7, TaskFinished = 8, Shutdown = 9,
});
impl_message!(AgentAnswer, "agent answer", AGENT_ANSWER_MAX, {
    Welcome = 1, Input = 2, Model = 3, Tool = 4, State = 5, Ack = 6, Cancelled = 7, Goodbye = 8,
});

/// The agent request kinds as a frame header carries them (the numbers of
/// `impl_message!` above; a test pins each to its variant).
pub mod request_kind {
    pub const HELLO: u16 = 1;
    pub const NEXT_INPUT: u16 = 2;
    pub const MODEL: u16 = 3;
    pub const TOOL: u16 = 4;
    pub const LOAD_STATE: u16 = 5;
    pub const SAVE_STATE: u16 = 6;
    pub const EVENT: u16 = 7;
    pub const TASK_FINISHED: u16 = 8;
    pub const SHUTDOWN: u16 = 9;
}

/// Per-kind size caps checked from the header, before decoding: a control
/// message never gets the 40 MiB a tool call may use.
pub const fn agent_request_cap(kind: u16) -> usize {
    use request_kind as k;
    match kind {
        k::MODEL => 40 << 20,                         // the whole conversation
        k::TOOL => AGENT_REQUEST_MAX,                 // arguments up to 40 MiB
        k::SAVE_STATE => STATE_FILE_MAX + (64 << 10), // a whole state file
        k::EVENT | k::TASK_FINISHED => 1 << 20,
        _ => 64 << 10, // Hello, NextInput, LoadState, Shutdown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_kind_constant_names_its_variant() {
        use request_kind as k;
        let pinned = [
            (k::HELLO, "Hello"),
            (k::NEXT_INPUT, "NextInput"),
            (k::MODEL, "Model"),
            (k::TOOL, "Tool"),
            (k::LOAD_STATE, "LoadState"),
            (k::SAVE_STATE, "SaveState"),
            (k::EVENT, "Event"),
            (k::TASK_FINISHED, "TaskFinished"),
            (k::SHUTDOWN, "Shutdown"),
        ];
        crate::codec::assert_kinds_pinned::<AgentRequest>(&pinned);
    }
}
