//! The broker survives hostile agents: oversized, random, lying, wrong-version
//! and out-of-state frames each end only their own session, with a clear
//! message, and the next session (with the real agent) runs normally. These run
//! the broker's session code in this test process with a hostile agent binary
//! in place of `sysward-agent` (a composition only tests make; the shipped
//! broker always starts its sibling agent).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use sysward_broker::project::Layout;
use sysward_broker::session::{run_session, SessionRequest};
use sysward_ipc::agent::SessionMode;
use sysward_tests::*;

fn evil_binary(mode: &str) -> PathBuf {
    let src = bin_dir().join("sysward-test-evil-agent");
    assert!(
        src.exists(),
        "build the test binaries first (cargo build --workspace --bins)"
    );
    let dir = std::path::Path::new("/var/tmp/sysward-tests/evil-bin");
    std::fs::create_dir_all(dir).unwrap();
    let dst = dir.join(format!("evil-{mode}"));
    let _ = std::fs::remove_file(&dst);
    std::fs::copy(&src, &dst).unwrap();
    dst
}

#[test]
fn hostile_frames_end_only_their_session() {
    if !require_root("hostile_frames_end_only_their_session") {
        return;
    }
    ensure_accounts();
    let server = scenario(r#"{"steps":[{"repeat":20,"content":"All good.\nTASK_STATUS: DONE"}]}"#);
    let p = TestProject::new("faults");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay done. No action is needed.\n");
    // The broker's sibling binaries are found next to the test binary's dir.
    std::env::set_current_dir(&p.dir).unwrap();
    let layout = Layout::standalone(&p.dir).unwrap();
    let mut ctx =
        sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    let real_agent = ctx.agent_path.clone();
    let op = Arc::new(Recorder::new());
    let cases = [
        ("oversized", "exceeds"),
        ("huge", "truncated"),
        ("random", "invalid frame"),
        ("lying-length", "undecodable"),
        ("version", "version mismatch"),
        ("out-of-state", "not permitted"),
        ("double-hello", "not permitted"),
        ("wrong-build", "version mismatch"),
    ];
    for (mode, expected) in cases {
        ctx.agent_path = evil_binary(mode);
        let summary = run_session(
            &ctx,
            SessionRequest {
                mode: SessionMode::Tasks { rerun: true },
                dry_run: false,
                operator: "test".into(),
            },
            op.as_ref(),
        );
        let error = summary.error.clone().unwrap_or_default();
        assert_eq!(summary.exit_code, 1, "{mode}: {summary:?}");
        assert!(
            error.contains(expected),
            "{mode}: expected {expected:?} in {error:?}"
        );
        // …and the very next session with the real agent works.
        ctx.agent_path = real_agent.clone();
        let ok = run_session(
            &ctx,
            SessionRequest {
                mode: SessionMode::Tasks { rerun: true },
                dry_run: false,
                operator: "test".into(),
            },
            op.as_ref(),
        );
        assert_eq!(ok.exit_code, 0, "after {mode}: {ok:?}");
    }
    // Every failure was audited.
    let audit = audit_records(&p);
    let errors = audit
        .iter()
        .filter(|r| r["event"]["event"] == "session_error")
        .count();
    assert!(
        errors >= cases.len() - 2,
        "only {errors} session errors audited"
    );
}

/// A classification that never ends and one that allocates without bound
/// (the test helper `sysward-test-evil-classifier` in place of
/// `sysward-classify`) each cost their request one denial and the broker one
/// helper restart, audited; the session goes on, and the next ordinary
/// command in it is decided and runs.
#[test]
fn runaway_classifications_cost_one_denial_each_not_the_session() {
    if !require_root("runaway_classifications_cost_one_denial_each_not_the_session") {
        return;
    }
    ensure_accounts();
    let shell = |script: &str| serde_json::json!({"tool_calls": [{"name": "shell", "arguments": {"command": script}}]});
    let server = scenario(
        &serde_json::json!({"steps": [
            shell("sysward-test-classifier: loop"),
            shell("sysward-test-classifier: allocate"),
            shell("echo still-decided"),
            {"content": "done\nTASK_STATUS: DONE"}
        ]})
        .to_string(),
    );
    let p = TestProject::new("classifier-runaway");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nRun three commands.\n");
    let layout = Layout::standalone(&p.dir).unwrap();
    let mut ctx =
        sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    ctx.classifier = Arc::new(
        sysward_broker::classifier::ClassifierPool::start(
            &bin_dir().join("sysward-test-evil-classifier"),
            1,
        )
        .unwrap(),
    );
    let op = Recorder::new();
    let summary = run_session(
        &ctx,
        SessionRequest {
            mode: SessionMode::Tasks { rerun: true },
            dry_run: false,
            operator: "test".into(),
        },
        &op,
    );
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    // What the model saw after each tool call.
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
    assert!(
        results[1].contains("denied by policy: classification did not finish within 1500 ms"),
        "{}",
        results[1]
    );
    assert!(
        results[2].contains("denied by policy: classification did not finish"),
        "{}",
        results[2]
    );
    assert!(results[3].contains("still-decided"), "{}", results[3]);
    assert!(!results[3].contains("denied"), "{}", results[3]);
    let audit = audit_records(&p);
    let killed: Vec<&serde_json::Value> = audit
        .iter()
        .filter(|r| r["event"]["event"] == "classifier_killed")
        .collect();
    assert_eq!(killed.len(), 2, "{killed:#?}");
    assert!(killed.iter().all(|r| r["event"]["restarted"] == true));
    assert!(
        killed[0]["event"]["what"]
            .as_str()
            .unwrap()
            .contains("killed after 1500 ms"),
        "{killed:#?}"
    );
    assert!(
        killed[1]["event"]["what"]
            .as_str()
            .unwrap()
            .contains("signal 6"),
        "{killed:#?}"
    );
    let sources: Vec<&str> = audit
        .iter()
        .filter(|r| r["event"]["event"] == "tool")
        .filter_map(|r| r["event"]["source"].as_str())
        .collect();
    assert!(
        sources.starts_with(&["classifier time limit", "classifier failure"]),
        "{sources:?}"
    );
    // One helper is ready again; the killed ones are gone (reaped).
    assert_eq!(ctx.classifier.idle_pids().len(), 1);
    for r in &killed {
        let pid = r["event"]["pid"].as_u64().unwrap();
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }
}
