//! IPC round trip agent → broker → agent, beside a raw SEQPACKET ping-pong of
//! the same sizes between two processes, in the same run.
//!
//! `cargo bench -p sysward-ipc --bench roundtrip [-- ROUNDS]`
//! Request: a ~200-byte tool call; reply: a tool result with 4 KiB of stdout.
//! The typed side does what the broker does per message: header check and
//! permission decision, bounded decode, encode of the answer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use nix::sys::socket::{recv, send, MsgFlags};
use nix::unistd::{fork, ForkResult};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use sysward_ipc::agent::{
    agent_request_cap, AgentAnswer, AgentRequest, ToolRequest, ToolResult, ToolStatus,
};
use sysward_ipc::codec::encode;
use sysward_ipc::Channel;

fn request() -> AgentRequest {
    AgentRequest::Tool(ToolRequest {
        call_id: "call_0001".into(),
        tool: "exec".into(),
        arguments: r#"{"command":"systemctl","args":["status","nginx","--no-pager","--lines","20"],"reason":"check the web server state before touching its configuration file"}"#.into(),
    })
}

fn reply() -> AgentAnswer {
    let mut r = ToolResult::refused("call_0001", ToolStatus::Ok, "");
    r.stdout = "x".repeat(4096);
    r.exit_code = Some(0);
    AgentAnswer::Tool(r)
}

fn stats(name: &str, mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    let p = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    let median = p(0.5);
    println!(
        "{name:<28} n={} median {:>7.2} µs  p90 {:>7.2} µs  p99 {:>7.2} µs  min {:>6.2} µs",
        samples.len(),
        median.as_secs_f64() * 1e6,
        p(0.9).as_secs_f64() * 1e6,
        p(0.99).as_secs_f64() * 1e6,
        samples[0].as_secs_f64() * 1e6
    );
    median.as_secs_f64()
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(100_000);
    let req_len = encode(&request()).unwrap().len();
    let rep_len = encode(&reply()).unwrap().len();
    println!("request frame {req_len} B, reply frame {rep_len} B, {rounds} round trips each");

    // raw ping-pong: same byte sizes, no codec
    let (a, b) = Channel::pair().unwrap();
    // SAFETY: single-threaded at this point; the child only uses its socket and exits.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            drop(a);
            let mut buf = vec![0u8; 1 << 16];
            let out = vec![7u8; rep_len];
            loop {
                match recv(b.raw_fd(), &mut buf, MsgFlags::empty()) {
                    Ok(0) | Err(_) => std::process::exit(0),
                    Ok(_) => {
                        let _ = send(b.raw_fd(), &out, MsgFlags::empty());
                    }
                }
            }
        }
        ForkResult::Parent { child } => {
            drop(b);
            let msg = vec![1u8; req_len];
            let mut buf = vec![0u8; 1 << 16];
            let mut samples = Vec::with_capacity(rounds);
            for i in 0..rounds + 1000 {
                let t = Instant::now();
                send(a.raw_fd(), &msg, MsgFlags::empty()).unwrap();
                let n = recv(a.raw_fd(), &mut buf, MsgFlags::empty()).unwrap();
                assert_eq!(n, rep_len);
                if i >= 1000 {
                    samples.push(t.elapsed());
                }
            }
            let raw = stats("raw SEQPACKET ping-pong", samples);
            drop(a);
            let _ = nix::sys::wait::waitpid(child, None);

            // typed: what the broker and agent really do
            let (mut agent, mut broker) = Channel::pair().unwrap();
            // SAFETY: as above.
            match unsafe { fork() }.unwrap() {
                ForkResult::Child => {
                    drop(agent);
                    let answer = reply();
                    loop {
                        let got = broker.recv_checked::<AgentRequest>(|h| {
                            if h.kind == 1 {
                                return Err(sysward_ipc::ChannelError::Illegal {
                                    kind: "Hello".into(),
                                    state: "ready".into(),
                                });
                            }
                            Ok(agent_request_cap(h.kind))
                        });
                        if got.is_err() {
                            std::process::exit(0);
                        }
                        if broker.send(&answer).is_err() {
                            std::process::exit(0);
                        }
                    }
                }
                ForkResult::Parent { child } => {
                    drop(broker);
                    let req = request();
                    let mut samples = Vec::with_capacity(rounds);
                    for i in 0..rounds + 1000 {
                        let t = Instant::now();
                        agent.send(&req).unwrap();
                        let ans = agent.recv::<AgentAnswer>().unwrap();
                        std::hint::black_box(&ans);
                        if i >= 1000 {
                            samples.push(t.elapsed());
                        }
                    }
                    let typed = stats("typed agent→broker→agent", samples);
                    println!("ratio typed/raw (medians): {:.2}", typed / raw);
                    let _ = agent.fd().as_raw_fd();
                    drop(agent);
                    let _ = nix::sys::wait::waitpid(child, None);
                }
            }
        }
    }
}
