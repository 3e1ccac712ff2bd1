//! The conversation as the agent keeps it, and its OpenAI rendering in native
//! or text mode.

use crate::toolcall::render_call;
use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// Result of a native tool call.
    Tool,
}

/// A native tool call the assistant made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub role: Role,
    pub content: String,
    /// Native calls of an assistant message.
    pub calls: Vec<Call>,
    /// For `Role::Tool`: the call it answers.
    pub call_id: Option<String>,
    /// A user message that only carries tool results (text protocol) or agent
    /// notes: never a place to cut the history.
    pub is_result: bool,
}

impl Msg {
    pub fn user(content: impl Into<String>) -> Self {
        Msg {
            role: Role::User,
            content: content.into(),
            calls: vec![],
            call_id: None,
            is_result: false,
        }
    }

    pub fn results(content: impl Into<String>) -> Self {
        Msg {
            is_result: true,
            ..Msg::user(content)
        }
    }

    pub fn assistant(content: impl Into<String>, calls: Vec<Call>) -> Self {
        Msg {
            role: Role::Assistant,
            content: content.into(),
            calls,
            call_id: None,
            is_result: false,
        }
    }

    pub fn tool(call_id: &str, content: impl Into<String>) -> Self {
        Msg {
            role: Role::Tool,
            content: content.into(),
            calls: vec![],
            call_id: Some(call_id.to_string()),
            is_result: true,
        }
    }

    /// Bytes this message adds to a request (content, calls, framing).
    pub fn weight(&self) -> usize {
        self.content.len()
            + self
                .calls
                .iter()
                .map(|c| c.arguments.len() + c.tool.len() + c.id.len() + 40)
                .sum::<usize>()
            + 16
    }

    /// The message as plain text (history shown to the operator, summaries,
    /// `recent` in contexto.mem).
    pub fn as_text(&self) -> String {
        let mut s = String::new();
        let role = match self.role {
            Role::User if self.is_result => "tool results",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool result",
        };
        s.push_str(role);
        s.push_str(": ");
        s.push_str(&self.content);
        for c in &self.calls {
            s.push('\n');
            s.push_str(&render_call(&c.tool, &c.arguments));
        }
        s
    }
}

/// OpenAI `messages` for a request. In text mode native calls become ```tool
/// blocks and native results user messages. Consecutive user messages are
/// merged (some chat templates insist on alternation).
pub fn render(system: &str, msgs: &[Msg], native: bool) -> Value {
    let mut out: Vec<Value> = vec![json!({"role": "system", "content": system})];
    for m in msgs {
        let v = match (m.role, native) {
            (Role::User, _) => json!({"role": "user", "content": m.content}),
            (Role::Assistant, true) if !m.calls.is_empty() => json!({
                "role": "assistant",
                "content": m.content,
                "tool_calls": m.calls.iter().map(|c| json!({
                    "id": c.id, "type": "function",
                    "function": {"name": c.tool, "arguments": c.arguments}})).collect::<Vec<_>>(),
            }),
            (Role::Assistant, _) => {
                let mut content = m.content.clone();
                for c in &m.calls {
                    if !content.is_empty() {
                        content.push('\n');
                    }
                    content.push_str(&render_call(&c.tool, &c.arguments));
                }
                json!({"role": "assistant", "content": content})
            }
            (Role::Tool, true) => json!({
                "role": "tool",
                "tool_call_id": m.call_id.clone().unwrap_or_default(),
                "content": m.content,
            }),
            (Role::Tool, false) => json!({"role": "user", "content": m.content}),
        };
        if v["role"] == "user" {
            if let Some(last) = out.last_mut() {
                if last["role"] == "user" {
                    let merged = format!(
                        "{}\n\n{}",
                        last["content"].as_str().unwrap_or(""),
                        v["content"].as_str().unwrap_or("")
                    );
                    last["content"] = Value::String(merged);
                    continue;
                }
            }
        }
        out.push(v);
    }
    Value::Array(out)
}

/// Largest arguments of a call that are not valid JSON kept in the history
/// as they came.
const UNPARSED_KEPT: usize = 512;

/// The arguments of a native call as the history keeps them: as sent,
/// unless they are not valid JSON and long. Those were refused as malformed
/// (the result says why) and would only fill the context on every later
/// step; the history keeps an excerpt, as a JSON object a server can render.
pub fn history_arguments(arguments: &str) -> String {
    if arguments.len() <= UNPARSED_KEPT || serde_json::from_str::<Value>(arguments).is_ok() {
        return arguments.to_string();
    }
    let mut cut = 200;
    while !arguments.is_char_boundary(cut) {
        cut -= 1;
    }
    json!({
        "unparsed_arguments_excerpt": format!("{}…", &arguments[..cut]),
        "bytes": arguments.len(),
    })
    .to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn long_unparsable_arguments_are_kept_as_an_excerpt() {
        let valid = format!("{{\"command\": \"{}\"}}", "x".repeat(4000));
        assert_eq!(history_arguments(&valid), valid);
        let short_bad = "{\"command\": \"ls";
        assert_eq!(history_arguments(short_bad), short_bad);
        let long_bad = format!("{{\"command\": \"ls\n{}", "é".repeat(3000));
        let kept = history_arguments(&long_bad);
        let v: Value = serde_json::from_str(&kept).unwrap();
        assert_eq!(v["bytes"], long_bad.len());
        assert!(kept.len() < 600, "{}", kept.len());
        assert!(v["unparsed_arguments_excerpt"]
            .as_str()
            .unwrap()
            .starts_with("{\"command\": \"ls"));
    }
}
