//! The agent's events (shown to the operator and recorded) and its task
//! outcomes (recorded as the broker, not the agent, sees them).

use super::dispatch::{self, Flow};
use super::*;

pub(super) fn on_event(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::Event(event) = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    // Only the broker says what an action produced.
    if matches!(event, AgentEvent::ToolOutput { .. }) {
        let _ = s.audit(json!({"event": "agent_refused_event", "session": s.id, "reason": "the agent sent an action's output, which only the broker reports"}));
        s.answer(AgentAnswer::Ack)?;
        return Ok(Flow::Next);
    }
    if let Some(record) = crate::record::agent_event(&s.id, &event) {
        let _ = s.audit(record);
    }
    if let AgentEvent::TaskStart { name } = &event {
        s.current_task = Some(name.clone());
        s.repeats.clear();
        s.engine = s.pre_approvals.enter(Some(name));
    }
    if let AgentEvent::Usage {
        prompt_tokens,
        completion_tokens,
    } = &event
    {
        let _ = s.audit(json!({"event": "model_usage", "session": s.id, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}));
    }
    s.op.event(&event);
    s.answer(AgentAnswer::Ack)?;
    Ok(Flow::Next)
}

pub(super) fn on_task_finished(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::TaskFinished(mut outcome) = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    if !s.pending_in_task.is_empty() && outcome.status == TaskStatus::Done {
        outcome.status = TaskStatus::Blocked;
        outcome.summary = format!(
            "approval required: {}\n{}",
            s.pending_in_task.join("; "),
            outcome.summary
        );
    }
    s.pending_in_task.clear();
    // The hash is the broker's own reading of the file, not
    // whatever the agent reports.
    let sha = s
        .tasks_expected
        .iter()
        .find(|(n, _)| *n == outcome.name)
        .map(|(_, h)| h.clone());
    if let (Some(sha), true) = (sha, outcome.status != TaskStatus::Skipped) {
        outcome.sha256 = sha.clone();
        s.records.set(&outcome.name, &sha, outcome.status);
        if let Err(e) = s.records.save(&s.ctx.layout, &s.ctx.pinned) {
            s.op.event(&AgentEvent::Warning(format!(
                "cannot record the task outcome: {}",
                crate::error::chain(&e)
            )));
        }
    }
    for record in crate::record::conflicts(&s.id, &outcome) {
        let _ = s.audit(record);
    }
    s.audit(json!({
        "event": "task_end", "session": s.id, "task": outcome.name,
        "sha256": outcome.sha256, "status": outcome.status.as_str(),
        "steps": outcome.steps, "conflicts": outcome.conflicts,
    }))?;
    s.outcomes.push(outcome);
    s.answer(AgentAnswer::Ack)?;
    Ok(Flow::Next)
}
