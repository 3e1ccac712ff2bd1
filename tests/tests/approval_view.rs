//! What a person approves is all in view: a destructive command after two
//! thousand characters of `echo` is shown with its own category and risk in
//! the panel (tmux) and in `sysward approvals` through the daemon, the whole
//! request is one key away, a pending line says what to type, and the record
//! says who answered (as root, real tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::tmux::Tmux;
use sysward_tests::*;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// `echo A…(2,100)…; rm -rf <data>`: the tail is what matters.
fn long_then_delete(data: &Path) -> String {
    format!("echo {}; rm -rf {}", "A".repeat(2100), data.display())
}

#[test]
fn the_panel_shows_every_command_and_the_whole_request_on_v() {
    if !require_root("the_panel_shows_every_command") {
        return;
    }
    ensure_accounts();
    let Some(tmux) = Tmux::start("view") else {
        eprintln!("\n*** SKIPPED the_panel_shows_every_command: tmux is not installed (scripts/test.sh installs it). ***\n");
        return;
    };
    let p = TestProject::new("approval-view");
    let data = p.path("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    let script = long_then_delete(&data);
    let server = scenario(
        &serde_json::json!({"steps": [
            {"expect": {"last_message_contains": "clean up"},
             "tool_calls": [{"name": "shell", "arguments": {"command": script}}]},
            {"expect": {"role_of_last": "tool"}, "content": "Cleaned up."}
        ]})
        .to_string(),
    );
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nALLOW_DELETE=true\nAPPROVAL_MODE=strict\nMAX_STEPS=10",
    );
    let exit_file = p.path("exit-code");
    tmux.line(&format!(
        "{} cli --root {}; echo $? > {}",
        shell_quote(&sysward()),
        shell_quote(&p.dir),
        shell_quote(&exit_file)
    ));
    tmux.wait_prompt(1);
    tmux.line("clean up");
    let panel = tmux.wait_count("approval needed", 1, Duration::from_secs(60));
    tmux.wait_for("the approval prompt", Duration::from_secs(10), |t| {
        t.contains("answer [y/s/n/v]:")
    });
    let panel = tmux
        .capture()
        .split_off(panel.find("approval needed").unwrap_or(0));
    // The tail is in the command row, and the delete is a part of its own.
    let flat: String = panel.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains(&format!("rm -rf {}", data.display())),
        "{panel}"
    );
    assert!(flat.contains("characters not shown"), "{panel}");
    assert!(flat.contains("delete · HIGH"), "{panel}");
    assert!(flat.contains("read-only · SAFE"), "{panel}");
    // v shows it all; then the person allows it and it takes effect.
    let joined = |t: &str| t.split_whitespace().collect::<String>();
    assert!(!joined(&panel).contains(&"A".repeat(1000)));
    tmux.line("v");
    tmux.wait_count("answer [y/s/n/v]:", 2, Duration::from_secs(10));
    let all = tmux.capture();
    assert!(joined(&all).contains(&"A".repeat(2100)), "{all}");
    tmux.line("y");
    tmux.wait_count("Cleaned up.", 1, Duration::from_secs(60));
    assert!(
        !data.exists(),
        "the approved rm did not take effect: {}",
        server
            .chat_requests()
            .last()
            .map(|c| c.message_text())
            .unwrap_or_default()
            .chars()
            .rev()
            .take(1500)
            .collect::<String>()
            .chars()
            .rev()
            .collect::<String>()
    );
    tmux.wait_prompt(2);
    tmux.keys(&["C-d"]);
    wait_for(Duration::from_secs(30), "sysward to exit", || {
        std::fs::read_to_string(&exit_file).ok()
    });
    // The record names who answered: uid, login and terminal.
    let records = audit_records(&p);
    let tool = tool_event(&records, "rm -rf");
    let by = tool["approved_by"].as_str().unwrap_or("");
    assert!(by.starts_with("operator (once): uid 0 (root)"), "{tool}");
    assert!(by.contains(" on /dev/pts/"), "{tool}");
}

#[test]
fn a_group_member_sees_the_same_request_through_the_daemon() {
    if !require_root("a_group_member_sees_the_same_request") {
        return;
    }
    ensure_accounts();
    let account = test_user("sysward-test-op", &["sysward"]);
    let user = account.name().to_string();
    let p = TestProject::new("approval-view-daemon");
    let data = p.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let server = scenario(
        &serde_json::json!({"steps": [
            {"tool_calls": [{"name": "shell", "arguments": {"command": long_then_delete(&data)}}]},
            {"content": "Waiting for approval.\nTASK_STATUS: BLOCKED"}
        ]})
        .to_string(),
    );
    p.init_conf(&server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nALLOW_DELETE=true\nAPPROVAL_MODE=strict\nMAX_STEPS=10",
        )
        .write("01-clean.md", "# Clean\nClean up the data directory.\n");
    let sock_dir = PathBuf::from(format!("/run/sysward-test-view-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&sock_dir);
    let socket = sock_dir.join("control.sock");
    struct Broker(std::process::Child, PathBuf);
    impl Drop for Broker {
        fn drop(&mut self) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = wait_output_or_kill(&mut self.0);
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _broker = Broker(
        Command::new(sysward())
            .args(["broker", "--root", p.dir.to_str().unwrap(), "--socket"])
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        sock_dir.clone(),
    );
    wait_for(Duration::from_secs(15), "the control socket", || {
        socket.exists().then_some(())
    });
    let as_member = |args: &[&str]| {
        let out = Command::new("setpriv")
            .args([
                &format!("--reuid={user}"),
                &format!("--regid={user}"),
                "--init-groups",
                "--",
            ])
            .arg(sysward())
            .args(args)
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        out
    };
    let run = as_member(&["run"]);
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(2), "BLOCKED expected: {said}");
    let id = said
        .split("sysward approve ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .map(|s| s.trim_matches(|c: char| !c.is_ascii_hexdigit()).to_string())
        .unwrap_or_else(|| panic!("no `sysward approve ID` line: {said}"));
    assert_eq!(id.len(), 12, "{said}");
    let list = as_member(&["approvals"]);
    let shown = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(list.status.success(), "{}", describe(&list));
    let flat: String = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains(&id), "{shown}");
    assert!(
        flat.contains(&format!("rm -rf {}", data.display())),
        "{shown}"
    );
    assert!(flat.contains("delete · HIGH"), "{shown}");
    assert!(flat.contains("characters not shown"), "{shown}");
    let full = as_member(&["approvals", "--full"]);
    assert!(String::from_utf8_lossy(&full.stdout).contains(&"A".repeat(2100)));
    // The legitimate path: approved, the next run does it.
    let approve = as_member(&["approve", &id]);
    assert!(approve.status.success(), "{}", describe(&approve));
    assert!(data.exists());
}

fn wait_output_or_kill(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let deadline = std::time::Instant::now() + Duration::from_secs(12);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}
