//! The broker's one operator: the `sysward` console on the other end of an
//! operator channel, speaking the ipc operator protocol. The daemon's control
//! connections (`control.rs`) and the standalone broker's socketpair
//! (`standalone.rs`) both end here, so there is one operator path.

use crate::cancel::CancelToken;
use crate::operator::{Operator, SecretPromptError};
use crate::operator_dispatch::{self, OperatorState};
use crate::session::{self, BrokerContext, SessionRequest};
use std::sync::mpsc::{self, Receiver};
use std::sync::Mutex;
use sysward_ipc::agent::{AgentEvent, SessionMode};
use sysward_ipc::operator::{
    ApprovalDecision, ApprovalPrompt, OperatorAnswer, OperatorRequest, RunOptions, SessionSummary,
};
use sysward_ipc::{Channel, BUILD_VERSION};

/// Most text of one event passed on to the console (it shows no more).
const EVENT_TEXT_MAX: usize = 64 << 10;

/// Requests one session's operator may have waiting (at most 64 KiB each).
pub const INPUT_QUEUE: usize = 32;

/// Why an operator's channel was not greeted or its session not served.
#[derive(Debug, thiserror::Error)]
pub enum OperatorChannelError {
    #[error(
        "version mismatch: client {client}, broker {BUILD_VERSION}; use the sysward binary that matches the running broker"
    )]
    VersionMismatch { client: String },
    #[error("operator did not open with hello")]
    NoHello,
    #[error(transparent)]
    Channel(#[from] sysward_ipc::ChannelError),
    /// The cancel pipe or the reader thread.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T, E = OperatorChannelError> = std::result::Result<T, E>;

/// Reads the console's `Hello` and welcomes it, or tells it why not (another
/// build than this broker's, or anything but a hello first).
pub fn greet(tx: &Channel, rx: &mut Channel) -> Result<()> {
    match operator_dispatch::recv(rx, OperatorState::AwaitHello) {
        Ok(OperatorRequest::Hello { build }) if build == BUILD_VERSION => {}
        Ok(OperatorRequest::Hello { build }) => {
            let refused = OperatorChannelError::VersionMismatch { client: build };
            tx.send(&OperatorAnswer::Error {
                message: refused.to_string(),
            })?;
            return Err(refused);
        }
        Ok(_) | Err(sysward_ipc::ChannelError::Illegal { .. }) => {
            tx.send(&OperatorAnswer::Error {
                message: "say hello first".to_string(),
            })?;
            return Err(OperatorChannelError::NoHello);
        }
        Err(e) => return Err(e.into()),
    }
    tx.send(&OperatorAnswer::Welcome {
        build: BUILD_VERSION.to_string(),
        broker_pid: std::process::id(),
    })?;
    Ok(())
}

/// The session a `Run` or `Cli` request asks for; `None` for any other request.
pub fn session_wanted(request: &OperatorRequest) -> Option<(SessionMode, RunOptions)> {
    match request {
        OperatorRequest::Run(o) => Some((SessionMode::Tasks { rerun: o.rerun }, o.clone())),
        OperatorRequest::Cli(o) => Some((SessionMode::Cli, o.clone())),
        _ => None,
    }
}

/// Runs one session for the console on `tx`/`rx`: its events, prompts and
/// summary go out, its input, answers and Ctrl+C come in. A console that goes
/// away cancels what runs and ends the input.
pub fn serve_session(
    ctx: &BrokerContext,
    tx: Channel,
    mut rx: Channel,
    mode: SessionMode,
    opts: &RunOptions,
    who: String,
) -> Result<SessionSummary> {
    let cancel = CancelToken::new()?;
    // Bounded: a client that sends faster than the session takes its input
    // is held back (the reader stops reading its socket), so a session's
    // queue never holds more than this many requests.
    let (in_tx, in_rx) = mpsc::sync_channel(INPUT_QUEUE);
    let reader_cancel = cancel.clone();
    std::thread::Builder::new()
        .name("operator-reader".to_string())
        .spawn(move || loop {
            match operator_dispatch::recv(&mut rx, OperatorState::InSession) {
                Ok(OperatorRequest::Cancel) => reader_cancel.cancel(),
                Ok(
                    req @ (OperatorRequest::Input(_)
                    | OperatorRequest::Approval { .. }
                    | OperatorRequest::Secret { .. }),
                ) => {
                    if in_tx.send(req).is_err() {
                        return;
                    }
                }
                Ok(OperatorRequest::Detach) => {
                    // The operator ended the dialogue (`/quit`, Ctrl+D at the
                    // prompt): input ends, nothing is cancelled, and a later
                    // Ctrl+C still reaches the session.
                    if in_tx.send(OperatorRequest::Detach).is_err() {
                        return;
                    }
                }
                Err(_) => {
                    // The operator went away: cancel what runs and end input.
                    let _ = in_tx.send(OperatorRequest::Detach);
                    reader_cancel.cancel();
                    return;
                }
                Ok(_) => {
                    let _ = in_tx.send(OperatorRequest::Detach);
                    reader_cancel.cancel();
                    return;
                }
            }
        })?;
    let operator = ChannelOperator {
        tx,
        interactive: opts.interactive || matches!(mode, SessionMode::Cli),
        inputs: Mutex::new(in_rx),
        cancel,
    };
    Ok(session::run_session(
        ctx,
        SessionRequest {
            mode,
            dry_run: opts.dry_run,
            operator: who,
        },
        &operator,
    ))
}

/// The console on the other end of an operator channel.
struct ChannelOperator {
    tx: Channel,
    /// A person at the client can answer prompts.
    interactive: bool,
    inputs: Mutex<Receiver<OperatorRequest>>,
    cancel: CancelToken,
}

impl ChannelOperator {
    fn send(&self, answer: &OperatorAnswer) {
        let _ = self.tx.send(answer);
    }
}

impl Operator for ChannelOperator {
    fn session_started(&self, session_id: &str, banner: &str) {
        self.send(&OperatorAnswer::SessionStarted {
            session_id: session_id.to_string(),
            banner: banner.to_string(),
        });
    }

    fn event(&self, event: &AgentEvent) {
        // Text is sanitized by the client before display as well; the broker
        // sanitizes what it renders itself (prompts, summaries).
        let event = match event {
            AgentEvent::Answer(t) => {
                AgentEvent::Answer(crate::sanitize::for_terminal(t, EVENT_TEXT_MAX))
            }
            AgentEvent::Info(t) => {
                AgentEvent::Info(crate::sanitize::for_terminal(t, EVENT_TEXT_MAX))
            }
            AgentEvent::Warning(t) => {
                AgentEvent::Warning(crate::sanitize::for_terminal(t, EVENT_TEXT_MAX))
            }
            other => other.clone(),
        };
        self.send(&OperatorAnswer::Event(event));
    }

    fn next_input(&self) -> Option<String> {
        self.send(&OperatorAnswer::InputWanted);
        let inputs = self.inputs.lock().ok()?;
        loop {
            match inputs.recv().ok()? {
                OperatorRequest::Input(line) => return Some(line),
                OperatorRequest::Detach => return None,
                _ => continue,
            }
        }
    }

    fn approve(&self, prompt: &ApprovalPrompt) -> Option<(ApprovalDecision, String)> {
        if !self.interactive {
            // Nobody to ask: the broker turns it into a pending approval.
            return None;
        }
        self.send(&OperatorAnswer::ApprovalNeeded(prompt.clone()));
        let inputs = self.inputs.lock().ok()?;
        loop {
            match inputs.recv().ok()? {
                OperatorRequest::Approval { id, decision, note } if id == prompt.id => {
                    return Some((decision, note))
                }
                OperatorRequest::Detach => return None,
                _ => continue,
            }
        }
    }

    fn finished(&self, summary: &SessionSummary) {
        self.send(&OperatorAnswer::Finished(summary.clone()));
    }

    fn ask_secret(
        &self,
        name: &str,
        scope: &crate::secrets::Scope,
        reason: &str,
    ) -> Result<Option<String>, SecretPromptError> {
        if !self.interactive {
            return Err(SecretPromptError::NotInteractive);
        }
        self.send(&OperatorAnswer::SecretNeeded {
            name: name.to_string(),
            prompt: crate::secrets::render_ask_prompt(name, scope, reason),
        });
        let inputs = self
            .inputs
            .lock()
            .map_err(|_| SecretPromptError::InputLost)?;
        loop {
            match inputs.recv() {
                Ok(OperatorRequest::Secret { value }) => return Ok(value.filter(|v| !v.is_empty())),
                Ok(OperatorRequest::Detach) | Err(_) => return Err(SecretPromptError::Gone),
                Ok(_) => continue,
            }
        }
    }

    fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    fn decided(&self, call_id: &str, _category: &str, risk: &str, _verdict: &str) {
        self.send(&OperatorAnswer::Decided {
            call_id: call_id.to_string(),
            risk: risk.to_string(),
        });
    }
}
