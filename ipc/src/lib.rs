//! The only vocabulary shared by sysward's processes.
//!
//! Every channel is a `SOCK_SEQPACKET` socket carrying one message per datagram.
//! A datagram is an 8-byte [`codec::Header`] (magic, protocol version, message
//! kind) followed by the bincode body of one enum value. The receiver checks the
//! version and decides whether the kind is legal in its current state *before*
//! it decodes the body (as OpenSSH's monitor does), and every decode is bounded
//! by the channel's maximum frame size.
//!
//! Directions:
//! - agent ↔ broker: [`agent::AgentRequest`] / [`agent::AgentAnswer`]
//! - operator ↔ broker: [`operator::OperatorRequest`] / [`operator::OperatorAnswer`]
//! - broker ↔ model gateway: [`gateway::GatewayRequest`] / [`gateway::GatewayAnswer`]
//! - broker ↔ command classifier: [`classify::ClassifyRequest`] / [`classify::ClassifyAnswer`]
//! - broker → executor: [`exec::ExecSpec`], answered by [`exec::ExecReport`]
//! - broker → network executor: [`net::NetSpec`], answered by [`net::NetReport`]

pub mod agent;
pub mod channel;
pub mod classify;
pub mod codec;
pub mod cve;
pub mod exec;
pub mod gateway;
pub mod model;
pub mod net;
pub mod operator;
pub mod patch;
pub mod peer;
pub mod profile;
pub mod tools;

pub use channel::{Channel, ChannelError};
pub use codec::{CodecError, Header, Message, PROTOCOL_VERSION};

/// The version string every hello carries, so a mismatch names both builds.
pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");
