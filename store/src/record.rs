//! What the session records beyond the broker's own decisions: the agent's
//! refusals and memory edits (typed events, every field bounded here again:
//! the agent is not trusted to have cut them), each memoria.md change with
//! its diff, the tasks' `CONFLICT:` lines, and the summaries of an action's
//! result that the model and the operator's console get.

use crate::project::sha256_hex;
use crate::sanitize;
use serde_json::{json, Value};
use sysward_ipc::agent::{AgentEvent, TaskOutcome, ToolResult};
use sysward_ipc::exec::FileChange;

/// A memoria.md diff kept in the audit record and shown at the end.
pub const MEMORY_DIFF_MAX: usize = 16 << 10;
/// The diff a write's result carries to the model.
pub const CHANGE_DIFF_MAX: usize = 4 << 10;
/// Diffs are computed only for files up to this size (memoria.md is at most
/// 8 MiB, but a line diff of that is not worth its time).
const DIFF_INPUT_MAX: usize = 1 << 20;
/// What the end-of-session report shows of all memoria.md changes.
const MEMORY_REPORT_MAX: usize = 32 << 10;
/// At most this many `conflict` records per task.
const CONFLICTS_MAX: usize = 50;

/// Cuts `s` to at most `max` bytes on a character boundary, saying so.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes not shown]", &s[..end], s.len() - end)
}

/// A unified diff of `old` → `new`, cut at `max` bytes; `None` when either
/// side is not text or too large to diff.
pub fn text_diff(name: &str, old: &[u8], new: &[u8], max: usize) -> Option<String> {
    if old.len() > DIFF_INPUT_MAX || new.len() > DIFF_INPUT_MAX {
        return None;
    }
    let (Ok(a), Ok(b)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return None;
    };
    let d = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(2))
        .diff_lines(a, b);
    let text = d
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string();
    Some(cut(&text, max))
}

/// The audit record of a memoria.md save, with the diff; `None` when the
/// content did not change.
pub fn memory_change(session: &str, old: Option<&[u8]>, new: &[u8]) -> Option<(Value, String)> {
    let before = old.unwrap_or_default();
    if before == new {
        return None;
    }
    let diff = text_diff("memoria.md", before, new, MEMORY_DIFF_MAX).unwrap_or_else(|| {
        format!(
            "(not shown as a diff: {} → {} bytes)",
            before.len(),
            new.len()
        )
    });
    let record = json!({
        "event": "memory_changed", "session": session,
        "bytes_before": before.len(), "bytes_after": new.len(),
        "sha256_before": sha256_hex(before),
        "sha256_after": sha256_hex(new),
        "diff": diff,
    });
    Some((record, diff))
}

/// The end-of-session note of every memoria.md change, for the operator.
pub fn memory_report(diffs: &[String]) -> Option<String> {
    if diffs.is_empty() {
        return None;
    }
    let mut text = format!(
        "memoria.md was changed {} time(s) in this session (it is part of every later session's prompt; review it):\n",
        diffs.len()
    );
    for d in diffs {
        text.push_str(d.trim_end());
        text.push('\n');
    }
    Some(cut(&text, MEMORY_REPORT_MAX))
}

/// The audit record of an agent event the broker keeps, or `None`.
pub fn agent_event(session: &str, event: &AgentEvent) -> Option<Value> {
    let l = |s: &str, n: usize| sanitize::one_line(s, n);
    match event {
        AgentEvent::CallRefused {
            call_id,
            tool,
            arguments,
            kind,
            message,
        } => Some(json!({
            "event": "agent_refused", "session": session, "call_id": l(call_id, 64),
            "tool": l(tool, 64), "kind": kind.as_str(), "arguments": l(arguments, 2000),
            "message": l(message, 1000),
        })),
        AgentEvent::MemoryEdit {
            call_id,
            tool,
            arguments,
            status,
            message,
        } => Some(json!({
            "event": "memory_tool", "session": session, "call_id": l(call_id, 64),
            "tool": l(tool, 64), "arguments": l(arguments, 4000), "status": status.as_str(),
            "message": l(message, 1000),
        })),
        _ => None,
    }
}

/// One `conflict` record per `CONFLICT:` line of a finished task (bounded).
pub fn conflicts(session: &str, outcome: &TaskOutcome) -> Vec<Value> {
    outcome
        .conflicts
        .iter()
        .take(CONFLICTS_MAX)
        .map(|c| {
            json!({
                "event": "conflict", "session": session,
                "task": sanitize::one_line(&outcome.name, 200),
                "text": sanitize::one_line(c, 2000),
            })
        })
        .collect()
}

/// What a file change adds to the write's result for the model: the diff
/// (cut) and how to undo it, as seed 000 asks.
pub fn change_for_model(change: &FileChange) -> String {
    let mut out = String::new();
    if !change.diff.is_empty() {
        out.push_str("diff:\n");
        out.push_str(cut(&change.diff, CHANGE_DIFF_MAX).trim_end());
        out.push('\n');
    }
    if let Some(b) = &change.backup {
        out.push_str(&format!("backup: {b}\n"));
    }
    out.push_str(&format!("rollback: {}", change.rollback));
    out
}

/// The last `lines` lines of `text`, at most `max` bytes.
fn tail(text: &str, lines: usize, max: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    let start = all.len().saturating_sub(lines);
    let joined = all[start..].join("\n");
    if joined.len() <= max {
        return joined;
    }
    let mut from = joined.len() - max;
    while !joined.is_char_boundary(from) {
        from += 1;
    }
    format!("…{}", &joined[from..])
}

/// The console's view of an action's result (already redacted by the
/// broker): the exit, the last lines of stderr, the head of stdout.
pub fn tool_output(call_id: &str, r: &ToolResult) -> AgentEvent {
    AgentEvent::ToolOutput {
        call_id: sanitize::one_line(call_id, 64),
        status: r.status,
        exit_code: r.exit_code,
        signal: r.signal,
        message: tail(&r.message, 6, 1500),
        stderr_tail: tail(&r.stderr, 8, 2000),
        stdout_head: cut(&r.stdout, 8 << 10),
    }
}
