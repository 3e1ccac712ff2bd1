//! Project tools: scripts in `PROJECT/tools/NAME/` (in the installed
//! layout `/var/lib/sysward-tools/NAME/`, which only the broker writes) with
//! a skill-pack manifest (`skill.json`, the same format and loader as the
//! operator's packs) that the model registers with `register_tool` or an
//! operator writes. A project tool is offered to the model only once a person has
//! approved the exact bytes of its manifest and its script (`sysward approve
//! ID`; the approval's key is their SHA-256): any later change to either
//! file makes it unapproved again. Its manifest's category and risk are
//! shown to that person and approved with the bytes: a read-only or network
//! tool is then decided and confined as a skill pack of that category (the
//! kernel holds the script to it); any other is decided by the classifier
//! as the command it is (the script run as a program in the project, its
//! arguments on stdin), an unknown program, since no profile can say what
//! it may write.

use crate::approvals::{request_key, ApprovalRequest, Approvals};
use crate::command_plan::CommandPlan;
use crate::planner::{Plan, PlanError};
use crate::skills::{self, Home, Skill, Skills};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use sysward_ipc::exec::{FileOp, RegisterToolArgs};
use sysward_ipc::operator::PromptPart;

/// The `tool` of a project tool's approval in the approvals store.
pub const APPROVAL_TOOL: &str = crate::approvals::LASTING_TOOL;
/// At most this many project tools are looked at.
const MAX_TOOLS: usize = 32;
/// Largest script `register_tool` writes or a project tool may have.
pub const SCRIPT_MAX: usize = 64 << 10;
/// Lines of the manifest and the script kept for the person approving.
const LINES_SHOWN: usize = crate::approval_view::PARTS_KEPT;

/// Why a project tool is not loaded, not registered or not run: the loader's
/// warnings, and what the model is told of a `register_tool` call or of a
/// call of the tool, in the words they have always had.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("{}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{}: larger than {} KiB", path.display(), max >> 10)]
    TooLarge { path: PathBuf, max: usize },
    #[error("{}: is not UTF-8 text", .0.display())]
    NotUtf8(PathBuf),
    #[error("{0}")]
    Load(skills::SkillError),
    #[error("project tool {0}: its manifest or script changed since it was approved; it needs a new approval (see `sysward approvals` in the next session)")]
    Changed(String),
    /// A tool waiting for a person: the hint the session worked out when it
    /// started (the approval's id, or why none could be made).
    #[error("{0}")]
    NotApproved(String),
    #[error("invalid arguments for register_tool: {0}")]
    InvalidArguments(serde_json::Error),
    #[error("register_tool: {0}")]
    Name(skills::NameError),
    #[error(
        "register_tool: {0} is the name of one of the operator's skill packs; choose another name"
    )]
    PackName(String),
    #[error("register_tool: the script is larger than {} KiB", SCRIPT_MAX >> 10)]
    ScriptTooLarge,
    #[error("register_tool: the script must start with a #! line naming its interpreter")]
    NoInterpreter,
    #[error("register_tool: the script must be text without NUL bytes")]
    NulInScript,
    #[error("register_tool: {0}")]
    ManifestText(serde_json::Error),
    #[error("register_tool: {0}")]
    Manifest(skills::SkillError),
    #[error("register_tool: {} is written by the broker, not by an action", .0.display())]
    BrokerWrites(PathBuf),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// `register_tool`'s arguments (strict: an unknown field is an error).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegisterArgs {
    name: String,
    description: String,
    #[serde(default)]
    parameters: Option<serde_json::Value>,
    category: String,
    risk: String,
    script: String,
    #[serde(default)]
    reason: Option<String>,
}

/// One project tool as loaded, with the SHA-256 its approval is bound to.
#[derive(Debug, Clone)]
pub struct ProjectTool {
    pub skill: Skill,
    pub manifest_path: PathBuf,
    pub manifest: String,
    pub script: String,
    pub sha256: String,
}

impl ProjectTool {
    /// The approval key of exactly these bytes.
    pub fn approval_key(&self) -> String {
        approval_key(&self.skill.tool.name, &self.sha256)
    }

