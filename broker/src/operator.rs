//! Where a session's events go and where its input and approvals come from.
//! The broker's one implementation is the operator channel (`operator_channel.rs`): the
//! operator protocol to the `sysward` console, whether the console reached
//! the daemon's control socket or started a standalone broker itself. The
//! broker holds no terminal.

use crate::cancel::CancelToken;
use crate::sanitize;
use sysward_ipc::agent::AgentEvent;
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt, SessionSummary};

/// Why nobody can type a secret for this session: the model is told
/// "ask_secret is not available: …" with these words.
#[derive(Debug, thiserror::Error)]
pub enum SecretPromptError {
    #[error("no operator terminal can answer a secret prompt in this session")]
    NoTerminal,
    #[error("nobody is at the client's terminal")]
    NotInteractive,
    #[error("operator input lost")]
    InputLost,
    #[error("the operator went away")]
    Gone,
}

pub trait Operator: Send + Sync {
    fn session_started(&self, session_id: &str, banner: &str);
    fn event(&self, event: &AgentEvent);
    /// The operator's next line (CLI). `None`: no more input.
    fn next_input(&self) -> Option<String>;
    /// Asks a person. `None` when nobody is there to answer (unattended run).
    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)>;
    fn finished(&self, summary: &SessionSummary);
    fn cancel_token(&self) -> &CancelToken;
    /// The broker's decision on the agent's call `call_id` (before it runs or
    /// is refused), so a terminal can show the action in its risk colour.
    fn decided(&self, _call_id: &str, _category: &str, _risk: &str, _verdict: &str) {}
    /// Asks the person at the terminal for a secret, without echo, for the
    /// given scope. `Err` says why nobody can answer here.
    fn ask_secret(
        &self,
        _name: &str,
        _scope: &crate::secrets::Scope,
        _reason: &str,
    ) -> Result<Option<String>, SecretPromptError> {
        Err(SecretPromptError::NoTerminal)
    }
}

/// Who a person is, for the record of what they decided: uid, login name,
/// and the terminal of `pid` (this process when None) as the kernel shows
/// it (`/proc/PID/fd/0`), never as a client claims it.
pub fn identity(uid: u32, pid: Option<u32>) -> String {
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| sanitize::one_line(&u.name, 64))
        .unwrap_or_else(|| "?".to_string());
    let fd0 = match pid {
        Some(p) => format!("/proc/{p}/fd/0"),
        None => "/proc/self/fd/0".to_string(),
    };
    let tty = std::fs::read_link(fd0)
        .ok()
        .map(|t| t.display().to_string())
        .filter(|t| t.starts_with("/dev/pts/") || t.starts_with("/dev/tty"))
        .map(|t| sanitize::one_line(&t, 64));
    let mut who = format!("uid {uid} ({name})");
    if let Some(p) = pid {
        who.push_str(&format!(" pid {p}"));
    }
    who.push_str(&match tty {
        Some(t) => format!(" on {t}"),
        None => " (no terminal)".to_string(),
    });
    who
}
