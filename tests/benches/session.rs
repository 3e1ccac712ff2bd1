//! Session start and resident memory, through the real binaries (as root).
//!
//! `cargo bench -p sysward-tests --bench session [-- RUNS]`
//! - session start: from spawning `sysward run --root DIR` to the agent's
//!   handshake, read from the broker's `session_ready` audit record
//!   (`since_start_ms`: measured inside the broker from its first instruction),
//!   and, as an outside bound, to the scripted model receiving the agent's
//!   first request;
//! - resident memory (VmRSS, VmHWM) of the broker, the agent and the gateway
//!   while a session waits on a slow model, and of an idle daemon.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use sysward_tests::*;

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[((v.len() as f64) * 0.9) as usize])
}

fn kib(pid: u32, key: &str) -> u64 {
    status_field(pid, key)
        .and_then(|v| v.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    if !require_root("session bench") {
        return;
    }
    ensure_accounts();
    let runs: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let step = r#"{"content":"ok\nTASK_STATUS: DONE"}"#;
    let server = scenario(&format!(
        r#"{{"steps":[{}]}}"#,
        vec![step; runs + 1].join(",")
    ));
    let p = TestProject::new("bench-session");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nok\n");
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    for i in 0..runs {
        let before = server.requests().len();
        let t = Instant::now();
        let out = Command::new(sysward())
            .args(["run", "--root", p.dir.to_str().unwrap(), "--rerun"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let first = wait_for(Duration::from_secs(20), "first model request", || {
            server.requests().get(before).map(|r| r.at_ms)
        });
        let _ = first;
        outside.push(t.elapsed().as_secs_f64() * 1e3);
        let status = wait_output(out, Duration::from_secs(30)).status;
        assert!(status.success(), "run {i} failed");
        let ready = audit_records(&p)
            .into_iter()
            .rev()
            .find(|r| r["event"]["event"] == "session_ready")
            .expect("session_ready record");
        inside.push(ready["event"]["since_start_ms"].as_f64().unwrap());
    }
    let (m, p90) = median(inside);
    println!("session start (broker start → agent handshake): median {m:.2} ms, p90 {p90:.2} ms over {runs} runs");
    let (m, p90) = median(outside);
    println!("spawn → first model request seen by the server: median {m:.2} ms, p90 {p90:.2} ms");

    // memory during a session waiting on a slow model
    let slow = scenario(r#"{"steps":[{"delay_ms":3000,"content":"ok\nTASK_STATUS: DONE"}]}"#);
    let q = TestProject::new("bench-memory");
    q.init_conf(&slow, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nok\n");
    let child = Command::new(sysward())
        .args(["run", "--root", q.dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let broker = standalone_broker(child.id());
    slow.wait_for_requests(1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    let agent = children_named(broker, "sysward-agent").pop().unwrap();
    let gateway = children_named(broker, "sysward-gateway").pop().unwrap();
    for (name, pid) in [("broker", broker), ("agent", agent), ("gateway", gateway)] {
        println!(
            "{name:<8} VmRSS {:>6} KiB  VmHWM {:>6} KiB (during a session)",
            kib(pid, "VmRSS:"),
            kib(pid, "VmHWM:")
        );
    }
    let _ = wait_output(child, Duration::from_secs(30));

    // idle daemon
    let dir = format!("/run/sysward-bench-{}", std::process::id());
    let socket = format!("{dir}/control.sock");
    let mut daemon = Command::new(sysward())
        .args([
            "broker",
            "--root",
            q.dir.to_str().unwrap(),
            "--socket",
            &socket,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(Duration::from_secs(10), "daemon socket", || {
        std::path::Path::new(&socket).exists().then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "daemon   VmRSS {:>6} KiB  VmHWM {:>6} KiB (idle)",
        kib(daemon.id(), "VmRSS:"),
        kib(daemon.id(), "VmHWM:")
    );
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
