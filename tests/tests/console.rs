//! The operator's console over the real tree: a failed action shows its exit
//! status and the last lines of its stderr under its `← error` line (in
//! tmux, through the daemon), `--verbose` shows every action's output,
//! `/quit` through the daemon exits 0 (not 130), and a command whose reader
//! went away (`sysward audit verify | head`) ends without a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::*;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn daemon_cli_shows_why_an_action_failed_and_quit_exits_zero() {
    if !require_root("daemon_cli_shows_why_an_action_failed_and_quit_exits_zero") {
        return;
    }
    ensure_accounts();
    let Some(tmux) = Tmux::start("console") else {
        eprintln!("\n*** SKIPPED daemon_cli_shows_why: tmux is not installed (scripts/test.sh installs it). ***\n");
        return;
    };
    let server = scenario(
        r#"{"steps":[
        {"expect":{"last_message_contains":"list it"},
         "tool_calls":[{"name":"exec","arguments":{"command":"ls","args":["/nonexistent-sysward-dir"]}}]},
        {"expect":{"role_of_last":"tool"},
         "tool_calls":[{"name":"exec","arguments":{"command":"echo","args":["quiet-success-output"]}}]},
        {"expect":{"role_of_last":"tool"}, "content":"It does not exist."}
    ]}"#,
    );
    let p = TestProject::new("console-daemon");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true\nMAX_STEPS=10");
    let sock_dir = PathBuf::from(format!("/run/sysward-test-console-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&sock_dir);
    let socket = sock_dir.join("control.sock");
    struct Broker(std::process::Child, PathBuf);
    impl Drop for Broker {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
            let _ = std::fs::remove_dir_all(&self.1);
        }
    }
    let _broker = Broker(
        Command::new(sysward())
            .args([
                "broker",
                "--root",
                p.dir.to_str().unwrap(),
                "--socket",
                socket.to_str().unwrap(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
        sock_dir.clone(),
    );
    wait_for(Duration::from_secs(15), "the control socket", || {
        socket.exists().then_some(())
    });
    let exit_file = p.path("exit-code");
    tmux.line(&format!(
        "{} cli --socket {}; echo $? > {}",
        shell_quote(&sysward()),
        shell_quote(&socket),
        shell_quote(&exit_file)
    ));
    tmux.wait_prompt(1);
    tmux.line("list it");
    tmux.wait_count("It does not exist.", 1, Duration::from_secs(60));
    tmux.wait_prompt(2);
    let pane = tmux.capture();
    // Under the failed action: its exit status and its stderr.
    let lines: Vec<&str> = pane.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("← error") && l.contains("/nonexistent-sysward-dir"))
        .unwrap_or_else(|| panic!("no error line:\n{pane}"));
    assert!(
        lines[at + 1].contains("exit status 2"),
        "no exit status under the error:\n{pane}"
    );
    assert!(
        lines[at + 1..]
            .iter()
            .take(4)
            .any(|l| l.contains("stderr:") && l.contains("No such file or directory")),
        "no stderr under the error:\n{pane}"
    );
    // A success shows no output without --verbose.
    assert!(pane.contains("← ok"), "{pane}");
    assert!(!pane.contains("│ quiet-success-output"), "{pane}");

    tmux.line("/quit");
    let code = wait_for(Duration::from_secs(30), "sysward to exit", || {
        std::fs::read_to_string(&exit_file)
            .ok()
            .filter(|s| !s.is_empty())
    });
    let pane = tmux.capture();
    assert_eq!(code.trim(), "0", "exit status after /quit; pane:\n{pane}");
    let records = audit_records(&p);
    assert!(
        records
            .iter()
            .any(|r| r["event"]["event"] == "session_end" && r["event"]["exit_code"] == 0),
        "{records:#?}"
    );
}

#[test]
fn verbose_shows_every_actions_output_and_errors_show_why_without_it() {
    if !require_root("verbose_shows_every_actions_output") {
        return;
    }
    ensure_accounts();
    let steps = r#"{"steps":[
        {"tool_calls":[{"name":"exec","arguments":{"command":"echo","args":["visible-with-verbose"]}}]},
        {"tool_calls":[{"name":"shell","arguments":{"command":"echo first-err >&2; echo last-err >&2; exit 3"}}]},
        {"content":"done\nTASK_STATUS: DONE"}
    ]}"#;
    let run = |verbose: bool| {
        let server = scenario(steps);
        let p = TestProject::new(if verbose {
            "console-verbose"
        } else {
            "console-quiet"
        });
        p.init_conf(&server, "")
            .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive")
            .write("01-t.md", "# T\nRun them.\n");
        let mut args = vec!["run", "--root", p.dir.to_str().unwrap()];
        if verbose {
            args.push("--verbose");
        }
        let out = run_sysward(&args, Duration::from_secs(120));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for verbose in [false, true] {
        let text = run(verbose);
        assert!(text.contains("exit status 3"), "verbose {verbose}:\n{text}");
        assert!(
            text.contains("stderr: first-err") && text.contains("stderr: last-err"),
            "verbose {verbose}:\n{text}"
        );
        assert_eq!(
            text.contains("│ visible-with-verbose"),
            verbose,
            "verbose {verbose}:\n{text}"
        );
    }
}

/// A pipe whose reading end is already closed: the first write gets EPIPE.
fn closed_pipe() -> OwnedFd {
    let mut fds = [0; 2];
    // SAFETY: a valid array of two descriptors.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both were just created and are owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    write
}

#[test]
fn a_closed_pipe_ends_one_shot_commands_without_a_panic() {
    if !require_root("a_closed_pipe_ends_one_shot_commands_without_a_panic") {
        return;
    }
    ensure_accounts();
    let server = scenario(r#"{"steps":[{"content":"nothing to do\nTASK_STATUS: DONE"}]}"#);
    let p = TestProject::new("console-pipe");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged")
        .write("01-t.md", "# T\nNo action is needed.\n");
    let dir = p.dir.to_str().unwrap();
    run_sysward(&["run", "--root", dir], Duration::from_secs(60));
    for args in [
        vec!["audit", "verify", "--root", dir],
        vec!["audit", "show", "--root", dir],
        vec!["approvals", "--root", dir],
        vec!["policy", "check", "--root", dir],
    ] {
        // Read normally, the command works.
        let ok = Command::new(sysward())
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(ok.status.success(), "{args:?}: {}", describe(&ok));
        // Its reader gone, it ends quietly.
        let out = Command::new(sysward())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(closed_pipe()))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && out.status.code() != Some(101),
            "{args:?}: {:?}\n{stderr}",
            out.status
        );
    }
    // The audit log is still intact (nothing was left half written).
    let again = run_sysward(&["audit", "verify", "--root", dir], Duration::from_secs(30));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("audit chain intact"),
        "{}",
        describe(&again)
    );
}

/// `policy check --file` judges a candidate agent.md where it lies (what
/// Ansible's `validate:` gives it): a broken one fails naming its line, a good
/// one prints its effective policy, and it cannot be mixed with `--root`.
#[test]
fn policy_check_of_a_candidate_file() {
    let dir = std::env::temp_dir().join(format!("sysward-policy-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    use sysward_testdir::RemoveOnDrop;
    let _cleanup = RemoveOnDrop(dir.clone());
    let broken = dir.join("candidate-broken");
    let good = dir.join("candidate-good");
    std::fs::write(&broken, "# x\n\n```policy\nEXECUTION_MODE=bogus\n```\n").unwrap();
    std::fs::write(&good, "# x\n\n```policy\nEXECUTION_MODE=privileged\n```\n").unwrap();
    let check = |args: &[&str]| {
        Command::new(sysward())
            .args(["policy", "check"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = check(&["--file", broken.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr.contains("line 4") && stderr.contains("EXECUTION_MODE"),
        "{stderr}"
    );
    let out = check(&["--file", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("EXECUTION_MODE=privileged"),
        "{}",
        describe(&out)
    );
    let out = check(&[
        "--file",
        good.to_str().unwrap(),
        "--root",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}