    /// The approval a person decides: the manifest and the script, line by
    /// line, as `sysward approvals` shows them.
    pub fn approval_request(&self, session: &str, host: &str, mode: &str) -> ApprovalRequest {
        let mut parts = Vec::new();
        let mut total = 0;
        for (file, text) in [("skill.json", &self.manifest), ("run", &self.script)] {
            let file = if file == "run" {
                self.skill
                    .executable
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            } else {
                file.to_string()
            };
            for line in text.lines() {
                total += 1;
                if parts.len() < LINES_SHOWN {
                    parts.push(PromptPart {
                        text: line.to_string(),
                        category: file.clone(),
                        risk: String::new(),
                    });
                }
            }
        }
        ApprovalRequest {
            session: session.to_string(),
            key: self.approval_key(),
            tool: APPROVAL_TOOL.to_string(),
            command: format!(
                "project tool {} (sha256 {}): {} — manifest {}: {} — script {}: {}",
                self.skill.tool.name,
                self.sha256,
                self.skill.tool.description,
                self.manifest_path.display(),
                self.manifest,
                self.skill.executable.display(),
                self.script
            ),
            cwd: self
                .manifest_path
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            category: if self.decided_as_skill() {
                format!(
                    "{} (approving this decides each call as {0}, as a skill pack)",
                    self.skill.category.as_str()
                )
            } else {
                format!(
                    "{} (claimed; each call is decided as the command it is)",
                    self.skill.category.as_str()
                )
            },
            risk: format!("{} (claimed)", self.skill.risk.as_str()),
            profile: if self.decided_as_skill() {
                format!(
                    "each call runs with a skill pack's {} profile: the kernel holds the script to it",
                    self.skill.category.as_str()
                )
            } else {
                "each call is decided as the command it is (an unknown program)".to_string()
            },
            reason: "a project tool is offered to the model only once a person approves its manifest and script".to_string(),
            mode: mode.to_string(),
            host: host.to_string(),
            task: None,
            parts,
            parts_total: total,
        }
    }

    /// Reads both files again: Ok when they still hash to what was approved.
    pub fn unchanged(&self) -> Result<(), ToolError> {
        let (manifest, script) = read_pair(&self.manifest_path, &self.skill.executable)?;
        if hash(&manifest, &script) == self.sha256 {
            Ok(())
        } else {
            Err(ToolError::Changed(self.skill.tool.name.clone()))
        }
    }

    /// True when a call is decided as a skill pack's is: the approved
    /// manifest says read-only or network, and the kernel holds the script
    /// to that (no write outside the action's scratch directory; network
    /// only as a network action).
    pub fn decided_as_skill(&self) -> bool {
        matches!(
            self.skill.category,
            sysward_policy::Category::ReadOnly | sysward_policy::Category::Network
        )
    }

    /// The plan of a call, the checked arguments on the script's standard
    /// input. A read-only or network tool is planned as a skill pack (a
    /// person approved these bytes, the category with them); any other is
    /// the script run as a program in the project, decided as that command
    /// (an unknown program), since no profile can say what it may write.
    pub fn plan(&self, arguments: &str, project: &Path) -> Result<Plan, PlanError> {
        if self.decided_as_skill() {
            return skills::plan(&self.skill, arguments, project);
        }
        let stdin = skills::arguments(&self.skill, arguments)?;
        Ok(Plan::Command(CommandPlan {
            argv: vec![self.skill.executable.display().to_string()],
            env: Vec::new(),
            stdin: Some(stdin),
            script: None,
            cwd: project.to_path_buf(),
            timeout_secs: Some(self.skill.timeout_secs),
            reason: String::new(),
        }))
    }
}

/// The key of an approval of tool `name` with content hash `sha256`.
pub fn approval_key(name: &str, sha256: &str) -> String {
    request_key(
        APPROVAL_TOOL,
        &format!("{name} {sha256}"),
        Path::new("/"),
        "",
    )
}

/// SHA-256 over the manifest and the script, each prefixed by its length.
fn hash(manifest: &[u8], script: &[u8]) -> String {
    let mut h = Sha256::new();
    for part in [manifest, script] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    crate::project::hex(&h.finalize())
}

