//! A hostile stand-in for `sysward-agent`, used only by the broker's fault
//! tests (the shipped agent has no such modes). It picks its misbehaviour from
//! its own file name (the tests hard-link it under several names) because the
//! broker passes it nothing but `--uid/--gid` and fd 3.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::{FromRawFd, OwnedFd};
use sysward_ipc::agent::{AgentAnswer, AgentRequest, ToolRequest};
use sysward_ipc::codec::{encode, HEADER_LEN, MAGIC};
use sysward_ipc::{Channel, BUILD_VERSION};

fn main() {
    let name = std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    // SAFETY: the broker passes the channel as fd 3 and nothing else owns it.
    let mut chan = Channel::new(unsafe { OwnedFd::from_raw_fd(3) });
    let hello = AgentRequest::Hello {
        build: BUILD_VERSION.to_string(),
    };
    match name.as_str() {
        "evil-oversized" => {
            // A 2 MiB frame where a hello may be 64 KiB.
            let mut frame = encode(&hello).unwrap();
            frame.resize(2 << 20, b'A');
            let _ = chan.send_frame(&frame);
        }
        "evil-huge" => {
            // One datagram far larger than any fragment may be: the broker
            // must see MSG_TRUNC, not a silently cut message.
            let mut frame = encode(&hello).unwrap();
            frame.resize(1 << 20, b'A');
            let _ = chan.send_datagram(&frame);
        }
        "evil-random" => {
            let mut bytes = vec![0u8; 4096];
            let mut f = std::fs::File::open("/dev/urandom").unwrap();
            std::io::Read::read_exact(&mut f, &mut bytes).unwrap();
            let _ = chan.send_frame(&bytes);
        }
        "evil-lying-length" => {
            // A valid header, then a body whose length prefix claims 8 TiB.
            let mut frame = Vec::new();
            frame.extend_from_slice(&MAGIC);
            frame.extend_from_slice(&sysward_ipc::PROTOCOL_VERSION.to_le_bytes());
            frame.extend_from_slice(&1u16.to_le_bytes());
            frame.extend_from_slice(&[0, 0]);
            assert_eq!(frame.len(), HEADER_LEN);
            frame.extend_from_slice(&[0, 0xFF, 0, 0, 0, 0, 0, 0, 8, 0]);
            let _ = chan.send_frame(&frame);
        }
        "evil-version" => {
            let mut frame = encode(&hello).unwrap();
            frame[2] = 99;
            let _ = chan.send_frame(&frame);
        }
        "evil-out-of-state" => {
            // A tool call before the handshake.
            let _ = chan.send(&AgentRequest::Tool(ToolRequest {
                call_id: "1".into(),
                tool: "exec".into(),
                arguments: r#"{"command":"id"}"#.into(),
            }));
        }
        "evil-double-hello" => {
            let _ = chan.send(&hello);
            let _ = chan.recv::<AgentAnswer>();
            let _ = chan.send(&hello);
        }
        "evil-wrong-build" => {
            let _ = chan.send(&AgentRequest::Hello {
                build: "0.0.0-other".to_string(),
            });
            // The broker answers Goodbye with the reason; show it for the test log.
            if let Ok(AgentAnswer::Goodbye { reason }) = chan.recv::<AgentAnswer>() {
                eprintln!("broker said: {reason}");
            }
        }
        other => {
            eprintln!("evil agent: unknown mode {other}");
            std::process::exit(2);
        }
    }
    // Wait for the broker to hang up.
    let _ = chan.recv::<AgentAnswer>();
}
