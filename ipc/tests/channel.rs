//! The codec and the channel against hostile input: real SEQPACKET socketpairs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sysward_ipc::agent::{AgentAnswer, AgentRequest, ToolRequest, AGENT_REQUEST_MAX};
use sysward_ipc::channel::FRAGMENT;
use sysward_ipc::codec::{decode, encode, CodecError, HEADER_LEN, MAGIC};
use sysward_ipc::exec::ExecReport;
use sysward_ipc::gateway::GatewayAnswer;
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest};
use sysward_ipc::{Channel, ChannelError, PROTOCOL_VERSION};

fn tool(args_len: usize) -> AgentRequest {
    AgentRequest::Tool(ToolRequest {
        call_id: "c1".into(),
        tool: "write_file".into(),
        arguments: "x".repeat(args_len),
    })
}

#[test]
fn small_and_fragmented_messages_round_trip() {
    let (a, mut b) = Channel::pair().unwrap();
    a.send(&AgentRequest::NextInput).unwrap();
    assert_eq!(b.recv::<AgentRequest>().unwrap(), AgentRequest::NextInput);
    // 10 MiB of arguments: ~55 fragments, reassembled exactly. A sender thread,
    // because the socket buffer holds only a few fragments.
    let big = tool(10 << 20);
    let sent = big.clone();
    let t = std::thread::spawn(move || a.send(&sent).unwrap());
    assert_eq!(b.recv::<AgentRequest>().unwrap(), big);
    t.join().unwrap();
}

#[test]
fn the_largest_tool_call_fits_and_one_byte_more_does_not() {
    let (a, mut b) = Channel::pair().unwrap();
    let overhead = encode(&tool(0)).unwrap().len();
    let fits = tool(AGENT_REQUEST_MAX - overhead - 8);
    let t = std::thread::spawn(move || {
        a.send(&fits).unwrap();
        // Encoding refuses anything above the direction's limit.
        assert!(matches!(
            encode(&tool(AGENT_REQUEST_MAX)),
            Err(CodecError::TooLarge { .. })
        ));
    });
    assert!(matches!(
        b.recv::<AgentRequest>().unwrap(),
        AgentRequest::Tool(_)
    ));
    t.join().unwrap();
}

#[test]
fn a_refused_kind_is_refused_from_the_header_before_reassembly() {
    let (a, mut b) = Channel::pair().unwrap();
    let t = std::thread::spawn(move || {
        let _ = a.send(&tool(4 << 20));
    });
    let mut asked = None;
    let err = b
        .recv_checked::<AgentRequest>(|h| {
            asked = Some(h.kind);
            Err(ChannelError::Illegal {
                kind: "Tool".into(),
                state: "before hello".into(),
            })
        })
        .unwrap_err();
    assert!(matches!(err, ChannelError::Illegal { .. }));
    assert_eq!(asked, Some(4));
    drop(b);
    t.join().unwrap();
}

#[test]
fn a_kind_cap_bounds_reassembly() {
    let (a, mut b) = Channel::pair().unwrap();
    let t = std::thread::spawn(move || {
        let _ = a.send(&tool(1 << 20));
    });
    let err = b
        .recv_checked::<AgentRequest>(|_| Ok(64 << 10))
        .unwrap_err();
    assert!(
        matches!(err, ChannelError::Codec(CodecError::TooLarge { .. })),
        "{err}"
    );
    drop(b);
    t.join().unwrap();
}

#[test]
fn an_oversized_single_datagram_is_truncation_not_a_short_read() {
    let (a, mut b) = Channel::pair().unwrap();
    a.force_send_buffer(4 << 20).unwrap();
    let mut frame = encode(&AgentRequest::NextInput).unwrap();
    frame.resize(FRAGMENT + 1000, 0);
    a.send_datagram(&frame).unwrap();
    assert!(matches!(
        b.recv::<AgentRequest>(),
        Err(ChannelError::Truncated { .. })
    ));
}

#[test]
fn hostile_frames_are_errors_not_aborts() {
    // A valid header, then a length prefix claiming 8 TiB: bincode without a
    // limit would try to allocate it and abort the process.
    let mut frame = Vec::new();
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    frame.extend_from_slice(&4u16.to_le_bytes());
    frame.extend_from_slice(&[0, 0]);
    frame.extend_from_slice(&[0, 0xFF, 0, 0, 0, 0, 0, 0, 8, 0, 1, 2, 3]);
    assert!(decode::<AgentRequest>(&frame).is_err());
    assert!(matches!(
        decode::<AgentRequest>(b"SW"),
        Err(CodecError::Short(2))
    ));
    assert!(matches!(
        decode::<AgentRequest>(b"XX\x01\x00\x01\x00\x00\x00"),
        Err(CodecError::BadMagic)
    ));
    let mut wrong = encode(&AgentRequest::NextInput).unwrap();
    wrong[2] = 77;
    assert!(matches!(
        decode::<AgentRequest>(&wrong),
        Err(CodecError::Version { peer: 77, .. })
    ));
    let mut unknown = encode(&AgentRequest::NextInput).unwrap();
    unknown[4] = 200;
    assert!(matches!(
        decode::<AgentRequest>(&unknown),
        Err(CodecError::UnknownKind(200))
    ));
    // Header says NextInput, body is a Shutdown.
    let mut lying = encode(&AgentRequest::Shutdown {
        reason: String::new(),
    })
    .unwrap();
    lying[4] = 2;
    assert!(matches!(
        decode::<AgentRequest>(&lying),
        Err(CodecError::KindMismatch { .. }) | Err(CodecError::Decode { .. })
    ));
    let mut trailing = encode(&AgentRequest::NextInput).unwrap();
    trailing.push(0);
    assert!(matches!(
        decode::<AgentRequest>(&trailing),
        Err(CodecError::Trailing { .. })
    ));
    assert_eq!(HEADER_LEN, 8);
}

/// Bounded property test (runs in CI): random and mutated frames never panic
/// any decoder. 20k cases per direction take well under a second.
#[test]
fn random_frames_never_panic_a_decoder() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let seeds: Vec<Vec<u8>> = vec![
        encode(&AgentRequest::Hello { build: "x".into() }).unwrap(),
        encode(&tool(40)).unwrap(),
        encode(&AgentAnswer::Ack).unwrap(),
        encode(&OperatorRequest::Input("hello".into())).unwrap(),
    ];
    for i in 0..20_000 {
        let mut frame = seeds[i % seeds.len()].clone();
        match next() % 4 {
            0 => {
                let len = (next() % 64) as usize;
                frame = (0..len).map(|_| next() as u8).collect();
            }
            1 => {
                for _ in 0..1 + next() % 4 {
                    let pos = (next() as usize) % frame.len();
                    frame[pos] = next() as u8;
                }
            }
            2 => frame.truncate((next() as usize) % (frame.len() + 1)),
            _ => {
                let pos = HEADER_LEN.min(frame.len());
                frame.splice(pos..pos, (0..(next() % 16)).map(|_| next() as u8));
            }
        }
        if frame.len() >= 4 && next() % 2 == 0 {
            frame[0..2].copy_from_slice(&MAGIC);
            frame[2..4].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
        }
        let _ = decode::<AgentRequest>(&frame);
        let _ = decode::<AgentAnswer>(&frame);
        let _ = decode::<OperatorRequest>(&frame);
        let _ = decode::<OperatorAnswer>(&frame);
        let _ = decode::<GatewayAnswer>(&frame);
        let _ = decode::<ExecReport>(&frame);
    }
}
