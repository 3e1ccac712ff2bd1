//! Every tool of the system, in one list: the agent offers these to the
//! model (their records generate the native `tools` schema, the text
//! protocol's description and the argument check before a request leaves the
//! agent), the broker plans exactly these and the policy catalog judges
//! exactly these. A tool is added here first; an exhaustive `match` on
//! [`Tool`] in the broker's planner and the policy's catalog then refuses to
//! compile until both know it, so the three cannot drift. The broker trusts
//! none of the agent's checking: it decodes and decides again.

use serde_json::{json, Value};

/// A tool's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    Exec,
    Shell,
    ReadFile,
    WriteFile,
    EditFile,
    AppendFile,
    CopyFile,
    MoveFile,
    RemoveFile,
    Mkdir,
    ListDir,
    Stat,
    Chmod,
    Chown,
    DiffFiles,
    ApplyPatch,
    TailFile,
    ReadJournal,
    SystemInfo,
    FindProgram,
    Remember,
    Forget,
    AskSecret,
    ProbeTcp,
    ProbeDns,
    ProbeHttp,
    WebFetch,
    WebSearch,
    CveLookup,
    RegisterTool,
    Download,
}

impl Tool {
    /// Every tool, in the order the model sees them.
    pub const ALL: &'static [Tool] = &[
        Tool::Exec,
        Tool::Shell,
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::EditFile,
        Tool::AppendFile,
        Tool::CopyFile,
        Tool::MoveFile,
        Tool::RemoveFile,
        Tool::Mkdir,
        Tool::ListDir,
        Tool::Stat,
        Tool::Chmod,
        Tool::Chown,
        Tool::DiffFiles,
        Tool::ApplyPatch,
        Tool::TailFile,
        Tool::ReadJournal,
        Tool::SystemInfo,
        Tool::FindProgram,
        Tool::Remember,
        Tool::Forget,
        Tool::AskSecret,
        Tool::ProbeTcp,
        Tool::ProbeDns,
        Tool::ProbeHttp,
        Tool::WebFetch,
        Tool::WebSearch,
        Tool::CveLookup,
        Tool::RegisterTool,
        Tool::Download,
    ];

    /// The name the model calls it by.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Exec => "exec",
            Tool::Shell => "shell",
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::EditFile => "edit_file",
            Tool::AppendFile => "append_file",
            Tool::CopyFile => "copy_file",
            Tool::MoveFile => "move_file",
            Tool::RemoveFile => "remove_file",
            Tool::Mkdir => "mkdir",
            Tool::ListDir => "list_dir",
            Tool::Stat => "stat",
            Tool::Chmod => "chmod",
            Tool::Chown => "chown",
            Tool::DiffFiles => "diff_files",
            Tool::ApplyPatch => "apply_patch",
            Tool::TailFile => "tail_file",
            Tool::ReadJournal => "read_journal",
            Tool::SystemInfo => "system_info",
            Tool::FindProgram => "find_program",
            Tool::Remember => "remember",
            Tool::Forget => "forget",
            Tool::AskSecret => "ask_secret",
            Tool::ProbeTcp => "probe_tcp",
            Tool::ProbeDns => "probe_dns",
            Tool::ProbeHttp => "probe_http",
            Tool::WebFetch => "web_fetch",
            Tool::WebSearch => "web_search",
            Tool::CveLookup => "cve_lookup",
            Tool::RegisterTool => "register_tool",
            Tool::Download => "download",
        }
    }

    /// The policy flags every call of this tool needs: with one of them
    /// off the policy denies it in any form, so a session does not describe
    /// it to the model ([`withheld`]).
    pub fn gates(self) -> &'static [&'static str] {
        match self {
            Tool::ProbeTcp | Tool::ProbeDns | Tool::ProbeHttp => &["ALLOW_NETWORK"],
            Tool::WebFetch | Tool::WebSearch | Tool::CveLookup => {
                &["ALLOW_NETWORK", "ALLOW_WEB_RESEARCH"]
            }
            Tool::RegisterTool => &["ALLOW_SELF_TOOL_CREATION"],
            Tool::Download => &["ALLOW_NETWORK", "ALLOW_DOWNLOADS"],
            _ => &[],
        }
    }

    /// The tool a request names; None for a name no tool has.
    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.iter().copied().find(|t| t.name() == name)
    }
}

