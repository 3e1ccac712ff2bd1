//! A tool request: plan, decide, authorize, then run through the execute stage.

use super::dispatch::{self, Flow};
use super::*;

impl<'a> Session<'a> {
    /// A tool request: decode, decide, maybe ask, run confined, audit, answer.
    pub(super) fn tool(&mut self, req: ToolRequest) -> ToolResult {
        let started = Instant::now();
        let call_id = sanitize::one_line(&req.call_id, 64);
        if req.tool == "ask_secret" {
            return self.ask_secret(&call_id, &req.arguments);
        }
        if req.tool == sysward_ipc::tools::Tool::RegisterTool.name() {
            if let Some(dir) = self.project_tools.broker_writes().map(Path::to_path_buf) {
                return self.register_as_broker(&call_id, &req, &dir);
            }
        }
        let default_cwd = self.ctx.layout.state_dir.clone();
        // The model and the audit read the refusal's words.
        let planned = match self.skills.find(&req.tool) {
            Some(skill) => {
                crate::skills::plan(skill, &req.arguments, &default_cwd).map_err(|e| e.to_string())
            }
            None => {
                match self
                    .project_tools
                    .plan(&req.tool, &req.arguments, &self.skills, &default_cwd)
                {
                    Some(planned) => planned.map_err(|e| e.to_string()),
                    None => crate::planner::plan(&req, &default_cwd).map_err(|e| e.to_string()),
                }
            }
        };
        let planned = planned.and_then(|plan| {
            plan.check_secrets(&self.secrets)
                .map_err(|e| e.to_string())
                .map(|()| plan)
        });
        let mut clock = crate::stage_clock::StageClock::start();
        clock.mark("plan");
        let (plan, decision) = match planned {
            Ok(mut plan) => {
                let classified = crate::planner::decide(
                    &self.ctx.classifier,
                    &self.engine,
                    &plan,
                    CLASSIFY_LIMIT,
                );
                if let Some(incident) = &classified.incident {
                    let _ = self.audit(json!({
                        "event": "classifier_killed", "session": self.id, "pid": incident.pid,
                        "what": incident.what, "restarted": incident.restarted,
                        "request": sanitize::one_line(&plan.display(), 2000),
                    }));
                    log_line(
                        self.ctx,
                        &format!(
                            "session {}: the command classifier (pid {}) {}; {}",
                            self.id,
                            incident.pid,
                            incident.what,
                            if incident.restarted {
                                "a fresh one is ready"
                            } else {
                                "none could be started again"
                            }
                        ),
                    );
                }
                let mut decision = classified.decision;
                if let crate::planner::Plan::File { op, .. } = &mut plan {
                    crate::netfilter_check::grant_check_capability(op, &mut decision);
                }
                self.op.decided(
                    &call_id,
                    decision.category.as_str(),
                    decision.risk.as_str(),
                    decision.verdict.as_str(),
                );
                (plan, decision)
            }
            Err(message) => {
                let _ = self.audit(json!({"event": "tool_refused", "session": self.id, "tool": sanitize::one_line(&req.tool, 64), "arguments": sanitize::one_line(&req.arguments, 2000), "error": message}));
                return ToolResult::refused(&call_id, ToolStatus::Error, message);
            }
        };
        clock.mark("decide");
        let mut record = json!({
            "event": "tool", "session": self.id, "tool": plan.tool_name(),
            "request": plan.display(), "category": decision.category.as_str(),
            "risk": decision.risk.as_str(), "decision": decision.verdict.as_str(),
            "source": decision.source, "reason": decision.reason,
            "profile": decision.profile.as_ref().map(|p| p.to_string()),
            "model_reason": sanitize::one_line(plan.reason(), 500),
        });
        // A project tool is decided as a skill pack or as the command it
        // is; the record names the tool too.
        if self.project_tools.is_offered(&req.tool) {
            record["project_tool"] = json!(req.tool);
        }
        // The same action at most twice per task (or CLI message), whether
        // it succeeded or not: a third asks the model to use the result or
        // change approach instead of looping.
        let repeat_key = format!(
            "{}\u{0}{}\u{0}{}",
            plan.tool_name(),
            decision.normalized,
            plan.cwd().display()
        );
        let seen = self.repeats.entry(repeat_key).or_insert(0);
        if *seen >= MAX_SAME_ACTION {
            record["decision"] = json!("refused (repeated)");
            let _ = self.audit(record);
            return ToolResult::refused(
                &call_id,
                ToolStatus::Denied,
                format!("refused: this exact action already ran {MAX_SAME_ACTION} times in this task; use its result, or change approach"),
            );
        }
        *seen += 1;
        let approved_by = match &decision.verdict {
            sysward_policy::Verdict::Deny { .. } => {
                self.denials += 1;
                let _ = self.audit(record);
                return ToolResult::refused(
                    &call_id,
                    ToolStatus::Denied,
                    format!("denied by policy: {}. Do not try to work around this; choose another approach or report the blocker.", decision.reason),
                );
            }
            sysward_policy::Verdict::Ask => {
                let normalized = decision.normalized.clone();
                let key = self.approval_key(&plan, &decision);
                if self.session_allowed.contains(&normalized) {
                    "operator (allowed for this session)".to_string()
                } else if let Some(a) = self.approvals.take_granted(&key, &self.id).ok().flatten() {
                    format!(
                        "pending approval {} by {}",
                        a.id,
                        a.decided_by.clone().unwrap_or_default()
                    )
                } else if let Some(a) = self.approvals.take_denied(&key, &self.id).ok().flatten() {
                    self.denials += 1;
                    record["decision"] = json!("denied (pending approval)");
                    let _ = self.audit(record);
                    return ToolResult::refused(&call_id, ToolStatus::Denied, a.denied_message());
                } else {
                    match self.ask(&plan, &decision) {
                        Ok(who) => who,
                        Err(result) => {
                            record["decision"] = json!(result.status.as_str());
                            let _ = self.audit(record);
                            let mut r = *result;
                            r.call_id = call_id;
                            return r;
                        }
                    }
                }
            }
            _ if decision.source.starts_with("pre-approved by ") => {
                if let Some(next) = self.pre_approvals.used(&decision.source) {
                    self.engine = next;
                }
                decision.source.clone()
            }
            _ => "policy".to_string(),
        };
        record["approved_by"] = json!(approved_by);
        clock.mark("authorize");
        let mut executed = false;
        let mut action_ran = false;
        let result = if self.dry_run && !crate::planner::runs_in_dry_run(decision.category) {
            ToolResult::message(
                &call_id,
                ToolStatus::Ok,
                format!(
                    "dry run: would run `{}` with profile {}",
                    plan.display(),
                    decision
                        .profile
                        .as_ref()
                        .map(|p| p.to_string())
                        .unwrap_or_default()
                ),
            )
        } else {
            // On disk before anything runs (execute waits for it): a crash or
            // a kill during the action still leaves its record.
            let mut start = record.clone();
            start["event"] = json!("action_start");
            executed = true;
            self.actions += 1;
            let (result, change, ran) = match &plan {
                crate::planner::Plan::Net(net) => {
                    let out = self.execute_net(&call_id, net, &decision, start);
                    record["hops"] = json!(out.hops);
                    if let Some(d) = out.download {
                        record["download"] = d;
                    }
                    (out.result, None, out.ran)
                }
                _ => {
                    // Until the answer is sent (`on_tool`), or the command
                    // has run for a few milliseconds.
                    self.wake_latency.hold();
                    match self.execute(&call_id, &plan, &decision, start, &mut clock) {
                        Ok(ran) => (ran.result, ran.change, true),
                        Err(e) => {
                            let ran = e.ran();
                            (e.into_result(&call_id), None, ran)
                        }
                    }
                }
            };
            action_ran = ran;
            if let Some(c) = change {
                record["change"] = json!({"path": c.path, "diff": c.diff, "backup": c.backup, "rollback": c.rollback});
            }
            result
        };
        let result = self.project_tool_result(&req, result);
        record["status"] = json!(result.status.as_str());
        record["redactions"] = json!(result.redactions);
        record["exit_code"] = json!(result.exit_code);
        record["signal"] = json!(result.signal);
        record["duration_ms"] = json!(started.elapsed().as_millis() as u64);
        if executed {
            clock.mark("result");
            record["stages_us"] = clock.to_json();
        }
        record["bytes_out"] =
            json!(result.stdout.len() + result.stderr.len() + result.message.len());
        // The outcome of a started action rides on the start record's sync
        // (the next record or the session's end makes it durable).
        let audited = if executed {
            self.audit_lazy(record)
        } else {
            self.audit(record)
        };
        if let Err(e) = audited {
            // Nothing unaudited reaches the model.
            let what = if action_ran {
                "the action ran but the audit log failed"
            } else {
                "nothing ran, and the audit log failed"
            };
            return ToolResult::refused(&call_id, ToolStatus::Error, format!("{what}: {e}"));
        }
        result
    }

