//! What a person sees of a request before approving it: never less than all
//! of it. A long command is shown by its head and tail with the count of what
//! lies between (and the whole on request); every simple command the
//! classifier found is listed with its own category and risk, so that an
//! `rm -rf` after two thousand characters of `echo` is in plain sight. The
//! approval panel and `sysward approvals` render the same lines.

use crate::sanitize;
use sysward_ipc::operator::PromptPart;

/// Characters of a long command shown before and after the elision.
const HEAD: usize = 400;
const TAIL: usize = 200;
/// Characters of one simple command shown before and after its elision.
const PART_HEAD: usize = 160;
const PART_TAIL: usize = 80;
/// Simple commands listed before "… and N more".
const PARTS_SHOWN: usize = 50;
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

/// The rows of the command: (label, text). `full` shows everything; else
/// `how` says how to see it all (the key in the panel, a flag in a listing).
pub fn command_rows(
    command: &str,
    parts: &[PromptPart],
    total_parts: usize,
    full: bool,
    how: &str,
) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    rows.push((
        "command",
        if full {
            sanitize::one_line(command, WHOLE)
        } else {
            elide(command, HEAD, TAIL, how)
        },
    ));
    // One part that is the whole command says nothing new.
    if parts.len() > 1 || total_parts > parts.len() {
        let shown = if full {
            parts.len()
        } else {
            parts.len().min(PARTS_SHOWN)
        };
        for (i, p) in parts.iter().take(shown).enumerate() {
            let text = if full {
                sanitize::one_line(&p.text, WHOLE)
            } else {
                elide(&p.text, PART_HEAD, PART_TAIL, "")
            };
            rows.push((
                if i == 0 { "parts" } else { "" },
                format!(
                    "{:>3}. {} · {:<8} {text}",
                    i + 1,
                    sanitize::one_line(&p.category, 32),
                    sanitize::one_line(&p.risk, 16).to_uppercase(),
                ),
            ));
        }
        let more = total_parts.saturating_sub(shown);
        if more > 0 {
            rows.push(("", format!("… and {more} more simple command(s){how}")));
        }
    }
    rows
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_command_after_a_long_one_is_never_hidden() {
        let long = format!("echo {}; rm -rf ./data", "A".repeat(2100));
        let rows = command_rows(&long, &[], 0, false, ": press v");
        assert!(rows[0].1.ends_with("rm -rf ./data"), "{}", rows[0].1);
        assert!(rows[0].1.contains("characters not shown: press v"));
        assert!(rows[0].1.chars().count() < 800);
        let full = command_rows(&long, &[], 0, true, "");
        assert_eq!(full[0].1, long);
    }

    #[test]
    fn parts_are_listed_with_their_risk() {
        let parts = vec![
            PromptPart {
                text: format!("echo {}", "A".repeat(2100)),
                category: "read-only".into(),
                risk: "safe".into(),
            },
            PromptPart {
                text: "rm -rf ./data".into(),
                category: "delete".into(),
                risk: "high".into(),
            },
        ];
        let rows = command_rows("x", &parts, 2, false, "");
        assert_eq!(rows.len(), 3);
        assert!(
            rows[2].1.contains("delete · HIGH") && rows[2].1.ends_with("rm -rf ./data"),
            "{}",
            rows[2].1
        );
        let many: Vec<PromptPart> = (0..120)
            .map(|i| PromptPart {
                text: format!("true {i}"),
                category: "read-only".into(),
                risk: "safe".into(),
            })
            .collect();
        let rows = command_rows("x", &many, 300, false, ": --full");
        assert!(
            rows.last().unwrap().1.contains("and 250 more"),
            "{:?}",
            rows.last()
        );
    }
}
