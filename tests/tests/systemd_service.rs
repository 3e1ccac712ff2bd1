//! The Debian package under a real systemd: each test boots a throwaway
//! Debian host (hostbed/, as sysward_tests::hosts), installs the .deb built from this tree
//! with dpkg and drives the real daemon through systemctl, the timer and the
//! control socket. The scripted model listens on this machine's loopback,
//! which the host shares (its network namespace is this machine's), except
//! where a test gives the host its own network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};
use sysward_tests::hosts::{Host, Options};
use sysward_tests::packaged::{configure, host_with_package, show, wait_active};
use sysward_tests::*;

/// The operator account the tests create inside a host (never on this
/// machine).
const OPERATOR: &str = "swop";

/// A member of the `sysward` group inside the host.
fn add_operator(host: &Host) {
    host.ok(&[
        "useradd",
        "-m",
        "-s",
        "/bin/bash",
        "-G",
        "sysward",
        OPERATOR,
    ]);
}

/// `sysward ARGS` run in the host by `user` (through the daemon).
fn sysward_as(host: &Host, user: &str, args: &[&str], timeout: Duration) -> Output {
    let home = format!("/home/{user}");
    let mut argv = vec![
        "setpriv",
        "--reuid",
        user,
        "--regid",
        user,
        "--init-groups",
        "--",
        "env",
        "-i",
        "PATH=/usr/bin:/bin",
        "LANG=C.UTF-8",
    ];
    let home_env = format!("HOME={home}");
    argv.push(&home_env);
    argv.push("/usr/bin/sysward");
    argv.extend_from_slice(args);
    let child = host.command(&argv).spawn().unwrap();
    wait_output(child, timeout)
}

fn summary_of(out: &Output) -> serde_json::Value {
    let events = json_lines(out);
    let summary = events.last().cloned().unwrap_or_default();
    assert_eq!(summary["event"], "summary", "{}", describe(out));
    summary
}

fn task_status(summary: &serde_json::Value, task: &str) -> String {
    summary["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| t["task"] == task)
        .map(|t| t["status"].as_str().unwrap_or("").to_string())
        .unwrap_or_default()
}

fn one_action_scenario(runs: usize) -> Handle {
    let call = r#"{"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]}"#;
    let done = r#"{"expect":{"role_of_last":"tool"},"content":"EXECUTED: uname -r. VERIFIED: printed.\n\nTASK_STATUS: DONE"}"#;
    let steps = vec![format!("{call},{done}"); runs].join(",");
    scenario(&format!(
        r#"{{"steps":[{steps}],"exhausted":{{"content":"Nothing more to do.\n\nTASK_STATUS: DONE"}}}}"#
    ))
}

const READ_ONLY_TASK: (&str, &str) = (
    "01-kernel.md",
    "# Kernel\nPrint the kernel release with `uname -r`, then report.\n",
);

/// The [Service] directives of the unit in this tree, in order.
fn unit_directives(section: &str) -> Vec<(String, String)> {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/systemd/sysward.service"),
    )
    .unwrap();
    let mut current = String::new();
    let mut found = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            current = line.trim_matches(|c| c == '[' || c == ']').to_string();
        } else if !line.is_empty() && !line.starts_with('#') && current == section {
            if let Some((k, v)) = line.split_once('=') {
                found.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
    }
    found
}

