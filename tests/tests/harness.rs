//! Issue 5 over the real process tree: text-protocol fallback, malformed tool
//! calls, step budgets, and a multi-step task that compacts (small
//! CONTEXT_SIZE), meets a denial, resumes from contexto.mem after a restart,
//! ends DONE, is skipped next time and runs again once edited.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

fn shipped(name: &str) -> Handle {
    let path = format!(
        "{}/../scripted-model/scenarios/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    ScriptedServer::start(Scenario::from_file(&path).unwrap()).unwrap()
}

fn run_json(p: &TestProject, extra: &[&str]) -> (std::process::Output, serde_json::Value) {
    let mut args = vec!["run", "--root", p.dir.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = run_sysward(&args, Duration::from_secs(120));
    let summary = json_lines(&out).pop().unwrap_or_default();
    (out, summary)
}

fn executed(p: &TestProject) -> Vec<String> {
    audit_records(p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "tool" && r["event"]["status"].is_string())
        .map(|r| r["event"]["request"].as_str().unwrap_or("").to_string())
        .collect()
}

const POLICY: &str = "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true";

#[test]
fn text_protocol_fallback_when_the_server_rejects_tools() {
    if !require_root("text_protocol_fallback") {
        return;
    }
    ensure_accounts();
    let server = shipped("text-protocol");
    let p = TestProject::new("textproto");
    p.init_conf(&server, "")
        .agent_md(POLICY)
        .write("01-t.md", "# T\nLook at the system.\n");
    let (out, summary) = run_json(&p, &[]);
    assert_eq!(summary["tasks"][0]["status"], "DONE", "{}", describe(&out));
    let ran = executed(&p);
    assert_eq!(ran.len(), 2, "{ran:?}");
    assert_eq!(ran[0], "system_info");
    assert!(ran[1].starts_with("uptime"), "{ran:?}");
    assert!(server.expectation_failures().is_empty());
}

#[test]
fn a_malformed_tool_call_is_returned_to_the_model_never_run() {
    if !require_root("a_malformed_tool_call") {
        return;
    }
    ensure_accounts();
    let server = shipped("malformed-tool-call");
    let p = TestProject::new("malformed");
    p.init_conf(&server, "")
        .agent_md(POLICY)
        .write("01-t.md", "# T\nUptime.\n");
    let (out, summary) = run_json(&p, &[]);
    assert_eq!(summary["tasks"][0]["status"], "DONE", "{}", describe(&out));
    assert_eq!(
        executed(&p),
        vec!["uptime -p".to_string()],
        "only the corrected call runs"
    );
    let chats = server.chat_requests();
    assert!(
        chats[1].message_text().to_lowercase().contains("malformed")
            || chats[1].message_text().contains("JSON")
    );
}

#[test]
fn an_exhausted_step_budget_is_incomplete_never_done() {
    if !require_root("an_exhausted_step_budget") {
        return;
    }
    ensure_accounts();
    let server = shipped("budget-exhaustion");
    let p = TestProject::new("budget");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true\nMAX_STEPS=5")
        .write("01-t.md", "# T\nProbe.\n");
    let (out, summary) = run_json(&p, &[]);
    assert_eq!(
        summary["tasks"][0]["status"],
        "INCOMPLETE",
        "{}",
        describe(&out)
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        server.chat_requests().len() <= 5,
        "more model calls than MAX_STEPS"
    );
}

#[test]
fn a_task_compacts_meets_a_denial_resumes_after_restart_and_is_then_skipped() {
    if !require_root("a_task_meets_a_denial_and_resumes") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"flavor":"vllm","context_size":8192,"steps":[
          {"usage":{"prompt_tokens":3500},"tool_calls":[{"name":"exec","arguments":{"command":"seq","args":["1","2500"]}}]},
          {"expect":{"any_message_contains":["LESSONS_LEARNED"]},"usage":{"prompt_tokens":2000},"content":"OBJECTIVE: Check the disks (task 01-disk.md).\nCURRENT_STATE: seq ran. [scripted-summary-7f3a]\nCOMPLETED_TASKS: none\nPENDING_TASKS: 01-disk.md: report.\nIMPORTANT_FACTS: none\nSYSTEM_STATE: Debian.\nFILES_CHANGED: none\nCOMMANDS_OF_IMPORTANCE: seq\nERRORS: none\nDECISIONS: read-only\nCREDENTIAL_REFERENCES: none\nHOSTS: localhost\nSERVICES: none\nLESSONS_LEARNED: none"},
          {"tool_calls":[{"name":"exec","arguments":{"command":"rm","args":["-rf","/var/log/journal"]}}]},
          {"error":{"status":400,"body":{"error":{"message":"scripted: bad request to stop the first run","type":"invalid_request_error"}}}},
          {"expect":{"any_message_contains":["LESSONS_LEARNED"]},"usage":{"prompt_tokens":2000},"content":"OBJECTIVE: Check the disks (task 01-disk.md).\nCURRENT_STATE: seq ran. [scripted-summary-7f3a]\nCOMPLETED_TASKS: none\nPENDING_TASKS: 01-disk.md: report.\nIMPORTANT_FACTS: none\nSYSTEM_STATE: Debian.\nFILES_CHANGED: none\nCOMMANDS_OF_IMPORTANCE: seq\nERRORS: none\nDECISIONS: read-only\nCREDENTIAL_REFERENCES: none\nHOSTS: localhost\nSERVICES: none\nLESSONS_LEARNED: none"},
          {"expect":{"any_message_contains":["scripted-summary-7f3a"]},"content":"EXECUTED: seq (previous session).\nVERIFIED: from the previous session.\nTASK_STATUS: DONE"},
          {"expect":{"any_message_contains":["LESSONS_LEARNED"]},"usage":{"prompt_tokens":2000},"content":"OBJECTIVE: Check the disks (task 01-disk.md).\nCURRENT_STATE: seq ran. [scripted-summary-7f3a]\nCOMPLETED_TASKS: none\nPENDING_TASKS: 01-disk.md: report.\nIMPORTANT_FACTS: none\nSYSTEM_STATE: Debian.\nFILES_CHANGED: none\nCOMMANDS_OF_IMPORTANCE: seq\nERRORS: none\nDECISIONS: read-only\nCREDENTIAL_REFERENCES: none\nHOSTS: localhost\nSERVICES: none\nLESSONS_LEARNED: none"},
          {"tool_calls":[{"name":"exec","arguments":{"command":"df","args":["-h"]}}]},
          {"expect":{"role_of_last":"tool"},"content":"EXECUTED: df -h.\nVERIFIED: its output.\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("resume");
    // Native tools: the scripted usage figures are not a real tokenizer's,
    // so auto's check for a server that drops tools would spend a step.
    p.init_conf(&server, "CONTEXT_SIZE=8192\nTOOL_CALLING=native")
        .agent_md(POLICY)
        .write(
            "01-disk.md",
            "# Disk\nCheck the disks; free space if you can.\n",
        );
    // 1. a tool, a denial, then a model error ends the run (state saved)
    let (first, s1) = run_json(&p, &[]);
    assert_eq!(s1["tasks"][0]["status"], "ERROR", "{}", describe(&first));
    let audit = audit_records(&p);
    let denied = audit
        .iter()
        .any(|r| r["event"]["event"] == "tool" && r["event"]["decision"] == "deny");
    assert!(denied, "the rm was not denied");
    let ctx = std::fs::read_to_string(p.path("contexto.mem")).expect("contexto.mem saved");
    assert!(
        ctx.contains("denied by policy"),
        "the session's messages were not saved"
    );
    // 2. a restart resumes from contexto.mem (the model sees the previous
    //    session's messages) and ends DONE
    let (second, s2) = run_json(&p, &[]);
    assert_eq!(s2["tasks"][0]["status"], "DONE", "{}", describe(&second));
    assert!(
        server.expectation_failures().is_empty(),
        "{:?}",
        server.expectation_failures()
    );
    // 3. DONE and unchanged: skipped, no model call
    let before = server.chat_requests().len();
    let (third, s3) = run_json(&p, &[]);
    assert_eq!(s3["tasks"][0]["status"], "SKIPPED", "{}", describe(&third));
    assert_eq!(server.chat_requests().len(), before);
    // 4. edited: runs again (the previous session's long output is compacted
    //    first: it no longer fits in 20 % of the small context)
    p.write("01-disk.md", "# Disk\nCheck the disks again.\n");
    let (fourth, s4) = run_json(&p, &[]);
    assert_eq!(s4["tasks"][0]["status"], "DONE", "{}", describe(&fourth));
    assert!(
        server.chat_requests().len() > before,
        "the edited task made no model call"
    );
}

#[test]
fn a_model_error_ends_with_its_reason_in_the_summary_and_the_audit() {
    if !require_root("a_model_error_ends_with_its_reason_in_the_summary_and_the_audit") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[{"error":{"status":400,"body":{"error":{"message":"scripted: refused for the test","type":"invalid_request_error"}}}}]}"#,
    );
    let p = TestProject::new("end-reason");
    p.init_conf(&server, "")
        .agent_md(POLICY)
        .write("01-t.md", "# T\nReport the uptime.\n");
    let (out, s) = run_json(&p, &[]);
    assert_eq!(s["tasks"][0]["status"], "ERROR", "{}", describe(&out));
    assert_eq!(s["tasks"][0]["steps"], 1, "{}", describe(&out));
    assert!(
        s["error"]
            .as_str()
            .unwrap_or("")
            .contains("scripted: refused for the test"),
        "{}",
        describe(&out)
    );
    let end = audit_records(&p)
        .into_iter()
        .find(|r| r["event"]["event"] == "session_end")
        .unwrap();
    assert!(
        end["event"]["error"]
            .as_str()
            .unwrap_or("")
            .contains("scripted: refused for the test"),
        "{end}"
    );
}
