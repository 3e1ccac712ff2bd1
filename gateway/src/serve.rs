//! The broker-facing protocol.
//!
//! ```text
//! broker                         gateway
//! Hello { build }          →
//!                          ←     Welcome { build, pid }     (other build: Error, exit 1)
//! Setup(GatewaySetup)      →
//!                          ←     Ready                      (bad setup: Error, exit 1)
//! Forward { id, request }  →
//!                          ←     Reply { id, reply }        (one request in flight at a time)
//! …
//! Shutdown | EOF                 exit 0 (also while a request is in flight: it is dropped)
//! ```
//!
//! A Forward that arrives while another is in flight supersedes it: the old
//! exchange is dropped (its connection closed), the old id is answered with
//! `Failed { Cancelled }`, and the new request is served. This is how a broker
//! that gave up on a request (operator cancel) moves on without killing the
//! gateway; there is never more than one request in flight.
//!
//! Anything else — a kind not legal in the current state, an undecodable or
//! oversized frame — is answered with `Error { message }` and ends the gateway
//! (exit 1). Which kind is legal is decided from the frame header before the
//! body is decoded.

use crate::forward::Gateway;
use crate::secret::scrub;
use nix::errno::Errno;
use sysward_ipc::codec::{CodecError, Message};
use sysward_ipc::gateway::{GatewayAnswer, GatewayRequest, GATEWAY_REQUEST_MAX};
use sysward_ipc::model::{ModelFailure, ModelReply};
use sysward_ipc::{Channel, ChannelError, BUILD_VERSION};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Size caps per kind, checked from the header before decoding.
const HELLO_MAX: usize = 4 << 10;
/// A setup carries the system root bundle (≈ 200 KiB on Debian) and extra roots.
const SETUP_MAX: usize = 8 << 20;
const SHUTDOWN_MAX: usize = 256;

const KIND_HELLO: u16 = 1;
const KIND_SETUP: u16 = 2;
const KIND_FORWARD: u16 = 3;
const KIND_SHUTDOWN: u16 = 4;

#[derive(Debug, Clone, Copy, Default)]
pub struct ServeConfig {
    /// The port the process was confined to (`--port`). When set, a setup whose
    /// `API_URL` names another port is refused: the sandbox would deny it anyway,
    /// with a far less helpful error.
    pub api_port: Option<u16>,
}

#[derive(Debug)]
pub enum ServeError {
    /// The peer broke the protocol or sent a bad setup; an `Error` answer was
    /// sent (when the channel still worked).
    Refused(String),
    /// The channel itself failed.
    Channel(String),
    /// The async runtime could not start.
    Runtime(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Refused(m) => write!(f, "{m}"),
            ServeError::Channel(m) => write!(f, "broker channel failed: {m}"),
            ServeError::Runtime(m) => write!(f, "cannot start the async runtime: {m}"),
        }
    }
}

impl std::error::Error for ServeError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    AwaitHello,
    AwaitSetup,
    Ready,
    /// A Forward is being served; Shutdown (or EOF) ends the gateway, a new
    /// Forward supersedes it.
    InFlight,
}

impl State {
    fn describe(self) -> &'static str {
        match self {
            State::AwaitHello => "before Hello",
            State::AwaitSetup => "after Hello, before Setup",
            State::Ready => "after Setup",
            State::InFlight => "while a Forward is in flight",
        }
    }

    /// The cap for a kind, or a refusal. Nothing of the body is decoded for a
    /// refused kind.
    fn permit(self, kind: u16) -> Result<usize, ChannelError> {
        let cap = match (self, kind) {
            (_, KIND_SHUTDOWN) => Some(SHUTDOWN_MAX),
            (State::AwaitHello, KIND_HELLO) => Some(HELLO_MAX),
            (State::AwaitSetup, KIND_SETUP) => Some(SETUP_MAX),
            (State::Ready | State::InFlight, KIND_FORWARD) => Some(GATEWAY_REQUEST_MAX),
            _ => None,
        };
        cap.ok_or_else(|| ChannelError::Illegal {
            kind: GatewayRequest::kind_name(kind)
                .unwrap_or("an unknown kind")
                .to_string(),
            state: self.describe().to_string(),
        })
    }
}

