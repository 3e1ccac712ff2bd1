//! Model API requests as they travel agent → broker → gateway and back.
//!
//! The agent names an endpoint from a closed set; it never names a host. The
//! broker checks the endpoint, the gateway checks it again and maps it onto the
//! configured `API_URL`.

use serde::{Deserialize, Serialize};

/// The only model API endpoints that exist for sysward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelEndpoint {
    /// `GET {API_URL}/models`
    Models,
    /// `GET {origin}/props` (llama.cpp's server)
    Props,
    /// `POST {API_URL}/chat/completions`, streaming or not.
    ChatCompletions,
}

impl ModelEndpoint {
    pub fn method(self) -> &'static str {
        match self {
            ModelEndpoint::Models | ModelEndpoint::Props => "GET",
            ModelEndpoint::ChatCompletions => "POST",
        }
    }

    /// Path relative to `API_URL` (or to the origin for `/props`).
    pub fn path(self) -> &'static str {
        match self {
            ModelEndpoint::Models => "models",
            ModelEndpoint::Props => "/props",
            ModelEndpoint::ChatCompletions => "chat/completions",
        }
    }
}

/// One model API call. `path` must equal `endpoint.path()`: it is carried so that
/// both the broker and the gateway can refuse a request that names anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub endpoint: ModelEndpoint,
    pub path: String,
    /// JSON body for POST, empty for GET.
    pub body: Vec<u8>,
    /// The body asks for `stream: true`; the gateway collects the SSE stream.
    pub stream: bool,
}

impl ModelRequest {
    pub fn new(endpoint: ModelEndpoint, body: Vec<u8>, stream: bool) -> Self {
        ModelRequest {
            endpoint,
            path: endpoint.path().to_string(),
            body,
            stream,
        }
    }

    /// The check both the broker and the gateway apply before forwarding.
    pub fn check(&self) -> Result<(), String> {
        if self.path != self.endpoint.path() {
            return Err(format!(
                "model request path {:?} is not the {:?} endpoint's path {:?}",
                truncate(&self.path, 200),
                self.endpoint,
                self.endpoint.path()
            ));
        }
        if self.endpoint.method() == "GET" && !self.body.is_empty() {
            return Err("a GET model request carries no body".to_string());
        }
        Ok(())
    }
}

/// What came back from the model server, or why nothing did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelReply {
    Http {
        status: u16,
        /// `Retry-After` in seconds when the server sent one.
        retry_after: Option<u32>,
        content_type: String,
        body: Vec<u8>,
    },
    Failed {
        kind: ModelFailure,
        message: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ModelFailure {
    /// TCP connect failed (refused, unreachable).
    Connect,
    /// No complete answer within REQUEST_TIMEOUT.
    Timeout,
    /// The response exceeded the size cap.
    TooLarge,
    /// The gateway or broker refused the request (wrong endpoint, …).
    Refused,
    /// The gateway died or answered nonsense.
    GatewayLost,
    /// Anything else at the HTTP layer (TLS, protocol).
    Protocol,
    /// The operator cancelled the turn.
    Cancelled,
}

/// `s` cut to at most `max` bytes, on a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
