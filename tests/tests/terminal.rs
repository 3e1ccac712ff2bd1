//! The operator's terminal, driven through tmux as a person would: `sysward
//! cli --root DIR` against the scripted model — history recall with the up
//! arrow, Ctrl+C cancelling a long action (killed, audited `cancelled`, the
//! session goes on), the approval panel answered, Ctrl+D leaving, and the
//! terminal left exactly as it was (`stty -a` before and after).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use sysward_tests::*;

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn cli_in_tmux_history_cancel_approval_and_a_sane_terminal() {
    if !require_root("cli_in_tmux_history_cancel_approval_and_a_sane_terminal") {
        return;
    }
    ensure_accounts();
    let Some(tmux) = Tmux::start("cli") else {
        eprintln!(
            "\n*** SKIPPED cli_in_tmux: tmux is not installed (scripts/test.sh installs it). ***\n"
        );
        return;
    };
    let server = scenario(
        r#"{"steps":[
        {"expect":{"last_message_contains":"check the disks"},
         "content":"The disks look fine."},
        {"expect":{"last_message_contains":"check the disks"},
         "tool_calls":[{"name":"shell","arguments":{"command":"sleep 30"}}]},
        {"expect":{"last_message_contains":"think for a long time"},
         "delay_ms":30000, "content":"too late"},
        {"expect":{"last_message_contains":"restart x please"},
         "tool_calls":[{"name":"shell","arguments":{"command":"systemctl restart x"}}]},
        {"expect":{"role_of_last":"tool","tool_result_contains":"not now"},
         "content":"Understood, x was not restarted."}
    ]}"#,
    );
    let p = TestProject::new("terminal-cli");
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nALLOW_SERVICE_RESTART=true\nAPPROVAL_MODE=strict\nDEFAULT_COMMAND_TIMEOUT=120\nMAX_STEPS=10",
    );
    let before = p.path("stty-before");
    let after = p.path("stty-after");
    let exit_file = p.path("exit-code");

    tmux.line(&format!("stty -a > {}", shell_quote(&before)));
    tmux.line(&format!(
        "{} cli --root {}; echo $? > {}",
        shell_quote(&sysward()),
        shell_quote(&p.dir),
        shell_quote(&exit_file)
    ));

    // 1. A question, answered.
    tmux.wait_prompt(1);
    tmux.line("check the disks");
    tmux.wait_count("The disks look fine.", 1, Duration::from_secs(60));
    tmux.wait_prompt(2);

    // 2. The up arrow recalls it; sent again, the model runs a long action.
    tmux.keys(&["Up"]);
    tmux.wait_for("the recalled line", Duration::from_secs(10), |t| {
        t.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_end() == "agent> check the disks")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_count("→ ", 1, Duration::from_secs(60));
    let sleeper = wait_for(Duration::from_secs(30), "the sleep 30 action", || {
        pids_running("sleep", "30").into_iter().next()
    });

    // While it runs: the spinner with the elapsed time, the step count and
    // the action in flight.
    tmux.wait_for("the spinner", Duration::from_secs(10), |t| {
        t.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| {
                l.contains("step 1/10")
                    && l.contains("shell: sleep 30 (")
                    && l.contains("Ctrl+C cancels")
            })
    });

    // 3. Ctrl+C cancels it: the process is killed, the session goes on.
    let cancelled_at = Instant::now();
    tmux.keys(&["C-c"]);
    tmux.wait_count("cancelled", 1, Duration::from_secs(20));
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(15),
        "cancellation took {:?}",
        cancelled_at.elapsed()
    );
    wait_for(Duration::from_secs(10), "the sleep to be gone", || {
        (!Path::new(&format!("/proc/{sleeper}")).exists()
            || status_field(sleeper, "State:").is_some_and(|s| s.starts_with('Z')))
        .then_some(())
    });
    tmux.wait_prompt(3);

    // 4. Ctrl+C also cancels a model request in flight.
    tmux.line("think for a long time");
    server.wait_for_requests(server.requests().len() + 1, Duration::from_secs(30));
    std::thread::sleep(Duration::from_millis(200));
    let cancelled_at = Instant::now();
    tmux.keys(&["C-c"]);
    tmux.wait_prompt(4);
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(10),
        "the model request was not cancelled promptly: {:?}",
        cancelled_at.elapsed()
    );
    assert!(!tmux.capture().contains("too late"));

    // 5. An approval panel, answered: s then "no" (not confirmed), then n
    //    with a note for the model.
    tmux.line("restart x please");
    let panel = tmux.wait_count("approval needed", 1, Duration::from_secs(60));
    assert!(panel.contains("systemctl restart x"), "{panel}");
    assert!(panel.contains("HIGH"), "risk shown: {panel}");
    assert!(panel.contains("[y] allow once"), "{panel}");
    tmux.wait_for("the approval prompt", Duration::from_secs(10), |t| {
        t.contains("answer [y/s/n/v]:")
    });
    tmux.line("s");
    tmux.wait_for("the second confirmation", Duration::from_secs(10), |t| {
        t.contains("type 'yes' to confirm")
    });
    tmux.line("no");
    tmux.wait_for("not confirmed", Duration::from_secs(10), |t| {
        t.contains("not confirmed; answer again")
    });
    tmux.wait_count("answer [y/s/n/v]:", 2, Duration::from_secs(10));
    tmux.line("n");
    tmux.wait_for("the note prompt", Duration::from_secs(10), |t| {
        t.contains("note for the model")
    });
    tmux.line("not now");
    tmux.wait_count(
        "Understood, x was not restarted.",
        1,
        Duration::from_secs(60),
    );
    tmux.wait_prompt(4);

    // 5. Ctrl+C at the prompt only warns; Ctrl+D leaves; the shell gets its
    //    terminal back unchanged.
    tmux.keys(&["C-c"]);
    tmux.wait_for("the exit hint", Duration::from_secs(10), |t| {
        t.contains("(Ctrl+C again or Ctrl+D to exit)")
    });
    tmux.keys(&["C-d"]);
    wait_for(Duration::from_secs(30), "sysward to exit", || {
        std::fs::read_to_string(&exit_file).ok()
    });
    tmux.line(&format!("stty -a > {}", shell_quote(&after)));
    wait_for(Duration::from_secs(10), "stty after", || {
        std::fs::read_to_string(&after)
            .ok()
            .filter(|s| !s.is_empty())
    });
    let pane = tmux.capture();
    let code = std::fs::read_to_string(&exit_file).unwrap();
    assert_eq!(code.trim(), "0", "exit status; pane:\n{pane}");
    assert_eq!(
        std::fs::read_to_string(&before).unwrap(),
        std::fs::read_to_string(&after).unwrap(),
        "stty -a changed; pane:\n{pane}"
    );

    // The audit trail: the sleep cancelled, the restart denied by the operator.
    let records = audit_records(&p);
    let sleep = tool_event(&records, "sleep 30");
    assert_eq!(sleep["status"], "cancelled", "{sleep:#}");
    let restart = tool_event(&records, "systemctl restart x");
    assert_eq!(restart["decision"], "denied", "{restart:#}");
    // (Not asserted: `server.expectation_failures()`. Today the broker still
    // forwards the model request the agent makes right after a cancelled
    // action — answered by the scenario with an expectation failure and
    // dropped as cancelled. See the report to the lead.)
    eprintln!("the pane at the end:\n{pane}");

    // History: both lines sent to the agent, 0600, stamped; nothing typed at
    // the approval prompt.
    let hist_path = p.path(".context-history");
    let hist = std::fs::read_to_string(&hist_path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run_standalone must build its LocalOperator with .with_project_history(&ctx.layout.config_dir))",
            hist_path.display()
        )
    });
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&hist_path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let entries: Vec<&str> = hist
        .lines()
        .map(|l| l.split_once('\t').unwrap().1)
        .collect();
    assert_eq!(
        entries,
        [
            "check the disks",
            "check the disks",
            "think for a long time",
            "restart x please"
        ],
        "{hist}"
    );
}

