//! The agent's only channel: typed requests to the broker, one answer each.
//!
//! Every request waits for its answer. `Cancelled` and `Goodbye` can answer any
//! request; they surface as [`Stop`] so the caller unwinds the turn (CLI) or the
//! session (tasks, goodbye).

use sysward_ipc::agent::{
    AgentAnswer, AgentEvent, AgentRequest, OperatorInput, SessionSetup, StateFile, TaskOutcome,
    ToolRequest, ToolResult,
};
use sysward_ipc::model::{ModelReply, ModelRequest};
use sysward_ipc::Channel;

/// Why the current turn or session cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stop {
    /// The operator pressed Ctrl+C: the outstanding request did not complete.
    #[error("cancelled by the operator")]
    Cancelled,
    /// The broker ends the session.
    #[error("session ended by the broker: {0}")]
    Goodbye(String),
    /// The channel broke (peer gone, undecodable frame).
    #[error("broker channel: {0}")]
    Channel(String),
    /// The broker answered something this request cannot get.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl Stop {
    /// Whether requests can still be sent after this stop.
    pub fn channel_usable(&self) -> bool {
        matches!(self, Stop::Cancelled | Stop::Goodbye(_))
    }
}

/// The request side of the agent ↔ broker channel.
#[derive(Debug)]
pub struct Link {
    chan: Channel,
    /// Requests sent, for tests and diagnostics.
    pub requests: u64,
}

fn kind_of(a: &AgentAnswer) -> &'static str {
    match a {
        AgentAnswer::Welcome(_) => "Welcome",
        AgentAnswer::Input(_) => "Input",
        AgentAnswer::Model(_) => "Model",
        AgentAnswer::Tool(_) => "Tool",
        AgentAnswer::State(_) => "State",
        AgentAnswer::Ack => "Ack",
        AgentAnswer::Cancelled => "Cancelled",
        AgentAnswer::Goodbye { .. } => "Goodbye",
    }
}

/// Longest text carried by one event (the broker caps an event frame at 1 MiB).
pub const EVENT_TEXT_MAX: usize = 256 << 10;

/// Cuts `s` to at most `max` bytes on a character boundary, saying so.
pub fn clip_text(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… {} more bytes not shown]", &s[..end], s.len() - end)
}

fn clip_event(ev: AgentEvent) -> AgentEvent {
    let c = |s: String| clip_text(&s, EVENT_TEXT_MAX);
    match ev {
        AgentEvent::Info(s) => AgentEvent::Info(c(s)),
        AgentEvent::Warning(s) => AgentEvent::Warning(c(s)),
        AgentEvent::Answer(s) => AgentEvent::Answer(c(s)),
        AgentEvent::ToolStart { call_id, summary } => AgentEvent::ToolStart {
            call_id,
            summary: clip_text(&summary, 4096),
        },
        AgentEvent::CallRefused {
            call_id,
            tool,
            arguments,
            kind,
            message,
        } => AgentEvent::CallRefused {
            call_id,
            tool: clip_text(&tool, 128),
            arguments: clip_text(&arguments, 2000),
            kind,
            message: clip_text(&message, 2000),
        },
        AgentEvent::MemoryEdit {
            call_id,
            tool,
            arguments,
            status,
            message,
        } => AgentEvent::MemoryEdit {
            call_id,
            tool: clip_text(&tool, 128),
            arguments: clip_text(&arguments, 4000),
            status,
            message: clip_text(&message, 2000),
        },
        other => other,
    }
}

fn clip_outcome(mut o: TaskOutcome) -> TaskOutcome {
    o.summary = clip_text(&o.summary, 64 << 10);
    o.conflicts.truncate(50);
    for c in &mut o.conflicts {
        *c = clip_text(c, 2000);
    }
    o
}

impl Link {
    pub fn new(chan: Channel) -> Self {
        Link { chan, requests: 0 }
    }