/// The names of the tools a session leaves out of the model's prompt: those
/// whose [`Tool::gates`] include a flag `flag_on` says is off. The broker
/// still decides (and audits) a call of one.
pub fn withheld(flag_on: impl Fn(&str) -> bool) -> Vec<String> {
    Tool::ALL
        .iter()
        .filter(|t| t.gates().iter().any(|g| !flag_on(g)))
        .map(|t| t.name().to_string())
        .collect()
}

/// Argument types, the small subset of JSON Schema the tools need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ty {
    Str,
    Int,
    Bool,
    StrList,
    /// `{"command": "...", "args": [...]}` (a validate command).
    Command,
    /// `{"NAME": "value", …}` (an environment).
    StrMap,
    /// Any JSON object (a tool's parameter schema, checked by the broker).
    Object,
}

impl Ty {
    pub fn schema(self) -> Value {
        match self {
            Ty::Str => json!({"type": "string"}),
            Ty::Int => json!({"type": "integer"}),
            Ty::Bool => json!({"type": "boolean"}),
            Ty::StrList => json!({"type": "array", "items": {"type": "string"}}),
            Ty::Command => json!({"type": "object", "properties": {
                "command": {"type": "string"},
                "args": {"type": "array", "items": {"type": "string"}}}}),
            Ty::StrMap => json!({"type": "object", "additionalProperties": {"type": "string"}}),
            Ty::Object => json!({"type": "object"}),
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Ty::Str => "str",
            Ty::Int => "int",
            Ty::Bool => "bool",
            Ty::StrList => "[str]",
            Ty::Command => "{command,args}",
            Ty::StrMap => "{NAME: str}",
            Ty::Object => "{…}",
        }
    }

