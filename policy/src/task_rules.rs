//! A task file's pre-approvals: what the task may do without asking, in the
//! operator's own words (task files are the operator's), valid for that
//! task's content only. A fenced block in the task file:
//!
//! ````text
//! ```approvals
//! exec sysctl --system
//! write_file /etc/sysctl.d/90-*.conf
//! edit_file /etc/ssh/sshd_config max=1
//! ```
//! ````
//!
//! `exec` (or `shell`) takes a command prefix as `COMMAND_ALLOW` does; a file
//! tool takes a path glob as `WRITE_ALLOW` does, for that tool only; `max=N`
//! limits how often the line may be used in one run of the task. They become
//! allow rules below agent.md's: an operator rule that asks or denies still
//! wins, and no rule lifts a flag, a mode, a path rule or a critical risk.

use crate::block::{OperatorRule, RuleAction, WriteRule};

/// The file tools a pre-approval may name: those of the shared tool list
/// that change files (by their catalog entry). `download` writes a file too,
/// but what it writes comes from the network: it is not pre-approvable.
/// `register_tool` writes files too, but a project tool needs a person's
/// approval of its exact bytes: a task file cannot stand in for it.
fn file_tools() -> Vec<&'static str> {
    use crate::catalog::Access;
    sysward_ipc::tools::Tool::ALL
        .iter()
        .filter_map(|t| crate::catalog::catalog(*t))
        .filter(|s| !matches!(s.access, Access::None | Access::Read))
        .filter(|s| !crate::catalog::is_network(s.tool))
        .filter(|s| s.tool != sysward_ipc::tools::Tool::RegisterTool)
        .map(|s| s.tool.name())
        .collect()
}

/// At most this many lines in one block.
const MAX_LINES: usize = 64;

/// The pre-approvals of one task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskApprovals {
    pub rules: Vec<OperatorRule>,
    pub write_rules: Vec<WriteRule>,
    /// (task file line, how many uses it allows per run).
    pub limits: Vec<(usize, u32)>,
}

impl TaskApprovals {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.write_rules.is_empty()
    }
}

/// Parses the ```approvals block of a task file. `origin` names the task and
/// its content (`10-ssh.md (sha256 ab12…)`) in every rule. An error names the
/// line; the caller then applies none of the block.
pub fn parse(text: &str, origin: &str) -> Result<TaskApprovals, String> {
    let mut out = TaskApprovals::default();
    let mut inside = false;
    let mut blocks = 0;
    let mut count = 0;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if !inside {
            if line == "```approvals" {
                inside = true;
                blocks += 1;
                if blocks > 1 {
                    return Err(format!("line {line_no}: a second ```approvals block"));
                }
            }
            continue;
        }
        if line == "```" {
            inside = false;
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        count += 1;
        if count > MAX_LINES {
            return Err(format!(
                "line {line_no}: more than {MAX_LINES} pre-approvals"
            ));
        }
        let mut words: Vec<&str> = line.split_whitespace().collect();
        let mut max = None;
        if let Some(last) = words.last().and_then(|w| w.strip_prefix("max=")) {
            let n: u32 = last
                .parse()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or_else(|| format!("line {line_no}: max= takes a count from 1 to 1000"))?;
            max = Some(n);
            words.pop();
        }
        let Some((tool, rest)) = words.split_first() else {
            continue;
        };
        if rest.is_empty() {
            return Err(format!(
                "line {line_no}: `{tool}` needs what it pre-approves"
            ));
        }
        match *tool {
            "exec" | "shell" => out.rules.push(OperatorRule {
                action: RuleAction::Allow,
                prefix: rest.iter().map(|w| w.to_string()).collect(),
                line: line_no,
                origin: Some(origin.to_string()),
            }),
            t if file_tools().contains(&t) => {
                if rest.len() != 1 {
                    return Err(format!("line {line_no}: `{t}` takes one path glob"));
                }
                let glob =
                    crate::glob::check(rest[0]).map_err(|e| format!("line {line_no}: {e}"))?;
                out.write_rules.push(WriteRule {
                    action: RuleAction::Allow,
                    glob,
                    tool: Some(t.to_string()),
                    line: line_no,
                    origin: Some(origin.to_string()),
                });
            }
            other => {
                return Err(format!(
                "line {line_no}: `{other}` cannot be pre-approved (exec, shell or a file tool: {})",
                file_tools().join(", ")
            ))
            }
        }
        if let Some(n) = max {
            out.limits.push((line_no, n));
        }
    }
    if inside {
        return Err("the ```approvals block is not closed".to_string());
    }
    Ok(out)
}

/// The task file line of the pre-approval that decided, from a decision's
/// `source` (`pre-approved by 10-ssh.md (sha256 …) line 4`).
pub fn line_of(source: &str) -> Option<usize> {
    source
        .strip_prefix("pre-approved by ")?
        .rsplit_once(" line ")?
        .1
        .parse()
        .ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    /// Exactly the file tools that change files (what the pre-approval
    /// syntax has always named), in the shared list's order.
    #[test]
    fn the_pre_approvable_file_tools_are_the_ones_that_change_files() {
        assert_eq!(
            file_tools(),
            [
                "write_file",
                "edit_file",
                "append_file",
                "copy_file",
                "move_file",
                "remove_file",
                "mkdir",
                "chmod",
                "chown",
                "apply_patch"
            ]
        );
    }

    use super::*;

    #[test]
    fn a_block_becomes_allow_rules_tied_to_its_task() {
        let text = "# SSH\nDo it.\n\n```approvals\n# the ones it needs\nexec sshd -t\nedit_file /etc/ssh/sshd_config max=1\nwrite_file /etc/sysctl.d/90-*.conf\n```\n";
        let a = parse(text, "10-ssh.md (sha256 ab12)").unwrap();
        assert_eq!(a.rules.len(), 1);
        assert_eq!(a.rules[0].prefix, ["sshd", "-t"]);
        assert_eq!(a.rules[0].line, 6);
        assert_eq!(a.write_rules.len(), 2);
        assert_eq!(a.limits, vec![(7, 1)]);
        assert_eq!(
            a.rules[0].source(),
            "pre-approved by 10-ssh.md (sha256 ab12) line 6"
        );
        assert_eq!(line_of(&a.rules[0].source()), Some(6));
        assert!(parse("no block here", "x").unwrap().is_empty());
    }

    #[test]
    fn mistakes_are_refused_with_their_line() {
        for (bad, why) in [
            ("```approvals\nreboot now\n```", "cannot be pre-approved"),
            ("```approvals\nwrite_file etc/x\n```", "absolute"),
            ("```approvals\nexec ls max=0\n```", "max="),
            ("```approvals\nexec\n```", "needs"),
            ("```approvals\nexec ls\n", "not closed"),
            ("```approvals\n```\n```approvals\n```", "second"),
        ] {
            let e = parse(bad, "t").unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
