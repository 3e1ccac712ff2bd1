//! One metadata record per tool. The record generates the native `tools` schema,
//! the text-protocol description, the argument check done before a request
//! leaves the agent, and the one-line summary the operator sees. The broker
//! trusts none of it: it resolves effects from its own catalog.

use serde_json::{json, Map, Value};

/// Argument types, the small subset of JSON Schema the tools need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Str,
    Int,
    Bool,
    StrList,
    /// `{"command": "...", "args": [...]}` (a validate command).
    Command,
    /// `{"NAME": "value", …}` (an environment).
    StrMap,
}

impl Ty {
    fn schema(self) -> Value {
        match self {
            Ty::Str => json!({"type": "string"}),
            Ty::Int => json!({"type": "integer"}),
            Ty::Bool => json!({"type": "boolean"}),
            Ty::StrList => json!({"type": "array", "items": {"type": "string"}}),
            Ty::Command => json!({"type": "object", "properties": {
                "command": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}}}}),
            Ty::StrMap => json!({"type": "object", "additionalProperties": {"type": "string"}}),
        }
    }

    fn text(self) -> &'static str {
        match self {
            Ty::Str => "str",
            Ty::Int => "int",
            Ty::Bool => "bool",
            Ty::StrList => "[str]",
            Ty::Command => "{command,args}",
            Ty::StrMap => "{NAME: str}",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            Ty::Str => v.is_string(),
            Ty::Int => v.is_i64() || v.is_u64(),
            Ty::Bool => v.is_boolean(),
            Ty::StrList => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            Ty::Command => v.as_object().is_some_and(|o| {
                o.get("command").is_some_and(Value::is_string)
                    && o.keys().all(|k| k == "command" || k == "args")
                    && o.get("args").is_none_or(|a| Ty::StrList.accepts(a))
            }),
            Ty::StrMap => v
                .as_object()
                .is_some_and(|o| o.values().all(Value::is_string)),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    /// Shown to the model only where the name does not say enough.
    pub desc: &'static str,
}

/// What a tool does, as the agent declares it (informational; the broker
/// decides from its own catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads the host.
    Read,
    /// Changes files on the host.
    Write,
    /// Runs a program on the host.
    Run,
    /// Handled inside the agent (memoria.md).
    Memory,
    /// Asks the operator for a secret.
    Secret,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Run => "run",
            Effect::Memory => "memory",
            Effect::Secret => "secret",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ToolMeta {
    pub name: &'static str,
    pub desc: &'static str,
    pub effect: Effect,
    pub params: &'static [Param],
}

impl ToolMeta {
    /// Handled by the agent itself rather than sent to the broker.
    pub fn is_local(&self) -> bool {
        self.effect == Effect::Memory
    }
}

const fn p(name: &'static str, ty: Ty, required: bool, desc: &'static str) -> Param {
    Param {
        name,
        ty,
        required,
        desc,
    }
}

const REASON: Param = p("reason", Ty::Str, false, "");
const CWD: Param = p("cwd", Ty::Str, false, "");
const TIMEOUT: Param = p("timeout_seconds", Ty::Int, false, "");
const PATH: Param = p("path", Ty::Str, true, "");
const VALIDATE: Param = p(
    "validate",
    Ty::Command,
    false,
    "check run on the new file first; {file} = its path",
);