/// Receives the next request legal in `state`; `Ok(None)` on EOF.
fn receive(channel: &mut Channel, state: State) -> Result<Option<GatewayRequest>, ServeError> {
    match channel.recv_checked::<GatewayRequest>(|h| state.permit(h.kind)) {
        Ok(req) => Ok(Some(req)),
        Err(e) if e.is_disconnect() => Ok(None),
        Err(e @ ChannelError::Io(_)) => Err(ServeError::Channel(e.to_string())),
        Err(e) => Err(refuse(channel, describe_channel_error(&e, state))),
    }
}

fn describe_channel_error(e: &ChannelError, state: State) -> String {
    match e {
        ChannelError::Illegal { kind, state } => {
            format!("protocol violation: {kind} is not permitted {state}")
        }
        ChannelError::Codec(CodecError::Version { peer, ours }) => format!(
            "version mismatch: the broker speaks gateway protocol {peer}, this sysward-gateway \
             speaks {ours}; install the broker and the gateway from the same sysward build"
        ),
        other => format!("bad frame {}: {other}", state.describe()),
    }
}

/// Sends `Error { message }` (best effort) and returns the matching error.
fn refuse(channel: &Channel, message: String) -> ServeError {
    let _ = channel.send(&GatewayAnswer::Error {
        message: message.clone(),
    });
    ServeError::Refused(message)
}

fn send(channel: &Channel, answer: &GatewayAnswer) -> Result<(), ServeError> {
    channel.send(answer).map_err(|e| match e {
        e if e.is_disconnect() => ServeError::Channel("the broker went away".to_string()),
        e => ServeError::Channel(e.to_string()),
    })
}

/// Runs the gateway protocol on `channel` until Shutdown or EOF (`Ok`), or a
/// protocol violation / bad setup (`Err`, after an `Error` answer). Creates its
/// own single-threaded runtime: call it after confinement.
pub fn serve(mut channel: Channel, config: ServeConfig) -> Result<(), ServeError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| ServeError::Runtime(e.to_string()))?;

    // Hello.
    match receive(&mut channel, State::AwaitHello)? {
        None | Some(GatewayRequest::Shutdown) => return Ok(()),
        Some(GatewayRequest::Hello { build }) => {
            if build != BUILD_VERSION {
                return Err(refuse(
                    &channel,
                    format!(
                        "version mismatch: the broker is sysward {build:?}, this sysward-gateway \
                         is {BUILD_VERSION:?}; install both from the same build"
                    ),
                ));
            }
            send(
                &channel,
                &GatewayAnswer::Welcome {
                    build: BUILD_VERSION.to_string(),
                    pid: std::process::id(),
                },
            )?;
        }
        Some(_) => return Err(refuse(&channel, "protocol violation".to_string())),
    }

    // Setup.
    let gateway = match receive(&mut channel, State::AwaitSetup)? {
        None | Some(GatewayRequest::Shutdown) => return Ok(()),
        Some(GatewayRequest::Setup(setup)) => {
            let key = setup.api_key.clone();
            let built = {
                let _guard = rt.enter();
                Gateway::new(&setup)
            };
            drop(setup);
            let gateway = match built {
                Ok(g) => g,
                Err(e) => return Err(refuse(&channel, scrub(&e.to_string(), &key))),
            };
            if let Some(port) = config.api_port {
                let url_port = gateway
                    .url_of(sysward_ipc::model::ModelEndpoint::ChatCompletions)
                    .port_or_known_default();
                if url_port != Some(port) {
                    return Err(refuse(
                        &channel,
                        format!(
                            "gateway setup refused: API_URL's port {} differs from the port {port} \
                             the gateway was confined to (--port); the broker must pass API_URL's port",
                            url_port.map_or("(none)".to_string(), |p| p.to_string())
                        ),
                    ));
                }
            }
            send(&channel, &GatewayAnswer::Ready)?;
            gateway
        }
        Some(_) => return Err(refuse(&channel, "protocol violation".to_string())),
    };

    // Forwards.
    let mut next = None;
    loop {
        let (id, request) = match next.take() {
            Some(superseding) => superseding,
            None => match receive(&mut channel, State::Ready)? {
                None | Some(GatewayRequest::Shutdown) => return Ok(()),
                Some(GatewayRequest::Forward { id, request }) => (id, request),
                Some(_) => return Err(refuse(&channel, "protocol violation".to_string())),
            },
        };
        let outcome = rt.block_on(async {
            tokio::select! {
                reply = gateway.forward(request) => Ok(Some(reply)),
                res = channel_readable(&channel) => res.map(|()| None),
            }
        });
        match outcome {
            Ok(Some(reply)) => send_reply(&channel, id, reply)?,
            Ok(None) => {
                // The broker spoke while the request was in flight (which is
                // now dropped): Shutdown/EOF end, a Forward supersedes it.
                match receive(&mut channel, State::InFlight)? {
                    None | Some(GatewayRequest::Shutdown) => return Ok(()),
                    Some(GatewayRequest::Forward {
                        id: new_id,
                        request,
                    }) => {
                        send(
                            &channel,
                            &GatewayAnswer::Reply {
                                id,
                                reply: ModelReply::Failed {
                                    kind: ModelFailure::Cancelled,
                                    message: format!(
                                        "model request {id} was superseded by request {new_id}"
                                    ),
                                },
                            },
                        )?;
                        next = Some((new_id, request));
                    }
                    Some(_) => return Err(refuse(&channel, "protocol violation".to_string())),
                }
            }
            Err(e) => return Err(ServeError::Channel(e)),
        }
    }
}

