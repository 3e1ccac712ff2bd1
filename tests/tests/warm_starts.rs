//! Warm starts through the broker (as root, real process tree): a command
//! confined like the one before it starts in a child the runner confined
//! ahead (a template) and must be confined exactly as a cold one. The same
//! session runs each probe cold, then warm: the legitimate read and write
//! take effect on the host both times, the reads and writes of sysward's
//! secrets fail both times. The same session with warm starts turned off
//! runs every command cold, as the control.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use sysward_broker::project::Layout;
use sysward_broker::session::exit;
use sysward_tests::*;

const SECRET: &str = "warm-start-secret-6f1c";

/// A script the catalog does not know (the "unknown" profile: root with
/// CAP_DAC_READ_SEARCH, writes only in its scratch directory): a legitimate
/// write in the scratch directory, then attempts on the secrets directory.
const PROBE: &str = r#"#!/bin/sh
echo "legit $2" > "$1/legit-$2" && echo "WROTE-LEGIT-$2"
echo evil > "$3/evil-$2" 2>/dev/null && echo "WROTE-SECRETS-$2"
cat "$3/probe" 2>/dev/null && echo "READ-SECRET-$2"
exit 0
"#;

struct Session {
    project: TestProject,
    server: Handle,
    work: std::path::PathBuf,
    secrets: std::path::PathBuf,
}

fn session(name: &str) -> Session {
    let p = TestProject::new(name);
    // The actions' scratch directory (the layout's tmp), which the profile
    // grants.
    let work = p.path(".agent/tmp");
    std::fs::create_dir_all(&work).unwrap();
    let secrets = p.path("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::write(secrets.join("probe"), SECRET).unwrap();
    std::fs::set_permissions(
        secrets.join("probe"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let script = p.path("probe.sh");
    std::fs::write(&script, PROBE).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let call = |command: &str, args: &[&str]| serde_json::json!({"tool_calls": [{"name": "exec", "arguments": {"command": command, "args": args}}]});
    let (w, s) = (work.display().to_string(), secrets.display().to_string());
    let steps = serde_json::json!({"steps": [
        call("cat", &["/etc/hostname"]),
        call("cat", &["/etc/hostname"]),
        call(&script.display().to_string(), &[&w, "1", &s]),
        call(&script.display().to_string(), &[&w, "2", &s]),
        {"content": "done\nTASK_STATUS: DONE"}
    ]});
    let server = scenario(&steps.to_string());
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-probe.md", "# Probe\nRun the probes.\n");
    Session {
        project: p,
        server,
        work,
        secrets,
    }
}

/// The tool records, in order: (request, warm started, exit code).
fn tool_records(p: &TestProject) -> Vec<(String, bool, Option<i64>)> {
    audit_records(p)
        .iter()
        .map(|r| &r["event"])
        .filter(|e| e["event"] == "tool")
        .map(|e| {
            (
                e["request"].as_str().unwrap_or("").to_string(),
                e["warm_start"].is_object(),
                e["exit_code"].as_i64(),
            )
        })
        .collect()
}

/// Runs the session with warm starts on or off and checks what the host and
/// the model saw; returns the tool records.
fn run_and_check(s: &Session, warm: bool) -> Vec<(String, bool, Option<i64>)> {
    let ctx = sysward_broker::context::broker_context_with_binaries(
        Layout::standalone(&s.project.dir).unwrap(),
        &bin_dir(),
    )
    .unwrap();
    ctx.runner.set_warm_starts(warm);
    let summary = run_tasks(&ctx, &Recorder::new());
    let said: Vec<String> = s
        .server
        .chat_requests()
        .iter()
        .map(|c| c.message_text())
        .collect();
    let said = said.join("\n");
    assert_eq!(summary.exit_code, exit::DONE, "{summary:?}\n{said}");
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    if !hostname.trim().is_empty() {
        assert!(
            said.contains(hostname.trim()),
            "the read went wrong: {said}"
        );
    }
    for n in ["1", "2"] {
        // The legitimate write, as the host sees it.
        let legit = std::fs::read_to_string(s.work.join(format!("legit-{n}"))).unwrap_or_default();
        assert_eq!(
            legit.trim(),
            format!("legit {n}"),
            "{said}\n{:#?}",
            audit_records(&s.project)
                .iter()
                .filter(|r| r["event"]["event"] == "tool")
                .collect::<Vec<_>>()
        );
        assert!(said.contains(&format!("WROTE-LEGIT-{n}")), "{said}");
        // The attacks.
        assert!(
            !s.secrets.join(format!("evil-{n}")).exists(),
            "probe {n} wrote into the secrets directory"
        );
        assert!(!said.contains(&format!("WROTE-SECRETS-{n}")), "{said}");
        assert!(!said.contains(&format!("READ-SECRET-{n}")), "{said}");
    }
    assert!(
        !said.contains(SECRET),
        "the secret reached the model: {said}"
    );
    let tools = tool_records(&s.project);
    assert_eq!(tools.len(), 4, "{tools:?}");
    assert!(tools.iter().all(|t| t.2 == Some(0)), "{tools:?}");
    tools
}

#[test]
fn a_command_confined_like_the_last_starts_warm_and_stays_confined() {
    if !require_root("a_command_confined_like_the_last_starts_warm_and_stays_confined") {
        return;
    }
    ensure_accounts();
    let s = session("warm-starts");
    let tools = run_and_check(&s, true);
    // The first of each pair confines a child after its request; the
    // second runs in the template warmed beside the first.
    let warm: Vec<bool> = tools.iter().map(|t| t.1).collect();
    assert_eq!(warm, [false, true, false, true], "{tools:?}");
}

#[test]
fn with_warm_starts_off_the_same_session_runs_cold() {
    if !require_root("with_warm_starts_off_the_same_session_runs_cold") {
        return;
    }
    ensure_accounts();
    let s = session("cold-starts");
    let tools = run_and_check(&s, false);
    assert!(tools.iter().all(|t| !t.1), "{tools:?}");
}