/// The tools of this build, in the order the model sees them.
pub static TOOLS: &[ToolMeta] = &[
    ToolMeta {
        name: "exec",
        desc: "Run a program with arguments, no shell.",
        effect: Effect::Run,
        params: &[
            p("command", Ty::Str, true, ""),
            p("args", Ty::StrList, false, ""),
            p(
                "env",
                Ty::StrMap,
                false,
                "extra environment variables, NAME: value (names A-Z 0-9 _)",
            ),
            p("stdin", Ty::Str, false, "text fed to its standard input"),
            CWD,
            TIMEOUT,
            REASON,
        ],
    },
    ToolMeta {
        name: "shell",
        desc: "Run a bash script (pipes, redirects, loops).",
        effect: Effect::Run,
        params: &[p("command", Ty::Str, true, ""), CWD, TIMEOUT, REASON],
    },
    ToolMeta {
        name: "read_file",
        desc: "Read a text file with line numbers.",
        effect: Effect::Read,
        params: &[
            PATH,
            p("offset", Ty::Int, false, "first line, 1-based"),
            p("limit", Ty::Int, false, "lines"),
        ],
    },
    ToolMeta {
        name: "write_file",
        desc: "Create or replace a file atomically (backup kept).",
        effect: Effect::Write,
        params: &[
            PATH,
            p("content", Ty::Str, true, ""),
            p("mode", Ty::Str, false, "octal, e.g. 0644"),
            VALIDATE,
            REASON,
        ],
    },
    ToolMeta {
        name: "edit_file",
        desc: "Replace one exact text fragment in a file.",
        effect: Effect::Write,
        params: &[
            PATH,
            p("old_text", Ty::Str, true, ""),
            p("new_text", Ty::Str, true, ""),
            VALIDATE,
            REASON,
        ],
    },
    ToolMeta {
        name: "append_file",
        desc: "Append text to a file.",
        effect: Effect::Write,
        params: &[PATH, p("content", Ty::Str, true, ""), REASON],
    },
    ToolMeta {
        name: "copy_file",
        desc: "Copy a file.",
        effect: Effect::Write,
        params: &[
            p("source", Ty::Str, true, ""),
            p("destination", Ty::Str, true, ""),
            REASON,
        ],
    },
    ToolMeta {
        name: "move_file",
        desc: "Move or rename a file.",
        effect: Effect::Write,
        params: &[
            p("source", Ty::Str, true, ""),
            p("destination", Ty::Str, true, ""),
            REASON,
        ],
    },
    ToolMeta {
        name: "remove_file",
        desc: "Delete a file or directory.",
        effect: Effect::Write,
        params: &[PATH, p("recursive", Ty::Bool, false, ""), REASON],
    },
    ToolMeta {
        name: "mkdir",
        desc: "Create a directory (with parents).",
        effect: Effect::Write,
        params: &[PATH, p("mode", Ty::Str, false, "octal"), REASON],
    },
    ToolMeta {
        name: "list_dir",
        desc: "List a directory.",
        effect: Effect::Read,
        params: &[PATH],
    },
    ToolMeta {
        name: "stat",
        desc: "File type, size, mode, owner, times.",
        effect: Effect::Read,
        params: &[PATH],
    },
    ToolMeta {
        name: "chmod",
        desc: "Change file mode.",
        effect: Effect::Write,
        params: &[PATH, p("mode", Ty::Str, true, "octal"), REASON],
    },
    ToolMeta {
        name: "chown",
        desc: "Change file owner and/or group.",
        effect: Effect::Write,
        params: &[
            PATH,
            p("owner", Ty::Str, false, ""),
            p("group", Ty::Str, false, ""),
            REASON,
        ],
    },
    ToolMeta {
        name: "system_info",
        desc: "OS, kernel, CPU, memory, users, init, package managers, mounts, interfaces.",
        effect: Effect::Read,
        params: &[],
    },
    ToolMeta {
        name: "find_program",
        desc: "Check which programs exist and which package provides a missing one.",
        effect: Effect::Read,
        params: &[p("programs", Ty::StrList, true, "")],
    },
    ToolMeta {
        name: "remember",
        desc: "Save durable facts to memoria.md (\"Label: value\" updates in place).",
        effect: Effect::Memory,
        params: &[
            p("section", Ty::Str, true, "e.g. Hosts"),
            p("entry", Ty::Str, false, "e.g. db01"),
            p("facts", Ty::StrList, true, ""),
            p("replace", Ty::Bool, false, "rewrite the entry"),
            p("sensitive", Ty::Bool, false, "allow a credential"),
        ],
    },
    ToolMeta {
        name: "forget",
        desc: "Remove a fact, an entry or a section from memoria.md.",
        effect: Effect::Memory,
        params: &[
            p("section", Ty::Str, true, ""),
            p("entry", Ty::Str, false, ""),
            p("fact", Ty::Str, false, "label or exact text"),
        ],
    },
    ToolMeta {
        name: "ask_secret",
        desc: "Ask the operator (CLI only) for a secret for one program: delivery arg, stdin, env:VAR or file:/path. Then use {{secret:name}} exactly as that argument/value.",
        effect: Effect::Secret,
        params: &[
            p("name", Ty::Str, true, ""),
            p("program", Ty::Str, false, ""),
            p("delivery", Ty::Str, true, ""),
            p("reason", Ty::Str, false, ""),
        ],
    },
];

pub fn find(name: &str) -> Option<&'static ToolMeta> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tools a compact prompt describes. The file tools left out (list_dir,
/// stat, copy_file, move_file, mkdir, chmod, chown, append_file) have plain
/// programs that do the same through `exec`, decided by the same policy;
/// they are still accepted when a model calls them.
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

/// Whether a tool is described to the model in this session. A compact
/// prompt keeps [`COMPACT_TOOLS`], and `ask_secret` only in the CLI (the
/// one place it works).
fn shown(t: &ToolMeta, compact: bool, tasks_mode: bool) -> bool {
    !compact || (COMPACT_TOOLS.contains(&t.name) && !(tasks_mode && t.effect == Effect::Secret))
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
        "name": t.name, "description": t.desc, "parameters": params}})
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

/// One line per tool for the text protocol: `name(arg*: type, …) — description`;
/// `compact` drops the parameter descriptions.
pub fn text_description(compact: bool, tasks_mode: bool) -> String {
    let mut out = String::new();
    for t in TOOLS.iter().filter(|t| shown(t, compact, tasks_mode)) {
        out.push_str("- ");
        out.push_str(t.name);
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
        match t.params.iter().find(|p| p.name == k) {
            None => {
                let known: Vec<&str> = t.params.iter().map(|p| p.name).collect();
                return Err(format!(
                    "unknown argument {k:?} for {} (arguments: {})",
                    t.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
            Some(p) if !v.is_null() && !p.ty.accepts(v) => {
                return Err(format!(
                    "argument {k:?} of {} must be {}",
                    t.name,
                    p.ty.text()
                ));
            }
            Some(_) => {}
        }
    }
    for p in t.params.iter().filter(|p| p.required) {
        if obj.get(p.name).is_none_or(Value::is_null) {
            return Err(format!(
                "missing required argument {:?} for {}",
                p.name, t.name
            ));
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
