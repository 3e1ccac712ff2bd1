//! The broker's side of the model gateway: start it, hand it its setup (the key
//! travels only here), forward the agent's model requests, notice its death.

use crate::cancel::CancelToken;
use crate::config::InitConf;
use crate::spawn::{self, Account};
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::net::ToSocketAddrs;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use sysward_ipc::gateway::{
    GatewayAnswer, GatewayRequest, GatewaySetup, GATEWAY_ANSWER_MAX, GATEWAY_REQUEST_MAX,
};
use sysward_ipc::model::{ModelFailure, ModelReply, ModelRequest};
use sysward_ipc::{Channel, ChannelError, BUILD_VERSION};

/// Why the model gateway could not be started and set up.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("the model gateway refused to start: {0}")]
    RefusedStart(String),
    #[error(
        "the model gateway is version {0}, the broker {BUILD_VERSION}: reinstall sysward so all binaries match"
    )]
    Version(String),
    /// Any other answer to hello, as the gateway sent it.
    #[error("the model gateway answered {0} to hello")]
    UnexpectedHello(String),
    #[error("cannot resolve the model host {host}")]
    Resolve {
        host: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the model gateway refused its setup: {0}")]
    RefusedSetup(String),
    /// Any other answer to the setup, as the gateway sent it.
    #[error("the model gateway answered {0} to setup")]
    UnexpectedSetup(String),
    #[error("the model gateway did not answer within {0}s")]
    Silent(u64),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error(transparent)]
    Spawn(#[from] spawn::SpawnSetupError),
}

type Result<T, E = GatewayError> = std::result::Result<T, E>;

/// 64 MiB response cap (seed).
pub const MAX_MODEL_RESPONSE: u64 = 64 << 20;
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct GatewayLink {
    child: Child,
    chan: Channel,
    next_id: u64,
    timeout: Duration,
    pub pid: u32,
}

impl GatewayLink {
    pub fn start(
        program: &std::path::Path,
        conf: &InitConf,
        account: &Account,
    ) -> Result<GatewayLink> {
        let (ours, theirs) = Channel::pair()?;
        ours.force_send_buffer(GATEWAY_REQUEST_MAX)?;
        theirs.force_send_buffer(GATEWAY_ANSWER_MAX)?;
        let args = vec![
            "--uid".to_string(),
            account.uid.to_string(),
            "--gid".to_string(),
            account.gid.to_string(),
            "--port".to_string(),
            conf.api_url.port.to_string(),
        ];
        let child = spawn::spawn_with_channel(
            program,
            &args,
            theirs.into_fd(),
            Stdio::null(),
            Stdio::inherit(),
        )?;
        let pid = child.id();
        let mut link = GatewayLink {
            child,
            chan: ours,
            next_id: 1,
            timeout: Duration::from_secs(u64::from(conf.request_timeout_secs) + 15),
            pid,
        };
        let hello = link.chan.send(&GatewayRequest::Hello {
            build: BUILD_VERSION.to_string(),
        });
        if let Err(e) = hello {
            // A gateway that refused to start may be gone already; the
            // reason it sent first is still queued here.
            if e.is_disconnect() {
                if let Ok(GatewayAnswer::Error { message }) = link.recv_within(Duration::ZERO) {
                    return Err(GatewayError::RefusedStart(message));
                }
            }
            return Err(e.into());
        }
        match link.recv_within(SETUP_TIMEOUT)? {
            GatewayAnswer::Welcome { build, .. } if build == BUILD_VERSION => {}
            GatewayAnswer::Welcome { build, .. } => return Err(GatewayError::Version(build)),
            GatewayAnswer::Error { message } => return Err(GatewayError::RefusedStart(message)),
            other => return Err(GatewayError::UnexpectedHello(format!("{other:?}"))),
        }
        let resolved = (conf.api_url.host.as_str(), conf.api_url.port)
            .to_socket_addrs()
            .map_err(|source| GatewayError::Resolve {
                host: conf.api_url.host.clone(),
                source,
            })?
            .map(|a| a.to_string())
            .collect::<Vec<_>>();
        let system_roots_pem = if conf.api_url.https {
            std::fs::read("/etc/ssl/certs/ca-certificates.crt").unwrap_or_default()
        } else {
            Vec::new()
        };
        link.chan.send(&GatewayRequest::Setup(GatewaySetup {
            api_url: conf.api_url.raw.clone(),
            api_key: conf.api_key.clone(),
            request_timeout_secs: conf.request_timeout_secs,
            max_response_bytes: MAX_MODEL_RESPONSE,
            resolved,
            extra_roots_pem: Vec::new(),
            system_roots_pem,
        }))?;
        match link.recv_within(SETUP_TIMEOUT)? {
            GatewayAnswer::Ready => Ok(link),
            GatewayAnswer::Error { message } => Err(GatewayError::RefusedSetup(message)),
            other => Err(GatewayError::UnexpectedSetup(format!("{other:?}"))),
        }
    }

