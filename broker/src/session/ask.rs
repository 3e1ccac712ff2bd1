//! Asking a person: the approval panel, pending approvals, and their record.

use super::*;

impl<'a> Session<'a> {
    /// Asks the operator; `Err` carries the result to return instead of running.
    pub(super) fn ask(
        &mut self,
        plan: &crate::planner::Plan,
        decision: &sysward_policy::Decision,
    ) -> Result<String, Box<ToolResult>> {
        if self.pending >= MAX_PENDING_APPROVALS {
            self.denials += 1;
            return Err(Box::new(ToolResult::refused(
                "",
                ToolStatus::Denied,
                "denied: too many approvals pending in this session",
            )));
        }
        let prompt = ApprovalPrompt {
            id: format!(
                "{}-{}",
                &self.id[..8.min(self.id.len())],
                self.actions + self.denials + 1
            ),
            mode: self.project.policy.execution_mode.as_str().to_string(),
            host: self.ctx.hostname.clone(),
            category: decision.category.as_str().to_string(),
            risk: decision.risk.as_str().to_string(),
            // Whole: a person approves all of it (the panel elides for
            // display and shows the rest on request).
            command: sanitize::one_line(&decision.normalized, crate::approval_view::WHOLE),
            profile: decision
                .profile
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            reason: sanitize::one_line(plan.reason(), 500),
            parts: crate::approval_view::prompt_parts(&decision.parts),
            parts_total: decision.parts.len(),
        };
        self.pending += 1;
        let answer = self.op.approve(&prompt);
        self.pending -= 1;
        if answer.is_none() {
            self.pending_in_task.push(prompt.command.clone());
            let request = ApprovalRequest {
                session: self.id.clone(),
                key: self.approval_key(plan, decision),
                tool: plan.tool_name().to_string(),
                command: prompt.command.clone(),
                cwd: plan.cwd().display().to_string(),
                category: prompt.category.clone(),
                risk: prompt.risk.clone(),
                profile: prompt.profile.clone(),
                reason: prompt.reason.clone(),
                mode: prompt.mode.clone(),
                host: prompt.host.clone(),
                task: self.current_task.clone(),
                parts: prompt.parts.clone(),
                parts_total: prompt.parts_total,
            };
            return match self.approvals.create(request) {
                Ok(created) => {
                    let a = created.approval();
                    let _ = self.audit(json!({"event": "approval_pending", "session": self.id, "approval": a.id, "command": prompt.command}));
                    log_line(
                        self.ctx,
                        &format!(
                            "session {}: approval {} pending: {}",
                            self.id, a.id, prompt.command
                        ),
                    );
                    self.op.event(&AgentEvent::Info(format!(
                        "pending approval {id}: {} ({} · risk {}) — to allow it: sysward approve {id} (then run again); to refuse: sysward deny {id}",
                        crate::approval_view::elide(&prompt.command, 160, 80, ""),
                        prompt.category,
                        prompt.risk,
                        id = a.id
                    )));
                    Err(Box::new(ToolResult::refused(
                        "",
                        ToolStatus::PendingApproval,
                        a.blocked_message(),
                    )))
                }
                Err(e) => {
                    self.denials += 1;
                    Err(Box::new(ToolResult::refused(
                        "",
                        ToolStatus::Denied,
                        e.to_string(),
                    )))
                }
            };
        }
        match answer {
            None => Err(Box::new(ToolResult::refused(
                "",
                ToolStatus::PendingApproval,
                "approval required",
            ))),
            Some((ApprovalDecision::AllowOnce, _)) => {
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} allowed once: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                Ok(format!("operator (once): {}", self.operator))
            }
            Some((ApprovalDecision::AllowSession { confirmed: true }, _)) => {
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} allowed for the session: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                self.session_allowed.insert(decision.normalized.clone());
                Ok(format!("operator (for this session): {}", self.operator))
            }
            Some((ApprovalDecision::AllowSession { confirmed: false }, _))
            | Some((ApprovalDecision::Deny, _)) => {
                self.denials += 1;
                let note = match answer {
                    Some((_, note)) if !note.is_empty() => {
                        format!(": {}", sanitize::one_line(&note, 500))
                    }
                    _ => String::new(),
                };
                let _ = self.audit(json!({"event": "approval_denied", "session": self.id, "command": prompt.command, "by": self.operator}));
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} denied: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                Err(Box::new(ToolResult::refused(
                    "",
                    ToolStatus::Denied,
                    format!("denied by the operator{note}"),
                )))
            }
        }
    }
}
