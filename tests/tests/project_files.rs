//! Project files that are not regular files are refused at once, naming the
//! file, instead of hanging the root broker in `open()`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};
use sysward_tests::*;

#[test]
fn a_fifo_in_place_of_a_project_file_is_refused_not_waited_on() {
    if !require_root("a_fifo_in_place_of_a_project_file_is_refused_not_waited_on") {
        return;
    }
    ensure_accounts();
    let server =
        scenario(r#"{"steps":[{"repeat":4,"content":"Nothing to run.\nTASK_STATUS: DONE"}]}"#);
    let p = TestProject::new("fifo");
    p.init_conf(&server, "")
        .write("01-t.md", "# T\nSay hello. No action is needed.\n");
    let root = p.dir.to_str().unwrap();
    for name in ["agent.md", "contexto.mem"] {
        // The legitimate project first (agent.md present), then the FIFO.
        p.agent_md("EXECUTION_MODE=guarded");
        let _ = std::fs::remove_file(p.path(name));
        let ok = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(p.path(name))
            .status()
            .unwrap();
        assert!(ok.success());
        let started = Instant::now();
        let out = run_sysward(&["run", "--root", root, "--rerun"], Duration::from_secs(30));
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{name}: {}",
            describe(&out)
        );
        if name == "agent.md" {
            assert!(!out.status.success(), "{}", describe(&out));
            let err = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                err.contains("agent.md") && err.contains("not a regular file"),
                "{}",
                describe(&out)
            );
        } else {
            // A state file that is not a regular file reads as absent: the
            // session runs (and replaces it when it saves).
            assert!(out.status.success(), "{name}: {}", describe(&out));
        }
        let _ = std::fs::remove_file(p.path(name));
    }
    // The legitimate twin: with regular files the same project runs.
    p.agent_md("EXECUTION_MODE=guarded");
    let out = run_sysward(&["run", "--root", root, "--rerun"], Duration::from_secs(60));
    assert!(out.status.success(), "{}", describe(&out));
}
