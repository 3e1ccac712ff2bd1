//! A complete record, over the real process tree: `remember` and the
//! memoria.md change it makes (with its diff, shown to the operator at the
//! end), calls the agent refused itself (unknown tool, malformed), the
//! model's stated reason for an action and a task's `CONFLICT:` line are all
//! in the audit log; a write's result to the model carries its diff and the
//! rollback instruction. Beside each: the legitimate call that still runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

fn events(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect()
}

#[test]
fn memory_refusals_reasons_conflicts_and_write_diffs_are_recorded() {
    if !require_root("memory_refusals_reasons_conflicts_and_write_diffs_are_recorded") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
        {"content":"CONFLICT: 01 asks to keep db01 on 10.0.0.4, this task moves it",
         "tool_calls":[{"name":"remember","arguments":{"section":"Hosts","entry":"db01","facts":["IP: 10.0.0.5"]}}]},
        {"tool_calls":[{"name":"frobnicate","arguments":{"x":1}}]},
        {"tool_calls":[{"name":"exec","arguments":{"command":"true","bogus_field":1}}]},
        {"tool_calls":[{"name":"exec","arguments":{"command":"true","reason":"prove the host answers"}}]},
        {"tool_calls":[{"name":"write_file","arguments":{"path":"notes.txt","content":"first line\n","reason":"start the notes"}}]},
        {"tool_calls":[{"name":"write_file","arguments":{"path":"notes.txt","content":"first line\nsecond line\n"}}]},
        {"expect":{"role_of_last":"tool"},"content":"done\nTASK_STATUS: DONE"}
    ]}"#,
    );
    let p = TestProject::new("record");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive")
        .write("01-t.md", "# T\nMove db01 and keep notes.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let ev = events(&p);
    let find = |kind: &str, needle: &str| {
        ev.iter()
            .find(|e| e["event"] == kind && e.to_string().contains(needle))
            .unwrap_or_else(|| panic!("no {kind} record with {needle}: {ev:#?}"))
            .clone()
    };

    // remember: the call and the memoria.md change with its diff.
    let tool = find("memory_tool", "remember");
    assert_eq!(tool["status"], "ok", "{tool}");
    assert!(
        tool["arguments"].as_str().unwrap().contains("10.0.0.5"),
        "{tool}"
    );
    let change = find("memory_changed", "10.0.0.5");
    let diff = change["diff"].as_str().unwrap();
    assert!(diff.contains("+- IP: 10.0.0.5"), "{diff}");
    assert!(diff.contains("+### db01"), "{diff}");
    // Shown to the operator at the end of the session.
    let shown = json_lines(&out);
    assert!(
        shown.iter().any(|l| l["event"] == "info"
            && l["text"]
                .as_str()
                .unwrap_or("")
                .contains("memoria.md was changed")
            && l["text"].as_str().unwrap_or("").contains("+- IP: 10.0.0.5")),
        "{}",
        describe(&out)
    );

    // Refused by the agent itself.
    let unknown = find("agent_refused", "frobnicate");
    assert_eq!(unknown["kind"], "unknown tool", "{unknown}");
    let malformed = find("agent_refused", "bogus_field");
    assert_eq!(malformed["kind"], "malformed", "{malformed}");
    assert_eq!(malformed["tool"], "exec", "{malformed}");

    // The model's reason, beside the policy's.
    let records = audit_records(&p);
    let exec = tool_event(&records, "true");
    assert_eq!(exec["model_reason"], "prove the host answers", "{exec}");
    assert_eq!(exec["status"], "ok", "{exec}");
    // Where the action's time went, stage by stage, adding up to no more
    // than the whole.
    let stages = exec["stages_us"].as_object().expect("stages_us");
    let mut names: Vec<&str> = stages.keys().map(String::as_str).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "authorize",
            "cgroup",
            "clone",
            "confine",
            "decide",
            "drain",
            "exec",
            "gate",
            "plan",
            "prepare",
            "result",
            "rules",
            "run",
            "spawn",
            "spec",
            "start_record",
            "start_record_wait"
        ],
        "{exec}"
    );
    let total: u64 = stages.values().map(|v| v.as_u64().unwrap()).sum();
    let whole = exec["duration_ms"].as_u64().unwrap();
    assert!(
        total <= (whole + 1) * 1000,
        "{total} µs of stages in {whole} ms: {exec}"
    );
    for measured in ["run", "confine", "exec"] {
        assert!(stages[measured].as_u64().unwrap() > 0, "{measured}: {exec}");
    }

    // The conflict the model stated while working.
    let conflict = find("conflict", "10.0.0.4");
    assert_eq!(conflict["task"], "01-t.md", "{conflict}");
    let end = find("task_end", "01-t.md");
    assert!(end["conflicts"].to_string().contains("10.0.0.4"), "{end}");

    // The write's result to the model: its diff and how to undo it.
    let chats = server.chat_requests();
    let last = chats
        .last()
        .unwrap()
        .body
        .as_ref()
        .map(|b| b.to_string())
        .unwrap_or_default();
    assert!(last.contains("rollback: rm "), "creation: {last}");
    assert!(last.contains("+second line"), "diff of the change: {last}");
    assert!(last.contains("rollback: patch -R"), "{last}");
    let write = tool_event(&records, "notes.txt");
    assert_eq!(write["model_reason"], "start the notes", "{write}");
}
