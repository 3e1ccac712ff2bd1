//! Where a session's events go and where its input and approvals come from: the
//! local terminal (`sysward run|cli --root DIR`) or a control-socket client.

use crate::cancel::CancelToken;
use crate::sanitize;
use std::io::{BufRead, Write};
use std::sync::Mutex;
use sysward_ipc::agent::AgentEvent;
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt, SessionSummary};

/// Longest answer text shown to the operator in one event.
pub const MAX_SHOWN: usize = 64 << 10;

pub trait Operator: Send + Sync {
    fn session_started(&self, session_id: &str, banner: &str);
    fn event(&self, event: &AgentEvent);
    /// The operator's next line (CLI). `None`: no more input.
    fn next_input(&self) -> Option<String>;
    /// Asks a person. `None` when nobody is there to answer (unattended run).
    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)>;
    fn finished(&self, summary: &SessionSummary);
    fn cancel_token(&self) -> &CancelToken;
}

/// Renders an event for a human, sanitized. `None` for events not shown.
pub fn render_event(event: &AgentEvent) -> Option<String> {
    let s = |t: &str| sanitize::for_terminal(t, MAX_SHOWN);
    let l = |t: &str| sanitize::one_line(t, 300);
    Some(match event {
        AgentEvent::Info(t) => s(t),
        AgentEvent::Warning(t) => format!("warning: {}", s(t)),
        AgentEvent::Step { task, step, max } => match task {
            Some(t) => format!("[{}] step {step}/{max}", l(t)),
            None => format!("step {step}/{max}"),
        },
        AgentEvent::ToolStart { summary, .. } => format!("→ {}", l(summary)),
        AgentEvent::ToolEnd {
            status,
            duration_ms,
            ..
        } => format!("← {} ({} ms)", status.as_str(), duration_ms),
        AgentEvent::Answer(t) => s(t),
        AgentEvent::TaskStart { name } => format!("== task {} ==", l(name)),
        AgentEvent::TaskSkipped { name, reason } => {
            format!("== task {}: skipped ({}) ==", l(name), l(reason))
        }
        AgentEvent::Usage { .. } => return None,
    })
}

