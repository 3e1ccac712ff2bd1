//! SIGTERM stops the broker cleanly: the running action is cancelled with
//! everything it started, its outcome, the session's end and the audit anchor
//! are written, the daemon removes its socket; the next session starts on an
//! intact chain (as root, real process tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use sysward_tests::*;

fn sleep_then_done() -> Handle {
    scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"sleep","args":["4747"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    )
}

fn project(name: &str, server: &Handle) -> TestProject {
    let p = TestProject::new(name);
    p.init_conf(server, "")
        .agent_md("EXECUTION_MODE=guarded\nDEFAULT_COMMAND_TIMEOUT=600")
        .write("01-sleep.md", "# Sleep\nSleep a while.\n");
    p
}

fn sigterm(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

fn sleeper_of(broker: u32) -> u32 {
    wait_for(Duration::from_secs(30), "the action to run", || {
        children_named(broker, "sleep").first().copied()
    })
}

fn gone(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
        || status_field(pid, "State:").is_some_and(|s| s.starts_with('Z'))
}

/// The record of the stopped session: its action cancelled, its end written,
/// the anchor at the last record, the chain intact.
fn check_recorded(p: &TestProject) {
    let records = audit_records(p);
    let tool = tool_event(&records, "sleep 4747");
    assert_eq!(tool["status"], "cancelled", "{tool}");
    let end = records
        .iter()
        .rev()
        .find(|r| r["event"]["event"] == "session_end")
        .unwrap_or_else(|| panic!("no session_end: {records:?}"));
    assert!(
        end["event"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("stopping"),
        "{end}"
    );
    let last_seq = records.last().unwrap()["seq"].as_u64().unwrap();
    let head = std::fs::read_to_string(p.path(".agent/audit.head")).unwrap();
    let anchored: u64 = head.split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(anchored, last_seq, "the anchor is behind the log: {head}");
    let verify = run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(verify.status.success(), "{}", describe(&verify));
}

#[test]
fn sigterm_to_run_records_the_cancelled_action_and_the_session_end() {
    if !require_root("sigterm_to_run_records_the_cancelled_action") {
        return;
    }
    ensure_accounts();
    let server = sleep_then_done();
    let p = project("stop-run", &server);
    let broker = Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = sleeper_of(standalone_broker(broker.id()));
    let asked = Instant::now();
    sigterm(broker.id());
    let out = wait_output(broker, Duration::from_secs(15));
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert_eq!(out.status.code(), Some(143), "{}", describe(&out));
    assert!(gone(sleeper), "the cancelled action still runs");
    check_recorded(&p);
    // The legitimate next run starts on the intact chain and runs its task.
    let server = scenario(r#"{"steps":[{"content":"done\nTASK_STATUS: DONE"}]}"#);
    p.init_conf(&server, "")
        .write("01-sleep.md", "# Nothing\nSay done. No action is needed.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[test]
fn sigterm_to_the_daemon_ends_its_sessions_and_removes_the_socket() {
    if !require_root("sigterm_to_the_daemon_ends_its_sessions") {
        return;
    }
    ensure_accounts();
    let server = sleep_then_done();
    let p = project("stop-daemon", &server);
    let dir = std::path::PathBuf::from(format!("/run/sysward-test-stop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("control.sock");
    let daemon = Command::new(sysward())
        .args([
            "broker",
            "--root",
            p.dir.to_str().unwrap(),
            "--socket",
            socket.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let daemon_pid = daemon.id();
    wait_for(Duration::from_secs(15), "the control socket", || {
        socket.exists().then_some(())
    });
    let client = Command::new(sysward())
        .args(["run", "--socket", socket.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = sleeper_of(daemon_pid);
    sigterm(daemon_pid);
    let daemon_out = wait_output(daemon, Duration::from_secs(15));
    let client_out = wait_output(client, Duration::from_secs(15));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        daemon_out.status.code(),
        Some(0),
        "{}",
        describe(&daemon_out)
    );
    assert!(!socket.exists(), "the socket was left behind");
    assert!(gone(sleeper), "the cancelled action still runs");
    assert_ne!(client_out.status.code(), Some(0));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&client_out.stdout),
        String::from_utf8_lossy(&client_out.stderr)
    );
    assert!(said.contains("stopping"), "the client was not told: {said}");
    check_recorded(&p);
}
