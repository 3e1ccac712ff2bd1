//! Skill packs: tools an operator installs as `skills/NAME/skill.json` (a
//! manifest) and an executable beside it, in the configuration directory
//! (`/etc/sysward/skills`, `DIR/skills` with `--root`). One manifest drives
//! the schema the model sees, the gate (category and risk, from which the
//! policy decides and the profile follows, network or not) and the audit
//! row. A pack runs like any action: confined by its decision's profile,
//! the model's arguments as JSON on its standard input, its result as JSON
//! on its standard output. A manifest that cannot be used stops the session
//! before it starts, naming its file and line.

use crate::planner::PlanError;
use crate::project::{strict_modes, Place};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use sysward_ipc::agent::{SkillParam, SkillTool};
use sysward_ipc::tools::{Tool, Ty};
use sysward_policy::{Category, Risk};

/// At most this many packs.
pub const MAX_SKILLS: usize = 32;
/// Largest manifest, in bytes.
const MANIFEST_MAX: u64 = 64 << 10;
/// Longest run a manifest may ask for.
const MAX_TIMEOUT_SECS: u64 = 600;
/// At most this many parameters per pack.
const MAX_PARAMS: usize = 16;

/// Why the skill packs cannot be used; the message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("{path}: {why}")]
    Pack { path: String, why: String },
    #[error("{path} line {line} column {column}: {why}")]
    Manifest {
        path: String,
        line: usize,
        column: usize,
        why: String,
    },
    #[error("{0}: more than {MAX_SKILLS} skill packs")]
    TooMany(String),
}

/// Why a name cannot be a tool's: said inside the pack's error when a pack
/// is loaded, and to the model when it registers a project tool.
#[derive(Debug, thiserror::Error)]
pub enum NameError {
    /// The name as shown (one line, at most 64 characters).
    #[error(
        "{0:?}: a tool's name must be 2-48 characters of a-z, 0-9 and _, starting with a letter"
    )]
    Charset(String),
    #[error("{0} is the name of a built-in tool; choose another name")]
    BuiltIn(String),
}

/// Why a pack's output is not shown as its JSON: the model is told, and sees
/// the output as it was.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("the skill pack's output is not JSON ({why}); it was:\n{stdout}")]
    NotJson {
        why: serde_json::Error,
        stdout: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    description: String,
    executable: String,
    #[serde(default)]
    parameters: Option<Parameters>,
    category: String,
    risk: String,
    #[serde(default)]
    timeout_seconds: Option<u64>,
}

/// The JSON Schema subset a pack's parameters are written in: an object of
/// named properties, each a string, an integer, a boolean or an array of
/// strings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Parameters {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    properties: BTreeMap<String, Property>,
    #[serde(default)]
    required: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Property {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    items: Option<Items>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Items {
    #[serde(rename = "type")]
    kind: String,
}

/// One loaded pack.
#[derive(Debug, Clone)]
pub struct Skill {
    pub tool: SkillTool,
    pub executable: PathBuf,
    pub category: Category,
    pub risk: Risk,
    pub timeout_secs: u64,
}

/// The packs of a session.
#[derive(Debug, Clone, Default)]
pub struct Skills(Vec<Skill>);

impl Skills {
    pub fn find(&self, name: &str) -> Option<&Skill> {
        self.0.iter().find(|s| s.tool.name == name)
    }

    /// What the agent describes to the model.
    pub fn tools(&self) -> Vec<SkillTool> {
        self.0.iter().map(|s| s.tool.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn valid_name(name: &str) -> bool {
    (2..=48).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn pack_error(path: &Path, why: impl Into<String>) -> SkillError {
    SkillError::Pack {
        path: path.display().to_string(),
        why: why.into(),
    }
}

/// What a root process obeys must be root's and writable by nobody else.
fn strict(path: &Path, place: Place) -> Result<std::fs::Metadata, SkillError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| pack_error(path, e.to_string()))?;
    if meta.file_type().is_symlink() {
        return Err(pack_error(path, "is a symbolic link; use the real file"));
    }
    strict_modes(path, &meta, place).map_err(|e| pack_error(path, e.0))?;
    Ok(meta)
}

/// Checks that a directory of tools is root's and writable by nobody else.
pub fn check_home(dir: &Path) -> Result<(), SkillError> {
    strict(dir, Place::ProjectDir).map(|_| ())
}

/// Loads every pack beneath `dir` (none when it does not exist), in name
/// order.
pub fn load(dir: &Path) -> Result<Skills, SkillError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Skills::default()),
        Err(e) => return Err(pack_error(dir, e.to_string())),
    };
    strict(dir, Place::ProjectDir)?;
    let mut names: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| pack_error(dir, e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        names.push(name);
        if names.len() > MAX_SKILLS {
            return Err(SkillError::TooMany(dir.display().to_string()));
        }
    }
    names.sort();
    let mut skills = Vec::new();
    for name in names {
        skills.push(load_one(&dir.join(&name), &name)?);
    }
    Ok(Skills(skills))
}