    fn recv_within(&mut self, timeout: Duration) -> Result<GatewayAnswer> {
        if !self
            .chan
            .wait_readable(timeout.as_millis().min(i32::MAX as u128) as i32)?
        {
            return Err(GatewayError::Silent(timeout.as_secs()));
        }
        match self.chan.recv::<GatewayAnswer>() {
            // A gateway that exits without reading what was sent to it
            // leaves a reset pending on this socket, which the kernel reports
            // before the answer the gateway sent first (its reason for
            // refusing to start); the next receive returns that answer.
            Err(ChannelError::Io(Errno::ECONNRESET)) if self.chan.wait_readable(0)? => {
                Ok(self.chan.recv::<GatewayAnswer>()?)
            }
            answer => Ok(answer?),
        }
    }

    /// Forwards one request. A dead or silent gateway is `GatewayLost`; the
    /// caller ends the session.
    pub fn forward(&mut self, request: ModelRequest, cancel: &CancelToken) -> ModelReply {
        let id = self.next_id;
        self.next_id += 1;
        if let Err(e) = self.chan.send(&GatewayRequest::Forward { id, request }) {
            return lost(format!("cannot reach the model gateway: {e}"));
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return lost(format!(
                    "the model gateway gave no answer within {}s",
                    self.timeout.as_secs()
                ));
            }
            let mut fds = [
                PollFd::new(self.chan.fd(), PollFlags::POLLIN),
                PollFd::new(cancel.fd(), PollFlags::POLLIN),
            ];
            let ms = PollTimeout::try_from(left.as_millis().min(60_000) as i32)
                .unwrap_or(PollTimeout::MAX);
            match poll(&mut fds, ms) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return lost(format!("poll: {e}")),
            }
            if cancel.is_cancelled() {
                // The gateway's answer to this id will be discarded below on the
                // next call; a cancelled request leaves no state behind.
                return ModelReply::Failed {
                    kind: ModelFailure::Cancelled,
                    message: "cancelled by the operator".to_string(),
                };
            }
            let ready = fds[0].revents().is_some_and(|r| !r.is_empty());
            if !ready {
                continue;
            }
            match self.chan.recv::<GatewayAnswer>() {
                Ok(GatewayAnswer::Reply { id: got, reply }) if got == id => return reply,
                Ok(GatewayAnswer::Reply { .. }) => continue, // answer to a cancelled request
                Ok(GatewayAnswer::Error { message }) => {
                    return lost(format!("the model gateway failed: {message}"))
                }
                Ok(other) => {
                    return lost(format!("the model gateway answered out of turn: {other:?}"))
                }
                Err(e) => return lost(format!("the model gateway is gone: {e}")),
            }
        }
    }
}

fn lost(message: String) -> ModelReply {
    ModelReply::Failed {
        kind: ModelFailure::GatewayLost,
        message,
    }
}

impl Drop for GatewayLink {
    fn drop(&mut self) {
        let _ = self.chan.send(&GatewayRequest::Shutdown);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
