//! A model request, forwarded to the key-holding gateway.

use super::dispatch::{self, Flow};
use super::*;

impl<'a> Session<'a> {
    pub(super) fn model(&mut self, model: sysward_ipc::model::ModelRequest) -> ModelReply {
        if let Err(why) = self.refresh_policy() {
            return ModelReply::Failed {
                kind: ModelFailure::Refused,
                message: why.to_string(),
            };
        }
        if let Err(why) = model.check() {
            let _ = self
                .ctx
                .audit
                .record(json!({"event": "model_refused", "session": self.id, "reason": why}));
            return ModelReply::Failed {
                kind: ModelFailure::Refused,
                message: why,
            };
        }
        let cancel = self.op.cancel_token().clone();
        if cancel.is_cancelled() {
            // The turn was cancelled while an action ran: do not spend a model call.
            return ModelReply::Failed {
                kind: ModelFailure::Cancelled,
                message: "cancelled by the operator".to_string(),
            };
        }
        let reply = self.gateway.forward(model, &cancel);
        if let ModelReply::Failed {
            kind: ModelFailure::Refused,
            message,
        } = &reply
        {
            let _ = self
                .ctx
                .audit
                .record(json!({"event": "model_refused", "session": self.id, "reason": message}));
        }
        if cancel.is_cancelled() {
            return ModelReply::Failed {
                kind: ModelFailure::Cancelled,
                message: "cancelled by the operator".to_string(),
            };
        }
        reply
    }
}

pub(super) fn on_model(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::Model(model) = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    let reply = s.model(model);
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
    s.answer(AgentAnswer::Model(reply))?;
    if lost {
        return Err(SessionError::Ended(format!(
            "the model gateway failed: {message}"
        )));
    }
    Ok(Flow::Next)
}