    /// Sends one request and returns its answer; `Cancelled`/`Goodbye` become errors.
    pub fn call(&mut self, req: &AgentRequest) -> Result<AgentAnswer, Stop> {
        self.requests += 1;
        self.chan
            .send(req)
            .map_err(|e| Stop::Channel(format!("send: {e}")))?;
        let answer: AgentAnswer = self
            .chan
            .recv()
            .map_err(|e| Stop::Channel(format!("receive: {e}")))?;
        match answer {
            AgentAnswer::Cancelled => Err(Stop::Cancelled),
            AgentAnswer::Goodbye { reason } => Err(Stop::Goodbye(reason)),
            other => Ok(other),
        }
    }

    fn unexpected<T>(what: &str, a: &AgentAnswer) -> Result<T, Stop> {
        Err(Stop::Protocol(format!(
            "{what} was answered with {}",
            kind_of(a)
        )))
    }

    fn expect_ack(&mut self, req: &AgentRequest, what: &str) -> Result<(), Stop> {
        match self.call(req)? {
            AgentAnswer::Ack => Ok(()),
            other => Self::unexpected(what, &other),
        }
    }

    pub fn hello(&mut self, build: &str) -> Result<SessionSetup, Stop> {
        match self.call(&AgentRequest::Hello {
            build: build.to_string(),
        })? {
            AgentAnswer::Welcome(setup) => Ok(*setup),
            other => Self::unexpected("Hello", &other),
        }
    }

    pub fn event(&mut self, ev: AgentEvent) -> Result<(), Stop> {
        self.expect_ack(&AgentRequest::Event(clip_event(ev)), "Event")
    }

    pub fn info(&mut self, text: impl Into<String>) -> Result<(), Stop> {
        self.event(AgentEvent::Info(text.into()))
    }

    pub fn warn(&mut self, text: impl Into<String>) -> Result<(), Stop> {
        self.event(AgentEvent::Warning(text.into()))
    }

    pub fn model(&mut self, req: ModelRequest) -> Result<ModelReply, Stop> {
        match self.call(&AgentRequest::Model(req))? {
            AgentAnswer::Model(r) => Ok(r),
            other => Self::unexpected("Model", &other),
        }
    }

    pub fn tool(&mut self, req: ToolRequest) -> Result<ToolResult, Stop> {
        let id = req.call_id.clone();
        match self.call(&AgentRequest::Tool(req))? {
            AgentAnswer::Tool(r) if r.call_id == id => Ok(r),
            AgentAnswer::Tool(r) => Err(Stop::Protocol(format!(
                "tool result for call {:?} answered call {:?}",
                r.call_id, id
            ))),
            other => Self::unexpected("Tool", &other),
        }
    }

    pub fn load_state(&mut self, file: StateFile) -> Result<Option<Vec<u8>>, Stop> {
        match self.call(&AgentRequest::LoadState(file))? {
            AgentAnswer::State(s) => Ok(s),
            other => Self::unexpected("LoadState", &other),
        }
    }

    pub fn save_state(&mut self, file: StateFile, content: Vec<u8>) -> Result<(), Stop> {
        self.expect_ack(&AgentRequest::SaveState { file, content }, "SaveState")
    }

    pub fn task_finished(&mut self, outcome: TaskOutcome) -> Result<(), Stop> {
        self.expect_ack(
            &AgentRequest::TaskFinished(clip_outcome(outcome)),
            "TaskFinished",
        )
    }

    pub fn next_input(&mut self) -> Result<OperatorInput, Stop> {
        match self.call(&AgentRequest::NextInput)? {
            AgentAnswer::Input(i) => Ok(i),
            other => Self::unexpected("NextInput", &other),
        }
    }

    /// Last request of a session. Waits a few seconds for the broker's answer,
    /// whatever it is, then returns: the agent exits either way.
    pub fn shutdown(&mut self, reason: &str) {
        self.requests += 1;
        if self
            .chan
            .send(&AgentRequest::Shutdown {
                reason: clip_text(reason, 4096),
            })
            .is_err()
        {
            return;
        }
        if let Ok(true) = self.chan.wait_readable(5_000) {
            let _ = self.chan.recv::<AgentAnswer>();
        }
    }
}
