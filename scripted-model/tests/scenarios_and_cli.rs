//! The shipped scenarios, scenario validation, and the binary's CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use sysward_testdir::RemoveOnDrop;

use common::*;
use serde_json::{json, Value};
use sysward_scripted_model::{Scenario, ScriptedServer};

fn scenario_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut out = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_shipped_scenario_parses() {
    let files = scenario_files();
    assert!(files.len() >= 15, "{files:?}");
    for f in files {
        let sc = Scenario::from_file(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            sc.description.is_some(),
            "{}: add a description",
            f.display()
        );
        assert!(!sc.steps.is_empty(), "{}", f.display());
    }
}

#[test]
fn readme_examples_parse() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut n = 0;
    let mut rest = text.as_str();
    while let Some(start) = rest.find("```json\n") {
        let after = &rest[start + 8..];
        // The closing fence starts a line (```tool inside a JSON string does not).
        let end = after.find("\n```").unwrap() + 1;
        let block = &after[..end];
        // Every ```json block of the README is a whole scenario.
        Scenario::from_str(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        n += 1;
        rest = &after[end + 3..];
    }
    assert!(n >= 2, "README should show scenario examples");
}

#[test]
fn invalid_scenarios_are_refused_with_a_reason() {
    let cases = [
        (
            r#"{"steps": [{"hang": true, "error": {"status": 500}}]}"#,
            "choose one",
        ),
        (
            r#"{"steps": [{"garbage": true, "content": "x"}]}"#,
            "cannot be combined",
        ),
        (r#"{"steps": [{"repeat": 0}]}"#, "repeat"),
        (r#"{"steps": [{"garbage": 5}]}"#, "garbage"),
        (r#"{"steps": [{"contnet": "typo"}]}"#, "unknown field"),
        (r#"{"flavor": "tgi"}"#, "unknown variant"),
        (r#"{"routes": {"props": {}}}"#, "GET /props"),
        (r#"{"stream_chunk_chars": 0}"#, "stream_chunk_chars"),
        (r#"{"expectation_status": 42}"#, "not an HTTP status"),
        (
            r#"{"steps": [{"error": {"status": 1000}}]}"#,
            "steps[0].error: status 1000",
        ),
        ("not json", "invalid scenario"),
    ];
    for (text, needle) in cases {
        let e = Scenario::from_str(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
    let parsed: Scenario = r#"{"steps": [{"content": "x"}]}"#.parse().unwrap();
    assert_eq!(parsed.steps.len(), 1);
    let e = Scenario::from_file("/nonexistent/x.json")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/x.json"), "{e}");
}

/// Play the simple task the way a harness would: first request with tools, then the
/// tool result.
#[test]
fn simple_task_plays_through() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/simple-task.json");
    let h = ScriptedServer::start(Scenario::from_file(path).unwrap()).unwrap();
    let models = get(h.addr(), "/v1/models").json();
    assert_eq!(models["data"][0]["max_model_len"], 32768);
    let tools = json!([{"type": "function", "function": {"name": "exec", "parameters": {"type": "object"}}}]);
    let mut messages = vec![
        json!({"role": "system", "content": "You are sysward."}),
        json!({"role": "user", "content": "Check the disks."}),
    ];
    let r = chat(h.addr(), &json!({"messages": messages, "tools": tools}));
    assert_eq!(r.status, 200, "{}", r.text());
    let msg = r.json()["choices"][0]["message"].clone();
    let call = msg["tool_calls"][0].clone();
    assert_eq!(call["function"]["name"], "exec");
    messages.push(msg);
    messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "Filesystem Size Used Avail Use% Mounted on"}));
    let r = chat(h.addr(), &json!({"messages": messages, "tools": tools}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .ends_with("TASK_STATUS: DONE"));
    assert!(h.expectation_failures().is_empty());
    assert_eq!(h.replies_remaining(), 0);
}

#[test]
fn text_protocol_scenario_rejects_tools_like_llamacpp() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/text-protocol.json");
    let h = ScriptedServer::start(Scenario::from_file(path).unwrap()).unwrap();
    assert_eq!(
        get(h.addr(), "/props").json()["default_generation_settings"]["n_ctx"],
        8192
    );
    let tools = json!([{"type": "function", "function": {"name": "exec"}}]);
    let r = chat(
        h.addr(),
        &json!({"messages": [{"role": "user", "content": "x"}], "tools": tools}),
    );
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json()["error"]["message"],
        "tools param requires --jinja flag"
    );
    let r = chat(h.addr(), &user("x"));
    assert!(r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("```tool"));
}

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sysward-scripted-model"))
}

fn tmpdir(name: &str) -> RemoveOnDrop {
    RemoveOnDrop::fresh_dir(&format!("scripted-cli-{name}"))
}

#[test]
fn cli_serves_records_writes_port_file_and_exits_when_idle() {
    let dir = tmpdir("serve");
    let sc = dir.join("s.json");
    std::fs::write(
        &sc,
        r#"{"description": "t", "steps": [{"content": "from the binary"}]}"#,
    )
    .unwrap();
    let rec = dir.join("rec.jsonl");
    let port_file = dir.join("port");
    let mut child = bin()
        .arg("--scenario")
        .arg(&sc)
        .arg("--listen=127.0.0.1:0")
        .arg("--record")
        .arg(&rec)
        .arg("--port-file")
        .arg(&port_file)
        .args(["--exit-after-idle", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .parse()
        .unwrap();
    assert!(addr.ip().is_loopback());
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(port, addr.port());
    let r = request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("Authorization", "Bearer abc")],
        Some(&user("hi").to_string()),
    )
    .unwrap();
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        "from the binary"
    );
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "did not exit when idle"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    let lines: Vec<Value> = std::fs::read_to_string(&rec)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["outcome"], "reply");
    assert!(lines[0]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .any(|h| h[0] == "authorization" && h[1] == "Bearer abc"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_check_and_errors() {
    let dir = tmpdir("check");
    let good = dir.join("good.json");
    std::fs::write(
        &good,
        r#"{"steps": [{"content": "a", "repeat": 2}, {"hang": true}]}"#,
    )
    .unwrap();
    let out = bin()
        .arg("--scenario")
        .arg(&good)
        .arg("--check")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 steps, 3 replies"));

    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        r#"{"steps": [{"hang": true, "close_connection": true}]}"#,
    )
    .unwrap();
    let out = bin().arg("--scenario").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("choose one"));

    let out = bin().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--scenario FILE is required"));

    let out = bin().args(["--scenario", "x", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = bin().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--exit-after-idle"));

    // Port in use → exit 1 with a message.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = bin()
        .arg("--scenario")
        .arg(&good)
        .arg("--listen")
        .arg(taken.local_addr().unwrap().to_string())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot start"));
    let _ = std::fs::remove_dir_all(&dir);
}
