//! broker ↔ command classifier (`sysward-classify`).
//!
//! The shell classifier (a bash parser and the policy engine's analysis) runs
//! in a confined helper process the broker can kill: a parse that runs away
//! costs one denial and one restart of the helper, never the broker.
//!
//! The vocabulary of the bodies (the policy block and host facts an engine
//! is built from, the request, the decision) belongs to the policy crate,
//! which depends on this one; the messages are generic over it so that the
//! kinds, their order and their size caps live here with every other channel.
//!
//! The exchange, always broker first, one answer per request:
//! - `Hello` → `Welcome` (build check), once;
//! - `LoadEngine { id, setup }` → `Loaded { id }`: the helper builds and keeps
//!   that engine (a bounded number of them; the oldest is dropped first);
//! - `Decide { engine, request }` → `Decided { decision, retiring }`, or
//!   `UnknownEngine { id }` when the helper no longer holds that engine (the
//!   broker loads it again and repeats the request);
//! - `Error { message }`: the helper refuses to go on and exits.

use crate::codec::{decode_limited, CodecError, Message};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClassifyRequest<Setup, Req> {
    Hello { build: String },
    LoadEngine { id: u64, setup: Setup },
    Decide { engine: u64, request: Req },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClassifyAnswer<D> {
    Welcome {
        build: String,
        pid: u32,
    },
    Loaded {
        id: u64,
    },
    /// `retiring`: the helper has used most of its CPU-time limit and exits
    /// after this answer; the broker starts a fresh one for the next request.
    Decided {
        decision: D,
        retiring: bool,
    },
    UnknownEngine {
        id: u64,
    },
    Error {
        message: String,
    },
}

/// A request carries at most a 1 MiB script (the engine refuses larger ones
/// unanalysed) or an engine setup (the policy block, at most agent.md's 1 MiB
/// plus a task's pre-approvals, and the host facts); an answer carries one
/// decision: its one-line text (at most 1 MiB) and the text of each command
/// found, which all parses of one request bound to a few MiB together. A
/// frame beyond the cap is an error, which the broker turns into a denial.
pub const CLASSIFY_REQUEST_MAX: usize = 4 << 20;
pub const CLASSIFY_ANSWER_MAX: usize = 16 << 20;

impl<Setup, Req> Message for ClassifyRequest<Setup, Req>
where
    Setup: Serialize + DeserializeOwned,
    Req: Serialize + DeserializeOwned,
{
    const NAME: &'static str = "classify request";
    const MAX_FRAME: usize = CLASSIFY_REQUEST_MAX;
    fn kind(&self) -> u16 {
        match self {
            ClassifyRequest::Hello { .. } => 1,
            ClassifyRequest::LoadEngine { .. } => 2,
            ClassifyRequest::Decide { .. } => 3,
        }
    }
    fn kind_name(kind: u16) -> Option<&'static str> {
        match kind {
            1 => Some("Hello"),
            2 => Some("LoadEngine"),
            3 => Some("Decide"),
            _ => None,
        }
    }
    fn decode_body(body: &[u8]) -> Result<Self, CodecError> {
        // Twice the frame cap, as for every other direction (see impl_message!).
        decode_limited::<Self, { 2 * CLASSIFY_REQUEST_MAX }>(Self::NAME, body)
    }
}

impl<D> Message for ClassifyAnswer<D>
where
    D: Serialize + DeserializeOwned,
{
    const NAME: &'static str = "classify answer";
    const MAX_FRAME: usize = CLASSIFY_ANSWER_MAX;
    fn kind(&self) -> u16 {
        match self {
            ClassifyAnswer::Welcome { .. } => 1,
            ClassifyAnswer::Loaded { .. } => 2,
            ClassifyAnswer::Decided { .. } => 3,
            ClassifyAnswer::UnknownEngine { .. } => 4,
            ClassifyAnswer::Error { .. } => 5,
        }
    }
    fn kind_name(kind: u16) -> Option<&'static str> {
        match kind {
            1 => Some("Welcome"),
            2 => Some("Loaded"),
            3 => Some("Decided"),
            4 => Some("UnknownEngine"),
            5 => Some("Error"),
            _ => None,
        }
    }
    fn decode_body(body: &[u8]) -> Result<Self, CodecError> {
        decode_limited::<Self, { 2 * CLASSIFY_ANSWER_MAX }>(Self::NAME, body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};

    type Request = ClassifyRequest<Vec<String>, String>;
    type Answer = ClassifyAnswer<String>;

    #[test]
    fn every_kind_round_trips_and_a_lying_header_is_refused() {
        let requests: [Request; 3] = [
            ClassifyRequest::Hello { build: "1".into() },
            ClassifyRequest::LoadEngine {
                id: 7,
                setup: vec!["a".into()],
            },
            ClassifyRequest::Decide {
                engine: 7,
                request: "ls".into(),
            },
        ];
        for r in requests {
            let frame = encode(&r).unwrap();
            assert_eq!(decode::<Request>(&frame).unwrap(), r);
            let mut lying = frame.clone();
            lying[4] = if r.kind() == 1 { 2 } else { 1 };
            assert!(matches!(
                decode::<Request>(&lying),
                Err(CodecError::KindMismatch { .. } | CodecError::Decode { .. })
            ));
        }
        let answer: Answer = ClassifyAnswer::Decided {
            decision: "allow".into(),
            retiring: true,
        };
        assert_eq!(decode::<Answer>(&encode(&answer).unwrap()).unwrap(), answer);
        let mut unknown = encode(&answer).unwrap();
        unknown[4] = 9;
        assert_eq!(decode::<Answer>(&unknown), Err(CodecError::UnknownKind(9)));
    }

    #[test]
    fn a_length_prefix_larger_than_the_frame_is_an_error_not_an_allocation() {
        // Decide with engine 1 and a string claiming 2^60 bytes.
        let mut frame = encode(&Request::Decide {
            engine: 1,
            request: String::new(),
        })
        .unwrap();
        frame.truncate(frame.len() - 1);
        frame.extend_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0x10]);
        assert!(matches!(
            decode::<Request>(&frame),
            Err(CodecError::Decode { .. })
        ));
    }
}
