//! broker ↔ model gateway.

use crate::impl_message;
use crate::model::{ModelReply, ModelRequest};
use serde::{Deserialize, Serialize};

/// The gateway's whole configuration arrives over the channel, never in argv or
/// the environment, so the key is not visible in `/proc/<pid>/cmdline|environ`.
/// Its `Debug` masks the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewaySetup {
    /// `API_URL` from init.conf, e.g. `http://127.0.0.1:8080/v1`.
    pub api_url: String,
    /// `API_KEY`, possibly empty.
    pub api_key: String,
    pub request_timeout_secs: u32,
    /// Response size cap in bytes (64 MiB as in the seed).
    pub max_response_bytes: u64,
    /// Resolved addresses of the API host (`ip:port`), resolved by the broker so
    /// the gateway needs neither `/etc/resolv.conf` nor a DNS socket.
    pub resolved: Vec<String>,
    /// Extra PEM root certificates (e.g. a self-signed local server).
    pub extra_roots_pem: Vec<u8>,
    /// System trust roots, read by the broker before the gateway is confined.
    pub system_roots_pem: Vec<u8>,
}

impl std::fmt::Debug for GatewaySetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewaySetup")
            .field("api_url", &self.api_url)
            .field(
                "api_key",
                &if self.api_key.is_empty() {
                    "(none)"
                } else {
                    "(set, masked)"
                },
            )
            .field("request_timeout_secs", &self.request_timeout_secs)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("resolved", &self.resolved)
            .field(
                "extra_roots_pem",
                &format_args!("{} bytes", self.extra_roots_pem.len()),
            )
            .field(
                "system_roots_pem",
                &format_args!("{} bytes", self.system_roots_pem.len()),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_never_prints_the_key() {
        let s = super::GatewaySetup {
            api_url: "http://h/v1".into(),
            api_key: "sk-very-secret-value".into(),
            request_timeout_secs: 1,
            max_response_bytes: 1,
            resolved: vec![],
            extra_roots_pem: vec![],
            system_roots_pem: vec![],
        };
        let shown = format!("{s:?} {:?}", super::GatewayRequest::Setup(s.clone()));
        assert!(!shown.contains("sk-very-secret-value"), "{shown}");
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GatewayRequest {
    Hello { build: String },
    Setup(GatewaySetup),
    Forward { id: u64, request: ModelRequest },
    Shutdown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum GatewayAnswer {
    Welcome {
        build: String,
        pid: u32,
    },
    Ready,
    Reply {
        id: u64,
        reply: ModelReply,
    },
    /// Fatal: the gateway refuses to go on (bad setup, version mismatch).
    Error {
        message: String,
    },
}

/// Requests carry at most a chat body (the agent's whole context plus tool
/// arguments); answers carry at most a 64 MiB response.
pub const GATEWAY_REQUEST_MAX: usize = 48 << 20;
pub const GATEWAY_ANSWER_MAX: usize = (64 << 20) + (64 << 10);

impl_message!(GatewayRequest, "gateway request", GATEWAY_REQUEST_MAX, {
    Hello = 1, Setup = 2, Forward = 3, Shutdown = 4,
});
impl_message!(GatewayAnswer, "gateway answer", GATEWAY_ANSWER_MAX, {
    Welcome = 1, Ready = 2, Reply = 3, Error = 4,
});
