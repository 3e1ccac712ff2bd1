#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::*;
use serde_json::json;
use sysward_ipc::agent::*;

#[test]
fn task_runs_a_tool_and_finishes_done() {
    let mut f = Fake::new(
        setup(SessionMode::Tasks { rerun: false }, vec![task("01-nginx.md", "Check nginx.")]),
        scripted(vec![
            calls(&[("call_1", "exec", json!({"command":"systemctl","args":["status","nginx"]}))]),
            text("<think>hmm</think>nginx is active.\nVERIFIED: systemctl says active.\nTASK_STATUS: DONE"),
        ]),
    );
    f.tool = Box::new(|r| ok(r, "● nginx.service - active (running)\n"));
    let (end, rec) = f.run();
    assert_eq!(end.exit_code, 0, "{end:?}");
    let kinds = rec.kinds();
    assert_eq!(&kinds[..3], &["Hello", "LoadState", "LoadState"]);
    assert_eq!(kinds.last(), Some(&"Shutdown"));
    let tools = rec.tools();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].tool, "exec");
    assert_eq!(tools[0].call_id, "call_1");
    let out = rec.outcomes();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TaskStatus::Done);
    assert!(!out[0].summary.contains("think"));
    // The tool result went back as a native tool message, fenced as untrusted data.
    let second = &rec.chats[1]["messages"];
    let tool_msg = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool_msg["tool_call_id"], "call_1");
    assert!(tool_msg["content"]
        .as_str()
        .unwrap()
        .contains("UNTRUSTED DATA"));
    assert!(rec.chats[0]["tools"].as_array().unwrap().len() >= 19);
    let ctx = rec.context();
    assert_eq!(ctx["tasks"]["01-nginx.md"]["status"], "DONE");
    // Tool start/end events with the operator's one-line summary.
    assert!(rec.events().iter().any(|e| matches!(e, AgentEvent::ToolStart { summary, .. } if summary == "exec: systemctl status nginx")));
}
