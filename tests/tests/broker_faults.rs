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
