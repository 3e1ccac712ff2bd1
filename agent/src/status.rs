//! The status a task's final answer claims, and whether it is believed.
//!
//! A status counts only when the answer holds exactly one line that is nothing
//! but `TASK_STATUS: DONE`, `BLOCKED` or `FAILED` (markdown emphasis and a
//! final full stop allowed) and no other line mentions `TASK_STATUS`: a small
//! model that repeats sysward's own reminder ("TASK_STATUS: DONE, TASK_STATUS:
//! BLOCKED or TASK_STATUS: FAILED") or names two statuses has not chosen one.
//!
//! DONE also needs evidence: at least one action of the task that succeeded
//! (a tool result with status ok, a memoria.md edit included). A task whose every action failed or was
//! refused, or that took none, is DONE only when its text says that no action
//! is needed (see [`asks_for_no_action`]).

use sysward_ipc::agent::TaskStatus;

/// What the status lines of an answer say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Exactly one clean status line, nothing else naming a status.
    One(TaskStatus),
    /// No line mentions `TASK_STATUS`.
    Missing,
    /// Several status lines, a line naming several statuses, or a mention
    /// that is not a clean status line (an echo of the instruction).
    Unclear,
}

/// Why a claimed status is not accepted as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    Missing,
    Unclear,
    /// DONE with no successful action, for a task that asks for action.
    DoneWithoutEvidence,
}

impl Problem {
    /// The one request to restate, sent back to the model.
    pub fn restate_prompt(self) -> &'static str {
        match self {
            Problem::Missing => {
                "[sysward] Your answer has no status line. Give the final answer again, ending with exactly one line that holds only the status you choose (DONE, BLOCKED or FAILED) after `TASK_STATUS: `."
            }
            Problem::Unclear => {
                "[sysward] Your answer names more than one status, or mentions TASK_STATUS outside one clean status line. Choose ONE status and give the final answer again, ending with exactly one line such as `TASK_STATUS: FAILED`, and no other line mentioning TASK_STATUS."
            }
            Problem::DoneWithoutEvidence => {
                "[sysward] You claimed DONE, but no action of this task succeeded: every call failed or was refused, or none was made. DONE needs evidence. Either run what the task needs and verify it, or give the final answer again with `TASK_STATUS: BLOCKED` or `TASK_STATUS: FAILED` and the reason."
            }
        }
    }

    /// What is wrong with the answer, in a few words.
    pub fn what(self) -> &'static str {
        match self {
            Problem::Missing => "the final answer had no status line",
            Problem::Unclear => "the final answer named several statuses or echoed the instruction",
            Problem::DoneWithoutEvidence => {
                "the model claimed DONE but no action of the task succeeded"
            }
        }
    }

    /// The reason recorded with FAILED when the restated answer still has it.
    pub fn failure_reason(self) -> String {
        format!("{}, also after one reminder", self.what())
    }
}

fn status_word(word: &str) -> Option<TaskStatus> {
    match word {
        "DONE" => Some(TaskStatus::Done),
        "BLOCKED" => Some(TaskStatus::Blocked),
        "FAILED" => Some(TaskStatus::Failed),
        _ => None,
    }
}

fn decoration(c: char) -> bool {
    matches!(c, '*' | '`' | '_' | '#' | '>' | '-' | ' ' | '\t')
}

/// The status of a line that is nothing but a status, if it is one.
fn clean_status_line(line: &str) -> Option<TaskStatus> {
    let t = line.trim().trim_matches(decoration);
    let up = t.to_ascii_uppercase();
    let rest = up.strip_prefix("TASK_STATUS")?;
    let rest = rest.trim_start_matches(|c: char| c == ':' || decoration(c));
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    let after = rest[word.len()..].trim_matches(|c: char| decoration(c) || c == '.' || c == '!');
    if !after.is_empty() {
        return None;
    }
    status_word(&word)
}

/// Reads the status lines of a final answer.
pub fn read_status(text: &str) -> Reading {
    let mut found: Option<TaskStatus> = None;
    let mut lines_with_status = 0usize;
    for line in text.lines() {
        if !line.to_ascii_uppercase().contains("TASK_STATUS") {
            continue;
        }
        lines_with_status += 1;
        match clean_status_line(line) {
            Some(s) => found = Some(s),
            None => return Reading::Unclear,
        }
    }
    match (lines_with_status, found) {
        (0, _) => Reading::Missing,
        (1, Some(s)) => Reading::One(s),
        _ => Reading::Unclear,
    }
}

/// Phrases by which a task says it needs no action, lower case. A task is
/// judged by its own text only, never by the model's answer: the operator
/// wrote it.
const NO_ACTION_PHRASES: &[&str] = &[
    "no action",
    "no tool",
    "no command",
    "without running",
    "without any command",
    "without tools",
    "without using tools",
    "without using any tool",
    "do not run",
    "don't run",
    "nothing to run",
    "answer from memory",
];

/// Whether the task's text says it needs no action (then a DONE with no
/// successful action is believed).
pub fn asks_for_no_action(task_text: &str) -> bool {
    let low = task_text.to_lowercase();
    NO_ACTION_PHRASES.iter().any(|p| low.contains(p))
}

/// Judges a final answer: the accepted status, or why it is not accepted.
pub fn judge(text: &str, successes: u32, task_text: &str) -> Result<TaskStatus, Problem> {
    match read_status(text) {
        Reading::Missing => Err(Problem::Missing),
        Reading::Unclear => Err(Problem::Unclear),
        Reading::One(TaskStatus::Done) if successes == 0 && !asks_for_no_action(task_text) => {
            Err(Problem::DoneWithoutEvidence)
        }
        Reading::One(s) => Ok(s),
    }
}
