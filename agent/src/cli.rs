//! CLI mode: the agent side of the operator dialogue the broker relays.

use crate::context;
use crate::conversation::Msg;
use crate::link::Stop;
use crate::session::{Session, SessionEnd, TurnError};
use crate::turn::TurnEnd;
use sysward_ipc::agent::OperatorInput;

pub const HELP: &str = "\
/help              this help
/status            model, API, mode, context use, project
/context [summary] context use, summary size, journal; `summary` prints the summary
/memory            memoria.md as stored now
/policy            the effective policy
/history           this session's conversation
/journal [n]       last n journal events (20)
/compact           fold old conversation into the summary now
/secrets           names of the secrets given this session (answered by the broker)
/clear             forget the recent conversation (summary, memory, journal stay)
/quit, /exit       end the session (Ctrl+D too)";

/// What a slash command asks of the loop.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

pub fn run_cli(s: &mut Session) -> Result<SessionEnd, Stop> {
    s.link.info(format!(
        "sysward agent — model {} — mode {} — project {} — {}",
        s.setup.model.model,
        s.setup.execution_mode,
        s.setup.project_display,
        s.usage_line()
    ))?;
    loop {
        let line = match s.link.next_input() {
            Ok(OperatorInput::Line(l)) => l,
            Ok(OperatorInput::End) | Err(Stop::Cancelled) => break,
            Err(e) => return Err(e),
        };
        let line = line.trim().to_string();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('/') {
            match command(s, &line) {
                Ok(Flow::Quit) => break,
                Ok(Flow::Continue) => continue,
                Err(TurnError::Stop(Stop::Cancelled)) => continue,
                Err(TurnError::Stop(e)) => return Err(e),
                Err(TurnError::Model(m)) => {
                    s.link.warn(m)?;
                    continue;
                }
            }
        }
        s.state
            .journal("operator", &crate::redact::redact(&line).text);
        match s.run_turn(&line, None) {
            Ok(TurnEnd::Answer { text, .. }) => {
                s.state.journal("answer", &text);
            }
            Ok(TurnEnd::Incomplete { .. }) => {
                s.link
                    .warn("step budget exhausted: the answer is INCOMPLETE")?;
            }
            Ok(TurnEnd::Blocked { reason, .. }) => {
                s.link.warn(format!("stopped: {reason}"))?;
            }
            Err(TurnError::Stop(Stop::Cancelled)) => {
                s.msgs.push(Msg::results(
                    "[sysward] The operator cancelled that request.",
                ));
                s.state
                    .journal("cancel", "message cancelled by the operator");
                s.link.info("cancelled")?;
            }
            Err(TurnError::Stop(e)) => return Err(e),
            Err(TurnError::Model(m)) => {
                s.state.journal("error", &m);
                s.link.warn(m)?;
            }
        }
        s.save_context()?;
    }
    Ok(SessionEnd::new(0, "operator ended the session"))
}

fn command(s: &mut Session, line: &str) -> Result<Flow, TurnError> {
    let mut parts = line.split_whitespace();
    let cmd = parts.next().unwrap_or("");
    let arg = parts.next();
    match cmd {
        "/help" => s.link.info(HELP)?,
        "/quit" | "/exit" => return Ok(Flow::Quit),
        "/status" => {
            let text = format!(
                "model: {}\napi: {}\ntool calling: {}\nmode: {}{}\nproject: {}\nhost: {}\n{}\ncompactions: {}",
                s.setup.model.model,
                s.setup.model.api_display,
                if s.native { "native" } else { "text protocol" },
                s.setup.execution_mode,
                if s.setup.dry_run { " (dry run)" } else { "" },
                s.setup.project_display,
                s.setup.hostname,
                s.usage_line(),
                s.state.compactions
            );
            s.link.info(text)?;
        }
        "/context" => {
            if arg == Some("summary") {
                let t = if s.state.summary.trim().is_empty() {
                    "(no summary yet)".to_string()
                } else {
                    s.state.summary.clone()
                };
                s.link.info(t)?;
            } else {
                let text = format!(
                    "{}\nsummary: {} chars, {} compactions\njournal: {} events\nconversation: {} messages",
                    s.usage_line(),
                    s.state.summary.len(),
                    s.state.compactions,
                    s.state.journal.len(),
                    s.msgs.len()
                );
                s.link.info(text)?;
            }
        }
        "/memory" => {
            s.reload_memory()?;
            let t = if s.memory.trim().is_empty() {
                "(memoria.md is empty)".to_string()
            } else {
                s.memory.clone()
            };
            s.link.info(t)?;
        }
        "/policy" => {
            let t = s.setup.policy_text.clone();
            s.link.info(t)?;
        }
        "/history" => {
            let t = if s.msgs.is_empty() {
                "(no conversation yet)".to_string()
            } else {
                s.msgs
                    .iter()
                    .map(Msg::as_text)
                    .collect::<Vec<_>>()
                    .join("\n\n")
            };
            s.link.info(t)?;
        }
        "/journal" => {
            let n = arg.and_then(|a| a.parse::<usize>().ok()).unwrap_or(20);
            let j = &s.state.journal;
            let t = j[j.len().saturating_sub(n)..]
                .iter()
                .map(|e| format!("{} {} {}", e.time, e.kind, e.text))
                .collect::<Vec<_>>()
                .join("\n");
            s.link.info(if t.is_empty() {
                "(journal is empty)".into()
            } else {
                t
            })?;
        }
        "/compact" => {
            if !s.compact(true)? {
                let keep = s.msgs.len().saturating_sub(2);
                let n = context::mark_old_outputs(&mut s.msgs, keep);
                if n > 0 {
                    s.link
                        .info(format!("{n} old tool output(s) replaced by a marker"))?;
                }
            }
        }
        "/clear" => {
            s.msgs.clear();
            s.previous.clear();
            s.state.journal("operator", "conversation cleared");
            s.save_context()?;
            s.link
                .info("conversation cleared (summary, memory and journal kept)")?;
        }
        "/secrets" => s
            .link
            .info("/secrets is answered by the broker, which holds the secrets")?,
        other => s
            .link
            .warn(format!("unknown command {other}; /help lists them"))?,
    }
    Ok(Flow::Continue)
}
