//! How a session's events and its summary read for the operator: the plain
//! text and the `--json` lines, shared by the terminal and the control
//! socket's clients (no terminal code here).

use sysward_broker::sanitize;
use sysward_ipc::agent::{AgentEvent, ToolStatus};
use sysward_ipc::operator::SessionSummary;

/// Longest answer text shown to the operator in one event.
pub const MAX_SHOWN: usize = 64 << 10;

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
        // For the audit only; the console shows an action's output under its
        // end line (`Screen`).
        AgentEvent::Usage { .. }
        | AgentEvent::CallRefused { .. }
        | AgentEvent::MemoryEdit { .. }
        | AgentEvent::ToolOutput { .. } => return None,
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
        AgentEvent::CallRefused {
            call_id,
            tool,
            kind,
            message,
            ..
        } => {
            json!({"event": "agent_refused", "call_id": l(call_id), "tool": l(tool), "kind": kind.as_str(), "message": l(message)})
        }
        AgentEvent::MemoryEdit {
            call_id,
            tool,
            status,
            message,
            ..
        } => {
            json!({"event": "memory_tool", "call_id": l(call_id), "tool": l(tool), "status": status.as_str(), "message": l(message)})
        }
        AgentEvent::ToolOutput {
            call_id,
            status,
            exit_code,
            signal,
            message,
            stderr_tail,
            stdout_head,
        } => {
            json!({"event": "tool_output", "call_id": l(call_id), "status": status.as_str(), "exit_code": exit_code, "signal": signal, "message": l(message), "stderr_tail": l(stderr_tail), "stdout_head": l(stdout_head)})
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

/// The lines the console prints under an action's `← status` line: on a
/// failure the exit status or reason and the tail of stderr; with
/// `verbose`, also the output.
pub fn render_tool_output(event: &AgentEvent, verbose: bool) -> Vec<String> {
    let AgentEvent::ToolOutput {
        status,
        exit_code,
        signal,
        message,
        stderr_tail,
        stdout_head,
        ..
    } = event
    else {
        return Vec::new();
    };
    let failed = !matches!(status, ToolStatus::Ok);
    let mut out = Vec::new();
    if failed {
        let how = match (exit_code, signal) {
            (Some(c), _) => format!("exit status {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => status.as_str().to_string(),
        };
        out.push(format!("  {how}"));
        for l in message.lines().filter(|l| !l.trim().is_empty()) {
            out.push(format!("  {}", sanitize::one_line(l, 300)));
        }
    }
    if failed || verbose {
        for l in stderr_tail.lines() {
            out.push(format!("  stderr: {}", sanitize::one_line(l, 300)));
        }
    }
    if verbose {
        for l in stdout_head.lines().take(100) {
            out.push(format!("  │ {}", sanitize::one_line(l, 300)));
        }
        if !failed {
            for l in message.lines().filter(|l| !l.trim().is_empty()) {
                out.push(format!("  {}", sanitize::one_line(l, 300)));
            }
        }
    }
    out
}
