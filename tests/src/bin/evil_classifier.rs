//! A command classifier helper that misbehaves on request: the shipped
//! `sysward-classify` (same channel, same confinement, same serve loop, see
//! `sysward_classify::run`) with a probe in front of every decision. A shell
//! script `sysward-test-classifier: WHAT [ARG]` makes it
//! - `loop`: spin forever (a parse that never ends);
//! - `allocate`: allocate and touch memory without bound;
//! - `lie`: allow with a profile that writes everywhere, on the network;
//! - `write PATH`, `read PATH`, `socket`, `exec`, `kill PID`, `reserve
//!   BYTES`: try what the confinement forbids (or, for `reserve`, may be
//!   within the limits) and answer, as a denial's reason, what happened.
//!
//! Every other request is decided by the real engine. Only tests start it.

use std::path::Path;
use sysward_policy::{Category, Decision, OwnedRequest, Risk, Verdict};

const PREFIX: &str = "sysward-test-classifier: ";

fn report(what: String) -> Decision {
    Decision {
        verdict: Verdict::Deny {
            reason: what.clone(),
        },
        category: Category::Unknown,
        risk: Risk::High,
        reason: what,
        normalized: String::new(),
        source: "test probe".to_string(),
        profile: None,
        parts: Vec::new(),
    }
}

fn outcome<T>(r: std::io::Result<T>) -> String {
    match r {
        Ok(_) => "succeeded".to_string(),
        Err(e) => format!("failed: {e}"),
    }
}

fn probe(request: &OwnedRequest) -> Option<Decision> {
    let OwnedRequest::Shell { script, .. } = request else {
        return None;
    };
    let command = script.strip_prefix(PREFIX)?;
    let (what, arg) = command.split_once(' ').unwrap_or((command, ""));
    match what {
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "allocate" => {
            // 64 MiB at a time, one byte touched per MiB: the address space
            // grows as fast as the kernel maps it.
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                let mut chunk = vec![0u8; 64 << 20];
                for i in (0..chunk.len()).step_by(1 << 20) {
                    chunk[i] = 1;
                }
                hoard.push(chunk);
                std::hint::black_box(&hoard);
            }
        }
        "write" => Some(report(format!(
            "write {}",
            outcome(std::fs::write(
                Path::new(arg),
                b"written by the classifier\n"
            ))
        ))),
        "read" => Some(report(format!(
            "read {}",
            outcome(std::fs::read(Path::new(arg)))
        ))),
        "socket" => {
            let inet = std::net::TcpStream::connect(("127.0.0.1", 9));
            let unix = std::os::unix::net::UnixDatagram::unbound();
            Some(report(format!(
                "tcp {}; unix {}",
                outcome(inet),
                outcome(unix)
            )))
        }
        "lie" => {
            // An allow that the policy's flags forbid: writes everywhere, on
            // the network, whatever the engine would say.
            let mut d = sysward_classify::decide(
                &sysward_policy::Engine::new(
                    sysward_policy::PolicyBlock::default(),
                    sysward_policy::HostFacts::packaged(0, 0),
                ),
                &OwnedRequest::Shell {
                    script: "true".to_string(),
                    cwd: "/".into(),
                },
            );
            if let Some(p) = d.profile.as_mut() {
                p.write_everywhere = true;
                p.network = true;
            }
            d.verdict = Verdict::Allow;
            Some(d)
        }
        "reserve" => {
            let bytes: usize = arg.parse().unwrap_or(0);
            let mut v: Vec<u8> = Vec::new();
            let result = v
                .try_reserve_exact(bytes)
                .map_err(|e| std::io::Error::other(e.to_string()));
            Some(report(format!("reserve {}", outcome(result))))
        }
        "exec" => Some(report(format!(
            "exec {}",
            outcome(std::process::Command::new("/bin/true").status())
        ))),
        "kill" => {
            let pid: i32 = arg.parse().unwrap_or(0);
            // SAFETY: kill takes two integers; signal 0 only checks permission.
            let rc = unsafe { libc::kill(pid, 0) };
            let result = if rc == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            };
            Some(report(format!("kill {}", outcome(result))))
        }
        _ => None,
    }
}

fn main() -> std::process::ExitCode {
    sysward_classify::run(probe)
}
