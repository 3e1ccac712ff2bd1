//! One metadata record per tool. The record generates the native `tools` schema,
//! the text-protocol description, the argument check done before a request
//! leaves the agent, and the one-line summary the operator sees. The broker
//! trusts none of it: it resolves effects from its own catalog.

use serde_json::{json, Map, Value};
use sysward_ipc::agent::{SessionSetup, SkillTool};
pub use sysward_ipc::tools::{find, Effect, Param, ToolMeta, Ty, TOOLS};

/// The tools a compact prompt describes. The tools left out (list_dir,
/// stat, copy_file, move_file, mkdir, chmod, chown, append_file, diff_files,
/// apply_patch, tail_file, read_journal) have plain programs that do the
/// same through `exec` (diff, patch, tail, journalctl), decided by the same
/// policy; they are still accepted when a model calls them.
const COMPACT_TOOLS: &[&str] = &[
    "exec",
    "shell",
    "read_file",
    "write_file",
    "edit_file",
    "remove_file",
    "system_info",
    "find_program",
    "remember",
    "forget",
    "ask_secret",
];

/// Whether a tool is described to the model in this session: `ask_secret`
/// only in the CLI (the one place a person can answer it), and a compact
/// prompt only [`COMPACT_TOOLS`].
fn shown(t: &ToolMeta, compact: bool, tasks_mode: bool) -> bool {
    !(tasks_mode && t.effect == Effect::Secret) && (!compact || COMPACT_TOOLS.contains(&t.name()))
}

/// Optional parameters a compact schema still describes: without them the
/// tool cannot do its common job.
const COMPACT_OPTIONAL: &[&str] = &["args", "recursive", "entry", "replace", "mode"];

/// Whether a parameter is described: compact schemas keep the required ones
/// and those in [`COMPACT_OPTIONAL`]. The others (`reason`, `cwd`,
/// `timeout_seconds`, `validate`, …) are still accepted when a model sends them.
fn shown_param(p: &Param, compact: bool) -> bool {
    !compact || p.required || COMPACT_OPTIONAL.contains(&p.name)
}

/// The native `tools` entry of one tool; `compact` drops the parameter
/// descriptions.
pub fn native_schema(t: &ToolMeta, compact: bool) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in t.params.iter().filter(|p| shown_param(p, compact)) {
        let mut s = p.ty.schema();
        if !p.desc.is_empty() && !compact {
            if let Some(o) = s.as_object_mut() {
                o.insert("description".into(), Value::String(p.desc.into()));
            }
        }
        props.insert(p.name.into(), s);
        if p.required {
            required.push(Value::String(p.name.into()));
        }
    }
    let mut params = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        params["required"] = Value::Array(required);
    }
    json!({"type": "function", "function": {
        "name": t.name(), "description": t.desc, "parameters": params}})
}

/// The `tools` array of a native request.
pub fn native_tools(compact: bool, tasks_mode: bool) -> Value {
    Value::Array(
        TOOLS
            .iter()
            .filter(|t| shown(t, compact, tasks_mode))
            .map(|t| native_schema(t, compact))
            .collect(),
    )
}

/// The tools of a session: [`native_tools`] without the tools its policy
/// withholds, and the operator's skill packs (described in compact prompts
/// too: the operator installed them for this host).
pub fn native_tools_with(compact: bool, tasks_mode: bool, setup: &SessionSetup) -> Value {
    let mut all = native_tools(compact, tasks_mode);
    if let Value::Array(list) = &mut all {
        list.retain(|t| {
            t["function"]["name"]
                .as_str()
                .is_none_or(|n| !setup.withheld_tools.iter().any(|w| w == n))
        });
        list.extend(setup.skills.iter().map(|s| skill_schema(s, compact)));
    }
    all
}

fn skill_schema(s: &SkillTool, compact: bool) -> Value {
    let mut props = Map::new();
    let mut required = Vec::new();
    for p in &s.params {
        let mut schema = p.ty.schema();
        if !p.description.is_empty() && !compact {
            if let Some(o) = schema.as_object_mut() {
                o.insert("description".into(), Value::String(p.description.clone()));
            }
        }
        props.insert(p.name.clone(), schema);
        if p.required {
            required.push(Value::String(p.name.clone()));
        }
    }
    let mut params = json!({"type": "object", "properties": props});
    if !required.is_empty() {
        params["required"] = Value::Array(required);
    }
    json!({"type": "function", "function": {
        "name": s.name, "description": format!("{} (skill pack)", s.description), "parameters": params}})
}

/// The skill packs for the text protocol, one line each as the tools are.
pub fn skills_text(skills: &[SkillTool]) -> String {
    let mut out = String::new();
    for s in skills {
        let params: Vec<String> = s
            .params
            .iter()
            .map(|p| {
                format!(
                    "{}{}: {}",
                    p.name,
                    if p.required { "*" } else { "" },
                    p.ty.text()
                )
            })
            .collect();
        out.push_str(&format!(
            "- {}({}): {} (skill pack)\n",
            s.name,
            params.join(", "),
            s.description
        ));
    }
    out
}

