//! The text tool-calling protocol and `<think>` stripping.
//!
//! Accepted in every mode (also inside the content of a native reply): a fenced
//! block whose info string is `tool` holding `{"tool": …, "arguments": {…}}`,
//! and `<tool_call>{"name": …, "arguments": {…}}</tool_call>` (Hermes/Qwen).
//! A block that does not parse is reported back to the model as an error; free
//! text is never executed.

use serde_json::Value;

/// One call found in text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCall {
    pub tool: String,
    /// The arguments object, serialized.
    pub arguments: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The text with think blocks and call blocks removed (what the operator sees).
    pub text: String,
    pub calls: Vec<TextCall>,
    /// One line per malformed block.
    pub errors: Vec<String>,
}

/// Removes `<think>…</think>` blocks. A closing tag without an opening one (the
/// template opened it) drops everything before it; an unclosed opening tag drops
/// the rest.
pub fn strip_think(s: &str) -> String {
    const OPEN: &str = "<think>";
    const CLOSE: &str = "</think>";
    let mut rest = s;
    // Closing tag before any opening one.
    if let Some(c) = rest.find(CLOSE) {
        if rest.find(OPEN).is_none_or(|o| o > c) {
            rest = &rest[c + CLOSE.len()..];
        }
    }
    let mut out = String::with_capacity(rest.len());
    loop {
        match rest.find(OPEN) {
            None => {
                out.push_str(rest);
                break;
            }
            Some(o) => {
                out.push_str(&rest[..o]);
                let after = &rest[o + OPEN.len()..];
                match after.find(CLOSE) {
                    Some(c) => rest = &after[c + CLOSE.len()..],
                    None => break,
                }
            }
        }
    }
    out.trim().to_string()
}

/// Interprets one JSON call body: `{"tool"|"name": …, "arguments"|"args"|"parameters": {…}}`.
pub fn parse_call_json(body: &str) -> Result<TextCall, String> {
    let v: Value = serde_json::from_str(body.trim()).map_err(|e| format!("invalid JSON: {e}"))?;
    let Value::Object(o) = v else {
        return Err("the block must hold one JSON object".into());
    };
    let tool = o
        .get("tool")
        .or_else(|| o.get("name"))
        .and_then(Value::as_str)
        .ok_or("missing \"tool\" name")?
        .to_string();
    let args = o
        .get("arguments")
        .or_else(|| o.get("args"))
        .or_else(|| o.get("parameters"));
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_string(),
        Some(Value::Object(_)) => args.map(Value::to_string).unwrap_or_default(),
        // Some templates double-encode the arguments.
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Value::Object(m).to_string(),
            _ => return Err("\"arguments\" must be a JSON object".into()),
        },
        Some(_) => return Err("\"arguments\" must be a JSON object".into()),
    };
    Ok(TextCall { tool, arguments })
}

const FENCE: &str = "```tool";
const TC_OPEN: &str = "<tool_call>";
const TC_CLOSE: &str = "</tool_call>";

/// Finds text-protocol calls in (think-stripped) content.
pub fn parse(content: &str) -> Parsed {
    let content = strip_think(content);
    let mut out = Parsed::default();
    let mut text = String::new();
    let mut rest = content.as_str();
    loop {
        let fence = find_fence(rest);
        let tag = rest.find(TC_OPEN);
        let next = match (fence, tag) {
            (None, None) => None,
            (Some(f), None) => Some((f, true)),
            (None, Some(t)) => Some((t, false)),
            (Some(f), Some(t)) => Some(if f < t { (f, true) } else { (t, false) }),
        };
        let Some((at, is_fence)) = next else {
            text.push_str(rest);
            break;
        };
        text.push_str(&rest[..at]);
        if is_fence {
            let after = &rest[at + FENCE.len()..];
            // The info string must be exactly `tool`.
            let body_start = after.find('\n').map(|i| i + 1).unwrap_or(after.len());
            let body = &after[body_start..];
            match find_closing_fence(body) {
                Some((end, skip)) => {
                    push_call(&mut out, &body[..end]);
                    rest = &body[end + skip..];
                }
                None => {
                    out.errors
                        .push("malformed tool call: ```tool block is not closed with ```".into());
                    rest = "";
                }
            }
        } else {
            let after = &rest[at + TC_OPEN.len()..];
            match after.find(TC_CLOSE) {
                Some(end) => {
                    push_call(&mut out, &after[..end]);
                    rest = &after[end + TC_CLOSE.len()..];
                }
                None => {
                    // Some models stop right after the JSON; accept a complete object.
                    let body = after.trim();
                    if parse_call_json(body).is_ok() {
                        push_call(&mut out, body);
                    } else {
                        out.errors
                            .push("malformed tool call: <tool_call> is not closed".into());
                    }
                    rest = "";
                }
            }
        }
    }
    out.text = text.trim().to_string();
    out
}

fn push_call(out: &mut Parsed, body: &str) {
    match parse_call_json(body) {
        Ok(c) => out.calls.push(c),
        Err(e) => out.errors.push(format!("malformed tool call: {e}")),
    }
}

/// Position of a "```tool" fence whose info string is exactly `tool`, at a line start.
fn find_fence(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(FENCE) {
        let at = from + i;
        let line_start = at == 0 || s[..at].ends_with('\n');
        let after = &s[at + FENCE.len()..];
        let info_end = after.find('\n').unwrap_or(after.len());
        if line_start && after[..info_end].trim().is_empty() {
            return Some(at);
        }
        from = at + FENCE.len();
    }
    None
}

/// The closing fence of a block body: (offset of the fence, bytes to skip).
fn find_closing_fence(body: &str) -> Option<(usize, usize)> {
    if body.starts_with("```") {
        return Some((0, 3));
    }
    body.find("\n```").map(|i| (i, 4))
}

/// Renders a call in the text protocol (history sent in text mode).
pub fn render_call(tool: &str, arguments: &str) -> String {
    let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
    let v = serde_json::json!({"tool": tool, "arguments": args});
    format!("```tool\n{v}\n```")
}
