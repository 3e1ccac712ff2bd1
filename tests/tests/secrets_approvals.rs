//! Issue 6 over the real process tree: exfiltration attempts fail or come back
//! masked; an unattended ask becomes a pending approval that a person decides
//! with `sysward approve`, after which the next run proceeds exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use sysward_tests::*;

const VALUE: &str = "S3cr3t-Value-4e1f9c";

fn tool_events(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "tool" || r["event"]["event"] == "tool_refused")
        .map(|r| r["event"].clone())
        .collect()
}

#[test]
fn secrets_cannot_be_exfiltrated_and_come_back_masked() {
    if !require_root("secrets_cannot_be_exfiltrated") {
        return;
    }
    ensure_accounts();
    let calls = [
        r#"{"name":"shell","arguments":{"command":"echo {{secret:db}}"}}"#,
        r#"{"name":"exec","arguments":{"command":"echo","args":["x{{secret:db}}"]}}"#,
        r#"{"name":"exec","arguments":{"command":"curl","args":["--password={{secret:db}}","http://127.0.0.1:9/"]}}"#,
        r#"{"name":"exec","arguments":{"command":"curl","args":["{{secret:db}}"]}}"#,
        r#"{"name":"exec","arguments":{"command":"printf","args":["%s|%s","{{secret:db}}","{{secret:nosuch}}"]}}"#,
        r#"{"name":"exec","arguments":{"command":"printf","args":["value=%s\n","{{secret:db}}"]}}"#,
        r#"{"name":"read_file","arguments":{"path":"secrets/db"}}"#,
        r#"{"name":"shell","arguments":{"command":"cat secrets/db; cat /proc/$PPID/environ; base64 secrets/db"}}"#,
    ];
    let steps: Vec<String> = calls
        .iter()
        .map(|c| format!(r#"{{"tool_calls":[{c}]}}"#))
        .collect();
    let server = scenario(&format!(
        r#"{{"never_contains":["{VALUE}"],"steps":[{},{{"content":"done\nTASK_STATUS: DONE"}}]}}"#,
        steps.join(",")
    ));
    let p = TestProject::new("secrets");
    p.init_conf(&server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
        )
        .write("01-t.md", "# T\nUse the db secret.\n");
    let dir = p.path("secrets");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    p.write("secrets/db", &format!("{VALUE}\n"));
    p.write("secrets/db.scope", "arg /usr/bin/printf\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(90),
    );
    assert!(
        server.expectation_failures().is_empty(),
        "the secret value reached the model: {}",
        describe(&out)
    );
    for r in server.requests() {
        assert!(!r.contains(VALUE), "secret in a model request");
    }
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(VALUE), "secret in the audit log");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains(VALUE), "secret on the operator's console");

    let events = tool_events(&p);
    let find = |needle: &str| {
        events
            .iter()
            .find(|e| e.to_string().contains(needle))
            .unwrap_or_else(|| panic!("no audit record for {needle}: {events:#?}"))
            .clone()
    };
    // refused before any decision: embedded, in a shell script, unknown
    for needle in [
        "echo {{secret:db}}",
        "x{{secret:db}}",
        "--password={{secret:db}}",
        "secret:nosuch",
    ] {
        let e = find(needle);
        assert!(
            e["status"].is_null() || e["event"] == "tool_refused",
            "{needle} ran: {e}"
        );
    }
    // out of scope: curl may not receive a secret scoped to printf
    let curl: Vec<_> = events
        .iter()
        .filter(|e| e.to_string().contains("curl"))
        .collect();
    assert!(
        curl.iter().all(|e| e["exit_code"].is_null()),
        "curl ran with the secret: {curl:?}"
    );
    // in scope: it ran, and its output came back masked
    let printf = find("value=%s");
    assert_eq!(printf["status"], "ok", "{printf}");
    assert!(printf["redactions"].as_u64().unwrap_or(0) >= 1, "{printf}");
    let chats = server.chat_requests();
    assert!(
        chats.iter().any(|r| r.contains("value={{secret:db}}")),
        "masked output not seen by the model"
    );
    // the secrets directory is never readable, not even for a privileged action
    let read = find("read_file");
    assert!(
        read["decision"] == "deny" || read["status"] == "error",
        "{read}"
    );
}

