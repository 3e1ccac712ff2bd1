//! A stand-in agent for the action benchmark (tests/benches/actions.rs): after
//! the handshake it sends N identical `exec /bin/true` tool requests, timing
//! each round trip agent → broker (decode, decision, audit, confined executor,
//! result) → agent, and reports the samples in an Info event. Not confined:
//! it measures the broker, it is not the shipped agent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Instant;
use sysward_ipc::agent::{AgentAnswer, AgentEvent, AgentRequest, ToolRequest, ToolStatus};
use sysward_ipc::{Channel, BUILD_VERSION};

fn main() {
    // SAFETY: the broker passes the channel as fd 3 and nothing else owns it.
    let mut chan = Channel::new(unsafe { OwnedFd::from_raw_fd(3) });
    chan.send(&AgentRequest::Hello {
        build: BUILD_VERSION.to_string(),
    })
    .unwrap();
    let AgentAnswer::Welcome(setup) = chan.recv::<AgentAnswer>().unwrap() else {
        panic!("no welcome");
    };
    // The task file's content: the number of round trips, then optionally the
    // program to run (default /bin/true), then its arguments.
    let content = setup
        .tasks
        .first()
        .map(|t| t.content.clone())
        .unwrap_or_default();
    let mut words = content.split_whitespace();
    let n: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(1000);
    let program = words.next().unwrap_or("/bin/true").to_string();
    let args: Vec<&str> = words.collect();
    let arguments = serde_json::json!({"command": program, "args": args}).to_string();
    let mut micros = Vec::with_capacity(n);
    let mut failures = 0;
    for i in 0..n {
        // Each round trip is a task of its own (outside the timing): the
        // broker runs one action at most twice per task.
        chan.send(&AgentRequest::Event(AgentEvent::TaskStart {
            name: format!("bench-{i}"),
        }))
        .unwrap();
        let _ = chan.recv::<AgentAnswer>().unwrap();
        let t = Instant::now();
        chan.send(&AgentRequest::Tool(ToolRequest {
            call_id: format!("b{i}"),
            tool: "exec".into(),
            arguments: arguments.clone(),
        }))
        .unwrap();
        match chan.recv::<AgentAnswer>().unwrap() {
            AgentAnswer::Tool(r) if r.status == ToolStatus::Ok => {}
            AgentAnswer::Tool(r) => {
                failures += 1;
                if failures == 1 {
                    eprintln!(
                        "first failure: {:?} {} exit {:?} signal {:?} stderr {:?}",
                        r.status, r.message, r.exit_code, r.signal, r.stderr
                    );
                }
            }
            other => panic!("unexpected answer {other:?}"),
        }
        micros.push(t.elapsed().as_micros() as u64);
    }
    let report = serde_json::json!({"micros": micros, "failures": failures}).to_string();
    chan.send(&AgentRequest::Event(AgentEvent::Info(report)))
        .unwrap();
    let _ = chan.recv::<AgentAnswer>();
    chan.send(&AgentRequest::Shutdown {
        reason: "done".into(),
    })
    .unwrap();
    let _ = chan.recv::<AgentAnswer>();
}
