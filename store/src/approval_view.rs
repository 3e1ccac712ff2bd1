//! What the broker keeps of a request for the person who approves it: the
//! whole command, and every simple command the classifier found with its own
//! category and risk (bounded), so that the console can show an `rm -rf`
//! after two thousand characters of `echo` in plain sight. The console
//! renders the panel and `sysward approvals` from these.

use crate::sanitize;
use sysward_ipc::operator::PromptPart;

/// Characters of one simple command shown before and after its elision.
pub const PART_HEAD: usize = 160;
pub const PART_TAIL: usize = 80;
/// More characters than any request holds (a script is at most 1 MiB):
/// "all of it".
pub const WHOLE: usize = 2 << 20;
/// Simple commands kept in a prompt or a stored approval.
pub const PARTS_KEPT: usize = 200;

/// `text` on one line, shown whole up to `head + tail` characters, else as
/// head … [N characters not shown: `how`] … tail.
pub fn elide(text: &str, head: usize, tail: usize, how: &str) -> String {
    let line = sanitize::one_line(text, WHOLE);
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= head + tail + 40 {
        return line;
    }
    let hidden = chars.len() - head - tail;
    format!(
        "{} … [{hidden} characters not shown{how}] … {}",
        chars[..head].iter().collect::<String>(),
        chars[chars.len() - tail..].iter().collect::<String>()
    )
}

/// The parts of a decision as kept in a prompt: at most [`PARTS_KEPT`], each
/// shortened for display (the full command stays in the prompt's `command`).
pub fn prompt_parts(parts: &[sysward_policy::Part]) -> Vec<PromptPart> {
    parts
        .iter()
        .take(PARTS_KEPT)
        .map(|p| PromptPart {
            text: elide(&p.text, PART_HEAD * 2, PART_TAIL * 2, ""),
            category: p.category.as_str().to_string(),
            risk: p.risk.as_str().to_string(),
        })
        .collect()
}
