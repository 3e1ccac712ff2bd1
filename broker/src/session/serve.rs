//! The agent protocol's serve loop: each request kind checked against the
//! dispatch table from its header, then handed to its handler.

use super::dispatch::{self, Flow};
use super::*;

impl<'a> Session<'a> {
    /// Receives one request, checking from the header first that the
    /// dispatch table permits its kind now, and its size.
    pub(super) fn recv(&mut self) -> Result<AgentRequest, ChannelError> {
        let state = self.state;
        self.chan
            .recv_checked::<AgentRequest>(|header| dispatch::permit(state, header.kind))
    }

    /// Appends to the audit log with every known secret masked.
    pub(super) fn audit(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        Ok(self.ctx.audit.record(record)?)
    }

    pub(super) fn audit_lazy(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        Ok(self.ctx.audit.record_lazy(record)?)
    }

    pub(super) fn answer(&mut self, answer: AgentAnswer) -> Result<()> {
        self.chan.send(&answer).map_err(SessionError::AnswerAgent)
    }

    /// The request loop: each request goes to its row's handler. Returns
    /// when the agent shuts down, dies, or misbehaves.
    pub(super) fn serve(&mut self) -> Result<()> {
        loop {
            let request = match self.recv() {
                Ok(r) => r,
                Err(e) => return Err(self.agent_lost(e)),
            };
            let row =
                dispatch::row(request.kind()).ok_or_else(|| dispatch::wrong_kind(&request))?;
            if row.refused_when_stopping && crate::signals::stopping() {
                return Err(SessionError::Ended(STOPPING_ENDS_SESSION.to_string()));
            }
            match (row.handler)(self, request)? {
                Flow::Next => {}
                Flow::End => return Ok(()),
            }
        }
    }

    /// Turns a receive failure into the session's ending, audited.
    pub(super) fn agent_lost(&mut self, e: ChannelError) -> SessionError {
        let status = self.agent.try_wait().ok().flatten();
        let what = match (&e, status) {
            (e, Some(st)) if e.is_disconnect() => format!("the agent exited unexpectedly ({st})"),
            (e, None) if e.is_disconnect() => "the agent closed its channel".to_string(),
            (ChannelError::Illegal { .. }, _) => {
                format!("the agent sent a request out of turn: {e}")
            }
            _ => format!("the agent sent an invalid frame: {e}"),
        };
        let _ = self
            .ctx
            .audit
            .record(json!({"event": "session_error", "session": self.id, "error": what}));
        SessionError::Ended(what)
    }

    pub(super) fn next_input(&mut self) -> OperatorInput {
        loop {
            self.op.cancel_token().reset();
            match self.op.next_input() {
                None => return OperatorInput::End,
                Some(line) if line.trim() == "/secrets" => {
                    self.op.event(&AgentEvent::Info(self.secrets.describe()));
                }
                Some(line) => {
                    // An operator may paste a known secret into the chat.
                    let (line, _) = self.secrets.redactor().redact_str(&line);
                    return OperatorInput::Line(line);
                }
            }
        }
    }

    /// The permission snapshot of a turn: agent.md's policy as it is now.
    /// A changed policy applies from this turn (audited, and the operator is
    /// told); one that no longer loads refuses the turn.
    pub(super) fn refresh_policy(&mut self) -> Result<(), PolicyRefusal> {
        let stamp = policy_stamp(&self.project.agent_md_path);
        if stamp == self.policy_stamp {
            return Ok(());
        }
        let loaded = Project::load_policy(&self.ctx.layout)
            .map_err(SessionError::from)
            .and_then(|(path, policy, _)| {
                let engine = crate::planner::engine_for_layout(
                    &self.ctx.layout,
                    &path,
                    &policy,
                    self.ctx.secrets.delivery_files(),
                )?;
                Ok((path, policy, engine))
            });
        match loaded {
            Ok((path, policy, engine)) => {
                self.policy_stamp = stamp;
                if policy != self.project.policy {
                    let _ = self.audit(json!({
                        "event": "policy_changed", "session": self.id, "file": path.display().to_string(),
                        "from": self.project.policy.render(), "to": policy.render(),
                    }));
                    self.op.event(&AgentEvent::Warning(format!(
                        "{} changed: its policy applies from this turn",
                        path.display()
                    )));
                    self.project.policy = policy;
                    self.engine = self.pre_approvals.rebase(engine);
                }
                Ok(())
            }
            Err(e) => {
                let refusal = PolicyRefusal::NoLongerLoads(e);
                let why = refusal.to_string();
                let _ = self
                    .audit(json!({"event": "policy_rejected", "session": self.id, "error": why}));
                self.op.event(&AgentEvent::Warning(why));
                Err(refusal)
            }
        }
    }
}

pub(super) fn on_next_input(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::NextInput = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    s.repeats.clear();
    let input = s.next_input();
    s.answer(AgentAnswer::Input(input))?;
    Ok(Flow::Next)
}

pub(super) fn on_shutdown(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::Shutdown { reason } = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    s.state = AgentState::Closed;
    let _ = s.chan.send(&AgentAnswer::Goodbye {
        reason: "bye".to_string(),
    });
    if !reason.is_empty() && reason != "done" {
        let reason = if crate::signals::stopping() && reason == "cancelled by the operator" {
            // The cancel was SIGTERM's, not a person's.
            "cancelled: the broker is stopping (SIGTERM)".to_string()
        } else {
            crate::sanitize::one_line(&reason, 2000)
        };
        s.op.event(&AgentEvent::Info(format!("agent finished: {reason}")));
        s.agent_reason = Some(reason);
    }
    Ok(Flow::End)
}