fn ty_of(p: &Property, path: &Path, name: &str) -> Result<Ty, SkillError> {
    match (p.kind.as_str(), &p.items) {
        ("string", None) => Ok(Ty::Str),
        ("integer", None) => Ok(Ty::Int),
        ("boolean", None) => Ok(Ty::Bool),
        ("array", Some(i)) if i.kind == "string" => Ok(Ty::StrList),
        _ => Err(pack_error(
            path,
            format!("parameter {name:?}: the type must be string, integer, boolean or an array of strings"),
        )),
    }
}

/// Where a manifest lives, which decides what it may claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// The operator's skill packs: decided by the manifest's category and
    /// risk, so only read-only or network.
    Packs,
    /// A project tool (`PROJECT/tools/NAME/`): any category is accepted; a
    /// person approves it with the bytes, and only read-only and network
    /// decide a call as a pack's (any other is run as an unknown program).
    Project,
}

/// A manifest's checked content, before its executable is looked at.
struct Checked {
    tool: SkillTool,
    executable: String,
    category: Category,
    risk: Risk,
    timeout_secs: u64,
}

/// Checks a manifest's text (from `manifest_path`, which errors name) as
/// the loader does; `name` is the tool's (its directory's) name.
pub fn check_manifest(
    text: &str,
    manifest_path: &Path,
    name: &str,
    home: Home,
) -> Result<(), SkillError> {
    parse_manifest(text, manifest_path, name, home).map(|_| ())
}

fn parse_manifest(
    text: &str,
    manifest_path: &Path,
    name: &str,
    home: Home,
) -> Result<Checked, SkillError> {
    let manifest: Manifest = serde_json::from_str(text).map_err(|e| {
        let whole = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        SkillError::Manifest {
            path: manifest_path.display().to_string(),
            line: e.line(),
            column: e.column(),
            why: whole.strip_suffix(&suffix).unwrap_or(&whole).to_string(),
        }
    })?;
    let bad = |why: String| pack_error(manifest_path, why);
    if manifest.description.trim().is_empty() || manifest.description.len() > 500 {
        return Err(bad("description must be 1 to 500 characters".into()));
    }
    let category = Category::from_name(&manifest.category)
        .ok_or_else(|| bad(format!("unknown category {:?}", manifest.category)))?;
    if home == Home::Packs && !matches!(category, Category::ReadOnly | Category::Network) {
        return Err(bad(format!(
            "category {}: a skill pack is read-only or network; a change to the host is a task with its approvals",
            category.as_str()
        )));
    }
    let risk = Risk::from_name(&manifest.risk)
        .ok_or_else(|| bad(format!("unknown risk {:?}", manifest.risk)))?;
    let timeout_secs = manifest.timeout_seconds.unwrap_or(60);
    if timeout_secs == 0 || timeout_secs > MAX_TIMEOUT_SECS {
        return Err(bad(format!(
            "timeout_seconds must be 1 to {MAX_TIMEOUT_SECS}"
        )));
    }
    if manifest.executable.is_empty()
        || manifest.executable.contains('/')
        || manifest.executable.starts_with('.')
    {
        return Err(bad(
            "executable must be a file name inside the pack's directory".into(),
        ));
    }
    let mut params = Vec::new();
    if let Some(p) = &manifest.parameters {
        if p.kind != "object" {
            return Err(bad("parameters must be {\"type\": \"object\", …}".into()));
        }
        if p.properties.len() > MAX_PARAMS {
            return Err(bad(format!("more than {MAX_PARAMS} parameters")));
        }
        for r in &p.required {
            if !p.properties.contains_key(r) {
                return Err(bad(format!(
                    "required parameter {r:?} is not among the properties"
                )));
            }
        }
        for (pname, prop) in &p.properties {
            if !valid_name(pname) && pname.len() != 1 {
                return Err(bad(format!("parameter name {pname:?}: use a-z, 0-9 and _")));
            }
            params.push(SkillParam {
                name: pname.clone(),
                ty: ty_of(prop, manifest_path, pname)?,
                required: p.required.contains(pname),
                description: prop.description.clone().unwrap_or_default(),
            });
        }
    }
    Ok(Checked {
        tool: SkillTool {
            name: name.to_string(),
            description: manifest.description,
            params,
        },
        executable: manifest.executable,
        category,
        risk,
        timeout_secs,
    })
}

