//! `register_tool` in the installed layout. Its tools directory
//! (`/var/lib/sysward-tools`) is one no action may write, so the broker
//! writes the tool itself, through the descriptor it holds, after the same
//! checks as in a `--root DIR` project and with the same gate
//! (ALLOW_SELF_TOOL_CREATION). Registering runs nothing: the tool is offered
//! only once a person approves its exact bytes.

use super::*;

impl<'a> Session<'a> {
    /// Checks, audits and writes a tool into `dir`; then its pending
    /// approval is made and the model told how it is decided.
    pub(super) fn register_as_broker(
        &mut self,
        call_id: &str,
        req: &ToolRequest,
        dir: &Path,
    ) -> ToolResult {
        let tool = sysward_ipc::tools::Tool::RegisterTool.name();
        let refuse = |s: &Self, status: ToolStatus, message: String| {
            let _ = s.audit(
                json!({"event": "tool_refused", "session": s.id, "tool": tool,
                "arguments": sanitize::one_line(&req.arguments, 2000), "error": message}),
            );
            ToolResult::refused(call_id, status, message)
        };
        if !self.project.policy.allow_self_tool_creation {
            return refuse(
                self,
                ToolStatus::Denied,
                "register_tool is turned off (ALLOW_SELF_TOOL_CREATION=false in agent.md's policy); continue without it or report the blocker".to_string(),
            );
        }
        // A secret placeholder in a tool would be written as it is: refused.
        let checked = self
            .secrets
            .check_text("register_tool", &req.arguments)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                crate::project_tools::check_registration(&req.arguments, dir, &self.skills)
                    .map_err(|e| e.to_string())
            });
        let registration = match checked {
            Ok(r) => r,
            Err(message) => return refuse(self, ToolStatus::Error, message),
        };
        let home = dir.join(&registration.name);
        self.op.decided(call_id, "write", "low", "allow");
        if self.dry_run {
            return ToolResult::message(
                call_id,
                ToolStatus::Ok,
                format!(
                    "dry run: would register project tool {} in {}",
                    registration.name,
                    home.display()
                ),
            );
        }
        let record = json!({
            "event": "tool", "session": self.id, "tool": tool,
            "request": format!("register_tool {}", home.display()),
            "category": "write", "risk": "low", "decision": "allow",
            "source": "ALLOW_SELF_TOOL_CREATION",
            "reason": "the broker writes the tool into its own tools directory; nothing registered runs before a person approves its bytes",
            "model_reason": sanitize::one_line(&registration.reason, 500),
            "manifest": registration.manifest,
        });
        if let Err(e) = self.audit(record) {
            return ToolResult::refused(
                call_id,
                ToolStatus::Error,
                format!(
                    "nothing was registered: the audit log failed: {}",
                    crate::error::chain(&e)
                ),
            );
        }
        let written =
            self.ctx
                .pinned
                .write_in_subdir(dir, &registration.name, &registration.files());
        if let Err(e) = written {
            let message = format!("register_tool: {}", crate::error::chain(&e));
            let _ = self.audit(
                json!({"event": "tool_result", "session": self.id, "tool": tool,
                "status": "error", "message": message}),
            );
            return ToolResult::refused(call_id, ToolStatus::Error, message);
        }
        let note = self.tool_registered(&req.arguments);
        ToolResult::message(
            call_id,
            ToolStatus::Ok,
            format!(
                "wrote {} (0755) and {} (0644)\n{note}",
                home.join(sysward_ipc::exec::RegisterToolArgs::SCRIPT)
                    .display(),
                home.join(sysward_ipc::exec::RegisterToolArgs::MANIFEST)
                    .display()
            ),
        )
    }
}
