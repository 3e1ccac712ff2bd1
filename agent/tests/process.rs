//! The real `sysward-agent` binary, confined by `sysward_sandbox::confine_agent`
//! (uid drop, empty network namespace, Landlock, allow-list seccomp), driven
//! over fd 3 by the fake broker. Proves the harness needs nothing the sandbox
//! forbids (no thread, no file, no socket). Needs root; skipped otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::*;
use serde_json::json;
use sysward_ipc::agent::*;

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

#[test]
fn confined_agent_runs_a_task_end_to_end() {
    if !is_root() {
        eprintln!("skipped: needs root to confine the agent");
        return;
    }
    let mut s = setup(
        SessionMode::Tasks { rerun: false },
        vec![task("01.md", "check"), task("02.md", "remember")],
    );
    s.model.context_size = None;
    let summary: String = sysward_agent::context::SECTIONS
        .iter()
        .map(|x| format!("{x}: n\n"))
        .collect();
    let mut n = 0;
    let model: ModelFn = Box::new(move |req, body| {
        match req.endpoint {
            sysward_ipc::model::ModelEndpoint::Models => {
                return http(200, json!({"data":[{"id":"qwen3","max_model_len":5000}]}))
            }
            sysward_ipc::model::ModelEndpoint::Props => return http(404, json!({})),
            _ => {}
        }
        if body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .starts_with("You compress")
        {
            return text(&summary);
        }
        n += 1;
        match n {
            1 => http(503, json!({"error":{"message":"overloaded"}})), // one real 1 s backoff sleep
            2..=5 => calls(&[(
                &format!("c{n}"),
                "exec",
                json!({"command":"journalctl","args":["-n", n.to_string()]}),
            )]),
            6 => text("checked\nTASK_STATUS: DONE"),
            7 => calls(&[(
                "m1",
                "remember",
                json!({"section":"Hosts","entry":"web01","facts":["Role: web"]}),
            )]),
            _ => text("remembered\nTASK_STATUS: DONE"),
        }
    });
    let mut f = Fake::new(s, model);
    f.tool = Box::new(|r| ok(r, &"a log line of the host\n".repeat(150)));
    let (status, rec) = f.run_process(NOBODY, NOBODY);
    assert!(status.success(), "{status:?} {:?}", rec.kinds());
    let o = rec.outcomes();
    assert_eq!(o.len(), 2);
    assert!(o.iter().all(|o| o.status == TaskStatus::Done), "{o:?}");
    assert!(
        rec.context()["compactions"].as_u64().unwrap() >= 1,
        "compaction ran confined"
    );
    assert!(rec.memory().contains("- Role: web"));
    assert_eq!(rec.kinds().last(), Some(&"Shutdown"));
    let peak = rec.agent_peak_kib.unwrap();
    eprintln!("agent peak resident memory: {peak} KiB");
    assert!(peak <= 25 << 10, "agent peak RSS {peak} KiB > 25 MiB");
}

#[test]
fn confined_agent_cli_dialogue() {
    if !is_root() {
        return;
    }
    let mut f = Fake::new(
        setup(SessionMode::Cli, vec![]),
        scripted(vec![text("hello back")]),
    );
    for l in ["/help", "hi", "/status", "/journal", "/quit"] {
        f.inputs.push_back(OperatorInput::Line(l.into()));
    }
    let (status, rec) = f.run_process(NOBODY, NOBODY);
    assert!(status.success());
    assert!(rec
        .events()
        .contains(&AgentEvent::Answer("hello back".into())));
    assert_eq!(rec.kinds().iter().filter(|k| **k == "NextInput").count(), 5);
}

#[test]
fn the_binary_refuses_bad_arguments_and_root() {
    use std::process::Command;
    let bin = env!("CARGO_BIN_EXE_sysward-agent");
    for args in [
        vec![],
        vec!["--uid", "1000"],
        vec!["--uid", "0", "--gid", "0"],
        vec!["--uid", "x", "--gid", "1"],
        vec!["--uid", "1", "--uid", "1"],
    ] {
        let out = Command::new(bin).args(&args).env_clear().output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}
