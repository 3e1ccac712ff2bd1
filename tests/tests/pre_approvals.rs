//! An unattended run does what its task pre-approved (audited as such) and
//! nothing more: an action outside the task's patterns, or past a pattern's
//! count, still waits for a person; `sysward approve --task` then approves
//! what waits, and the next run proceeds (as root, real tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;
use sysward_tests::*;

/// A directory outside the project (writes there need approval in strict
/// mode), removed afterwards.
struct Outside(PathBuf);

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_task_runs_unattended_within_its_pre_approvals_and_waits_outside_them() {
    if !require_root("a_task_runs_unattended_within_its_pre_approvals") {
        return;
    }
    ensure_accounts();
    let out = Outside(PathBuf::from(format!(
        "/var/tmp/sysward-preapproved-{}",
        std::process::id()
    )));
    let conf = out.0.join("conf.d");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::create_dir_all(out.0.join("old/sub")).unwrap();
    let write = |name: &str| serde_json::json!({"tool_calls": [{"name": "write_file", "arguments": {"path": conf.join(name), "content": "x = 1\n"}}]});
    let server = scenario(
        &serde_json::json!({"steps": [
            write("90-a.conf"),
            {"tool_calls": [{"name": "exec", "arguments": {"command": "rm", "args": ["-rf", out.0.join("old")]}}]},
            write("90-c.conf"),
            write("10-b.conf"),
            {"content": "two writes wait for approval\nTASK_STATUS: BLOCKED"}
        ]})
        .to_string(),
    );
    let p = TestProject::new("pre-approvals");
    let task = format!(
        "# Configure\nWrite the configuration.\n\n```approvals\n# what this task may do unattended\nwrite_file {}/90-*.conf max=1\nexec rm -rf {}\n```\n",
        conf.display(),
        out.0.join("old").display()
    );
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=strict\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_DELETE=true")
        .write("01-configure.md", &task);
    let run = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(
        run.status.code(),
        Some(2),
        "BLOCKED expected: {}",
        describe(&run)
    );
    // What the task pre-approved took effect, with the record saying so.
    assert!(conf.join("90-a.conf").exists());
    assert!(!out.0.join("old").exists());
    let records = audit_records(&p);
    let first = tool_event(&records, "90-a.conf");
    let by = first["approved_by"].as_str().unwrap_or("");
    assert!(
        by.starts_with("pre-approved by 01-configure.md (sha256 ") && by.ends_with(" line 6"),
        "{first}"
    );
    assert!(tool_event(&records, "rm -rf")["approved_by"]
        .as_str()
        .unwrap_or("")
        .ends_with(" line 7"));
    // Past its count, and outside the patterns: waiting.
    assert!(!conf.join("90-c.conf").exists());
    assert!(!conf.join("10-b.conf").exists());
    let pending: Vec<_> = records
        .iter()
        .filter(|r| r["event"]["event"] == "approval_pending")
        .collect();
    assert_eq!(pending.len(), 2, "{pending:?}");

    // Without a terminal and without --yes, nothing is approved.
    let unconfirmed = run_sysward(
        &[
            "approve",
            "--task",
            "01-configure.md",
            "--root",
            p.dir.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(
        unconfirmed.status.code(),
        Some(1),
        "{}",
        describe(&unconfirmed)
    );
    assert!(
        describe(&unconfirmed).contains("add --yes"),
        "{}",
        describe(&unconfirmed)
    );
    // The operator approves what the task waits for, at once.
    let approve = run_sysward(
        &[
            "approve",
            "--task",
            "01-configure.md",
            "--yes",
            "--root",
            p.dir.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert!(approve.status.success(), "{}", describe(&approve));
    assert!(
        describe(&approve).contains("10-b.conf"),
        "the requests were not shown: {}",
        describe(&approve)
    );
    let again = run_sysward(
        &[
            "approve",
            "--task",
            "01-configure.md",
            "--yes",
            "--root",
            p.dir.to_str().unwrap(),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(again.status.code(), Some(1), "nothing is left to approve");
    let server = scenario(
        &serde_json::json!({"steps": [
            write("90-c.conf"),
            write("10-b.conf"),
            {"content": "done\nTASK_STATUS: DONE"}
        ]})
        .to_string(),
    );
    p.init_conf(&server, "");
    let rerun = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(rerun.status.code(), Some(0), "{}", describe(&rerun));
    assert!(conf.join("90-c.conf").exists() && conf.join("10-b.conf").exists());
}

#[test]
fn the_same_action_runs_at_most_twice_per_task() {
    if !require_root("the_same_action_runs_at_most_twice_per_task") {
        return;
    }
    ensure_accounts();
    let uname = serde_json::json!({"tool_calls": [{"name": "exec", "arguments": {"command": "uname", "args": ["-r"]}}]});
    let other = serde_json::json!({"tool_calls": [{"name": "exec", "arguments": {"command": "uname", "args": ["-m"]}}]});
    let server = scenario(
        &serde_json::json!({"steps": [
            uname, uname, uname, other,
            {"content": "done\nTASK_STATUS: DONE"},
            uname,
            {"content": "done\nTASK_STATUS: DONE"}
        ]})
        .to_string(),
    );
    let p = TestProject::new("repeats");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-a.md", "# A\nShow the kernel.\n")
        .write("02-b.md", "# B\nShow the kernel again.\n");
    let run = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(run.status.code(), Some(0), "{}", describe(&run));
    // What each model request's last message (the latest tool result) says.
    let results: Vec<String> = server
        .chat_requests()
        .iter()
        .map(|c| {
            c.messages()
                .last()
                .map(sysward_scripted_model::message_text)
                .unwrap_or_default()
        })
        .collect();
    // The third identical call is refused; another command, and the same
    // command in the next task, run.
    assert!(results[3].contains("already ran 2 times"), "{}", results[3]);
    assert!(!results[2].contains("already ran"), "{}", results[2]);
    assert!(!results[4].contains("already ran") && !results[6].contains("already ran"));
    let records = audit_records(&p);
    let refused = records
        .iter()
        .filter(|r| r["event"]["decision"] == "refused (repeated)")
        .count();
    assert_eq!(refused, 1);
}

#[test]
fn a_policy_changed_mid_session_applies_from_the_next_turn() {
    if !require_root("a_policy_changed_mid_session_applies_from_the_next_turn") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]},
          {"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-m"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("policy-turn");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-a.md", "# A\nShow the kernel.\n");
    let layout = sysward_broker::project::Layout::standalone(&p.dir).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    // Once the first action is decided, the operator adds a deny rule.
    let md = p.path("agent.md");
    let edited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let op = {
        let edited = std::sync::Arc::clone(&edited);
        Recorder::on_decided(move || {
            if !edited.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::fs::write(&md, "# Test agent\n\n```policy\nEXECUTION_MODE=guarded\nCOMMAND_DENY=uname -m\n```\n").unwrap();
            }
        })
    };
    let _ = run_tasks(&ctx, &op);
    let records = audit_records(&p);
    assert!(
        records
            .iter()
            .any(|r| r["event"]["event"] == "policy_changed"),
        "{records:?}"
    );
    assert_eq!(tool_event(&records, "uname -r")["decision"], "allow");
    let second = tool_event(&records, "uname -m");
    assert_eq!(second["decision"], "deny", "{second}");
    assert!(
        second["source"]
            .as_str()
            .unwrap_or("")
            .contains("operator rule"),
        "{second}"
    );
    // A policy that no longer loads refuses the turn.
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    p.init_conf(&server, "")
        .write("01-a.md", "# A\nShow the kernel once more.\n");
    let md = p.path("agent.md");
    let broke = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let op = {
        let broke = std::sync::Arc::clone(&broke);
        Recorder::on_decided(move || {
            if !broke.swap(true, std::sync::atomic::Ordering::SeqCst) {
                std::fs::write(&md, "# broken\n\n```policy\nEXECUTION_MODE=bogus\n```\n").unwrap();
            }
        })
    };
    let summary = run_tasks(&ctx, &op);
    assert_ne!(summary.exit_code, 0, "{summary:?}");
    let records = audit_records(&p);
    assert!(
        records
            .iter()
            .any(|r| r["event"]["event"] == "policy_rejected"),
        "{records:?}"
    );
    assert_eq!(
        server.chat_requests().len(),
        1,
        "a model call was made after the policy broke"
    );
}
