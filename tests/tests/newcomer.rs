//! A newcomer's path: `sysward init DIR`, point init.conf at a model server,
//! `sysward doctor --json`, run the example task; `sysward status` says what
//! happened. An unreadable task file is skipped by name while the others run
//! (as root, real tree, scripted model).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

#[test]
fn init_doctor_and_a_first_task() {
    if !require_root("init_doctor_and_a_first_task") {
        return;
    }
    ensure_accounts();
    let dir = std::env::temp_dir().join(format!("sysward-newcomer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let d = dir.to_str().unwrap();
    let init = run_sysward(&["init", d], Duration::from_secs(20));
    assert!(init.status.success(), "{}", describe(&init));
    for f in ["init.conf", "agent.md", "01-health-check.md"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    // Never overwrites.
    std::fs::write(
        dir.join("agent.md"),
        "# mine\n\n```policy\nEXECUTION_MODE=guarded\n```\n",
    )
    .unwrap();
    let again = run_sysward(&["init", d], Duration::from_secs(20));
    assert!(describe(&again).contains("kept"), "{}", describe(&again));
    assert!(std::fs::read_to_string(dir.join("agent.md"))
        .unwrap()
        .starts_with("# mine"));

    // The newcomer edits API_URL and MODEL, as the comments say.
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uptime"}}]},
          {"content":"| item | state |\n| uptime | fine |\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let conf = std::fs::read_to_string(dir.join("init.conf")).unwrap();
    let conf: String = conf
        .lines()
        .map(|l| {
            if l.starts_with("API_URL=") {
                format!("API_URL={}", server.base_url())
            } else if l.starts_with("MODEL=") {
                "MODEL=scripted-model".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("init.conf"), conf + "\n").unwrap();
    let doctor = run_sysward(&["doctor", "--root", d, "--json"], Duration::from_secs(30));
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}): {}", describe(&doctor)));
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .unwrap_or_else(|| panic!("no {name} row: {report}"))
            .clone()
    };
    assert_eq!(check("configuration")["ok"], true, "{report}");
    // Every binary a session starts is found beside the console.
    let binaries = check("binaries");
    assert!(
        binaries["ok"] == true
            && binaries["state"]
                .as_str()
                .is_some_and(|s| s.contains("classifier and network executor")),
        "{report}"
    );
    // An unreadable task beside the example: skipped by name, the rest runs.
    std::fs::write(dir.join("02-broken.md"), [0xffu8, 0xfe, 0x00, 0x41]).unwrap();
    let run = run_sysward(&["run", "--root", d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(said.contains("01-health-check.md: DONE"), "{said}");
    assert!(said.contains("02-broken.md skipped"), "{said}");
    let status = run_sysward(&["status", "--root", d], Duration::from_secs(20));
    let shown = describe(&status);
    assert!(
        shown.contains("01-health-check.md") && shown.contains("DONE"),
        "{shown}"
    );
    assert!(shown.contains("chain intact"), "{shown}");
}

/// The uid of an account, from `id -u`.
fn uid_of(name: &str) -> u32 {
    let out = std::process::Command::new("id")
        .args(["-u", name])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn doctor_json(d: &str) -> serde_json::Value {
    let doctor = run_sysward(&["doctor", "--root", d, "--json"], Duration::from_secs(30));
    serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}): {}", describe(&doctor)))
}

fn check(report: &serde_json::Value, name: &str) -> (bool, String) {
    let row = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} row: {report}"));
    (
        row["ok"].as_bool().unwrap(),
        row["state"].as_str().unwrap().to_string(),
    )
}

/// As sshd's StrictModes: a project file or a directory above it that
/// another user owns, or that group or others may write, is refused by
/// `run` naming it and the fix, and flagged by `doctor` (both rows); put
/// right, both pass and the task runs. The project lives under /var/tmp
/// (root's, sticky), which is fine.
#[test]
fn a_project_another_user_can_change_is_refused_until_fixed() {
    use std::os::unix::fs::PermissionsExt;
    if !require_root("a_project_another_user_can_change_is_refused_until_fixed") {
        return;
    }
    ensure_accounts();
    let user = test_user("sysward-t-owner", &[]);
    let uid = uid_of(user.name());
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uptime"}}]},
          {"content":"uptime: fine\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("strict-modes");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-uptime.md", "# Uptime\nShow the uptime with `uptime`.\n");
    let d = p.dir.to_str().unwrap();
    let agent_md = p.path("agent.md");
    let shown = agent_md.display().to_string();

    std::os::unix::fs::chown(&agent_md, Some(uid), None).unwrap();
    let run = run_sysward(&["run", "--root", d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "{shown} is owned by uid {uid} ({}), not root",
            user.name()
        )) && said.contains(&format!("chown root:root {shown}; chmod go-w {shown}")),
        "{said}"
    );
    let report = doctor_json(d);
    for row in ["configuration", "file modes"] {
        let (ok, state) = check(&report, row);
        assert!(!ok && state.contains(&shown), "{row}: {state}");
    }
    assert_eq!(report["ok"], false);
    std::os::unix::fs::chown(&agent_md, Some(0), None).unwrap();

    // A task file its group may write: the whole run is refused, not just
    // that task (whoever wrote it may have written the others).
    let task = p.path("01-uptime.md");
    std::fs::set_permissions(&task, std::fs::Permissions::from_mode(0o620)).unwrap();
    let run = run_sysward(&["run", "--root", d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "{} is writable by its group (mode 0620)",
            task.display()
        )),
        "{said}"
    );
    let (ok, state) = check(&doctor_json(d), "file modes");
    assert!(!ok && state.contains("01-uptime.md"), "{state}");
    std::fs::set_permissions(&task, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A directory above the project owned by that user: it could swap the
    // project for another.
    let nested = TestProject::new("strict-modes-parent");
    let inner = nested.dir.join("project");
    std::fs::create_dir(&inner).unwrap();
    for f in ["init.conf", "agent.md", "01-uptime.md"] {
        std::fs::copy(p.path(f), inner.join(f)).unwrap();
    }
    std::os::unix::fs::chown(&nested.dir, Some(uid), None).unwrap();
    let inner_d = inner.to_str().unwrap();
    let run = run_sysward(&["run", "--root", inner_d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("{} is owned by uid {uid}", nested.dir.display())),
        "{said}"
    );
    let (ok, state) = check(&doctor_json(inner_d), "file modes");
    assert!(
        !ok && state.contains(&nested.dir.display().to_string()),
        "{state}"
    );
    std::os::unix::fs::chown(&nested.dir, Some(0), None).unwrap();

    // Put right: doctor and run agree again.
    let report = doctor_json(d);
    for row in ["configuration", "file modes"] {
        let (ok, state) = check(&report, row);
        assert!(ok, "{row}: {state}");
    }
    let run = run_sysward(&["run", "--root", d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(said.contains("01-uptime.md: DONE"), "{said}");
}

/// `doctor` run by a user who may not read root's project says "cannot read
/// X as uid N", never that X is missing: both for a private (0700)
/// directory, where even a file's existence is hidden, and for a 0600 file
/// in a directory anyone may list.
#[test]
fn doctor_as_another_user_says_what_it_cannot_read() {
    use std::os::unix::fs::PermissionsExt;
    if !require_root("doctor_as_another_user_says_what_it_cannot_read") {
        return;
    }
    let user = test_user("sysward-t-reader", &[]);
    let uid = uid_of(user.name());
    // Reachable by that user: a 0755 directory of root's under /var/tmp.
    let base = std::path::PathBuf::from(format!(
        "/var/tmp/sysward-doctor-uid-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&base);
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(base.clone());
    for (dir_mode, name) in [(0o700, "private"), (0o755, "listable")] {
        let dir = base.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        for f in ["init.conf", "agent.md"] {
            std::fs::write(dir.join(f), "API_URL=http://127.0.0.1:9/v1\nMODEL=m\n").unwrap();
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
        let child = std::process::Command::new("setpriv")
            .args([
                "--reuid",
                user.name(),
                "--regid",
                user.name(),
                "--clear-groups",
                "--",
            ])
            .arg(sysward())
            .args(["doctor", "--root", dir.to_str().unwrap(), "--json"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(30));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", describe(&out)));
        let (ok, state) = check(&report, "configuration");
        let init = dir.join("init.conf");
        assert!(!ok, "{name}: {state}");
        assert!(
            state.contains(&format!("cannot read {} as uid {uid}", init.display())),
            "{name}: {state}"
        );
        assert!(!state.contains("not found"), "{name}: {state}");
        // In the private directory even the modes cannot be checked; in
        // the listable one they can, and they are right.
        let (ok, state) = check(&report, "file modes");
        if dir_mode == 0o700 {
            assert!(
                !ok && state.contains(&format!("as uid {uid}")),
                "{name}: {state}"
            );
        } else {
            assert!(ok, "{name}: {state}");
        }
    }
}
