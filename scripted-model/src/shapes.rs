//! Recorded response shapes of real servers (files in `scripted-model/shapes/`).

use serde_json::Value;

use crate::scenario::Flavor;

/// Values substituted into a shape.
pub struct Vars<'a> {
    pub model: &'a str,
    pub context_size: u64,
    pub n_ctx_train: u64,
    pub prompt_tokens: u64,
    pub method: &'a str,
    pub path: &'a str,
}

/// What a shape file holds for error-like replies.
pub struct ShapeReply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

fn models_text(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Openai => include_str!("../shapes/openai.models.json"),
        Flavor::Vllm => include_str!("../shapes/vllm.models.json"),
        Flavor::Llamacpp => include_str!("../shapes/llamacpp.models.json"),
        Flavor::Ollama => include_str!("../shapes/ollama.models.json"),
        Flavor::Openrouter => include_str!("../shapes/openrouter.models.json"),
    }
}

fn tools_rejected_text(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Openai => include_str!("../shapes/openai.tools_rejected.json"),
        Flavor::Vllm => include_str!("../shapes/vllm.tools_rejected.json"),
        Flavor::Llamacpp => include_str!("../shapes/llamacpp.tools_rejected.json"),
        Flavor::Ollama => include_str!("../shapes/ollama.tools_rejected.json"),
        Flavor::Openrouter => include_str!("../shapes/openrouter.tools_rejected.json"),
    }
}

fn context_exceeded_text(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Openai => include_str!("../shapes/openai.context_exceeded.json"),
        Flavor::Vllm => include_str!("../shapes/vllm.context_exceeded.json"),
        Flavor::Llamacpp => include_str!("../shapes/llamacpp.context_exceeded.json"),
        Flavor::Ollama => include_str!("../shapes/ollama.context_exceeded.json"),
        Flavor::Openrouter => include_str!("../shapes/openrouter.context_exceeded.json"),
    }
}

fn not_found_text(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Openai => include_str!("../shapes/openai.not_found.json"),
        Flavor::Vllm => include_str!("../shapes/vllm.not_found.json"),
        Flavor::Llamacpp => include_str!("../shapes/llamacpp.not_found.json"),
        Flavor::Ollama => include_str!("../shapes/ollama.not_found.json"),
        Flavor::Openrouter => include_str!("../shapes/openrouter.not_found.json"),
    }
}

fn substitute(v: &mut Value, vars: &Vars<'_>) {
    match v {
        Value::String(s) => {
            let number = match s.as_str() {
                "{{CONTEXT_SIZE}}" => Some(vars.context_size),
                "{{N_CTX_TRAIN}}" => Some(vars.n_ctx_train),
                "{{PROMPT_TOKENS}}" => Some(vars.prompt_tokens),
                _ => None,
            };
            if let Some(n) = number {
                *v = Value::from(n);
            } else if s.contains("{{") {
                *s = s
                    .replace("{{MODEL}}", vars.model)
                    .replace("{{METHOD}}", vars.method)
                    .replace("{{PATH}}", vars.path)
                    .replace("{{CONTEXT_SIZE}}", &vars.context_size.to_string())
                    .replace("{{PROMPT_TOKENS}}", &vars.prompt_tokens.to_string());
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| substitute(x, vars)),
        Value::Object(o) => o.values_mut().for_each(|x| substitute(x, vars)),
        _ => {}
    }
}

fn render(text: &str, vars: &Vars<'_>) -> Value {
    // The shape files are checked by a unit test; a broken one degrades to null.
    let mut v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    substitute(&mut v, vars);
    v
}

fn render_reply(text: &str, vars: &Vars<'_>) -> ShapeReply {
    let v = render(text, vars);
    let status = v
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .unwrap_or(500);
    let body = v.get("body").cloned().unwrap_or(Value::Null);
    let ct = v.get("content_type").and_then(Value::as_str);
    match body {
        Value::String(s) => ShapeReply {
            status,
            content_type: ct.unwrap_or("text/plain; charset=utf-8").to_string(),
            body: s.into_bytes(),
        },
        other => ShapeReply {
            status,
            content_type: ct.unwrap_or("application/json").to_string(),
            body: other.to_string().into_bytes(),
        },
    }
}

/// `GET /v1/models` body.
pub fn models(flavor: Flavor, vars: &Vars<'_>) -> Value {
    render(models_text(flavor), vars)
}

/// `GET /props` body (llama.cpp only).
pub fn props(vars: &Vars<'_>) -> Value {
    render(include_str!("../shapes/llamacpp.props.json"), vars)
}

/// The flavor's "this server/model cannot take `tools`" error.
pub fn tools_rejected(flavor: Flavor, vars: &Vars<'_>) -> ShapeReply {
    render_reply(tools_rejected_text(flavor), vars)
}

/// The flavor's prompt-exceeds-context error.
pub fn context_exceeded(flavor: Flavor, vars: &Vars<'_>) -> ShapeReply {
    render_reply(context_exceeded_text(flavor), vars)
}

/// The flavor's answer for a path it does not serve.
pub fn not_found(flavor: Flavor, vars: &Vars<'_>) -> ShapeReply {
    render_reply(not_found_text(flavor), vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Flavor; 5] = [
        Flavor::Openai,
        Flavor::Vllm,
        Flavor::Llamacpp,
        Flavor::Ollama,
        Flavor::Openrouter,
    ];

    #[test]
    fn every_shape_file_is_json() {
        let mut texts = vec![include_str!("../shapes/llamacpp.props.json")];
        for f in ALL {
            texts.extend([
                models_text(f),
                tools_rejected_text(f),
                context_exceeded_text(f),
                not_found_text(f),
            ]);
        }
        for t in texts {
            assert!(serde_json::from_str::<Value>(t).is_ok(), "bad shape: {t}");
        }
    }
}
