//! Framing and the one place where bytes become messages.
//!
//! bincode is pinned to 2.0.1 (3.0.0 is a `compile_error!` stub) and every decode
//! runs with a byte limit: bincode 2 without a limit trusts a length prefix and
//! tries to allocate it, which aborted a test process on a 13-byte message.

use serde::{de::DeserializeOwned, Serialize};

/// Bumped whenever any message layout changes; both sides refuse a mismatch.
pub const PROTOCOL_VERSION: u16 = 1;

/// First two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"SW";

/// Size of the fixed header in front of every body.
pub const HEADER_LEN: usize = 8;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    #[error("frame of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short(usize),
    #[error("frame does not start with the sysward magic")]
    BadMagic,
    #[error("protocol version mismatch: peer speaks {peer}, we speak {ours}; install matching sysward binaries")]
    Version { peer: u16, ours: u16 },
    #[error("unknown message kind {0}")]
    UnknownKind(u16),
    #[error("frame of {len} bytes exceeds the channel limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("undecodable {what} body: {detail}")]
    Decode { what: &'static str, detail: String },
    #[error("{what} body has {trailing} trailing bytes")]
    Trailing { what: &'static str, trailing: usize },
    #[error("header says kind {header} but the body decodes as kind {body}")]
    KindMismatch { header: u16, body: u16 },
    #[error("cannot encode {what}: {detail}")]
    Encode { what: &'static str, detail: String },
}

/// The fixed header, readable without touching the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    pub kind: u16,
}

impl Header {
    /// Parses and checks the header: magic and protocol version.
    pub fn parse(frame: &[u8]) -> Result<Header, CodecError> {
        if frame.len() < HEADER_LEN {
            return Err(CodecError::Short(frame.len()));
        }
        if frame[0..2] != MAGIC {
            return Err(CodecError::BadMagic);
        }
        let version = u16::from_le_bytes([frame[2], frame[3]]);
        let kind = u16::from_le_bytes([frame[4], frame[5]]);
        if version != PROTOCOL_VERSION {
            return Err(CodecError::Version {
                peer: version,
                ours: PROTOCOL_VERSION,
            });
        }
        Ok(Header { version, kind })
    }
}

/// A message type of one channel direction.
pub trait Message: Serialize + DeserializeOwned + Sized {
    /// Name used in errors and the audit log.
    const NAME: &'static str;
    /// Largest frame (header included) accepted on this direction.
    const MAX_FRAME: usize;
    /// The discriminant written in the header.
    fn kind(&self) -> u16;
    /// Human name of a kind, `None` when the kind does not exist.
    fn kind_name(kind: u16) -> Option<&'static str>;
    /// Decodes a body with this direction's limit. Implemented by [`impl_message!`]
    /// so that the limit is a literal constant for bincode's type-level limit.
    fn decode_body(body: &[u8]) -> Result<Self, CodecError>;
}

/// Encodes `msg` as one frame.
pub fn encode<M: Message>(msg: &M) -> Result<Vec<u8>, CodecError> {
    let mut frame = Vec::with_capacity(256);
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    frame.extend_from_slice(&msg.kind().to_le_bytes());
    frame.extend_from_slice(&[0, 0]);
    bincode::serde::encode_into_std_write(msg, &mut frame, bincode::config::standard()).map_err(
        |e| CodecError::Encode {
            what: M::NAME,
            detail: e.to_string(),
        },
    )?;
    if frame.len() > M::MAX_FRAME {
        return Err(CodecError::TooLarge {
            len: frame.len(),
            max: M::MAX_FRAME,
        });
    }
    Ok(frame)
}

/// Decodes a whole frame: header checks, size check, bounded body decode, and a
/// check that the body is the kind the header announced.
pub fn decode<M: Message>(frame: &[u8]) -> Result<M, CodecError> {
    let header = Header::parse(frame)?;
    if frame.len() > M::MAX_FRAME {
        return Err(CodecError::TooLarge {
            len: frame.len(),
            max: M::MAX_FRAME,
        });
    }
    if M::kind_name(header.kind).is_none() {
        return Err(CodecError::UnknownKind(header.kind));
    }
    let msg = M::decode_body(&frame[HEADER_LEN..])?;
    if msg.kind() != header.kind {
        return Err(CodecError::KindMismatch {
            header: header.kind,
            body: msg.kind(),
        });
    }
    Ok(msg)
}

/// Bounded bincode decode of exactly `body`; trailing bytes are an error.
pub fn decode_limited<T: DeserializeOwned, const LIMIT: usize>(
    what: &'static str,
    body: &[u8],
) -> Result<T, CodecError> {
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let (value, used) = bincode::serde::decode_from_slice::<T, _>(body, config).map_err(|e| {
        CodecError::Decode {
            what,
            detail: e.to_string(),
        }
    })?;
    if used != body.len() {
        return Err(CodecError::Trailing {
            what,
            trailing: body.len() - used,
        });
    }
    Ok(value)
}

/// Test helper: each kind constant of `pinned` names its variant, and no
/// other kind exists.
#[cfg(test)]
pub(crate) fn assert_kinds_pinned<M: Message>(pinned: &[(u16, &str)]) {
    for (kind, name) in pinned {
        assert_eq!(M::kind_name(*kind), Some(*name), "kind {kind}");
    }
    let known = (0..=u16::MAX)
        .filter(|kind| M::kind_name(*kind).is_some())
        .count();
    assert_eq!(known, pinned.len(), "{} has kinds not pinned", M::NAME);
}

/// Implements [`Message`] for an enum: `impl_message!(Type, "name", MAX, { Variant = kind, ... })`.
/// Kinds are explicit so that reordering variants can never silently renumber them.
#[macro_export]
macro_rules! impl_message {
    ($ty:ident, $name:literal, $max:expr, { $($variant:ident = $kind:literal),+ $(,)? }) => {
        impl $crate::codec::Message for $ty {
            const NAME: &'static str = $name;
            const MAX_FRAME: usize = $max;
            fn kind(&self) -> u16 {
                match self {
                    $( $ty::$variant { .. } => $kind, )+
                }
            }
            fn kind_name(kind: u16) -> Option<&'static str> {
                match kind {
                    $( $kind => Some(stringify!($variant)), )+
                    _ => None,
                }
            }
            fn decode_body(body: &[u8]) -> Result<Self, $crate::codec::CodecError> {
                // bincode's limit counts more than the body's bytes for strings
                // (a frame at the cap fails with a 1x limit: see the channel
                // tests); twice the frame size still bounds every allocation.
                $crate::codec::decode_limited::<Self, { 2 * $max }>($name, body)
            }
        }
    };
}