/// Checks a skill pack call's arguments against its manifest's parameters,
/// as [`check_args`] checks a built-in tool's (`reason` is accepted and not
/// passed on).
pub fn check_skill_args(s: &SkillTool, arguments: &str) -> Result<Map<String, Value>, String> {
    let params: Vec<(&str, Ty, bool)> = s
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.ty, p.required))
        .chain(std::iter::once(("reason", Ty::Str, false)))
        .collect();
    check_against(&s.name, &params, arguments)
}

/// One line per tool for the text protocol: `name(arg*: type, …) — description`;
/// `compact` drops the parameter descriptions.
pub fn text_description(compact: bool, tasks_mode: bool) -> String {
    text_description_without(compact, tasks_mode, &[])
}

/// [`text_description`] without the `withheld` tools.
pub fn text_description_without(compact: bool, tasks_mode: bool, withheld: &[String]) -> String {
    let mut out = String::new();
    for t in TOOLS
        .iter()
        .filter(|t| shown(t, compact, tasks_mode) && !withheld.iter().any(|w| w == t.name()))
    {
        out.push_str("- ");
        out.push_str(t.name());
        out.push('(');
        let params: Vec<&Param> = t
            .params
            .iter()
            .filter(|p| shown_param(p, compact))
            .collect();
        for (i, p) in params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(p.name);
            if p.required {
                out.push('*');
            }
            out.push_str(": ");
            out.push_str(p.ty.text());
            if !p.desc.is_empty() && !compact {
                out.push_str(" (");
                out.push_str(p.desc);
                out.push(')');
            }
        }
        out.push_str("): ");
        out.push_str(t.desc);
        out.push('\n');
    }
    out
}

/// Checks arguments against the record: a JSON object, known names, right
/// types, required present. Returns the parsed object.
pub fn check_args(t: &ToolMeta, arguments: &str) -> Result<Map<String, Value>, String> {
    let params: Vec<(&str, Ty, bool)> = t
        .params
        .iter()
        .map(|p| (p.name, p.ty, p.required))
        .collect();
    check_against(t.name(), &params, arguments)
}

/// The check of [`check_args`] against `(name, type, required)` triples.
fn check_against(
    tool: &str,
    params: &[(&str, Ty, bool)],
    arguments: &str,
) -> Result<Map<String, Value>, String> {
    let trimmed = arguments.trim();
    let v: Value = if trimmed.is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(trimmed).map_err(|e| format!("arguments are not valid JSON: {e}"))?
    };
    let Value::Object(obj) = v else {
        return Err("arguments must be a JSON object".into());
    };
    for (k, v) in &obj {
        match params.iter().find(|p| p.0 == k) {
            None => {
                let known: Vec<&str> = params.iter().map(|p| p.0).collect();
                return Err(format!(
                    "unknown argument {k:?} for {tool} (arguments: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            Some(p) if !v.is_null() && !p.1.accepts(v) => {
                return Err(format!("argument {k:?} of {tool} must be {}", p.1.text()));
            }
            Some(_) => {}
        }
    }
    for p in params.iter().filter(|p| p.2) {
        if obj.get(p.0).is_none_or(Value::is_null) {
            return Err(format!("missing required argument {:?} for {tool}", p.0));
        }
    }
    Ok(obj)
}

fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut t: String = one_line.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// The operator's one-line view of a call: `exec: systemctl status nginx`.
pub fn summary(tool: &str, args: &Map<String, Value>) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    let body = match tool {
        "exec" => {
            let mut parts: Vec<String> = Vec::new();
            if let Some(env) = args.get("env").and_then(Value::as_object) {
                parts.extend(
                    env.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))),
                );
            }
            parts.push(s("command").to_string());
            if let Some(a) = args.get("args").and_then(Value::as_array) {
                parts.extend(a.iter().filter_map(Value::as_str).map(str::to_string));
            }
            if let Some(t) = args.get("stdin").and_then(Value::as_str) {
                parts.push(format!("<<< {t}"));
            }
            parts.join(" ")
        }
        "shell" => s("command").to_string(),
        "copy_file" | "move_file" => format!("{} → {}", s("source"), s("destination")),
        "chmod" => format!("{} {}", s("mode"), s("path")),
        "chown" => format!("{}:{} {}", s("owner"), s("group"), s("path")),
        "find_program" => args
            .get("programs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default(),
        "remember" | "forget" => {
            let e = s("entry");
            if e.is_empty() {
                s("section").to_string()
            } else {
                format!("{} / {e}", s("section"))
            }
        }
        "ask_secret" => s("name").to_string(),
        "system_info" => String::new(),
        _ => s("path").to_string(),
    };
    if body.is_empty() {
        tool.to_string()
    } else {
        format!("{tool}: {}", clip(&body, 160))
    }
}
