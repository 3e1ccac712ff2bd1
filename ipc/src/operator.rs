//! operator (the `sysward` console) ↔ broker: over the daemon's control
//! socket, or over the socketpair of a standalone `sysward-broker` the console
//! started (`sysward run|cli --root DIR`); the same messages either way.
//! Unlike the agent channel the broker streams events: after `Run` or `Cli` it
//! sends `Event`s, prompts and finally `Finished`, while the client may send
//! `Input`, `Cancel` and answers to prompts.

use crate::agent::{AgentEvent, TaskOutcome};
use crate::impl_message;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOptions {
    pub rerun: bool,
    pub dry_run: bool,
    /// A person can answer prompts (stdin is a terminal). When false, an ask
    /// becomes a pending approval instead of a prompt.
    pub interactive: bool,
}

/// A pending decision shown to a person. Every string is sanitized by the broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPrompt {
    pub id: String,
    pub mode: String,
    pub host: String,
    pub category: String,
    pub risk: String,
    /// The full command after unwrapping (or the tool and its target).
    pub command: String,
    /// The confinement profile in one line.
    pub profile: String,
    pub reason: String,
    /// Every simple command the classifier found, with its own category and
    /// risk (the panel lists them; a long one is shown by head and tail).
    #[serde(default)]
    pub parts: Vec<PromptPart>,
    /// How many simple commands there are in all (`parts` keeps the first
    /// ones only when there are very many).
    #[serde(default)]
    pub parts_total: usize,
}

/// One simple command of an approval request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptPart {
    pub text: String,
    pub category: String,
    pub risk: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApprovalDecision {
    AllowOnce,
    /// Allow this normalized command for the rest of the session; `confirmed`
    /// must be true (the client asks a second time).
    AllowSession {
        confirmed: bool,
    },
    Deny,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummary {
    pub session_id: String,
    pub outcomes: Vec<TaskOutcome>,
    /// Process exit status `sysward run` should end with.
    pub exit_code: i32,
    pub actions: u32,
    pub denials: u32,
    pub duration_ms: u64,
    /// Why the session ended, when it ended abnormally.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatorRequest {
    Hello {
        build: String,
    },
    Run(RunOptions),
    Cli(RunOptions),
    Input(String),
    /// Ctrl+C: cancel the turn in flight.
    Cancel,
    Approval {
        id: String,
        decision: ApprovalDecision,
        note: String,
    },
    /// End of the operator's input: close the session cleanly.
    Detach,
    /// The answer to `SecretNeeded`: the value typed without echo, or None
    /// when the operator declined.
    Secret {
        value: Option<String>,
    },
    /// Instead of a session: decide a pending approval (`deny_note` Some = deny).
    Decide {
        id: String,
        deny_note: Option<String>,
    },
    /// Instead of a session: list the approvals (JSON).
    ListApprovals,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatorAnswer {
    Welcome {
        build: String,
        broker_pid: u32,
    },
    /// The session started: its id, mode and project as shown in the banner.
    SessionStarted {
        session_id: String,
        banner: String,
    },
    Event(AgentEvent),
    /// The agent waits for the operator's next line (CLI).
    InputWanted,
    ApprovalNeeded(ApprovalPrompt),
    Finished(SessionSummary),
    /// The model asked for a secret (`ask_secret`): show `prompt` (name, scope,
    /// reason; sanitized) and read the value without echo.
    SecretNeeded {
        name: String,
        prompt: String,
    },
    /// The broker decided about the agent's call `call_id` (before it runs
    /// or is refused): the console shows the action in its risk's colour.
    Decided {
        call_id: String,
        risk: String,
    },
    /// The outcome of `Decide` / `ListApprovals`: text for the person (JSON
    /// for the list) and whether it succeeded.
    Done {
        ok: bool,
        text: String,
    },
    /// The request was refused or the session failed; the text says what to do.
    Error {
        message: String,
    },
}

pub const OPERATOR_REQUEST_MAX: usize = 64 << 10;
pub const OPERATOR_ANSWER_MAX: usize = 2 << 20;

impl_message!(OperatorRequest, "operator request", OPERATOR_REQUEST_MAX, {
    Hello = 1, Run = 2, Cli = 3, Input = 4, Cancel = 5, Approval = 6, Detach = 7, Secret = 8,
    Decide = 9, ListApprovals = 10,
});

/// The operator request kinds as a frame header carries them (the numbers
/// of `impl_message!` above; a test pins each to its variant).
pub mod request_kind {
    pub const HELLO: u16 = 1;
    pub const RUN: u16 = 2;
    pub const CLI: u16 = 3;
    pub const INPUT: u16 = 4;
    pub const CANCEL: u16 = 5;
    pub const APPROVAL: u16 = 6;
    pub const DETACH: u16 = 7;
    pub const SECRET: u16 = 8;
    pub const DECIDE: u16 = 9;
    pub const LIST_APPROVALS: u16 = 10;
}
impl_message!(OperatorAnswer, "operator answer", OPERATOR_ANSWER_MAX, {
    Welcome = 1, SessionStarted = 2, Event = 3, InputWanted = 4, ApprovalNeeded = 5,
    Finished = 6, Error = 7, SecretNeeded = 8, Done = 9, Decided = 10,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_kind_constant_names_its_variant() {
        use request_kind as k;
        let pinned = [
            (k::HELLO, "Hello"),
            (k::RUN, "Run"),
            (k::CLI, "Cli"),
            (k::INPUT, "Input"),
            (k::CANCEL, "Cancel"),
            (k::APPROVAL, "Approval"),
            (k::DETACH, "Detach"),
            (k::SECRET, "Secret"),
            (k::DECIDE, "Decide"),
            (k::LIST_APPROVALS, "ListApprovals"),
        ];
        crate::codec::assert_kinds_pinned::<OperatorRequest>(&pinned);
    }
}
