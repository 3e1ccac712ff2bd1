//! The agent protocol's serve loop: each request kind checked against the dispatch table from its header, then handed to its handler.

use super::*;

impl<'a> Session<'a> {
    /// Receives one request, checking legality and size from the header first.
    pub(super) fn recv(&mut self) -> Result<AgentRequest, ChannelError> {
        let state = self.state;
        self.chan.recv_checked::<AgentRequest>(|header| {
            let name = AgentRequest::kind_name(header.kind).unwrap_or("unknown");
            let legal = match state {
                AgentState::AwaitHello => header.kind == 1,
                AgentState::Ready => header.kind != 1,
                AgentState::Closed => false,
            };
            if !legal {
                return Err(ChannelError::Illegal {
                    kind: name.to_string(),
                    state: format!("in state {state:?}"),
                });
            }
            Ok(agent_request_cap(header.kind))
        })
    }

    /// Appends to the audit log with every known secret masked.
    pub(super) fn audit(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        self.ctx.audit.record(record)
    }

    pub(super) fn audit_lazy(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        self.ctx.audit.record_lazy(record)
    }

    pub(super) fn answer(&mut self, answer: AgentAnswer) -> Result<()> {
        self.chan.send(&answer).context("cannot answer the agent")
    }

    /// The request loop. Returns when the agent shuts down, dies, or misbehaves.
    pub(super) fn serve(&mut self) -> Result<()> {
        loop {
            let request = match self.recv() {
                Ok(r) => r,
                Err(e) => return Err(self.agent_lost(e)),
            };
            if crate::signals::stopping()
                && matches!(
                    request,
                    AgentRequest::NextInput | AgentRequest::Model(_) | AgentRequest::Tool(_)
                )
            {
                anyhow::bail!(STOPPING_ENDS_SESSION);
            }
            match request {
                AgentRequest::Hello { .. } => unreachable_state(),
                AgentRequest::NextInput => {
                    self.repeats.clear();
                    let input = self.next_input();
                    self.answer(AgentAnswer::Input(input))?;
                }
                AgentRequest::Model(model) => {
                    let reply = self.model(model);
                    let lost = matches!(
                        &reply,
                        ModelReply::Failed {
                            kind: ModelFailure::GatewayLost,
                            ..
                        }
                    );
                    let message = match &reply {
                        ModelReply::Failed { message, .. } => message.clone(),
                        _ => String::new(),
                    };
                    self.answer(AgentAnswer::Model(reply))?;
                    if lost {
                        anyhow::bail!("the model gateway failed: {message}");
                    }
                }
                AgentRequest::Tool(tool) => {
                    let result = self.tool(tool);
                    self.op
                        .event(&crate::record::tool_output(&result.call_id, &result));
                    self.answer(AgentAnswer::Tool(result))?;
                    if let Some(why) = self.ctx.pinned.stopped() {
                        anyhow::bail!("{why}");
                    }
                }
                AgentRequest::LoadState(file) => {
                    let content = self.load_state(file);
                    self.answer(AgentAnswer::State(content))?;
                }
                AgentRequest::SaveState { file, content } => {
                    self.save_state(file, &content)?;
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::Event(event) => {
                    // Only the broker says what an action produced.
                    if matches!(event, AgentEvent::ToolOutput { .. }) {
                        let _ = self.audit(json!({"event": "agent_refused_event", "session": self.id, "reason": "the agent sent an action's output, which only the broker reports"}));
                        self.answer(AgentAnswer::Ack)?;
                        continue;
                    }
                    if let Some(record) = crate::record::agent_event(&self.id, &event) {
                        let _ = self.audit(record);
                    }
                    if let AgentEvent::TaskStart { name } = &event {
                        self.current_task = Some(name.clone());
                        self.repeats.clear();
                        self.engine = self.pre_approvals.enter(Some(name));
                    }
                    if let AgentEvent::Usage {
                        prompt_tokens,
                        completion_tokens,
                    } = &event
                    {
                        let _ = self.audit(json!({"event": "model_usage", "session": self.id, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}));
                    }
                    self.op.event(&event);
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::TaskFinished(mut outcome) => {
                    if !self.pending_in_task.is_empty() && outcome.status == TaskStatus::Done {
                        outcome.status = TaskStatus::Blocked;
                        outcome.summary = format!(
                            "approval required: {}\n{}",
                            self.pending_in_task.join("; "),
                            outcome.summary
                        );
                    }
                    self.pending_in_task.clear();
                    // The hash is the broker's own reading of the file, not
                    // whatever the agent reports.
                    let sha = self
                        .tasks_expected
                        .iter()
                        .find(|(n, _)| *n == outcome.name)
                        .map(|(_, h)| h.clone());
                    if let (Some(sha), true) = (sha, outcome.status != TaskStatus::Skipped) {
                        outcome.sha256 = sha.clone();
                        self.records.set(&outcome.name, &sha, outcome.status);
                        if let Err(e) = self.records.save(&self.ctx.layout, &self.ctx.pinned) {
                            self.op.event(&AgentEvent::Warning(format!(
                                "cannot record the task outcome: {e:#}"
                            )));
                        }
                    }
                    for record in crate::record::conflicts(&self.id, &outcome) {
                        let _ = self.audit(record);
                    }
                    self.audit(json!({
                        "event": "task_end", "session": self.id, "task": outcome.name,
                        "sha256": outcome.sha256, "status": outcome.status.as_str(),
                        "steps": outcome.steps, "conflicts": outcome.conflicts,
                    }))?;
                    self.outcomes.push(outcome);
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::Shutdown { reason } => {
                    self.state = AgentState::Closed;
                    let _ = self.chan.send(&AgentAnswer::Goodbye {
                        reason: "bye".to_string(),
                    });
                    if !reason.is_empty() && reason != "done" {
                        let reason = if crate::signals::stopping()
                            && reason == "cancelled by the operator"
                        {
                            // The cancel was SIGTERM's, not a person's.
                            "cancelled: the broker is stopping (SIGTERM)".to_string()
                        } else {
                            crate::sanitize::one_line(&reason, 2000)
                        };
                        self.op
                            .event(&AgentEvent::Info(format!("agent finished: {reason}")));
                        self.agent_reason = Some(reason);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Turns a receive failure into the session's ending, audited.
    pub(super) fn agent_lost(&mut self, e: ChannelError) -> anyhow::Error {
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
        anyhow::anyhow!(what)
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
    pub(super) fn refresh_policy(&mut self) -> Result<(), String> {
        let stamp = policy_stamp(&self.project.agent_md_path);
        if stamp == self.policy_stamp {
            return Ok(());
        }
        let loaded = Project::load_policy(&self.ctx.layout).and_then(|(path, policy, _)| {
            let engine = crate::decide::engine_for_layout(
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
                let why = format!(
                    "agent.md no longer loads ({e:#}): this turn is refused until it is fixed"
                );
                let _ = self
                    .audit(json!({"event": "policy_rejected", "session": self.id, "error": why}));
                self.op.event(&AgentEvent::Warning(why.clone()));
                Err(why)
            }
        }
    }
}