#[test]
fn an_unattended_ask_waits_for_a_person_then_runs_exactly_once() {
    if !require_root("an_unattended_ask_waits_for_a_person") {
        return;
    }
    ensure_accounts();
    // An existing file the action empties: whether it ran shows in its size.
    let marker = format!("/var/tmp/sysward-approval-marker-{}", std::process::id());
    let arm = || std::fs::write(&marker, "armed").unwrap();
    let ran = || {
        std::fs::metadata(&marker)
            .map(|m| m.len() == 0)
            .unwrap_or(false)
    };
    arm();
    // One tool call and one final answer per run, three runs.
    let call = format!(
        r#"{{"tool_calls":[{{"name":"exec","arguments":{{"command":"truncate","args":["-s","0","{marker}"],"reason":"mark"}}}}]}}"#
    );
    let done = r#"{"content":"marked\nTASK_STATUS: DONE"}"#;
    let server = scenario(&format!(
        r#"{{"steps":[{call},{done},{call},{done},{call},{done}]}}"#
    ));
    let p = TestProject::new("approvals");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=strict\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true")
        .write("01-t.md", "# T\nCreate the marker.\n");
    let root = p.dir.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--root", root, "--json"];
        args.extend_from_slice(extra);
        run_sysward(&args, Duration::from_secs(60))
    };
    // 1. unattended: the ask becomes a pending approval, the task is BLOCKED
    let first = run(&[]);
    assert_eq!(first.status.code(), Some(2), "{}", describe(&first));
    assert!(!ran(), "ran without approval");
    let list = run_sysward(
        &["approvals", "--root", root, "--json"],
        Duration::from_secs(10),
    );
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let pending: Vec<_> = v["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["status"] == "pending")
        .collect();
    assert_eq!(pending.len(), 1, "{v:#}");
    let id = pending[0]["id"].as_str().unwrap().to_string();
    assert!(pending[0].to_string().contains("truncate"), "{v:#}");
    // 2. a person approves
    let ok = run_sysward(&["approve", &id, "--root", root], Duration::from_secs(10));
    assert!(ok.status.success(), "{}", describe(&ok));
    // 3. the next run makes the identical request: it proceeds
    let second = run(&[]);
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    assert!(ran(), "the approved action did not run");
    arm();
    // 4. exactly once: a further identical request needs a new approval
    let third = run(&["--rerun"]);
    assert_eq!(third.status.code(), Some(2), "{}", describe(&third));
    assert!(!ran(), "an approval was used twice");
    let _ = std::fs::remove_file(&marker);
    let verify = run_sysward(
        &["audit", "verify", "--root", root],
        Duration::from_secs(10),
    );
    assert!(verify.status.success(), "{}", describe(&verify));
}

#[test]
fn ask_secret_takes_a_value_from_the_operator_that_the_model_never_sees() {
    if !require_root("ask_secret_takes_a_value") {
        return;
    }
    ensure_accounts();
    let typed = "Typed-Secret-8c21d0";
    let server = ask_secret_scenario(typed);
    let p = TestProject::new("ask-secret");
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
    );
    let child = std::process::Command::new(sysward())
        .args(["cli", "--root", p.dir.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = answer_secret_dialogue(child, &server, typed);
    assert!(
        server.expectation_failures().is_empty(),
        "the typed secret reached the model: {}",
        describe(&out)
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(typed),
        "echoed on the console"
    );
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(typed), "secret in the audit log");
    let events = tool_events(&p);
    let printf = events
        .iter()
        .find(|e| e.to_string().contains("got="))
        .expect("printf ran");
    assert_eq!(printf["status"], "ok", "{printf}");
    assert!(printf["redactions"].as_u64().unwrap_or(0) >= 1, "{printf}");
    assert!(server
        .chat_requests()
        .iter()
        .any(|r| r.contains("got={{secret:db}}")));
    assert!(audit.contains("\"ask_secret\"") && audit.contains("\"stored\""));
}