/// JSON form of an event for `--json` output (strings sanitized too).
pub fn event_json(event: &AgentEvent) -> serde_json::Value {
    use serde_json::json;
    let l = |t: &str| sanitize::for_terminal(t, MAX_SHOWN);
    match event {
        AgentEvent::Info(t) => json!({"event": "info", "text": l(t)}),
        AgentEvent::Warning(t) => json!({"event": "warning", "text": l(t)}),
        AgentEvent::Step { task, step, max } => {
            json!({"event": "step", "task": task.as_deref().map(l), "step": step, "max": max})
        }
        AgentEvent::ToolStart { call_id, summary } => {
            json!({"event": "tool_start", "call_id": l(call_id), "summary": l(summary)})
        }
        AgentEvent::ToolEnd {
            call_id,
            status,
            duration_ms,
        } => {
            json!({"event": "tool_end", "call_id": l(call_id), "status": status.as_str(), "duration_ms": duration_ms})
        }
        AgentEvent::Answer(t) => json!({"event": "answer", "text": l(t)}),
        AgentEvent::TaskStart { name } => json!({"event": "task_start", "task": l(name)}),
        AgentEvent::TaskSkipped { name, reason } => {
            json!({"event": "task_skipped", "task": l(name), "reason": l(reason)})
        }
        AgentEvent::Usage {
            prompt_tokens,
            completion_tokens,
        } => {
            json!({"event": "usage", "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
        }
    }
}

pub fn summary_json(summary: &SessionSummary) -> serde_json::Value {
    serde_json::json!({
        "event": "summary",
        "session": summary.session_id,
        "exit_code": summary.exit_code,
        "actions": summary.actions,
        "denials": summary.denials,
        "duration_ms": summary.duration_ms,
        "error": summary.error.as_deref().map(|e| sanitize::for_terminal(e, 4000)),
        "tasks": summary.outcomes.iter().map(|o| serde_json::json!({
            "task": sanitize::for_terminal(&o.name, 300),
            "status": o.status.as_str(),
            "steps": o.steps,
            "summary": sanitize::for_terminal(&o.summary, 4000),
        })).collect::<Vec<_>>(),
    })
}

pub fn render_summary(summary: &SessionSummary) -> String {
    let mut out = String::new();
    for o in &summary.outcomes {
        out.push_str(&format!(
            "{}: {} ({} steps)\n",
            sanitize::one_line(&o.name, 200),
            o.status.as_str(),
            o.steps
        ));
    }
    if let Some(e) = &summary.error {
        out.push_str(&format!(
            "session ended: {}\n",
            sanitize::for_terminal(e, 4000)
        ));
    }
    out.push_str(&format!(
        "{} actions, {} denials, {:.1}s",
        summary.actions,
        summary.denials,
        summary.duration_ms as f64 / 1000.0
    ));
    out
}

pub fn render_prompt(p: &ApprovalPrompt) -> String {
    format!(
        "\n┌─ approval needed ({}) ──────────────\n│ mode:     {}\n│ host:     {}\n│ category: {}   risk: {}\n│ command:  {}\n│ runs as:  {}\n│ reason:   {}\n└─ [y] allow once  [s] allow for this session  [n] deny\n",
        p.id, p.mode, p.host, p.category, p.risk, p.command, p.profile, p.reason
    )
}

/// The operator on this process's own terminal.
pub struct LocalOperator {
    pub json: bool,
    pub interactive: bool,
    cancel: CancelToken,
    at_prompt: std::sync::Arc<std::sync::atomic::AtomicBool>,
    out: Mutex<std::io::Stdout>,
}

impl LocalOperator {
    pub fn new(
        json: bool,
        interactive: bool,
        cancel: CancelToken,
        at_prompt: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> LocalOperator {
        LocalOperator {
            json,
            interactive,
            cancel,
            at_prompt,
            out: Mutex::new(std::io::stdout()),
        }
    }

    fn print(&self, text: &str) {
        if let Ok(mut out) = self.out.lock() {
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    }

    fn read_line(&self, prompt: &str) -> Option<String> {
        if !self.json {
            if let Ok(mut out) = self.out.lock() {
                let _ = write!(out, "{prompt}");
                let _ = out.flush();
            }
        }
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_string()),
        }
    }
}

impl Operator for LocalOperator {
    fn session_started(&self, session_id: &str, banner: &str) {
        if self.json {
            self.print(
                &serde_json::json!({"event": "session_start", "session": session_id}).to_string(),
            );
        } else {
            self.print(banner);
        }
    }

    fn event(&self, event: &AgentEvent) {
        if self.json {
            self.print(&event_json(event).to_string());
        } else if let Some(text) = render_event(event) {
            self.print(&text);
        }
    }

    fn next_input(&self) -> Option<String> {
        if !self.interactive {
            return None;
        }
        // Ctrl+C at the prompt exits (seed); during a turn it cancels.
        self.at_prompt
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let line = self.read_line("agent> ");
        self.at_prompt
            .store(false, std::sync::atomic::Ordering::SeqCst);
        line
    }

    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)> {
        if !self.interactive {
            return None;
        }
        self.print(&render_prompt(prompt));
        loop {
            let answer = self.read_line("answer [y/s/n]: ")?;
            match answer.trim() {
                "y" | "Y" => return Some((ApprovalDecision::AllowOnce, String::new())),
                "s" | "S" => {
                    let confirm = self.read_line(
                        "allow this exact command for the rest of the session? type 'yes' to confirm: ",
                    )?;
                    let confirmed = confirm.trim() == "yes";
                    if confirmed {
                        return Some((ApprovalDecision::AllowSession { confirmed }, String::new()));
                    }
                    self.print("not confirmed; answer again");
                }
                "n" | "N" => {
                    let note = self
                        .read_line("note for the model (optional): ")
                        .unwrap_or_default();
                    return Some((ApprovalDecision::Deny, note));
                }
                _ => self.print("answer y, s or n"),
            }
        }
    }

    fn finished(&self, summary: &SessionSummary) {
        if self.json {
            self.print(&summary_json(summary).to_string());
        } else {
            self.print(&render_summary(summary));
        }
    }

    fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }
}