/// Checks a tool's name (its directory's): the charset, and no built-in's.
pub fn check_name(name: &str) -> Result<(), NameError> {
    if !valid_name(name) {
        return Err(NameError::Charset(crate::sanitize::one_line(name, 64)));
    }
    if Tool::from_name(name).is_some() {
        return Err(NameError::BuiltIn(name.to_string()));
    }
    Ok(())
}

fn load_one(pack: &Path, name: &str) -> Result<Skill, SkillError> {
    load_from(pack, name, Home::Packs).map(|(skill, _)| skill)
}

/// Loads the tool in directory `pack` named `name`; also returns the
/// manifest's text exactly as it was parsed.
pub fn load_from(pack: &Path, name: &str, home: Home) -> Result<(Skill, String), SkillError> {
    let meta = strict(pack, Place::ProjectDir)?;
    if !meta.is_dir() {
        return Err(pack_error(
            pack,
            "is not a directory (a pack is a directory holding skill.json and its executable)",
        ));
    }
    check_name(name).map_err(|why| pack_error(pack, why.to_string()))?;
    let manifest_path = pack.join("skill.json");
    let m = strict(&manifest_path, Place::File)?;
    if m.len() > MANIFEST_MAX {
        return Err(pack_error(
            &manifest_path,
            format!("is larger than {} KiB", MANIFEST_MAX >> 10),
        ));
    }
    let text = std::fs::read_to_string(&manifest_path)
        .map_err(|e| pack_error(&manifest_path, e.to_string()))?;
    let checked = parse_manifest(&text, &manifest_path, name, home)?;
    let executable = pack.join(&checked.executable);
    let exe = strict(&executable, Place::File)?;
    if !exe.is_file() || std::os::unix::fs::PermissionsExt::mode(&exe.permissions()) & 0o111 == 0 {
        return Err(pack_error(
            &executable,
            "is not an executable file (chmod 0755)",
        ));
    }
    Ok((
        Skill {
            tool: checked.tool,
            executable,
            category: checked.category,
            risk: checked.risk,
            timeout_secs: checked.timeout_secs,
        },
        text,
    ))
}

/// The model's arguments checked against the pack's parameters (the agent
/// checks too; the broker trusts none of it) and turned into the JSON the
/// pack reads on its standard input.
pub fn arguments(skill: &Skill, arguments: &str) -> Result<String, PlanError> {
    let tool = || skill.tool.name.clone();
    let v: serde_json::Value = if arguments.trim().is_empty() {
        serde_json::json!({})
    } else {
        serde_json::from_str(arguments)
            .map_err(|why| PlanError::InvalidArguments { tool: tool(), why })?
    };
    let obj = v
        .as_object()
        .ok_or_else(|| PlanError::NotAnObject { tool: tool() })?;
    let mut out = serde_json::Map::new();
    for (k, value) in obj {
        if k == "reason" {
            continue;
        }
        let p = skill
            .tool
            .params
            .iter()
            .find(|p| &p.name == k)
            .ok_or_else(|| PlanError::UnknownArgument {
                tool: tool(),
                argument: k.clone(),
            })?;
        if !p.ty.accepts(value) {
            return Err(PlanError::WrongType {
                tool: tool(),
                argument: k.clone(),
                expected: p.ty.text(),
            });
        }
        out.insert(k.clone(), value.clone());
    }
    for p in skill.tool.params.iter().filter(|p| p.required) {
        if !out.contains_key(&p.name) {
            return Err(PlanError::MissingArgument {
                tool: tool(),
                argument: p.name.clone(),
            });
        }
    }
    Ok(serde_json::Value::Object(out).to_string())
}

/// A pack's standard output as the model sees it: its JSON, indented; an
/// output that is not JSON is shown as it is, with a note.
pub fn result_text(stdout: &str) -> Result<String, OutputError> {
    match serde_json::from_str::<serde_json::Value>(stdout.trim()) {
        Ok(v) => Ok(serde_json::to_string_pretty(&v).unwrap_or_else(|_| stdout.to_string())),
        Err(why) => Err(OutputError::NotJson {
            why,
            stdout: stdout.to_string(),
        }),
    }
}

/// The plan of a call to `skill`: its executable, run as an argv with the
/// checked arguments on its standard input, in the broker's working
/// directory for actions.
pub fn plan(skill: &Skill, arguments: &str, cwd: &Path) -> Result<crate::planner::Plan, PlanError> {
    let stdin = self::arguments(skill, arguments)?;
    Ok(crate::planner::Plan::Skill {
        tool: skill.tool.name.clone(),
        category: skill.category,
        risk: skill.risk,
        command: crate::command_plan::CommandPlan {
            argv: vec![skill.executable.display().to_string()],
            env: Vec::new(),
            stdin: Some(stdin),
            script: None,
            cwd: cwd.to_path_buf(),
            timeout_secs: Some(skill.timeout_secs),
            reason: String::new(),
        },
    })
}