fn read_pair(manifest: &Path, script: &Path) -> Result<(Vec<u8>, Vec<u8>), ToolError> {
    let read = |p: &Path, max: usize| -> Result<Vec<u8>, ToolError> {
        let failed = |error| ToolError::Read {
            path: p.to_path_buf(),
            error,
        };
        let f = crate::project::open_regular(p).map_err(failed)?;
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, max as u64 + 1), &mut out)
            .map_err(failed)?;
        if out.len() > max {
            return Err(ToolError::TooLarge {
                path: p.to_path_buf(),
                max,
            });
        }
        Ok(out)
    };
    Ok((read(manifest, 64 << 10)?, read(script, SCRIPT_MAX)?))
}

/// The project's tools, and why the others could not be used (file and
/// line, as for skill packs; they do not stop the session).
#[derive(Debug, Default)]
pub struct ProjectTools {
    pub tools: Vec<ProjectTool>,
    pub warnings: Vec<String>,
}

impl ProjectTools {
    pub fn find(&self, name: &str) -> Option<&ProjectTool> {
        self.tools.iter().find(|t| t.skill.tool.name == name)
    }
}

/// Loads every tool beneath `dir` (none when it does not exist), in name
/// order; a name taken by one of the operator's packs is refused.
pub fn load(dir: &Path, packs: &Skills) -> ProjectTools {
    let mut out = ProjectTools::default();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return out,
        Err(e) => {
            out.warnings.push(format!(
                "{}: {e}; no project tool is offered",
                dir.display()
            ));
            return out;
        }
    };
    if let Err(why) = skills::check_home(dir) {
        out.warnings
            .push(format!("no project tool is offered: {why}"));
        return out;
    }
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    if names.len() > MAX_TOOLS {
        out.warnings.push(format!(
            "{}: more than {MAX_TOOLS} project tools; only the first {MAX_TOOLS} by name are looked at",
            dir.display()
        ));
        names.truncate(MAX_TOOLS);
    }
    for name in names {
        let home = dir.join(&name);
        if packs.find(&name).is_some() {
            out.warnings.push(format!(
                "{}: {name} is the name of a skill pack; rename the project tool",
                home.display()
            ));
            continue;
        }
        match load_one(&home, &name) {
            Ok(t) => out.tools.push(t),
            Err(why) => out
                .warnings
                .push(format!("project tool not offered: {why}")),
        }
    }
    out
}

fn load_one(home: &Path, name: &str) -> Result<ProjectTool, ToolError> {
    let (skill, manifest) =
        skills::load_from(home, name, Home::Project).map_err(ToolError::Load)?;
    let manifest_path = home.join(RegisterToolArgs::MANIFEST);
    let (_, script) = read_pair(&manifest_path, &skill.executable)?;
    let script =
        String::from_utf8(script).map_err(|_| ToolError::NotUtf8(skill.executable.clone()))?;
    let sha256 = hash(manifest.as_bytes(), script.as_bytes());
    Ok(ProjectTool {
        skill,
        manifest_path,
        manifest,
        script,
        sha256,
    })
}

/// Which loaded tools a person has approved (exactly these bytes); the
/// others get a pending approval (one per content, reused while it waits)
/// whose id the returned messages name.
pub fn partition(
    tools: ProjectTools,
    approvals: &Approvals,
    request: impl Fn(&ProjectTool) -> ApprovalRequest,
) -> (Vec<ProjectTool>, Vec<(ProjectTool, String)>) {
    let mut approved = Vec::new();
    let mut waiting = Vec::new();
    for t in tools.tools {
        match approvals.granted(&t.approval_key()) {
            Ok(Some(_)) => approved.push(t),
            Ok(None) => {
                let hint = match approvals.create(request(&t)) {
                    Ok(c) => not_approved_message(&t.skill.tool.name, Some(&c.approval().id)),
                    Err(e) => format!("{}; {e}", not_approved_message(&t.skill.tool.name, None)),
                };
                waiting.push((t, hint));
            }
            Err(e) => {
                let hint = format!(
                    "{}; the approvals could not be read: {}",
                    not_approved_message(&t.skill.tool.name, None),
                    crate::error::chain(&e)
                );
                waiting.push((t, hint));
            }
        }
    }
    (approved, waiting)
}

/// What the model (and the operator) is told about a tool not yet approved.
pub fn not_approved_message(name: &str, id: Option<&str>) -> String {
    match id {
        Some(id) => format!(
            "project tool {name} is not approved: a person must review its manifest and script first (`sysward approvals` shows them; `sysward approve {id}`); it is offered from the next session after that. Do not work around this; continue without it or report the blocker."
        ),
        None => format!(
            "project tool {name} is not approved: a person must review its manifest and script first (`sysward approvals`, then `sysward approve ID`)"
        ),
    }
}