    pub fn accepts(self, v: &Value) -> bool {
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
            Ty::Object => v.is_object(),
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
    /// Reaches another host over the network (through the broker's
    /// confined network executor).
    Network,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Read => "read",
            Effect::Write => "write",
            Effect::Run => "run",
            Effect::Memory => "memory",
            Effect::Secret => "secret",
            Effect::Network => "network",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ToolMeta {
    pub tool: Tool,
    pub desc: &'static str,
    pub effect: Effect,
    pub params: &'static [Param],
}

impl ToolMeta {
    pub fn name(&self) -> &'static str {
        self.tool.name()
    }

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
        tool: Tool::Exec,
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
        tool: Tool::Shell,
        desc: "Run a bash script (pipes, redirects, loops).",
        effect: Effect::Run,
        params: &[p("command", Ty::Str, true, ""), CWD, TIMEOUT, REASON],
    },
    ToolMeta {
        tool: Tool::ReadFile,
        desc: "Read a text file with line numbers.",
        effect: Effect::Read,
        params: &[
            PATH,
            p("offset", Ty::Int, false, "first line, 1-based"),
            p("limit", Ty::Int, false, "lines"),
        ],
    },
    ToolMeta {
        tool: Tool::WriteFile,
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
        tool: Tool::EditFile,
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
        tool: Tool::AppendFile,
        desc: "Append text to a file.",
        effect: Effect::Write,
        params: &[PATH, p("content", Ty::Str, true, ""), REASON],
    },
    ToolMeta {
        tool: Tool::CopyFile,
        desc: "Copy a file.",
        effect: Effect::Write,
        params: &[
            p("source", Ty::Str, true, ""),
            p("destination", Ty::Str, true, ""),
            REASON,
        ],
    },
    ToolMeta {
        tool: Tool::MoveFile,
        desc: "Move or rename a file.",
        effect: Effect::Write,
        params: &[
            p("source", Ty::Str, true, ""),
            p("destination", Ty::Str, true, ""),
            REASON,
        ],
    },
    ToolMeta {
        tool: Tool::RemoveFile,
        desc: "Delete a file or directory.",
        effect: Effect::Write,
        params: &[PATH, p("recursive", Ty::Bool, false, ""), REASON],
    },
    ToolMeta {
        tool: Tool::Mkdir,
        desc: "Create a directory (with parents).",
        effect: Effect::Write,
        params: &[PATH, p("mode", Ty::Str, false, "octal"), REASON],
    },
    ToolMeta {
        tool: Tool::ListDir,
        desc: "List a directory.",
        effect: Effect::Read,
        params: &[PATH],
    },
    ToolMeta {
        tool: Tool::Stat,
        desc: "File type, size, mode, owner, times.",
        effect: Effect::Read,
        params: &[PATH],
    },
    ToolMeta {
        tool: Tool::Chmod,
        desc: "Change file mode.",
        effect: Effect::Write,
        params: &[PATH, p("mode", Ty::Str, true, "octal"), REASON],
    },
    ToolMeta {
        tool: Tool::Chown,
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
        tool: Tool::DiffFiles,
        desc: "Unified diff of two files, or of a file and new content.",
        effect: Effect::Read,
        params: &[
            PATH,
            p("other", Ty::Str, false, ""),
            p("content", Ty::Str, false, "or this"),
        ],
    },
    ToolMeta {
        tool: Tool::ApplyPatch,
        desc: "Apply a unified diff to files, all or nothing.",
        effect: Effect::Write,
        params: &[
            p("patch", Ty::Str, true, ""),
            p("directory", Ty::Str, false, ""),
            p("strip", Ty::Int, false, ""),
            REASON,
        ],
    },
    ToolMeta {
        tool: Tool::TailFile,
        desc: "Last lines of a file; optionally follow it.",
        effect: Effect::Read,
        params: &[
            PATH,
            p("lines", Ty::Int, false, ""),
            p("follow_seconds", Ty::Int, false, "max 30"),
        ],
    },
    ToolMeta {
        tool: Tool::ReadJournal,
        desc: "systemd journal entries.",
        effect: Effect::Read,
        params: &[
            p("unit", Ty::Str, false, ""),
            p("priority", Ty::Str, false, "e.g. err"),
            p("since", Ty::Str, false, "e.g. -1h"),
            p("grep", Ty::Str, false, ""),
            p("lines", Ty::Int, false, ""),
        ],
    },
    ToolMeta {
        tool: Tool::SystemInfo,
        desc: "OS, kernel, CPU, memory, users, init, package managers, mounts, interfaces.",
        effect: Effect::Read,
        params: &[],
    },
    ToolMeta {
        tool: Tool::FindProgram,
        desc: "Check which programs exist and which package provides a missing one.",
        effect: Effect::Read,
        params: &[p("programs", Ty::StrList, true, "")],
    },
    ToolMeta {
        tool: Tool::Remember,
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
        tool: Tool::Forget,
        desc: "Remove a fact, an entry or a section from memoria.md.",
        effect: Effect::Memory,
        params: &[
            p("section", Ty::Str, true, ""),
            p("entry", Ty::Str, false, ""),
            p("fact", Ty::Str, false, "label or exact text"),
        ],
    },
    ToolMeta {
        tool: Tool::AskSecret,
        desc: "Ask the operator (CLI only) for a secret for one program: delivery arg, stdin, env:VAR or file:/path. Then use {{secret:name}} exactly as that argument/value.",
        effect: Effect::Secret,
        params: &[
            p("name", Ty::Str, true, ""),
            p("program", Ty::Str, false, ""),
            p("delivery", Ty::Str, true, ""),
            p("reason", Ty::Str, false, ""),
        ],
    },
    ToolMeta {
        tool: Tool::ProbeTcp,
        desc: "TCP port state, connect time.",
        effect: Effect::Network,
        params: &[
            p("host", Ty::Str, true, ""),
            p("port", Ty::Int, true, ""),
        ],
    },
    ToolMeta {
        tool: Tool::ProbeDns,
        desc: "DNS A/AAAA/MX/TXT/CNAME lookup.",
        effect: Effect::Network,
        params: &[
            p("name", Ty::Str, true, ""),
            p("type", Ty::Str, false, "default A"),
            p("server", Ty::Str, false, "IP[:PORT]"),
        ],
    },
    ToolMeta {
        tool: Tool::ProbeHttp,
        desc: "HTTP status, headers, TLS cert, timings.",
        effect: Effect::Network,
        params: &[p("url", Ty::Str, true, "")],
    },
    ToolMeta {
        tool: Tool::WebFetch,
        desc: "Fetch a web page as text.",
        effect: Effect::Network,
        params: &[p("url", Ty::Str, true, "")],
    },
    ToolMeta {
        tool: Tool::WebSearch,
        desc: "Search the web.",
        effect: Effect::Network,
        params: &[p("query", Ty::Str, true, ""), p("max_results", Ty::Int, false, "")],
    },
    ToolMeta {
        tool: Tool::CveLookup,
        desc: "CVEs (NVD severity, CVSS, references) judged for this host by the Debian tracker: one of cve, package, installed.",
        effect: Effect::Network,
        params: &[
            p("cve", Ty::Str, false, "e.g. CVE-2014-6271"),
            p("package", Ty::Str, false, "a Debian source package"),
            p("installed", Ty::Bool, false, "every installed package"),
        ],
    },
    ToolMeta {
        tool: Tool::RegisterTool,
        desc: "Save a script as project tool NAME; usable once a person approves it.",
        effect: Effect::Write,
        params: &[
            p("name", Ty::Str, true, ""),
            p("description", Ty::Str, true, ""),
            p("parameters", Ty::Object, false, "JSON schema of its arguments"),
            p("category", Ty::Str, true, ""),
            p("risk", Ty::Str, true, ""),
            p("script", Ty::Str, true, "#! script: JSON args on stdin, JSON out"),
            REASON,
        ],
    },
    ToolMeta {
        tool: Tool::Download,
        desc: "Download a file over HTTP(S), size-capped, verified by sha256, sha512 or checksum_url (at most one).",
        effect: Effect::Network,
        params: &[
            p("url", Ty::Str, true, ""),
            p("path", Ty::Str, false, "default .agent/downloads/NAME"),
            p("sha256", Ty::Str, false, "hex"),
            p("sha512", Ty::Str, false, "hex"),
            p("checksum_url", Ty::Str, false, "a sha256sum/sha512sum file"),
            p("overwrite", Ty::Bool, false, "replace an existing file (backup kept)"),
            TIMEOUT,
            REASON,
        ],
    },
];

/// The record of a tool named by a request (the model's spelling).
pub fn find(name: &str) -> Option<&'static ToolMeta> {
    let tool = Tool::from_name(name)?;
    TOOLS.iter().find(|t| t.tool == tool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each tool has exactly one record, in [`Tool::ALL`]'s order, and its
    /// name comes back to it.
    #[test]
    fn every_tool_has_one_record_and_one_name() {
        assert_eq!(TOOLS.len(), Tool::ALL.len());
        for (record, tool) in TOOLS.iter().zip(Tool::ALL) {
            assert_eq!(record.tool, *tool);
            assert_eq!(Tool::from_name(tool.name()), Some(*tool));
            assert_eq!(find(tool.name()).map(|r| r.tool), Some(*tool));
        }
        assert_eq!(Tool::from_name("launch_missiles"), None);
    }
}