    /// A project tool's output is its JSON (as a skill pack's); a tool that
    /// `register_tool` wrote gets its pending approval, which the model is
    /// told how to have decided.
    pub(super) fn project_tool_result(
        &mut self,
        req: &ToolRequest,
        mut result: ToolResult,
    ) -> ToolResult {
        if result.status != ToolStatus::Ok {
            return result;
        }
        if req.tool == sysward_ipc::tools::Tool::RegisterTool.name() && result.exit_code.is_none() {
            let note = self.tool_registered(&req.arguments);
            result.message = format!("{}\n{note}", result.message);
        } else if self.project_tools.runs_as_command(&req.tool) {
            match crate::skills::result_text(&result.stdout) {
                Ok(text) => result.stdout = text,
                Err(why) => {
                    result.status = ToolStatus::Error;
                    result.stdout.clear();
                    result.message = why.to_string();
                }
            }
        }
        result
    }

    /// After `register_tool` wrote a tool: its pending approval (audited),
    /// and what the model is told about it.
    pub(super) fn tool_registered(&mut self, arguments: &str) -> String {
        let mode = self.project.policy.execution_mode.as_str();
        let (id, host, task) = (&self.id, &self.ctx.hostname, &self.current_task);
        let note = self
            .project_tools
            .registered(arguments, &self.approvals, |t| {
                let mut r = t.approval_request(id, host, mode);
                r.task.clone_from(task);
                r
            });
        let _ = self
            .audit(json!({"event": "project_tool_registered", "session": self.id, "note": note}));
        note
    }

    /// The identity of a request for pending approvals: an approval granted for
    /// it lets exactly this request (same command, directory and profile) run.
    pub(super) fn approval_key(
        &self,
        plan: &crate::planner::Plan,
        decision: &sysward_policy::Decision,
    ) -> String {
        let profile = decision
            .profile
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        approvals::request_key(plan.tool_name(), &decision.normalized, plan.cwd(), &profile)
    }
}

pub(super) fn on_tool(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::Tool(tool) = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    let result = s.tool(tool);
    s.op.event(&crate::record::tool_output(&result.call_id, &result));
    let answered = s.answer(AgentAnswer::Tool(result));
    s.wake_latency.release();
    answered?;
    if let Some(why) = s.ctx.pinned.stopped() {
        return Err(SessionError::Ended(why.to_string()));
    }
    Ok(Flow::Next)
}
