//! Where a session's events go and where its input and approvals come from: the
//! local terminal (`sysward run|cli --root DIR`) or a control-socket client.

use crate::cancel::CancelToken;
use crate::sanitize;
use crate::terminal::{Console, HistoryFile, Prompted};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use sysward_ipc::agent::AgentEvent;
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt, SessionSummary};

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
    ) -> Result<Option<String>, String> {
        Err("no operator terminal can answer a secret prompt in this session".to_string())
    }
}

/// The approval panel without colours (see `terminal::render_approval_panel`).
pub fn render_prompt(p: &ApprovalPrompt) -> String {
    crate::terminal::render_approval_panel(p, crate::terminal::Style::plain())
}

/// The operator on this process's own terminal (`sysward run|cli --root DIR`):
/// line editing and history at the `agent> ` prompt, a spinner while the model
/// works, the approval panel. With `json`, one JSON object per line instead.
pub struct LocalOperator {
    pub json: bool,
    pub interactive: bool,
    cancel: CancelToken,
    at_prompt: Arc<AtomicBool>,
    history: Option<HistoryFile>,
    verbose: bool,
    console: std::sync::OnceLock<Console>,
}

impl LocalOperator {
    pub fn new(
        json: bool,
        interactive: bool,
        cancel: CancelToken,
        at_prompt: Arc<AtomicBool>,
    ) -> LocalOperator {
        LocalOperator {
            json,
            interactive,
            cancel,
            at_prompt,
            history: None,
            verbose: false,
            console: std::sync::OnceLock::new(),
        }
    }

    /// Keeps the `agent> ` history in `DIR/.context-history` (0600, with
    /// timestamps; credential-like lines are never written).
    pub fn with_project_history(mut self, project_dir: &std::path::Path) -> LocalOperator {
        self.history = Some(HistoryFile::for_project(project_dir));
        self
    }

    /// Shows every action's output, not only failures' (`--verbose`).
    pub fn with_verbose(mut self, verbose: bool) -> LocalOperator {
        self.verbose = verbose;
        self
    }

    /// The console starts on first use, so that nothing touches the terminal
    /// before the session does.
    fn console(&self) -> &Console {
        self.console.get_or_init(|| {
            let history = if self.interactive {
                self.history.clone()
            } else {
                None
            };
            let console = Console::new(self.json, history);
            console.screen.set_verbose(self.verbose);
            console
        })
    }
}

impl Operator for LocalOperator {
    fn session_started(&self, session_id: &str, banner: &str) {
        self.console().screen.banner(session_id, banner);
    }

    fn event(&self, event: &AgentEvent) {
        self.console().screen.event(event);
    }

    fn next_input(&self) -> Option<String> {
        if !self.interactive {
            return None;
        }
        // Ctrl+C at the prompt exits (seed); during a turn it cancels. With a
        // line editor Ctrl+C at the prompt is a key, not a signal.
        self.at_prompt.store(true, Ordering::SeqCst);
        let read = self.console().prompt();
        self.at_prompt.store(false, Ordering::SeqCst);
        match read {
            Prompted::Line(line) => Some(line),
            Prompted::Exit => None,
        }
    }

    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)> {
        if !self.interactive {
            return None;
        }
        Some(self.console().approve(prompt))
    }

    fn finished(&self, summary: &SessionSummary) {
        self.console().screen.finished(summary);
    }

    fn ask_secret(
        &self,
        name: &str,
        scope: &crate::secrets::Scope,
        reason: &str,
    ) -> Result<Option<String>, String> {
        if !self.interactive {
            return Err("nobody is at this session's terminal".to_string());
        }
        self.console().screen.idle();
        crate::secrets::ask_secret_on_terminal(name, scope, reason).map_err(|e| e.to_string())
    }

    fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    fn decided(&self, call_id: &str, _category: &str, risk: &str, _verdict: &str) {
        self.console().screen.decided(call_id, risk);
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