/// A `register_tool` call's checked content: the manifest built from the
/// model's fields and checked by the skill-pack loader's rules.
#[derive(Debug)]
pub struct Registration {
    pub name: String,
    pub manifest: String,
    pub script: String,
    pub reason: String,
}

impl Registration {
    /// The files of the tool's directory: the script first, then the
    /// manifest, so that a manifest never names a missing script.
    pub fn files(&self) -> [(&'static str, &[u8], u32); 2] {
        [
            (RegisterToolArgs::SCRIPT, self.script.as_bytes(), 0o755),
            (RegisterToolArgs::MANIFEST, self.manifest.as_bytes(), 0o644),
        ]
    }
}

/// Checks a `register_tool` call's arguments; `tools_dir` names the
/// manifest in errors.
pub fn check_registration(
    arguments: &str,
    tools_dir: &Path,
    packs: &Skills,
) -> Result<Registration, ToolError> {
    let a: RegisterArgs = serde_json::from_str(arguments).map_err(ToolError::InvalidArguments)?;
    skills::check_name(&a.name).map_err(ToolError::Name)?;
    if packs.find(&a.name).is_some() {
        return Err(ToolError::PackName(a.name));
    }
    if a.script.len() > SCRIPT_MAX {
        return Err(ToolError::ScriptTooLarge);
    }
    if !a.script.starts_with("#!") {
        return Err(ToolError::NoInterpreter);
    }
    if a.script.contains('\0') {
        return Err(ToolError::NulInScript);
    }
    let mut manifest = serde_json::json!({
        "description": a.description,
        "executable": RegisterToolArgs::SCRIPT,
        "category": a.category,
        "risk": a.risk,
    });
    if let Some(p) = a.parameters {
        manifest["parameters"] = p;
    }
    let manifest = serde_json::to_string_pretty(&manifest).map_err(ToolError::ManifestText)? + "\n";
    let manifest_path = tools_dir.join(&a.name).join(RegisterToolArgs::MANIFEST);
    skills::check_manifest(&manifest, &manifest_path, &a.name, Home::Project)
        .map_err(ToolError::Manifest)?;
    Ok(Registration {
        name: a.name,
        manifest,
        script: a.script,
        reason: a.reason.unwrap_or_default(),
    })
}

/// The plan of a `register_tool` call in a `--root DIR` project: the
/// checked tool written into `tools_dir/NAME/` by the executor as a file
/// tool (so the policy decides it as a write there:
/// ALLOW_SELF_TOOL_CREATION, the path rules, the audit).
pub fn register_plan(
    arguments: &str,
    tools_dir: &Path,
    packs: &Skills,
) -> Result<(Plan, String), ToolError> {
    let r = check_registration(arguments, tools_dir, packs)?;
    let dir = tools_dir.join(&r.name);
    // The tools directory itself is a target: the executor may have to
    // create it (and the grant is then its parent, the project).
    let targets = vec![
        tools_dir.to_path_buf(),
        dir.join(RegisterToolArgs::SCRIPT),
        dir.join(RegisterToolArgs::MANIFEST),
    ];
    let display = format!(
        "register_tool {}",
        crate::command_plan::shell_quote(&dir.display().to_string())
    );
    let plan = Plan::File {
        tool: "register_tool".to_string(),
        op: FileOp::RegisterTool(RegisterToolArgs {
            directory: dir.display().to_string(),
            manifest: r.manifest,
            script: r.script,
        }),
        targets,
        recursive: false,
        cwd: tools_dir.parent().unwrap_or(tools_dir).to_path_buf(),
        reason: r.reason,
        display,
    };
    Ok((plan, r.name))
}

/// Where a session's project tools live.
#[derive(Debug, Clone)]
pub enum ToolsHome {
    /// A `--root DIR` project's `tools/`: `register_tool` is a write there
    /// that an action makes, decided by the policy as any write.
    Project(PathBuf),
    /// The installed layout's tools directory
    /// ([`crate::project::INSTALLED_TOOLS_DIR`]): written by the broker
    /// alone, through its held descriptor, since no action may write it.
    /// `ignored` is `/etc/sysward/tools`, named in the warning given when an
    /// operator put tools there.
    Broker { dir: PathBuf, ignored: PathBuf },
}

impl ToolsHome {
    fn dir(&self) -> &Path {
        match self {
            ToolsHome::Project(dir) | ToolsHome::Broker { dir, .. } => dir,
        }
    }
}

/// A session's project tools: the approved ones it offers, and the names of
/// the others with what a call of one is told.
#[derive(Debug)]
pub struct SessionTools {
    home: ToolsHome,
    approved: Vec<ProjectTool>,
    waiting: Vec<(String, String)>,
}

impl SessionTools {
    /// Loads the tools of the home and sorts them by approval; the warnings
    /// name each tool that cannot be used, and each waiting for a person.
    /// In the installed layout a tool an operator put in
    /// `/etc/sysward/tools` is a warning saying where it belongs.
    pub fn start(
        home: ToolsHome,
        packs: &Skills,
        approvals: &Approvals,
        request: impl Fn(&ProjectTool) -> ApprovalRequest,
    ) -> (SessionTools, Vec<String>) {
        let mut warnings = Vec::new();
        if let ToolsHome::Broker { dir, ignored } = &home {
            if std::fs::read_dir(ignored).is_ok_and(|mut e| e.next().is_some()) {
                warnings.push(format!(
                    "{} is not used in the installed layout (no action runs programs from /etc/sysward): make each tool there a skill pack in /etc/sysward/skills/NAME/; tools the model registers are kept in {}",
                    ignored.display(),
                    dir.display()
                ));
            }
        }
        let loaded = load(home.dir(), packs);
        warnings.extend(loaded.warnings.iter().cloned());
        let (approved, waiting) = partition(loaded, approvals, request);
        let waiting: Vec<(String, String)> = waiting
            .into_iter()
            .map(|(t, hint)| (t.skill.tool.name, hint))
            .collect();
        warnings.extend(waiting.iter().map(|(_, hint)| hint.clone()));
        (
            SessionTools {
                home,
                approved,
                waiting,
            },
            warnings,
        )
    }