#[test]
fn the_unit_starts_through_notify_with_every_promised_directive() {
    let test = "the_unit_starts_through_notify_with_every_promised_directive";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    // The package's first install enabled and started it.
    assert_eq!(
        host.run(&["systemctl", "is-enabled", "sysward.service"])
            .stdout,
        b"enabled\n"
    );
    host.ok(&["systemctl", "stop", "sysward.service"]);
    assert_eq!(show(&host, "sysward.service", "ActiveState"), "inactive");
    // With Type=notify, start returns once the broker said READY=1, which
    // it says once the control socket listens.
    let t = Instant::now();
    host.ok(&["systemctl", "start", "sysward.service"]);
    println!(
        "systemctl start sysward: {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert_eq!(show(&host, "sysward.service", "ActiveState"), "active");
    assert_eq!(show(&host, "sysward.service", "SubState"), "running");
    assert_eq!(show(&host, "sysward.service", "Type"), "notify");
    host.ok(&["test", "-S", "/run/sysward/control.sock"]);
    assert_eq!(
        host.ok(&["stat", "-c", "%a %U %G", "/run/sysward/control.sock"])
            .trim(),
        "660 root sysward"
    );
    let journal = host.ok(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-u",
        "sysward.service",
    ]);
    assert!(
        journal.contains("listening on /run/sysward/control.sock"),
        "journalctl -u sysward:\n{journal}"
    );

    // Every directive of the unit in this tree is what systemd loaded.
    let installed = host
        .read("/usr/lib/systemd/system/sysward.service")
        .unwrap();
    let ours = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/systemd/sysward.service"),
    )
    .unwrap();
    assert_eq!(
        installed, ours,
        "the packaged unit differs from packaging/systemd/sysward.service"
    );
    let mut missing = Vec::new();
    let directives = unit_directives("Service");
    for (key, value) in &directives {
        let (prop, want) = match key.as_str() {
            "RestartSec" => ("RestartUSec".to_string(), value.clone()),
            "ExecStart" => {
                let got = show(&host, "sysward.service", "ExecStart");
                if !got.contains(&format!("argv[]={value} ")) {
                    missing.push(format!("ExecStart={value}: systemd has {got}"));
                }
                continue;
            }
            _ => (key.clone(), value.clone()),
        };
        let got = show(&host, "sysward.service", &prop);
        if got != want {
            missing.push(format!("{key}={value}: systemd has {prop}={got:?}"));
        }
        if key.starts_with("Limit") {
            let soft = show(&host, "sysward.service", &format!("{key}Soft"));
            if soft != want {
                missing.push(format!("{key}={value}: the soft limit is {soft:?}"));
            }
        }
    }
    for promised in [
        "UMask",
        "LimitCORE",
        "LimitNOFILE",
        "Restart",
        "RestartPreventExitStatus",
        "KeyringMode",
        "Delegate",
        "RestrictRealtime",
        "LockPersonality",
        "NotifyAccess",
    ] {
        if !directives.iter().any(|(k, _)| k == promised) {
            missing.push(format!("{promised}= is no longer in the unit"));
        }
    }
    // The running broker has them: its own limits and umask.
    let pid = show(&host, "sysward.service", "MainPID");
    let limits = host.ok(&["cat", &format!("/proc/{pid}/limits")]);
    let status = host.ok(&["cat", &format!("/proc/{pid}/status")]);
    let limit = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| {
                l[name.len()..]
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    if limit("Max core file size") != "0 0" {
        missing.push(format!(
            "the broker's core limit: {}",
            limit("Max core file size")
        ));
    }
    if limit("Max open files") != "8192 8192" {
        missing.push(format!(
            "the broker's open-files limit: {}",
            limit("Max open files")
        ));
    }
    if !status.lines().any(|l| l == "Umask:\t0077") {
        missing.push("the broker's umask is not 0077".into());
    }
    let after = show(&host, "sysward.service", "After");
    if !after.contains("network-online.target") {
        missing.push(format!("After= lacks network-online.target: {after}"));
    }

    // systemd's own exposure rating, printed for the record.
    let security = host.run(&[
        "systemd-analyze",
        "security",
        "--no-pager",
        "sysward.service",
    ]);
    let text = String::from_utf8_lossy(&security.stdout).into_owned();
    println!("systemd-analyze security sysward.service:\n{text}");
    let overall = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall rating: {}", describe(&security)));
    println!("SCORE: {}", overall.trim());
    for (directive, row) in [
        ("RestrictRealtime", "RestrictRealtime="),
        ("LockPersonality", "LockPersonality="),
        ("KeyringMode", "KeyringMode="),
        ("UMask", "UMask="),
    ] {
        let good = text
            .lines()
            .any(|l| l.trim_start().starts_with('✓') && l.contains(row));
        if !good {
            missing.push(format!(
                "systemd-analyze security does not rate {directive} as set"
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "promised unit directives missing or different:\n{}",
        missing.join("\n")
    );

    // Restart=on-failure: a killed broker comes back.
    let old = pid.clone();
    host.ok(&["kill", "-9", &old]);
    let start = Instant::now();
    loop {
        let now = show(&host, "sysward.service", "MainPID");
        if now != old && now != "0" && show(&host, "sysward.service", "ActiveState") == "active" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the killed broker was not restarted: {}",
            String::from_utf8_lossy(
                &host
                    .run(&["systemctl", "status", "--no-pager", "sysward"])
                    .stdout
            )
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(show(&host, "sysward.service", "NRestarts"), "1");
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

#[test]
fn the_timer_and_a_group_member_run_the_tasks_through_the_daemon() {
    let test = "the_timer_and_a_group_member_run_the_tasks_through_the_daemon";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    let server = one_action_scenario(2);
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    host.ok(&["systemctl", "enable", "--now", "sysward-run.timer"]);
    assert_eq!(show(&host, "sysward-run.timer", "ActiveState"), "active");
    let next = show(&host, "sysward-run.timer", "NextElapseUSecRealtime");
    assert!(
        !next.is_empty() && next != "n/a",
        "no next elapse: {next:?}"
    );
    let timers = host.ok(&[
        "systemctl",
        "list-timers",
        "--all",
        "--no-pager",
        "sysward-run.timer",
    ]);
    println!("{timers}");
    let row = timers
        .lines()
        .find(|l| l.contains("sysward-run.timer"))
        .unwrap_or_else(|| panic!("list-timers:\n{timers}"));
    assert!(
        !row.trim_start().starts_with("n/a"),
        "no next elapse: {row}"
    );
    assert!(row.contains("sysward-run.service"), "{row}");

    // What the timer starts, now.
    let t = Instant::now();
    let out = host.run(&["systemctl", "start", "sysward-run.service"]);
    println!(
        "systemctl start sysward-run.service: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let journal = host.ok(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-u",
        "sysward-run.service",
    ]);
    assert!(out.status.success(), "{}\n{journal}", describe(&out));
    assert_eq!(show(&host, "sysward-run.service", "Result"), "success");
    assert_eq!(show(&host, "sysward-run.service", "ExecMainStatus"), "0");
    let summary: serde_json::Value = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .rfind(|v| v["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary in the journal:\n{journal}"));
    assert_eq!(task_status(&summary, "01-kernel.md"), "DONE", "{summary:#}");
    assert_eq!(summary["actions"], 1, "{summary:#}");

    // A member of the sysward group runs the tasks with `sysward run`.
    add_operator(&host);
    let out = sysward_as(
        &host,
        OPERATOR,
        &["run", "--json", "--rerun"],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let summary = summary_of(&out);
    assert_eq!(task_status(&summary, "01-kernel.md"), "DONE", "{summary:#}");
    let events = json_lines(&out);
    assert!(
        events.iter().any(|e| e.to_string().contains("uname")),
        "the action is not in the events: {events:#?}"
    );
    // Someone outside the group is refused by the daemon.
    host.ok(&["useradd", "-m", "swout"]);
    let refused = sysward_as(&host, "swout", &["run", "--json"], Duration::from_secs(30));
    assert!(!refused.status.success(), "{}", describe(&refused));
    // Both sessions are in the broker's audit log, whose chain verifies.
    host.ok(&["sysward", "audit", "verify"]);
    let audit = host.ok(&["sysward", "audit", "show", "--json"]);
    let ends = audit
        .lines()
        .filter(|l| l.contains("\"session_end\""))
        .count();
    assert_eq!(ends, 2, "{audit}");
    assert!(
        server.expectation_failures().is_empty(),
        "{:?}",
        server.expectation_failures()
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

#[test]
fn remove_keeps_configuration_and_state_and_purge_removes_them() {
    let test = "remove_keeps_configuration_and_state_and_purge_removes_them";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    let server = one_action_scenario(1);
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    host.sh_ok("echo '# operator marker' >> /etc/sysward/init.conf");
    host.ok(&["systemctl", "enable", "--now", "sysward-run.timer"]);
    let out = host.run(&["sysward", "run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let audit = host.read("/var/lib/sysward/audit.log").unwrap();
    assert!(!audit.is_empty());

    let out = host.run(&["dpkg", "-r", "sysward"]);
    assert!(out.status.success(), "dpkg -r: {}", describe(&out));
    let mut wrong = Vec::new();
    let exists = |p: &str| host.run(&["test", "-e", p]).status.success();
    for gone in [
        "/usr/bin/sysward",
        "/usr/libexec/sysward/sysward-broker",
        "/usr/libexec/sysward/sysward-agent",
        "/usr/libexec/sysward/sysward-exec",
        "/usr/libexec/sysward/sysward-gateway",
        "/usr/lib/systemd/system/sysward.service",
        "/usr/lib/systemd/system/sysward-run.service",
        "/usr/lib/systemd/system/sysward-run.timer",
        "/usr/share/man/man8/sysward.8.gz",
        "/run/sysward",
        "/etc/systemd/system/multi-user.target.wants/sysward.service",
        "/etc/systemd/system/timers.target.wants/sysward-run.timer",
    ] {
        if exists(gone) {
            wrong.push(format!("dpkg -r left {gone}"));
        }
    }
    for kept in [
        "/etc/sysward/agent.md",
        "/etc/sysward/01-kernel.md",
        "/etc/sysward/secrets",
        "/var/lib/sysward/audit.log",
    ] {
        if !exists(kept) {
            wrong.push(format!("dpkg -r removed {kept}"));
        }
    }
    if !host
        .read("/etc/sysward/init.conf")
        .unwrap_or_default()
        .contains("# operator marker")
    {
        wrong.push("dpkg -r lost the edited init.conf".into());
    }
    if host.read("/var/lib/sysward/audit.log").as_deref() != Some(audit.as_str()) {
        wrong.push("dpkg -r changed the audit log".into());
    }
    for unit in ["sysward.service", "sysward-run.timer"] {
        let state = show(&host, unit, "ActiveState");
        if state == "active" {
            wrong.push(format!("{unit} is still {state} after dpkg -r"));
        }
    }
    // The broker re-executes itself (a scrubbed environment), so its
    // command name is "exe": match the command line (the console's, and the
    // root broker's in /usr/libexec/sysward).
    if host
        .run(&[
            "pgrep",
            "-f",
            "^/usr/(bin/sysward|libexec/sysward/sysward-broker)",
        ])
        .status
        .success()
    {
        wrong.push("a sysward process still runs after dpkg -r".into());
    }
    let status = host.ok(&["dpkg-query", "-W", "-f=${Status}", "sysward"]);
    if status != "deinstall ok config-files" {
        wrong.push(format!("dpkg status after -r: {status:?}"));
    }
    for account in ["sysward-agent", "sysward-model"] {
        if !host.run(&["getent", "passwd", account]).status.success() {
            wrong.push(format!("dpkg -r removed the user {account}"));
        }
    }

    let out = host.run(&["dpkg", "-P", "sysward"]);
    assert!(out.status.success(), "dpkg -P: {}", describe(&out));
    for gone in [
        "/etc/sysward",
        "/var/lib/sysward",
        "/run/sysward",
        "/etc/systemd/system/sysward.service.d",
        "/etc/systemd/system/sysward-run.service.d",
        "/etc/systemd/system/sysward-run.timer.d",
    ] {
        if exists(gone) {
            wrong.push(format!("dpkg -P left {gone}"));
        }
    }
    let backups = host.sh("ls /var/backups/sysward-audit-*.log");
    let backup = String::from_utf8_lossy(&backups.stdout).trim().to_string();
    if backup.lines().count() != 1 {
        wrong.push(format!(
            "purge kept no single audit copy: {}",
            describe(&backups)
        ));
    } else {
        if host.read(&backup).as_deref() != Some(audit.as_str()) {
            wrong.push(format!("{backup} is not the audit log"));
        }
        let mode = host.ok(&["stat", "-c", "%a %U %G", &backup]);
        if mode.trim() != "600 root root" {
            wrong.push(format!("{backup} is {}", mode.trim()));
        }
    }
    for account in ["sysward-agent", "sysward-model"] {
        if !host.run(&["getent", "passwd", account]).status.success() {
            wrong.push(format!(
                "dpkg -P removed the user {account} (kept by design)"
            ));
        }
    }
    if !host.run(&["getent", "group", "sysward"]).status.success() {
        wrong.push("dpkg -P removed the group sysward (kept by design)".into());
    }
    if host
        .run(&["dpkg-query", "-W", "-f=${Status}", "sysward"])
        .status
        .success()
        && host.ok(&["dpkg-query", "-W", "-f=${Status}", "sysward"]) != "unknown ok not-installed"
    {
        wrong.push("dpkg still knows the package after -P".into());
    }
    // list-unit-files exits 1 when nothing matches.
    let units = host.run(&["systemctl", "list-unit-files", "--no-legend", "sysward*"]);
    let units = String::from_utf8_lossy(&units.stdout).into_owned();
    if !units.trim().is_empty() {
        wrong.push(format!("unit files left after -P: {units}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// The scripted model listening in another network namespace (a host's
/// own): it is made and shut down from inside that namespace, since its
/// shutdown connects to its own address to wake its accept loop.
struct ServerIn {
    ns: std::fs::File,
    server: Option<Handle>,
}

fn enter_netns(ns: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid namespace descriptor; it affects the calling thread only.
    unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) == 0 }
}

impl ServerIn {
    fn start(pid: u32, make: impl FnOnce() -> Handle + Send) -> ServerIn {
        // The descriptor keeps the namespace for the shutdown, even when the
        // host is gone first.
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/net")).unwrap();
        let server = std::thread::scope(|s| {
            s.spawn(|| {
                assert!(
                    enter_netns(&ns),
                    "setns: {}",
                    std::io::Error::last_os_error()
                );
                make()
            })
            .join()
            .unwrap()
        });
        ServerIn {
            ns,
            server: Some(server),
        }
    }
}

impl std::ops::Deref for ServerIn {
    type Target = Handle;
    fn deref(&self) -> &Handle {
        self.server.as_ref().unwrap()
    }
}

impl Drop for ServerIn {
    fn drop(&mut self) {
        let server = self.server.take();
        let ns = &self.ns;
        std::thread::scope(|s| {
            s.spawn(move || {
                if enter_netns(ns) {
                    drop(server);
                } else {
                    // Its shutdown could not reach it and would wait forever.
                    std::mem::forget(server);
                }
            });
        });
    }
}

/// A policy that lets ordinary admin work run unattended where the decision
/// table allows it; high-risk requests still wait for a person.
const ADMIN_POLICY: &str = "EXECUTION_MODE=unrestricted
APPROVAL_MODE=permissive
ALLOW_OUTSIDE_PROJECT_READ=true
ALLOW_OUTSIDE_PROJECT_WRITE=true
ALLOW_PACKAGE_INSTALL=true
ALLOW_NETWORK=true
ALLOW_DELETE=true
MAX_STEPS=60
DEFAULT_COMMAND_TIMEOUT=600";

fn tool(name: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":name,"arguments":args}]})
}

/// A scenario that makes the same requests in each of `runs` sessions.
fn repeated(steps: &[serde_json::Value], runs: usize) -> Handle {
    let mut script = Vec::new();
    for _ in 0..runs {
        script.extend(steps.iter().cloned());
        script.push(serde_json::json!({"content":"EXECUTED and VERIFIED.\n\nTASK_STATUS: DONE"}));
    }
    scenario(&serde_json::json!({ "steps": script }).to_string())
}

/// The text of the tool result the model received for `steps[i]` in the
/// session that used steps from `offset` on.
fn result_of(server: &Handle, offset: usize, i: usize) -> String {
    server
        .chat_requests()
        .get(offset + i + 1)
        .and_then(|c| c.messages().last().cloned())
        .map(|m| sysward_scripted_model::message_text(&m))
        .unwrap_or_else(|| format!("no result for step {i}"))
}

/// Runs the tasks as the operator; when the run is BLOCKED on pending
/// approvals, the operator lists and approves them (as a person would, with
/// `sysward approvals` and `sysward approve ID`) and runs again. Returns the
/// approved requests.
fn run_approving(host: &Host, steps: usize) -> (Vec<String>, String) {
    let timeout = Duration::from_secs(900);
    let t = Instant::now();
    let first = sysward_as(host, OPERATOR, &["run", "--json"], timeout);
    println!(
        "first run: {:.1} s, exit {:?}",
        t.elapsed().as_secs_f64(),
        first.status.code()
    );
    let code = first.status.code();
    if code == Some(0) {
        return (Vec::new(), describe(&first));
    }
    assert_eq!(
        code,
        Some(2),
        "neither DONE nor BLOCKED: {}",
        describe(&first)
    );
    let list = sysward_as(
        host,
        OPERATOR,
        &["approvals", "--json"],
        Duration::from_secs(30),
    );
    assert!(list.status.success(), "{}", describe(&list));
    let v: serde_json::Value = serde_json::from_slice(&list.stdout)
        .unwrap_or_else(|e| panic!("sysward approvals --json: {e}: {}", describe(&list)));
    let pending: Vec<&serde_json::Value> = v["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["status"] == "pending")
        .collect();
    assert!(
        !pending.is_empty(),
        "BLOCKED without a pending approval: {v:#}"
    );
    let mut approved = Vec::new();
    for a in pending {
        let id = a["id"].as_str().unwrap();
        let out = sysward_as(host, OPERATOR, &["approve", id], Duration::from_secs(30));
        assert!(
            out.status.success(),
            "sysward approve {id}: {}",
            describe(&out)
        );
        approved.push(a.to_string());
    }
    println!("approved {} requests", approved.len());
    let t = Instant::now();
    let second = sysward_as(host, OPERATOR, &["run", "--json"], timeout);
    println!(
        "second run: {:.1} s, exit {:?}",
        t.elapsed().as_secs_f64(),
        second.status.code()
    );
    let summary = summary_of(&second);
    assert_eq!(
        second.status.code(),
        Some(0),
        "the run after approving is not DONE ({} steps): {summary:#}\n{}",
        steps,
        describe(&second)
    );
    (approved, describe(&second))
}

#[test]
fn approved_admin_work_through_the_daemon_takes_effect_in_the_host() {
    const TOOL_SCRIPT: &str = "#!/bin/sh\nprintf '{\"uid\": %s, \"filesystems\": %s}\\n' \"$(id -u)\" \"$(df -P | wc -l)\"\n";
    let test = "approved_admin_work_through_the_daemon_takes_effect_in_the_host";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    add_operator(&host);
    let conf = "# written by sysward\nmanaged=yes\n";
    let package = "jq";
    let steps = vec![
        tool(
            "write_file",
            serde_json::json!({"path":"/etc/sysward-test.conf","content":conf}),
        ),
        tool(
            "exec",
            serde_json::json!({"command":"useradd","args":["-m","-s","/bin/sh","swtestusr"],"reason":"an account for the test"}),
        ),
        tool(
            "shell",
            serde_json::json!({"command":format!("apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends {package}"),"timeout_seconds":600}),
        ),
        tool(
            "exec",
            serde_json::json!({"command":package,"args":["--version"]}),
        ),
        tool(
            "shell",
            serde_json::json!({"command":format!("DEBIAN_FRONTEND=noninteractive apt-get remove -y -q {package}"),"timeout_seconds":600}),
        ),
        // The installed layout's project tools live in a directory only the
        // broker writes: it writes the tool there, and the tool waits for a
        // person.
        tool(
            "register_tool",
            serde_json::json!({"name":"disk_report","description":"Disk usage.","category":"read-only","risk":"low","script":TOOL_SCRIPT}),
        ),
        // Offered (and run) once a person approved its bytes.
        tool("disk_report", serde_json::json!({})),
        // The policy cannot see through the variable and allows the write;
        // the action's mount namespace holds the tools directory read-only.
        tool(
            "shell",
            serde_json::json!({"command":"f=/var/lib/sysward-tools; echo tampered | tee -a $f/disk_report/run"}),
        ),
    ];
    // A tool an operator put where project tools live in a --root project.
    host.sh_ok("mkdir -p /etc/sysward/tools/uptime_json && printf '%s\\n' '{\"description\":\"Uptime.\",\"executable\":\"run\",\"category\":\"read-only\",\"risk\":\"low\"}' > /etc/sysward/tools/uptime_json/skill.json && printf '#!/bin/sh\\necho {}\\n' > /etc/sysward/tools/uptime_json/run && chmod 0755 /etc/sysward/tools/uptime_json/run");
    let server = repeated(&steps, 2);
    let policy = format!("{ADMIN_POLICY}\nALLOW_SELF_TOOL_CREATION=true");
    configure(
        &host,
        &server,
        &policy,
        &[("01-admin.md", "# Admin\nWrite the test configuration, add the test account, install jq, check it, remove it.\n")],
    );
    let (approved, last_run) = run_approving(&host, steps.len());
    for a in &approved {
        println!("  approved: {a}");
    }
    // The session whose requests ran is the last one.
    let offset = if approved.is_empty() {
        0
    } else {
        steps.len() + 1
    };
    let results: Vec<String> = (0..steps.len())
        .map(|i| result_of(&server, offset, i))
        .collect();
    let ok = |i: usize| results[i].contains("status=\"ok\"");
    let mut failures = Vec::new();
    let mut check = |cond: bool, what: &str, i: usize| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            failures.push(format!(
                "{what}: {}",
                results[i].chars().take(1500).collect::<String>()
            ));
        }
    };
    // Checked from inside the host, not through sysward.
    let written = host.run(&["cat", "/etc/sysward-test.conf"]);
    check(
        ok(0) && written.stdout == conf.as_bytes(),
        "write_file of a new file in /etc",
        0,
    );
    let home = host.run(&["stat", "-c", "%U %F", "/home/swtestusr"]);
    check(
        ok(1)
            && host.run(&["id", "swtestusr"]).status.success()
            && String::from_utf8_lossy(&home.stdout).trim() == "swtestusr directory",
        "useradd -m: the account and its home",
        1,
    );
    check(ok(2), &format!("apt-get install -y {package}"), 2);
    check(
        ok(3) && results[3].contains("jq-"),
        &format!("{package} --version ran the installed program"),
        3,
    );
    let status = host.run(&["dpkg-query", "-W", "-f=${Status}", package]);
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    check(
        ok(4)
            && !status.contains("install ok installed")
            && !host.run(&["test", "-e", "/usr/bin/jq"]).status.success(),
        &format!("apt-get remove -y {package} (status now {status:?})"),
        4,
    );
    let audit = host.run(&["dpkg", "--audit"]);
    check(
        audit.status.success() && audit.stdout.is_empty() && audit.stderr.is_empty(),
        "dpkg --audit prints nothing",
        4,
    );
    let tool_dir = "/var/lib/sysward-tools/disk_report";
    let modes = host.run(&[
        "stat",
        "-c",
        "%a %U",
        tool_dir,
        &format!("{tool_dir}/run"),
        &format!("{tool_dir}/skill.json"),
    ]);
    let script = host.run(&["cat", &format!("{tool_dir}/run")]);
    check(
        ok(5)
            && results[5].contains("approved and offered already")
            && String::from_utf8_lossy(&modes.stdout) == "755 root\n755 root\n644 root\n"
            && script.stdout == TOOL_SCRIPT.as_bytes(),
        "register_tool writes the tool into /var/lib/sysward-tools (0755 run, 0644 skill.json)",
        5,
    );
    let first_session_register = result_of(&server, 0, 5);
    check(
        first_session_register.contains("registered project tool disk_report")
            && first_session_register.contains("sysward approve"),
        "the first registration waits for a person, saying how to approve it",
        5,
    );
    let memoria = host.run(&["cat", "/var/lib/sysward/memoria.md"]);
    check(
        String::from_utf8_lossy(&memoria.stdout)
            .contains("Path: /var/lib/sysward-tools/disk_report/run"),
        "memoria.md's Tools section names where the tool is",
        5,
    );
    check(
        ok(6) && results[6].contains("\"uid\": 0") && results[6].contains("\"filesystems\""),
        "the approved tool is offered and runs, its JSON reaching the model",
        6,
    );
    check(
        !ok(7)
            && results[7].contains("Read-only file system")
            && script.stdout == TOOL_SCRIPT.as_bytes(),
        "an action the policy allowed cannot change the registered tool (the kernel holds it read-only)",
        7,
    );
    let offered = first_chat_body(&server);
    check(
        offered.contains("\"register_tool\"") && !offered.contains("\"uptime_json\""),
        "register_tool is offered; the tool in /etc/sysward/tools is not",
        5,
    );
    check(
        last_run.contains("/etc/sysward/tools is not used in the installed layout"),
        "the operator is told the tool in /etc/sysward/tools belongs in skills/",
        5,
    );
    check(
        !host
            .run(&["sysward", "approvals", "--json"])
            .stdout
            .windows(11)
            .any(|w| w == b"uptime_json"),
        "no approval waits for a tool that cannot run",
        5,
    );
    // With the flag off, register_tool is neither offered nor written, and
    // a call of it anyway is refused and audited.
    let off_server = repeated(
        &[tool(
            "register_tool",
            serde_json::json!({"name":"off_tool","description":"Off.","category":"read-only","risk":"low","script":TOOL_SCRIPT}),
        )],
        1,
    );
    host.sh_ok(&format!(
        "sed -i 's#^API_URL=.*#API_URL={}#' /etc/sysward/init.conf",
        off_server.base_url()
    ));
    host.write(
        "/etc/sysward/agent.md",
        format!("# Test host\nYou administer a test host.\n\n```policy\n{ADMIN_POLICY}\n```\n"),
        0o600,
    );
    // The task was recorded DONE and is unchanged: run it again.
    let off = sysward_as(
        &host,
        OPERATOR,
        &["run", "--rerun", "--json"],
        Duration::from_secs(300),
    );
    let refused = result_of(&off_server, 0, 0);
    let audit_log = host.run(&["cat", "/var/lib/sysward/audit.log"]);
    let audited = String::from_utf8_lossy(&audit_log.stdout)
        .lines()
        .any(|l| l.contains("\"tool_refused\"") && l.contains("off_tool"));
    check(
        refused.contains("status=\"denied\"")
            && refused.contains("ALLOW_SELF_TOOL_CREATION=false")
            && !first_chat_body(&off_server).contains("\"register_tool\"")
            && !host
                .run(&["test", "-e", "/var/lib/sysward-tools/off_tool"])
                .status
                .success()
            && audited,
        &format!(
            "ALLOW_SELF_TOOL_CREATION=false: register_tool is not offered, a call is refused and audited, nothing is written (result: {}; run: {})",
            refused.chars().take(600).collect::<String>(),
            describe(&off).chars().take(300).collect::<String>()
        ),
        5,
    );
    let verify = host.run(&["sysward", "audit", "verify"]);
    check(verify.status.success(), "the audit chain verifies", 0);
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// A sysctl setting applied with `sysctl --system` changes the host's
/// kernel settings as the host sees them. The host gets its own network
/// namespace (its net.* settings are its own and writable there); the
/// scripted model listens inside it.
#[test]
fn an_approved_sysctl_setting_takes_effect_in_the_host() {
    let test = "an_approved_sysctl_setting_takes_effect_in_the_host";
    let Some(host) = host_with_package(
        test,
        Options {
            nspawn_args: vec!["--private-network".into()],
            ..Options::default()
        },
    ) else {
        return;
    };
    add_operator(&host);
    let key = "net.ipv4.conf.all.log_martians";
    let proc_path = "/proc/sys/net/ipv4/conf/all/log_martians";
    let machine_before = std::fs::read_to_string(proc_path).unwrap();
    assert_eq!(host.ok(&["cat", proc_path]).trim(), "0");
    let steps = vec![
        tool(
            "write_file",
            serde_json::json!({"path":"/etc/sysctl.d/99-sysward-test.conf","content":format!("{key} = 1\n")}),
        ),
        tool(
            "exec",
            serde_json::json!({"command":"sysctl","args":["--system"],"reason":"apply the setting"}),
        ),
    ];
    let server = ServerIn::start(host.pid1(), || repeated(&steps, 2));
    configure(
        &host,
        &server,
        ADMIN_POLICY,
        &[(
            "01-sysctl.md",
            "# Sysctl\nLog martian packets: a setting in /etc/sysctl.d, applied.\n",
        )],
    );
    let (approved, _) = run_approving(&host, steps.len());
    let offset = if approved.is_empty() {
        0
    } else {
        steps.len() + 1
    };
    let applied = result_of(&server, offset, 1);
    println!(
        "sysctl --system gave: {}",
        applied.chars().take(3000).collect::<String>()
    );
    assert_eq!(
        host.read("/etc/sysctl.d/99-sysward-test.conf").as_deref(),
        Some(format!("{key} = 1\n").as_str())
    );
    assert!(
        applied.contains("Applying /etc/sysctl.d/99-sysward-test.conf")
            && applied.contains(&format!("{key} = 1")),
        "{applied}"
    );
    // In a container only the network settings are the container's own:
    // the defaults Debian ships for kernel.* and fs.* cannot be set there
    // (a read-only /proc/sys, as nspawn mounts it), so `sysctl --system`
    // exits 1 whoever runs it. Anything else it reports is a failure.
    let stderr = applied.split("stderr:").nth(1).unwrap_or("");
    let unexpected: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("</tool_result"))
        // A refused key outside net.* is the container's limit.
        .filter(|l| !l.starts_with("sysctl: permission denied on key \"") || l.contains("\"net."))
        .collect();
    assert!(
        unexpected.is_empty(),
        "sysctl --system reported: {unexpected:?}\n{applied}"
    );
    assert_eq!(
        host.ok(&["sysctl", "-n", key]).trim(),
        "1",
        "the setting did not reach the host: {applied}"
    );
    assert_eq!(
        std::fs::read_to_string(proc_path).unwrap(),
        machine_before,
        "this machine's own setting changed"
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// Inside a container whose manager filters system calls (nspawn's own
/// seccomp filter), the broker cannot confine the gateway: the session fails
/// closed and says which layer is refused and why, and so does doctor.
#[test]
fn a_container_filtering_landlock_is_named_as_the_cause() {
    let Some(host) = host_with_package(
        "a_container_filtering_landlock_is_named_as_the_cause",
        Options {
            nspawn_seccomp: true,
            ..Options::default()
        },
    ) else {
        return;
    };
    let server = one_action_scenario(1);
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    let out = host.run(&["sysward", "run", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let summary = summary_of(&out);
    let error = summary["error"].as_str().unwrap_or("");
    println!("session error: {error}");
    for needle in [
        "cannot start the model gateway",
        "landlock",
        "refused with EPERM by a seccomp filter",
        "SYSTEMD_SECCOMP=0",
    ] {
        assert!(error.contains(needle), "{needle:?} not in: {error}");
    }
    assert_eq!(summary["actions"], 0, "{summary:#}");
    // Through the host's systemd, so that doctor runs under the container's
    // filter as the daemon does (a command entered with nsenter is not).
    let doctor = host.run(&["systemd-run", "--wait", "--pipe", "-q", "sysward", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout).into_owned();
    assert!(!doctor.status.success(), "{}", describe(&doctor));
    assert!(
        text.lines()
            .any(|l| l.contains("landlock") && l.contains("SYSTEMD_SECCOMP=0")),
        "doctor does not name the cause:\n{text}"
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// Waits until a process whose command line matches `pattern` runs in the
/// host.
fn wait_process(host: &Host, pattern: &str) {
    let start = Instant::now();
    while !host.run(&["pgrep", "-f", pattern]).status.success() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no process {pattern:?} in the host"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `systemctl stop sysward` during a session: the running action ends with
/// the broker (systemd does not track it: it runs in the broker's own action
/// cgroup), and the operator's client is told the daemon closed the session.
#[test]
fn stopping_the_service_ends_the_running_action() {
    let Some(host) = host_with_package(
        "stopping_the_service_ends_the_running_action",
        Options::default(),
    ) else {
        return;
    };
    let call = r#"{"tool_calls":[{"name":"shell","arguments":{"command":"touch /tmp/sysward-marker && sleep 97"}}]}"#;
    let server = scenario(&format!(r#"{{"steps":[{call}]}}"#));
    configure(
        &host,
        &server,
        ADMIN_POLICY,
        &[("01-wait.md", "# Wait\nWait.\n")],
    );
    add_operator(&host);
    let mut cmd = host.command(&[
        "setpriv",
        "--reuid",
        OPERATOR,
        "--regid",
        OPERATOR,
        "--init-groups",
        "--",
        "/usr/bin/sysward",
        "run",
        "--json",
    ]);
    let client = cmd.spawn().unwrap();
    wait_process(&host, "^sleep 97");
    let t = Instant::now();
    host.ok(&["systemctl", "stop", "sysward.service"]);
    println!("systemctl stop: {:.2} s", t.elapsed().as_secs_f64());
    assert_eq!(show(&host, "sysward.service", "ActiveState"), "inactive");
    assert_eq!(show(&host, "sysward.service", "Result"), "success");
    let start = Instant::now();
    while host.run(&["pgrep", "-f", "^sleep 97"]).status.success() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the action outlived the stopped service"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = wait_output(client, Duration::from_secs(30));
    assert!(!out.status.success(), "{}", describe(&out));
    // A clean stop: the client is told why, and the record is complete.
    assert!(
        describe(&out).contains("the broker is stopping"),
        "{}",
        describe(&out)
    );
    let audit = host.read("/var/lib/sysward/audit.log").unwrap();
    assert!(audit.contains("\"session_end\""), "{audit}");
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// One of sysward's own paths replaced while an action runs: the session
/// ends with exit 5, the daemon exits 5, and systemd leaves it stopped
/// (RestartPreventExitStatus=5) for a person to look.
#[test]
fn a_replaced_sysward_binary_stops_the_daemon_for_good() {
    let Some(host) = host_with_package(
        "a_replaced_sysward_binary_stops_the_daemon_for_good",
        Options::default(),
    ) else {
        return;
    };
    let call = r#"{"tool_calls":[{"name":"shell","arguments":{"command":"touch /tmp/sysward-marker && sleep 3"}}]}"#;
    let server = scenario(&format!(
        r#"{{"steps":[{call},{{"content":"done\nTASK_STATUS: DONE"}}]}}"#
    ));
    configure(
        &host,
        &server,
        ADMIN_POLICY,
        &[("01-wait.md", "# Wait\nWait.\n")],
    );
    let client = host.command(&["sysward", "run", "--json"]).spawn().unwrap();
    wait_process(&host, "^sleep 3");
    // What a careless deployment does: the same bytes, another inode.
    host.sh_ok(
        "cp -p /usr/libexec/sysward/sysward-exec /root/exec.copy && mv /root/exec.copy /usr/libexec/sysward/sysward-exec",
    );
    let out = wait_output(client, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(5), "{}", describe(&out));
    let summary = summary_of(&out);
    let error = summary["error"].as_str().unwrap_or("");
    assert!(
        error.contains("its own paths changed")
            && error.contains("/usr/libexec/sysward/sysward-exec"),
        "{summary:#}"
    );
    // Past RestartSec=5s: still down, never restarted.
    let start = Instant::now();
    while show(&host, "sysward.service", "ActiveState") != "failed" {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the daemon did not exit"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(show(&host, "sysward.service", "ActiveState"), "failed");
    assert_eq!(show(&host, "sysward.service", "ExecMainStatus"), "5");
    assert_eq!(show(&host, "sysward.service", "NRestarts"), "0");
    let journal = host.ok(&[
        "journalctl",
        "--no-pager",
        "-o",
        "cat",
        "-u",
        "sysward.service",
    ]);
    assert!(
        journal.contains("the broker stopped: its own paths changed"),
        "{journal}"
    );
    let audit = host.ok(&["sysward", "audit", "show", "--json"]);
    assert!(audit.contains("broker_stopped"), "{audit}");
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// The audit anchor goes to the journal with every session end: a rewrite of
/// the log and its anchor that is consistent (so the chain alone calls it
/// intact) disagrees with what journald kept.
#[test]
fn the_journal_mirror_finds_a_consistent_rewrite_of_the_log() {
    let test = "the_journal_mirror_finds_a_consistent_rewrite_of_the_log";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    let server = one_action_scenario(1);
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    let out = host.run(&["sysward", "run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    host.ok(&["journalctl", "--sync"]);
    // The broker's own log is in the journal: the session, who ran it, how
    // it ended.
    let journal = host.ok(&["journalctl", "--no-pager", "-o", "cat", "-u", "sysward"]);
    assert!(journal.contains("started by uid 0 (root)"), "{journal}");
    assert!(journal.contains("ended: exit 0"), "{journal}");
    let agrees = host.ok(&["sysward", "audit", "verify", "--journal"]);
    assert!(agrees.contains("agrees with"), "{agrees}");
    // Root rewrites what the action was, chains every record again and
    // re-anchors: the files agree with each other.
    let log = host.path("/var/lib/sysward/audit.log");
    let mut records: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let tool = records
        .iter_mut()
        .find(|r| r["event"]["event"] == "tool")
        .expect("a tool record");
    tool["event"]["request"] = serde_json::json!("uname -a");
    rechain(
        &log,
        &host.path("/var/lib/sysward/.agent/audit.head"),
        records,
    );
    host.ok(&["sysward", "audit", "verify"]);
    let found = host.run(&["sysward", "audit", "verify", "--journal"]);
    assert_eq!(found.status.code(), Some(1), "{}", describe(&found));
    assert!(
        describe(&found).contains("MISMATCH"),
        "{}",
        describe(&found)
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// `systemctl restart sysward` while a group member's session waits on a
/// slow model: the client exits non-zero with one plain line saying the
/// daemon stopped and to run again (no channel or decode error), and the
/// restarted daemon (a new MainPID) serves the next session.
#[test]
fn restarting_the_service_mid_session_tells_the_client_and_serves_again() {
    let Some(host) = host_with_package(
        "restarting_the_service_mid_session_tells_the_client_and_serves_again",
        Options::default(),
    ) else {
        return;
    };
    let call = r#"{"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]}"#;
    let done = r#"{"content":"EXECUTED: uname -r. VERIFIED: printed.\n\nTASK_STATUS: DONE"}"#;
    // The first reply comes only after the restart (the broker has long
    // stopped waiting for it by then); the second session gets the rest.
    let server = scenario(&format!(
        r#"{{"steps":[{{"delay_ms":90000,"content":"too late"}},{call},{done}]}}"#
    ));
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    add_operator(&host);
    let before = show(&host, "sysward.service", "MainPID");
    let client = host
        .command(&[
            "setpriv",
            "--reuid",
            OPERATOR,
            "--regid",
            OPERATOR,
            "--init-groups",
            "--",
            "/usr/bin/sysward",
            "run",
        ])
        .spawn()
        .unwrap();
    // Once the session's first chat request is with the (slow) model.
    let start = Instant::now();
    while server.chat_requests().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the session never asked the model"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = Instant::now();
    host.ok(&["systemctl", "restart", "sysward.service"]);
    println!("systemctl restart: {:.2} s", t.elapsed().as_secs_f64());
    let out = wait_output(client, Duration::from_secs(60));
    let said = describe(&out);
    // As `sysward run --root` exits after SIGTERM.
    assert_eq!(out.status.code(), Some(143), "{said}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // One line says both what happened and what to do.
    assert!(
        stdout.lines().chain(stderr.lines()).any(|l| {
            (l.contains("the broker is stopping") || l.contains("the sysward daemon stopped"))
                && (l.contains("run it again") || l.contains("run the command again"))
        }),
        "no line says the daemon stopped and to run again: {said}"
    );
    assert!(!said.contains("cancelled by the operator"), "{said}");
    for raw in ["peer closed", "undecodable", "socket error", "Broken pipe"] {
        assert!(
            !said.contains(raw),
            "a raw channel error reached the operator: {said}"
        );
    }
    wait_active(&host, "sysward.service");
    let after = show(&host, "sysward.service", "MainPID");
    assert_ne!(before, after, "the daemon was not restarted");
    let out = sysward_as(
        &host,
        OPERATOR,
        &["run", "--json"],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(task_status(&summary_of(&out), "01-kernel.md"), "DONE");
    host.ok(&["sysward", "audit", "verify"]);
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// An upgrade with `dpkg -i` of a newer version (this package repacked
/// with its version bumped, as a rebuild would be): the operator's edited
/// init.conf and agent.md (conffiles) are kept as they are, and the daemon
/// is restarted on the new package (a new MainPID, active) and serves with
/// the kept configuration.
#[test]
fn upgrading_keeps_the_edited_configuration_and_restarts_the_daemon() {
    let Some(host) = host_with_package(
        "upgrading_keeps_the_edited_configuration_and_restarts_the_daemon",
        Options::default(),
    ) else {
        return;
    };
    let server = one_action_scenario(1);
    configure(
        &host,
        &server,
        "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true",
        &[READ_ONLY_TASK],
    );
    host.sh_ok("echo '# operator marker' >> /etc/sysward/init.conf");
    let init_before = host.read("/etc/sysward/init.conf").unwrap();
    let agent_before = host.read("/etc/sysward/agent.md").unwrap();
    let old = host.ok(&["dpkg-query", "-W", "-f=${Version}", "sysward"]);
    let new = format!("{}+upgrade1", old.trim());
    host.sh_ok(&format!(
        "rm -rf /root/repack && dpkg-deb -R /root/sysward.deb /root/repack \
         && sed -i 's/^Version: .*/Version: {new}/' /root/repack/DEBIAN/control \
         && dpkg-deb --build /root/repack /root/sysward-new.deb >/dev/null"
    ));
    host.ok(&["dpkg", "--compare-versions", &new, "gt", old.trim()]);
    let pid_before = show(&host, "sysward.service", "MainPID");

    let out = host.run(&["dpkg", "-i", "/root/sysward-new.deb"]);
    assert!(
        out.status.success(),
        "dpkg -i (upgrade): {}",
        describe(&out)
    );
    assert_eq!(
        host.ok(&["dpkg-query", "-W", "-f=${Version}", "sysward"])
            .trim(),
        new
    );
    assert_eq!(host.read("/etc/sysward/init.conf").unwrap(), init_before);
    assert_eq!(host.read("/etc/sysward/agent.md").unwrap(), agent_before);
    assert!(
        !host
            .run(&["test", "-e", "/etc/sysward/init.conf.dpkg-new"])
            .status
            .success()
            && !host
                .run(&["test", "-e", "/etc/sysward/init.conf.dpkg-dist"])
                .status
                .success(),
        "dpkg left a new init.conf beside the kept one"
    );
    let mode = host.ok(&[
        "stat",
        "-c",
        "%U:%G %a",
        "/etc/sysward/init.conf",
        "/etc/sysward",
    ]);
    assert_eq!(mode, "root:root 600\nroot:root 700\n");
    wait_active(&host, "sysward.service");
    let pid_after = show(&host, "sysward.service", "MainPID");
    assert_ne!(
        pid_before, pid_after,
        "the upgrade did not restart the daemon"
    );
    // The restarted daemon runs the operator's kept configuration.
    let out = host.run(&["sysward", "run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(task_status(&summary_of(&out), "01-kernel.md"), "DONE");
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}