/// Sends a reply; a reply too large for the channel becomes a `TooLarge`
/// failure so the agent learns why.
fn send_reply(channel: &Channel, id: u64, reply: ModelReply) -> Result<(), ServeError> {
    let len = match &reply {
        ModelReply::Http { body, .. } => body.len(),
        ModelReply::Failed { .. } => 0,
    };
    match channel.send(&GatewayAnswer::Reply { id, reply }) {
        Ok(()) => Ok(()),
        Err(e @ ChannelError::Io(Errno::EMSGSIZE | Errno::ENOBUFS))
        | Err(e @ ChannelError::Codec(CodecError::TooLarge { .. })) => send(
            channel,
            &GatewayAnswer::Reply {
                id,
                reply: ModelReply::Failed {
                    kind: ModelFailure::TooLarge,
                    message: format!(
                        "the model's response ({len} bytes) does not fit the broker channel \
                         ({e}); ask for a shorter answer or lower the response cap"
                    ),
                },
            },
        ),
        Err(e) if e.is_disconnect() => Err(ServeError::Channel("the broker went away".to_string())),
        Err(e) => Err(ServeError::Channel(e.to_string())),
    }
}

/// Resolves when the channel has something to read (a message or EOF).
async fn channel_readable(channel: &Channel) -> Result<(), String> {
    // SAFETY: the registered fd is borrowed from `channel`, which outlives
    // `watch` (the borrow's lifetime ties them), so it stays open and refers to
    // the same socket for as long as it is registered.
    let watch = unsafe { AsyncFd::register_with_interest(channel.fd(), Interest::READABLE) }
        .map_err(|e| format!("cannot watch the channel: {e}"))?;
    loop {
        let mut guard = watch
            .readable()
            .await
            .map_err(|e| format!("cannot watch the channel: {e}"))?;
        // Confirm with a zero-timeout poll: readiness may be spurious.
        match channel.wait_readable(0) {
            Ok(true) => return Ok(()),
            Ok(false) => guard.clear_ready(),
            Err(e) => return Err(e.to_string()),
        }
    }
}