    /// The directory `register_tool` writes as the broker (the installed
    /// layout), or None when an action writes it (a `--root DIR` project).
    pub fn broker_writes(&self) -> Option<&Path> {
        match &self.home {
            ToolsHome::Broker { dir, .. } => Some(dir),
            ToolsHome::Project(_) => None,
        }
    }

    /// The tools the model is offered (described as skill packs are).
    pub fn offered(&self) -> Vec<sysward_ipc::agent::SkillTool> {
        self.approved.iter().map(|t| t.skill.tool.clone()).collect()
    }

    /// The names of the tools waiting for a person.
    pub fn unapproved(&self) -> Vec<String> {
        self.waiting.iter().map(|(name, _)| name.clone()).collect()
    }

    /// True when `name` is an approved project tool (its output is JSON).
    pub fn is_offered(&self, name: &str) -> bool {
        self.approved.iter().any(|t| t.skill.tool.name == name)
    }

    /// True when `name` is an approved project tool run as a program (not
    /// as a skill pack, whose JSON output the action stage reads).
    pub fn runs_as_command(&self, name: &str) -> bool {
        self.approved
            .iter()
            .any(|t| t.skill.tool.name == name && !t.decided_as_skill())
    }

    /// The plan of a call of `register_tool` or of a project tool, run in
    /// `cwd`; None for any other tool. A tool not approved, or changed since
    /// it was, is an error that says how to get it approved.
    pub fn plan(
        &self,
        tool: &str,
        arguments: &str,
        packs: &Skills,
        cwd: &Path,
    ) -> Option<Result<Plan, ToolError>> {
        if tool == sysward_ipc::tools::Tool::RegisterTool.name() {
            return Some(match &self.home {
                ToolsHome::Project(dir) => {
                    register_plan(arguments, dir, packs).map(|(plan, _)| plan)
                }
                // The session writes these itself (`broker_writes`); no
                // action may.
                ToolsHome::Broker { dir, .. } => Err(ToolError::BrokerWrites(dir.clone())),
            });
        }
        if let Some(t) = self.approved.iter().find(|t| t.skill.tool.name == tool) {
            return Some(
                t.unchanged()
                    .and_then(|()| t.plan(arguments, cwd).map_err(ToolError::from)),
            );
        }
        self.waiting
            .iter()
            .find(|(name, _)| name == tool)
            .map(|(_, hint)| Err(ToolError::NotApproved(hint.clone())))
    }

