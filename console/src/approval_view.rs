//! What a person sees of a request before approving it: never less than all
//! of it. A long command is shown by its head and tail with the count of what
//! lies between (and the whole on request); every simple command the
//! classifier found is listed with its own category and risk, so that an
//! `rm -rf` after two thousand characters of `echo` is in plain sight. The
//! approval panel and `sysward approvals` render the same lines.

use anyhow::Result;
use sysward_broker::approval_view::{elide, PART_HEAD, PART_TAIL, WHOLE};
use sysward_broker::approvals::{self, Approval, Status};
use sysward_broker::project::Layout;
use sysward_broker::sanitize;
use sysward_ipc::operator::PromptPart;

/// Characters of a long command shown before and after the elision.
const HEAD: usize = 400;
const TAIL: usize = 200;
/// Simple commands listed before "… and N more".
const PARTS_SHOWN: usize = 50;

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

/// A stored approval for a person (sanitized): a long command by head and
/// tail unless `full`, and every simple command with its category and risk.
pub fn render_approval(a: &Approval, now: i64, full: bool) -> String {
    let l = |t: &str| sanitize::one_line(t, 2000);
    let r = &a.request;
    let status = a.status_at(now);
    let when = match status {
        Status::Pending | Status::Approved => {
            format!("expires in {}", approvals::human_duration(a.expires - now))
        }
        _ => format!("expired {}", approvals::rfc3339(a.expires)),
    };
    let mut out = format!(
        "{}  {}  {}  (session {}, created {}{})\n  mode:     {}   host: {}\n  category: {}   risk: {}\n{}  cwd:      {}\n  runs as:  {}\n  reason:   {}\n",
        a.id,
        status.as_str(),
        when,
        l(&r.session),
        approvals::rfc3339(a.created),
        r.task.as_deref().map(|t| format!(", task {}", l(t))).unwrap_or_default(),
        l(&r.mode),
        l(&r.host),
        l(&r.category),
        l(&r.risk),
        command_rows(
            &r.command,
            &r.parts,
            r.parts_total,
            full,
            ": `sysward approvals --full` shows it all",
        )
        .into_iter()
        .map(|(name, value)| format!(
            "  {:<9} {value}\n",
            if name.is_empty() { String::new() } else { format!("{name}:") }
        ))
        .collect::<String>(),
        l(&r.cwd),
        l(&r.profile),
        l(&r.reason),
    );
    if let (Some(by), Some(at)) = (&a.decided_by, a.decided_at) {
        out.push_str(&format!(
            "  decided:  {} by {} at {}\n",
            a.status.as_str(),
            l(by),
            approvals::rfc3339(at)
        ));
    }
    if let Some(n) = &a.note {
        out.push_str(&format!("  note:     {}\n", l(n)));
    }
    if let Some(at) = a.used_at {
        out.push_str(&format!(
            "  used:     at {} by session {}\n",
            approvals::rfc3339(at),
            l(a.used_by_session.as_deref().unwrap_or("?"))
        ));
    }
    out
}

/// `sysward approvals [--json]`: every stored approval with the prompt's
/// details. Exit 0.
pub fn cmd_list(layout: &Layout, json: bool, full: bool) -> Result<i32> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&approvals::list_json(layout)?)?
        );
        return Ok(0);
    }
    let dir = layout.approvals_dir();
    if std::fs::symlink_metadata(&dir).is_err() {
        println!("no approvals");
        return Ok(0);
    }
    let store = approvals::Approvals::open_dir(&dir)?;
    let (list, problems) = store.list_with_problems()?;
    let now = approvals::now_unix();
    if list.is_empty() {
        println!("no approvals");
    }
    for a in &list {
        println!("{}", render_approval(a, now, full));
    }
    let waiting = list
        .iter()
        .filter(|a| a.status_at(now) == Status::Pending)
        .count();
    if waiting > 0 {
        println!("{waiting} waiting: `sysward approve ID` or `sysward deny ID [--note TEXT]`");
    }
    for p in problems {
        eprintln!("warning: {}", sanitize::one_line(&p, 500));
    }
    Ok(0)
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

    #[test]
    fn a_listed_approval_shows_the_prompts_details() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED a_listed_approval_shows_the_prompts_details: needs root (the approvals directory is root-only 0700)");
            return;
        }
        use std::os::unix::fs::PermissionsExt;
        let d = sysward_testdir::RemoveOnDrop::fresh_dir("sysward-console-approvals");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let layout = Layout::standalone(&d).unwrap();
        assert_eq!(cmd_list(&layout, false, false).unwrap(), 0);
        let profile = "uid 0, writes /etc/nginx, no network";
        let command = "systemctl reload nginx";
        let req = approvals::ApprovalRequest {
            session: "sess-1".to_string(),
            key: approvals::request_key("exec", command, std::path::Path::new("/root"), profile),
            tool: "exec".to_string(),
            command: command.to_string(),
            cwd: "/root".to_string(),
            category: "service".to_string(),
            risk: "medium".to_string(),
            profile: profile.to_string(),
            reason: "reload after the config change".to_string(),
            mode: "strict".to_string(),
            host: "web1".to_string(),
            task: Some("01-nginx.md".to_string()),
            parts: Vec::new(),
            parts_total: 1,
        };
        let store = approvals::Approvals::open(&layout).unwrap();
        store.create(req).unwrap();
        let list = store.list().unwrap();
        let shown = render_approval(&list[0], approvals::now_unix(), false);
        for want in [
            "pending",
            "systemctl reload nginx",
            "service",
            "medium",
            "uid 0, writes /etc/nginx",
            "reload after",
            "strict",
            "web1",
            "01-nginx.md",
        ] {
            assert!(shown.contains(want), "{want} in {shown}");
        }
        assert_eq!(cmd_list(&layout, false, false).unwrap(), 0);
        assert_eq!(cmd_list(&layout, true, false).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&d);
    }
}
