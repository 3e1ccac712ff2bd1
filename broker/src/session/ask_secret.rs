//! `ask_secret`: a person types a secret the model never sees.

use super::*;

impl<'a> Session<'a> {
    /// `ask_secret`: the operator types a value (no echo) for one program and
    /// delivery the model names; the model only ever gets the placeholder.
    pub(super) fn ask_secret(&mut self, call_id: &str, arguments: &str) -> ToolResult {
        let fail = |m: String| ToolResult::refused(call_id, ToolStatus::Error, m);
        if matches!(self.mode, SessionMode::Tasks { .. }) {
            return fail("ask_secret is not available in tasks mode: no operator is there to type it. End the task as BLOCKED and say which secret is needed (an administrator can add it to the secrets directory with a scope)".to_string());
        }
        let args: crate::secrets::AskSecretArgs = match serde_json::from_str(arguments) {
            Ok(a) => a,
            Err(e) => return fail(format!("invalid arguments for ask_secret: {e}")),
        };
        let program = match args.program.as_deref().map(command_plan::resolve_program) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => return fail(e),
            None => None,
        };
        let scope = match crate::secrets::session_scope(program.as_deref(), &args.delivery) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        };
        let reason = sanitize::one_line(args.reason.as_deref().unwrap_or(""), 500);
        let name = sanitize::one_line(&args.name, 64);
        let answer = self.op.ask_secret(&name, &scope, &reason);
        let record = |outcome: &str| json!({"event": "ask_secret", "session": self.id, "name": name, "scope": scope.lines(), "outcome": outcome});
        match answer {
            Ok(Some(value)) => {
                let bytes = value.len();
                match self.secrets.add_session(&name, value, scope.clone()) {
                    Ok(()) => {
                        let mut r = record("stored");
                        r["bytes"] = json!(bytes);
                        let _ = self.audit(r);
                        ToolResult::message(
                            call_id,
                            ToolStatus::Ok,
                            format!("stored for this session; use {} exactly as a whole argument/value where its scope allows: {}", crate::secrets::placeholder(&name), scope.lines().join("; ")),
                        )
                    }
                    Err(e) => {
                        let _ = self.audit(record("refused"));
                        fail(e.to_string())
                    }
                }
            }
            Ok(None) => {
                let _ = self.audit(record("declined"));
                ToolResult::refused(call_id, ToolStatus::Denied, "the operator gave no value")
            }
            Err(why) => {
                let _ = self.audit(record("unavailable"));
                fail(format!("ask_secret is not available: {why}. Ask the operator to use `sysward cli` at a terminal, or an administrator to add the secret to the secrets directory with a scope"))
            }
        }
    }
}