    /// After `register_tool` wrote a tool: its pending approval, and what
    /// the model is told about it.
    pub fn registered(
        &mut self,
        arguments: &str,
        approvals: &Approvals,
        request: impl Fn(&ProjectTool) -> ApprovalRequest,
    ) -> String {
        let Ok(a) = serde_json::from_str::<RegisterArgs>(arguments) else {
            return String::new();
        };
        match load_one(&self.home.dir().join(&a.name), &a.name) {
            Ok(t) => {
                if self
                    .approved
                    .iter()
                    .any(|o| o.sha256 == t.sha256 && o.skill.tool.name == a.name)
                {
                    return format!(
                        "registered project tool {} (sha256 {}): these exact bytes are approved and offered already",
                        a.name, t.sha256
                    );
                }
                if matches!(approvals.granted(&t.approval_key()), Ok(Some(_))) {
                    return format!(
                        "registered project tool {} (sha256 {}): a person approved these exact bytes before; it is offered from the next session",
                        a.name, t.sha256
                    );
                }
                let hint = match approvals.create(request(&t)) {
                    Ok(c) => not_approved_message(&a.name, Some(&c.approval().id)),
                    Err(e) => format!("{}; {e}", not_approved_message(&a.name, None)),
                };
                // A new version of an offered tool is not that tool.
                self.approved.retain(|o| o.skill.tool.name != a.name);
                self.waiting.retain(|(name, _)| name != &a.name);
                self.waiting.push((a.name.clone(), hint.clone()));
                format!(
                    "registered project tool {} (sha256 {}); it is not usable yet: {hint}",
                    a.name, t.sha256
                )
            }
            Err(why) => format!("registered, but the tool cannot be used as written: {why}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(name: &str, parameters: serde_json::Value, script: &str) -> String {
        serde_json::json!({"name": name, "description": "d", "parameters": parameters,
            "category": "read-only", "risk": "low", "script": script})
        .to_string()
    }

    #[test]
    fn register_refuses_bad_names_schemas_and_scripts() {
        let dir = Path::new("/p/tools");
        let packs = Skills::default();
        let ok = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let (plan, name) =
            register_plan(&args("good_tool", ok.clone(), "#!/bin/sh\n"), dir, &packs).unwrap();
        assert_eq!(name, "good_tool");
        let Plan::File {
            targets,
            op: FileOp::RegisterTool(a),
            ..
        } = plan
        else {
            panic!("not a register_tool file plan");
        };
        assert_eq!(a.directory, "/p/tools/good_tool");
        assert!(targets.contains(&PathBuf::from("/p/tools")));
        assert!(a.manifest.contains("\"executable\": \"run\""));
        for bad in ["../x", "a/b", "-x", "exec", "X", "a", ".hidden"] {
            assert!(
                register_plan(&args(bad, ok.clone(), "#!/bin/sh\n"), dir, &packs).is_err(),
                "{bad}"
            );
        }
        let nested = serde_json::json!({"type": "object", "properties": {"n": {"type": "object"}}});
        assert!(register_plan(&args("t_nested", nested, "#!/bin/sh\n"), dir, &packs).is_err());
        assert!(register_plan(&args("t_noshebang", ok.clone(), "echo hi\n"), dir, &packs).is_err());
        let unknown_field = r##"{"name":"t_x","description":"d","category":"read-only","risk":"low","script":"#!/bin/sh\n","path":"/etc"}"##;
        assert!(register_plan(unknown_field, dir, &packs).is_err());
    }

    #[test]
    fn the_hash_binds_both_files_and_their_boundary() {
        assert_ne!(hash(b"ab", b"c"), hash(b"a", b"bc"));
        assert_ne!(hash(b"m", b"s1"), hash(b"m", b"s2"));
        assert_eq!(hash(b"m", b"s"), hash(b"m", b"s"));
        assert_ne!(
            approval_key("t", &hash(b"m", b"s")),
            approval_key("u", &hash(b"m", b"s"))
        );
    }
}
