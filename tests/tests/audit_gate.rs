//! An action runs only once its start record is on disk, and a broker that
//! dies takes its running action with it (as root, real process tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_broker::project::Layout;
use sysward_broker::session::{run_session, SessionRequest};
use sysward_ipc::agent::SessionMode;
use sysward_tests::*;

/// `sysward run --root <project>` in the background, output discarded.
fn start_run(p: &TestProject) -> std::process::Child {
    Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn policy() -> &'static str {
    "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true\nDEFAULT_COMMAND_TIMEOUT=60"
}

#[test]
fn a_killed_broker_leaves_the_start_record_and_takes_its_action_along() {
    if !require_root("a_killed_broker_leaves_the_start_record") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"sleep","args":["47"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("audit-kill");
    p.init_conf(&server, "")
        .agent_md(policy())
        .write("01-sleep.md", "# Sleep\nSleep a while.\n");
    let mut broker = start_run(&p);
    let broker_pid = standalone_broker(broker.id());
    // The command is the broker's own child (no helper exec in between).
    let sleeper = wait_for(Duration::from_secs(30), "the action to run", || {
        children_named(broker_pid, "sleep").first().copied()
    });
    let audit = audit_records(&p);
    let start = audit
        .iter()
        .find(|r| r["event"]["event"] == "action_start")
        .unwrap_or_else(|| panic!("no action_start while the action runs: {audit:?}"));
    assert!(
        start["event"]["request"]
            .as_str()
            .unwrap()
            .contains("sleep 47"),
        "{start}"
    );
    assert_eq!(start["event"]["decision"], "allow");
    // kill -9: no chance to clean up.
    kill9_standalone(&mut broker);
    wait_for(Duration::from_secs(10), "the action to die", || {
        (!std::path::Path::new(&format!("/proc/{sleeper}")).exists()
            || status_field(sleeper, "State:").is_some_and(|s| s.starts_with('Z')))
        .then_some(())
    });
    // The log still verifies: the start record is whole.
    let verify = run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(verify.status.success(), "{}", describe(&verify));
}

#[test]
fn when_the_start_record_cannot_be_written_nothing_runs() {
    if !require_root("when_the_start_record_cannot_be_written") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("audit-frozen");
    // A directory of its own: the project directory holds protected files,
    // so nothing new can be created right in it.
    std::fs::create_dir_all(p.path("work")).unwrap();
    let marker = p.path("work").join("the-action-ran");
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"touch","args":["{}"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        marker.display()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-touch.md", "# Touch\nMake a marker.\n");
    let layout = Layout::standalone(&p.dir).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    // The log turns immutable once the action is decided, so that its start
    // record cannot be written.
    let log = p.path("audit.log");
    let op = Recorder::on_decided(move || {
        let st = Command::new("chattr").arg("+i").arg(&log).status().unwrap();
        assert!(st.success(), "chattr +i failed");
    });
    let _ = run_session(
        &ctx,
        SessionRequest {
            mode: SessionMode::Tasks { rerun: false },
            dry_run: false,
            operator: "test".into(),
        },
        &op,
    );
    let _ = Command::new("chattr")
        .arg("-i")
        .arg(p.path("audit.log"))
        .status();
    let chats = server.chat_requests();
    assert!(chats.len() >= 2, "the model never got the tool result");
    assert!(
        chats[1].contains("nothing ran"),
        "{}",
        chats[1].message_text()
    );
    assert!(!marker.exists(), "the command ran without its audit record");
}

/// A file operation's validate command starts with clean signals and is part
/// of the action: what it leaves behind (setsid'd, in the background) dies
/// with the action.
#[test]
fn a_validate_command_leaves_nothing_running() {
    if !require_root("a_validate_command_leaves_nothing_running") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("validate-orphan");
    std::fs::create_dir_all(p.path("work")).unwrap();
    let target = p.path("work").join("app.conf");
    let first = p.path("work").join("mask.conf");
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"write_file","arguments":{{"path":"{}","content":"x\n","validate":{{"command":"grep","args":["-q","^SigBlk:[[:space:]]*0*$","/proc/self/status"]}}}}}}]}},
          {{"tool_calls":[{{"name":"write_file","arguments":{{"path":"{}","content":"port = 1\n","validate":{{"command":"sh","args":["-c","setsid sleep 4711 >/dev/null 2>&1 < /dev/null & true","{{file}}"]}}}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        first.display(),
        target.display()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-write.md", "# Write\nWrite the file.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", describe(&out));
    // The first validate command saw no blocked signal (the broker blocks
    // SIGINT and SIGTERM for its own signal thread; children must not).
    assert_eq!(
        std::fs::read_to_string(&first).ok().as_deref(),
        Some("x\n"),
        "validate saw a blocked signal mask: {}",
        describe(&out)
    );
    // The validate command really ran (positive control): the file is there.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "port = 1\n");
    let left = Command::new("pgrep")
        .args(["-f", "sleep 4711"])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&left.stdout).to_string();
    if !pids.trim().is_empty() {
        let _ = Command::new("pkill").args(["-f", "sleep 4711"]).status();
    }
    assert!(pids.trim().is_empty(), "left running: {pids}");
}

/// An action that leaves a daemon behind is killed with its cgroup, and the
/// actions after it still run: a killed cgroup is never handed to the next
/// action (a child created inside one with clone3 is killed at birth).
#[test]
fn actions_after_a_killed_cgroup_still_run() {
    if !require_root("actions_after_a_killed_cgroup_still_run") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"shell","arguments":{"command":"setsid sleep 4712 >/dev/null 2>&1 < /dev/null & echo first"}}]},
          {"tool_calls":[{"name":"exec","arguments":{"command":"echo","args":["second"]}}]},
          {"tool_calls":[{"name":"exec","arguments":{"command":"echo","args":["third"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("cgroup-reuse");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-t.md", "# T\nThree commands.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let chats = server.chat_requests();
    assert_eq!(chats.len(), 4, "{}", describe(&out));
    for (i, word) in [(1, "first"), (2, "second"), (3, "third")] {
        let text = chats[i].message_text();
        assert!(
            text.contains("status=\"ok\"") && text.contains(&format!("{word}\n")),
            "action {i}: {text}"
        );
    }
    let left = Command::new("pgrep")
        .args(["-f", "sleep 4712"])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&left.stdout).to_string();
    if !pids.trim().is_empty() {
        let _ = Command::new("pkill")
            .args(["-9", "-f", "sleep 4712"])
            .status();
    }
    assert!(pids.trim().is_empty(), "left running: {pids}");
}

/// What a broker killed with -9 leaves behind — a setsid'd descendant of its
/// action, still in the action's cgroup — is killed by the next broker that
/// starts.
#[test]
fn the_next_broker_kills_what_a_dead_one_left() {
    if !require_root("the_next_broker_kills_what_a_dead_one_left") {
        return;
    }
    ensure_accounts();
    let pgrep = || {
        let out = Command::new("pgrep")
            .args(["-f", "sleep 4713"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"shell","arguments":{"command":"setsid sleep 4713 >/dev/null 2>&1 < /dev/null & sleep 40"}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("stale-cgroup");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-t.md", "# T\nStart a daemon.\n");
    let mut broker = start_run(&p);
    wait_for(Duration::from_secs(30), "the daemon to start", || {
        (!pgrep().is_empty()).then_some(())
    });
    kill9_standalone(&mut broker);
    // The action's own process died with the broker; its daemon did not
    // (unless a broker of a test running beside this one cleaned up already:
    // any broker start does).
    // Any broker start cleans up: a second project, one task, no action.
    let server2 = scenario(r#"{"steps":[{"content":"nothing\nTASK_STATUS: DONE"}]}"#);
    let p2 = TestProject::new("stale-cgroup-next");
    p2.init_conf(&server2, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nNothing.\n");
    let out = run_sysward(
        &["run", "--root", p2.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let left = pgrep();
    if !left.is_empty() {
        let _ = Command::new("pkill")
            .args(["-9", "-f", "sleep 4713"])
            .status();
    }
    assert!(left.is_empty(), "still running: {left}; {}", describe(&out));
}