/// The same terminal through the daemon: `sysward cli --socket S` run by a
/// member of the `sysward` group (not root) — history in that user's own
/// `~/.sysward_history`, Ctrl+C relayed as a `Cancel`, the approval panel
/// answered "y" once.
#[test]
fn daemon_cli_in_tmux_as_a_group_member() {
    if !require_root("daemon_cli_in_tmux_as_a_group_member") {
        return;
    }
    ensure_accounts();
    let Some(tmux) = Tmux::start("daemon") else {
        eprintln!("\n*** SKIPPED daemon_cli_in_tmux: tmux is not installed (scripts/test.sh installs it). ***\n");
        return;
    };
    let account = test_user("sysward-test-term", &["sysward"]);
    let user = account.name();
    let server = scenario(
        r#"{"steps":[
        {"expect":{"last_message_contains":"uptime please"},
         "tool_calls":[{"name":"shell","arguments":{"command":"sleep 30"}}]},
        {"expect":{"last_message_contains":"uptime please"},
         "tool_calls":[{"name":"shell","arguments":{"command":"systemctl restart x"}}]},
        {"expect":{"role_of_last":"tool"},
         "content":"Restart attempted."}
    ]}"#,
    );
    let p = TestProject::new("terminal-daemon");
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nALLOW_SERVICE_RESTART=true\nAPPROVAL_MODE=strict\nMAX_STEPS=10",
    );
    // The member's home, outside the root-only test directories.
    struct Home(PathBuf);
    impl Drop for Home {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let home = Home(PathBuf::from(format!(
        "/tmp/sysward-term-home-{}",
        std::process::id()
    )));
    let _ = std::fs::remove_dir_all(&home.0);
    std::fs::create_dir(&home.0).unwrap();
    let _ = Command::new("chown")
        .arg(format!("{user}:{user}"))
        .arg(&home.0)
        .status();
    let home = &home.0;
    let sock_dir = PathBuf::from(format!("/run/sysward-test-term-{}", std::process::id()));
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

    tmux.line(&format!(
        "env HOME={} setpriv --reuid={user} --regid={user} --init-groups -- {} cli --socket {}",
        shell_quote(home),
        shell_quote(&sysward()),
        shell_quote(&socket)
    ));
    tmux.wait_prompt(1);
    tmux.line("uptime please");
    tmux.wait_count("→ ", 1, Duration::from_secs(60));
    let sleeper = wait_for(Duration::from_secs(30), "the sleep 30 action", || {
        pids_running("sleep", "30").into_iter().next()
    });
    tmux.keys(&["C-c"]);
    tmux.wait_count("← cancelled", 1, Duration::from_secs(20));
    wait_for(Duration::from_secs(10), "the sleep to be gone", || {
        (!Path::new(&format!("/proc/{sleeper}")).exists()
            || status_field(sleeper, "State:").is_some_and(|s| s.starts_with('Z')))
        .then_some(())
    });
    tmux.wait_prompt(2);
    tmux.keys(&["Up"]);
    tmux.wait_for("the recalled line", Duration::from_secs(10), |t| {
        t.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_end() == "agent> uptime please")
    });
    tmux.keys(&["Enter"]);
    tmux.wait_count("approval needed", 1, Duration::from_secs(60));
    tmux.wait_for("the approval prompt", Duration::from_secs(10), |t| {
        t.contains("answer [y/s/n/v]:")
    });
    tmux.line("y");
    tmux.wait_count("Restart attempted.", 1, Duration::from_secs(60));
    tmux.wait_prompt(3);
    tmux.keys(&["C-d"]);
    tmux.wait_for("the shell prompt", Duration::from_secs(30), |t| {
        t.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .is_some_and(|l| l.trim_end() == "$")
    });
    let pane = tmux.capture();
    eprintln!("the pane at the end:\n{pane}");

    let records = audit_records(&p);
    let sleep = tool_event(&records, "sleep 30");
    assert_eq!(sleep["status"], "cancelled", "{sleep:#}");
    let restart = tool_event(&records, "systemctl restart x");
    // Who answered: the member, on the terminal the kernel shows.
    let by = restart["approved_by"].as_str().unwrap_or("");
    assert!(
        by.starts_with("operator (once): uid ")
            && by.contains(&format!("({user})"))
            && by.contains(" on /dev/pts/"),
        "{restart:#}"
    );

    // The history is the member's own, 0600, owned by them.
    use std::os::unix::fs::MetadataExt;
    let hist_path = home.join(".sysward_history");
    let meta = std::fs::metadata(&hist_path)
        .unwrap_or_else(|e| panic!("{}: {e}\n{pane}", hist_path.display()));
    assert_eq!(meta.mode() & 0o777, 0o600);
    let uid: u32 = String::from_utf8(
        Command::new("id")
            .args(["-u", user])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(meta.uid(), uid);
    let hist = std::fs::read_to_string(&hist_path).unwrap();
    let entries: Vec<&str> = hist
        .lines()
        .map(|l| l.split_once('\t').unwrap().1)
        .collect();
    assert_eq!(entries, ["uptime please", "uptime please"], "{hist}");
}

/// Pids of processes named `name` whose argv contains `arg`.
fn pids_running(name: &str, arg: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if args.first().is_some_and(|a| a.ends_with(name)) && args.iter().any(|a| a == arg) {
            found.push(pid);
        }
    }
    found
}
