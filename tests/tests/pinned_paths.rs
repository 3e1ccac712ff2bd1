//! The broker keeps its own directories and files open from start-up and,
//! after every action that can write, checks that their paths still name the
//! same inodes: a directory swapped in mid-session stops the broker (audited,
//! nothing further runs), while the same session with nothing swapped runs
//! every action (as root, real process tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use sysward_broker::project::Layout;
use sysward_broker::session::exit;
use sysward_tests::*;

/// Two writes in the project's `work/` directory, then DONE.
fn two_writes(p: &TestProject) -> (Handle, std::path::PathBuf, std::path::PathBuf) {
    std::fs::create_dir_all(p.path("work")).unwrap();
    let first = p.path("work").join("first");
    let second = p.path("work").join("second");
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"touch","args":["{}"]}}}}]}},
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"touch","args":["{}"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        first.display(),
        second.display()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=60")
        .write("01-touch.md", "# Touch\nMake two markers.\n");
    (server, first, second)
}

fn context(p: &TestProject) -> sysward_broker::session::BrokerContext {
    sysward_broker::context::broker_context_with_binaries(
        Layout::standalone(&p.dir).unwrap(),
        &bin_dir(),
    )
    .unwrap()
}

fn stop_records(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "broker_stopped")
        .collect()
}

#[test]
fn with_nothing_moved_every_write_runs() {
    if !require_root("with_nothing_moved_every_write_runs") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("pinned-control");
    let (server, first, second) = two_writes(&p);
    let ctx = context(&p);
    let summary = run_tasks(&ctx, &Recorder::new());
    assert_eq!(summary.exit_code, exit::DONE, "{summary:?}");
    assert!(
        first.exists() && second.exists(),
        "{:?}",
        server
            .chat_requests()
            .iter()
            .map(|c| c.message_text())
            .collect::<Vec<_>>()
    );
    assert!(stop_records(&p).is_empty());
    // The broker's state was written through its held directories.
    assert!(p.path(".agent/tasks.json").exists());
}

#[test]
fn a_state_directory_swapped_during_an_action_stops_the_broker() {
    if !require_root("a_state_directory_swapped_during_an_action_stops_the_broker") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("pinned-swap");
    let (server, first, second) = two_writes(&p);
    let ctx = context(&p);
    // While the first action is decided, someone replaces the approvals
    // directory with one of their own (what a pinned ancestor and a
    // read-only bind keep actions from doing).
    let approvals = p.path(".agent/approvals");
    let moved = p.path(".agent/approvals.moved");
    let swapped = Arc::new(AtomicBool::new(false));
    let op = {
        let (approvals, moved, swapped) = (approvals.clone(), moved.clone(), Arc::clone(&swapped));
        Recorder::on_decided(move || {
            if !swapped.swap(true, Ordering::SeqCst) {
                std::fs::rename(&approvals, &moved).unwrap();
                std::fs::create_dir(&approvals).unwrap();
            }
        })
    };
    let summary = run_tasks(&ctx, &op);
    assert_eq!(summary.exit_code, exit::STOPPED, "{summary:?}");
    let error = summary.error.clone().unwrap_or_default();
    assert!(error.contains("approvals directory"), "{error}");
    assert!(first.exists(), "the first action did not run");
    assert!(!second.exists(), "an action ran after the broker stopped");
    // The agent got the result with the reason; no model call followed.
    assert_eq!(server.chat_requests().len(), 1);
    let stops = stop_records(&p);
    assert_eq!(stops.len(), 1, "{stops:?}");
    assert!(
        stops[0]["event"]["changes"][0]
            .as_str()
            .unwrap()
            .contains(".agent/approvals"),
        "{}",
        stops[0]
    );
    // Every later session of this broker is refused before it starts.
    let again = run_tasks(&ctx, &Recorder::new());
    assert_eq!(again.exit_code, exit::STOPPED, "{again:?}");
    assert_eq!(stop_records(&p).len(), 1);
    drop(ctx);
    // Restored by a person, a new broker runs the task to the end.
    std::fs::remove_dir(&approvals).unwrap();
    std::fs::rename(&moved, &approvals).unwrap();
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"touch","args":["{}"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        second.display()
    ));
    p.init_conf(&server, "");
    let ctx = context(&p);
    let summary = run_tasks(&ctx, &Recorder::new());
    assert_eq!(summary.exit_code, exit::DONE, "{summary:?}");
    assert!(second.exists());
}
