//! The bridge between a decoded tool request and the pure policy engine: the
//! broker's canonical plan of what will run, the engine's decision about it, and
//! the executor spec built from the plan (never from the request).

use crate::classifier::{Classified, ClassifierPool, EngineHandle};
use crate::command_plan::{self, CommandPlan};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use sysward_ipc::agent::ToolRequest;
use sysward_ipc::exec::{
    AppendFileArgs, ChmodArgs, ChownArgs, CommandSpec, CopyFileArgs, DiffFilesArgs, EditFileArgs,
    ExecSpec, FileOp, ListDirArgs, MkdirArgs, MoveFileArgs, ReadFileArgs, RemoveFileArgs, StatArgs,
    TailFileArgs, WriteFileArgs, FILE_WRITE_MAX,
};
use sysward_ipc::profile::ConfinementProfile;
use sysward_ipc::tools::Tool;
use sysward_policy::{Category, HostFacts, OwnedRequest};

/// Why a tool call cannot be planned (or its plan cannot run): what the
/// model is told and the audit's `tool_refused` records, so each variant's
/// words are the ones the broker has always said. Text from the crates that
/// still answer with a `String` (command planning, the journal, network
/// tools, program lookup) is carried as it came.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("unknown tool {0:?}: the broker runs only the tools it knows")]
    UnknownTool(String),
    #[error("invalid arguments for {tool}: {why}")]
    InvalidArguments {
        tool: String,
        why: serde_json::Error,
    },
    #[error("arguments for {tool} must be a JSON object")]
    NotAnObject { tool: String },
    #[error("unknown argument {argument:?} for {tool}")]
    UnknownArgument { tool: String, argument: String },
    #[error("argument {argument:?} of {tool} must be {expected}")]
    WrongType {
        tool: String,
        argument: String,
        expected: &'static str,
    },
    #[error("missing required argument {argument:?} for {tool}")]
    MissingArgument { tool: String, argument: String },
    #[error("{0} is not an action the broker runs")]
    NotAnAction(&'static str),
    #[error("register_tool is planned with the project's tools")]
    RegisterTool,
    #[error("find_program needs 1 to 32 program names")]
    ProgramCount,
    #[error("find_program: {0:?} is not a program name")]
    NotAProgramName(String),
    #[error("a path must be non-empty and contain no NUL byte")]
    BadPath,
    #[error("{tool}: content is larger than {FILE_WRITE_MAX} bytes")]
    ContentTooLarge { tool: &'static str },
    #[error("diff_files needs exactly one of `other` (a file) or `content`")]
    DiffNeedsOne,
    #[error("tail_file: lines must be 1 to {MAX_TAIL_LINES}")]
    TailLines,
    #[error("tail_file: follow_seconds is at most {MAX_FOLLOW_SECS}")]
    FollowTooLong,
    #[error("{0} is not a file tool")]
    NotAFileTool(String),
    #[error("{0} runs in the network executor, not sysward-exec")]
    NetworkTool(&'static str),
    /// A secret placeholder that cannot be substituted where it stands.
    #[error("{0}")]
    Secret(crate::secrets::SecretError),
    #[error(transparent)]
    Patch(#[from] crate::patch_plan::PatchPlanError),
    /// `command_plan::command_plan`'s own words.
    #[error("{0}")]
    Command(String),
    /// `journal::argv`'s own words.
    #[error("{0}")]
    Journal(String),
    /// `net_action::plan`'s own words.
    #[error("{0}")]
    Net(String),
    /// `command_plan::resolve_program`'s own words.
    #[error("{0}")]
    Program(String),
}

/// What the broker will do for one request.
#[derive(Debug, Clone)]
pub enum Plan {
    Command(CommandPlan),
    /// A broker-defined read-only script (system_info, find_program), decided
    /// as the tool it implements.
    Builtin {
        tool: String,
        command: CommandPlan,
    },
    /// A tool of the operator's skill packs: decided by
    /// its manifest's category and risk, run as its executable.
    Skill {
        tool: String,
        category: Category,
        risk: sysward_policy::Risk,
        command: CommandPlan,
    },
    File {
        tool: String,
        op: FileOp,
        targets: Vec<PathBuf>,
        recursive: bool,
        cwd: PathBuf,
        reason: String,
        display: String,
    },
    /// A network tool, run by the confined network executor.
    Net(crate::net_action::NetPlan),
}

/// Decodes a tool request into the broker's plan. Unknown tools and malformed
/// arguments are errors the model sees.
pub fn plan(req: &ToolRequest, default_cwd: &Path) -> std::result::Result<Plan, PlanError> {
    let Some(tool) = Tool::from_name(&req.tool) else {
        return Err(PlanError::UnknownTool(crate::sanitize::one_line(
            &req.tool, 64,
        )));
    };
    match tool {
        Tool::Exec | Tool::Shell => Ok(Plan::Command(
            command_plan::command_plan(&req.tool, &req.arguments, default_cwd)
                .map_err(PlanError::Command)?,
        )),
        Tool::ReadFile
        | Tool::WriteFile
        | Tool::EditFile
        | Tool::AppendFile
        | Tool::CopyFile
        | Tool::MoveFile
        | Tool::RemoveFile
        | Tool::Mkdir
        | Tool::ListDir
        | Tool::Stat
        | Tool::Chmod
        | Tool::Chown
        | Tool::DiffFiles
        | Tool::TailFile
        | Tool::ApplyPatch => file_plan(&req.tool, &req.arguments, default_cwd),
        Tool::ReadJournal => {
            let argv = crate::journal::argv(&req.arguments).map_err(PlanError::Journal)?;
            Ok(Plan::Builtin {
                tool: tool.name().to_string(),
                command: CommandPlan {
                    argv,
                    env: Vec::new(),
                    stdin: None,
                    script: None,
                    cwd: default_cwd.to_path_buf(),
                    timeout_secs: Some(60),
                    reason: String::new(),
                },
            })
        }
        Tool::SystemInfo => {
            let _: serde_json::Map<String, serde_json::Value> =
                decode("system_info", &req.arguments)?;
            Ok(builtin(
                "system_info",
                SYSTEM_INFO_SCRIPT.to_string(),
                default_cwd,
            ))
        }
        Tool::FindProgram => {
            let a: FindProgramArgs = decode("find_program", &req.arguments)?;
            Ok(builtin(
                "find_program",
                find_program_script(&a.programs)?,
                default_cwd,
            ))
        }
        // The agent keeps memoria.md itself (each change reaches the broker
        // as its own audited request), and a secret is asked for by its own
        // request kind: neither is an action.
        Tool::ProbeTcp
        | Tool::ProbeDns
        | Tool::ProbeHttp
        | Tool::WebFetch
        | Tool::WebSearch
        | Tool::CveLookup
        | Tool::Download => Ok(Plan::Net(
            crate::net_action::plan(tool, &req.arguments, default_cwd).map_err(PlanError::Net)?,
        )),
        Tool::Remember | Tool::Forget | Tool::AskSecret => Err(PlanError::NotAnAction(tool.name())),
        // Planned by the session, which knows the project's tools directory
        // and the skill packs whose names it may not take.
        Tool::RegisterTool => Err(PlanError::RegisterTool),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FindProgramArgs {
    programs: Vec<String>,
}

/// `system_info`: a fixed read-only script, never anything from the request.
const SYSTEM_INFO_SCRIPT: &str = r#"echo "== os"; cat /etc/os-release 2>/dev/null | grep -E '^(PRETTY_NAME|ID|VERSION_ID)='
echo "== kernel"; uname -srmo
echo "== cpu"; nproc; grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-
echo "== memory"; grep -E '^(MemTotal|MemAvailable|SwapTotal):' /proc/meminfo
echo "== identity"; echo "uid=$(id -u) euid=$(id -u) user=$(id -un)"
echo "== escalation"; for p in sudo doas; do command -v $p >/dev/null && echo "$p: present" || echo "$p: absent"; done
echo "== init"; ps -p 1 -o comm= 2>/dev/null || cat /proc/1/comm
echo "== package managers"; for p in apt-get dpkg dnf yum pacman zypper apk pip3 npm; do command -v $p >/dev/null && echo "$p"; done
echo "== mounts"; grep -vE ' (proc|sysfs|cgroup2?|devpts|mqueue|securityfs|pstore|bpf|tracefs|debugfs|configfs|fusectl|hugetlbfs|autofs|binfmt_misc) ' /proc/mounts
echo "== interfaces"; ip -brief address 2>/dev/null || cat /proc/net/dev"#;

/// `find_program`: which of the named programs exist, and which package
/// provides a missing one (dpkg -S on Debian). Names are checked, then quoted.
fn find_program_script(programs: &[String]) -> std::result::Result<String, PlanError> {
    if programs.is_empty() || programs.len() > 32 {
        return Err(PlanError::ProgramCount);
    }
    let mut script = String::new();
    for p in programs {
        if p.is_empty()
            || p.len() > 64
            || !p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
        {
            return Err(PlanError::NotAProgramName(crate::sanitize::one_line(p, 64)));
        }
        script.push_str(&format!(
            "if command -v {p} >/dev/null 2>&1; then echo \"{p}: $(command -v {p})\"; else echo \"{p}: not installed\"; (dpkg -S \"bin/{p}\" 2>/dev/null || true) | head -3; fi\n"
        ));
    }
    Ok(script)
}

fn builtin(tool: &str, script: String, cwd: &Path) -> Plan {
    Plan::Builtin {
        tool: tool.to_string(),
        command: CommandPlan {
            argv: vec!["bash".to_string(), "-c".to_string(), script.clone()],
            env: Vec::new(),
            stdin: None,
            script: Some(script),
            cwd: cwd.to_path_buf(),
            timeout_secs: Some(30),
            reason: String::new(),
        },
    }
}

fn decode<T: serde::de::DeserializeOwned>(
    tool: &str,
    arguments: &str,
) -> std::result::Result<T, PlanError> {
    serde_json::from_str(arguments).map_err(|why| PlanError::InvalidArguments {
        tool: tool.to_string(),
        why,
    })
}

/// Makes `p` absolute against `cwd`, refusing NUL bytes.
fn abs_string(p: &mut String, cwd: &Path) -> std::result::Result<PathBuf, PlanError> {
    if p.is_empty() || p.contains('\0') {
        return Err(PlanError::BadPath);
    }
    let path = absolute(p, cwd);
    *p = path.display().to_string();
    Ok(path)
}

/// A file tool: strict decoding into the executor's argument structs, every
/// path made absolute, the targets the policy judges.
fn file_plan(tool: &str, arguments: &str, cwd: &Path) -> std::result::Result<Plan, PlanError> {
    let mut recursive = false;
    let (op, targets, reason) = match tool {
        "read_file" => {
            let mut a: ReadFileArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::ReadFile(a))
        }
        "write_file" => {
            let mut a: WriteFileArgs = decode(tool, arguments)?;
            if a.content.len() > FILE_WRITE_MAX {
                return Err(PlanError::ContentTooLarge { tool: "write_file" });
            }
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::WriteFile(a))
        }
        "edit_file" => {
            let mut a: EditFileArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::EditFile(a))
        }
        "append_file" => {
            let mut a: AppendFileArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::AppendFile(a))
        }
        "copy_file" => {
            let mut a: CopyFileArgs = decode(tool, arguments)?;
            let t = vec![
                abs_string(&mut a.source, cwd)?,
                abs_string(&mut a.destination, cwd)?,
            ];
            (a.reason.clone(), t, FileOp::CopyFile(a))
        }
        "move_file" => {
            let mut a: MoveFileArgs = decode(tool, arguments)?;
            let t = vec![
                abs_string(&mut a.source, cwd)?,
                abs_string(&mut a.destination, cwd)?,
            ];
            (a.reason.clone(), t, FileOp::MoveFile(a))
        }
        "remove_file" => {
            let mut a: RemoveFileArgs = decode(tool, arguments)?;
            recursive = a.recursive.unwrap_or(false);
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::RemoveFile(a))
        }
        "mkdir" => {
            let mut a: MkdirArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::Mkdir(a))
        }
        "list_dir" => {
            let mut a: ListDirArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::ListDir(a))
        }
        "stat" => {
            let mut a: StatArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::Stat(a))
        }
        "chmod" => {
            let mut a: ChmodArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::Chmod(a))
        }
        "chown" => {
            let mut a: ChownArgs = decode(tool, arguments)?;
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::Chown(a))
        }
        "diff_files" => {
            let mut a: DiffFilesArgs = decode(tool, arguments)?;
            let mut t = vec![abs_string(&mut a.path, cwd)?];
            match (&mut a.other, &a.content) {
                (Some(other), None) => t.push(abs_string(other, cwd)?),
                (None, Some(c)) if c.len() <= FILE_WRITE_MAX => {}
                (None, Some(_)) => return Err(PlanError::ContentTooLarge { tool: "diff_files" }),
                _ => return Err(PlanError::DiffNeedsOne),
            }
            (a.reason.clone(), t, FileOp::DiffFiles(a))
        }
        "tail_file" => {
            let mut a: TailFileArgs = decode(tool, arguments)?;
            if a.lines.is_some_and(|n| n == 0 || n > MAX_TAIL_LINES) {
                return Err(PlanError::TailLines);
            }
            if a.follow_seconds.is_some_and(|s| s > MAX_FOLLOW_SECS) {
                return Err(PlanError::FollowTooLong);
            }
            let t = vec![abs_string(&mut a.path, cwd)?];
            (a.reason.clone(), t, FileOp::TailFile(a))
        }
        "apply_patch" => crate::patch_plan::plan(arguments, cwd)?,
        other => return Err(PlanError::NotAFileTool(other.to_string())),
    }
    .pipe_reorder();
    let display = format!(
        "{tool} {}",
        targets
            .iter()
            .map(|t| command_plan::shell_quote(&t.display().to_string()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok(Plan::File {
        tool: tool.to_string(),
        op,
        targets,
        recursive,
        cwd: cwd.to_path_buf(),
        reason: reason.unwrap_or_default(),
        display,
    })
}

/// tail_file shows at most this many lines.
pub const MAX_TAIL_LINES: u64 = 5000;
/// tail_file follows a file for at most this long (well inside a read-only
/// action's timeout).
pub const MAX_FOLLOW_SECS: u64 = 30;

/// Puts a `(reason, targets, op)` triple in `(op, targets, reason)` order.
trait PipeReorder {
    fn pipe_reorder(self) -> (FileOp, Vec<PathBuf>, Option<String>);
}

impl PipeReorder for (Option<String>, Vec<PathBuf>, FileOp) {
    fn pipe_reorder(self) -> (FileOp, Vec<PathBuf>, Option<String>) {
        (self.2, self.1, self.0)
    }
}

fn absolute(p: &str, cwd: &Path) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        cwd.join(path)
    }
}

impl Plan {
    pub fn tool_name(&self) -> &str {
        match self {
            Plan::Command(c) if c.script.is_some() => "shell",
            Plan::Command(_) => "exec",
            Plan::Builtin { tool, .. } | Plan::Skill { tool, .. } | Plan::File { tool, .. } => tool,
            Plan::Net(n) => n.tool.name(),
        }
    }

    pub fn display(&self) -> String {
        match self {
            Plan::Command(c) => c.display(),
            Plan::Builtin { tool, .. } => tool.clone(),
            Plan::Skill { tool, command, .. } => {
                format!("{tool} {}", command.stdin.as_deref().unwrap_or("{}"))
            }
            Plan::File { display, .. } => display.clone(),
            Plan::Net(n) => n.display.clone(),
        }
    }

    /// True when a file tool targets something outside `project` (backups
    /// are made for those, seed BACKUP_BEFORE_SYSTEM_EDIT).
    pub fn touches_outside(&self, project: &Path) -> bool {
        match self {
            Plan::File { targets, .. } => targets.iter().any(|t| !t.starts_with(project)),
            _ => false,
        }
    }

    /// The working directory the request runs in.
    pub fn cwd(&self) -> &Path {
        match self {
            Plan::Command(c)
            | Plan::Builtin { command: c, .. }
            | Plan::Skill { command: c, .. } => &c.cwd,
            Plan::File { cwd, .. } => cwd,
            Plan::Net(n) => &n.cwd,
        }
    }

    /// Refuses a request whose secret placeholders could not be substituted
    /// (embedded, in a shell script, out of scope, unknown) before anyone is
    /// asked to approve it. Builtin scripts are the broker's own.
    pub fn check_secrets(
        &self,
        secrets: &crate::secrets::SessionSecrets,
    ) -> std::result::Result<(), PlanError> {
        let r = match self {
            Plan::Builtin { .. } => Ok(()),
            // A pack gets no secret: a placeholder in its arguments is refused.
            Plan::Skill { command, .. } => {
                secrets.check_text("arguments", command.stdin.as_deref().unwrap_or(""))
            }
            Plan::Command(c) => match &c.script {
                Some(script) => secrets.check_shell(script),
                None => {
                    let program = command_plan::resolve_program(&c.argv[0])
                        .unwrap_or_else(|_| PathBuf::from(&c.argv[0]));
                    secrets
                        .check_command(&program, &c.argv, &c.env, c.stdin.as_deref())
                        .map(|_| ())
                }
            },
            Plan::File { op, .. } => secrets.check_file_op(op).map(|_| ()),
            // Nothing is substituted into a network request: a placeholder
            // in it is refused rather than sent as written.
            Plan::Net(n) => secrets.check_text(n.tool.name(), &n.display),
        };
        let cwd_check = secrets.check_text("cwd", &self.cwd().display().to_string());
        r.and(cwd_check).map_err(PlanError::Secret)
    }

    /// The timeout the request asked for (bounded when decoded).
    pub fn timeout_secs(&self) -> Option<u64> {
        match self {
            Plan::Command(c)
            | Plan::Builtin { command: c, .. }
            | Plan::Skill { command: c, .. } => c.timeout_secs,
            Plan::File { .. } => None,
            Plan::Net(n) => n.timeout_secs,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Plan::Command(c)
            | Plan::Builtin { command: c, .. }
            | Plan::Skill { command: c, .. } => &c.reason,
            Plan::File { reason, .. } => reason,
            Plan::Net(n) => &n.reason,
        }
    }

    /// The spec the executor gets: built from the plan and the decision's
    /// profile, nothing else.
    pub fn exec_spec(
        &self,
        id: u64,
        profile: ConfinementProfile,
        cgroup_dir: Option<String>,
        backup: bool,
    ) -> std::result::Result<ExecSpec, PlanError> {
        match self {
            Plan::Command(c)
            | Plan::Builtin { command: c, .. }
            | Plan::Skill { command: c, .. } => {
                let mut profile = profile;
                let mut argv = c.argv.clone();
                if profile.name == NETFILTER_LIST {
                    match netfilter_listing(c) {
                        Some(listing) => argv = listing,
                        None => {
                            // Not provably the listing: it runs without the
                            // capability (and its listing fails with EPERM).
                            let cap = sysward_policy::netfilter::LIST_CAP;
                            profile.capabilities.retain(|x| x != cap);
                            profile.name = "read-only".to_string();
                        }
                    }
                }
                argv[0] = command_plan::resolve_program(&argv[0])
                    .map_err(PlanError::Program)?
                    .display()
                    .to_string();
                let tmp = profile.scratch_dir.clone();
                let mut env = command_plan::action_env(tmp.as_deref());
                env.extend(c.env.iter().cloned());
                Ok(ExecSpec::Command {
                    id,
                    command: CommandSpec {
                        argv,
                        env,
                        cwd: c.cwd.display().to_string(),
                        cgroup_dir,
                        stdin: c.stdin.clone(),
                    },
                    profile,
                })
            }
            Plan::File { op, .. } => Ok(ExecSpec::File {
                id,
                op: op.clone(),
                backup,
                env: command_plan::action_env(profile.scratch_dir.as_deref()),
                profile,
            }),
            Plan::Net(n) => Err(PlanError::NetworkTool(n.tool.name())),
        }
    }
}

/// The profile the policy gives a netfilter listing (it keeps CAP_NET_ADMIN).
const NETFILTER_LIST: &str = "netfilter-list";

/// The argv a netfilter listing runs as, when the broker can confirm what the
/// policy recognised (`sysward_policy::netfilter`): the request is exactly a
/// listing (a `shell` script of plain words is run as those words, without a
/// shell), with no environment or input of its own, and the program PATH
/// finds is the root-owned nft or xtables-nft binary in /usr/sbin, not
/// writable by anyone else. None: it keeps no capability.
fn netfilter_listing(c: &command_plan::CommandPlan) -> Option<Vec<String>> {
    if !c.env.is_empty() || c.stdin.is_some() {
        return None;
    }
    let argv: Vec<String> = match &c.script {
        Some(script) => {
            let words: Vec<String> = script.split_ascii_whitespace().map(String::from).collect();
            let plain = |w: &String| {
                w.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-' | '/'))
            };
            if !words.iter().all(plain) {
                return None;
            }
            words
        }
        None => c.argv.clone(),
    };
    if !sysward_policy::netfilter::is_listing(&argv) {
        return None;
    }
    crate::netfilter_check::trusted_program(argv.first()?)?;
    Some(argv)
}

/// True when a category changes nothing on the host (dry-run still runs it).
pub fn runs_in_dry_run(category: Category) -> bool {
    matches!(category, Category::ReadOnly | Category::Network)
}

/// The request the classifier decides for a plan.
pub fn request_of(plan: &Plan) -> OwnedRequest {
    match plan {
        Plan::Command(c) => match &c.script {
            Some(script) => OwnedRequest::Shell {
                script: script.clone(),
                cwd: c.cwd.clone(),
            },
            None => OwnedRequest::Exec {
                argv: c.argv.clone(),
                env: c.env.clone(),
                stdin: c.stdin.clone(),
                cwd: c.cwd.clone(),
            },
        },
        Plan::Builtin { tool, command } => OwnedRequest::Tool {
            name: tool.clone(),
            targets: Vec::new(),
            recursive: false,
            cwd: command.cwd.clone(),
        },
        Plan::Skill {
            tool,
            category,
            risk,
            command,
        } => OwnedRequest::Skill {
            name: tool.clone(),
            category: *category,
            risk: *risk,
            cwd: command.cwd.clone(),
        },
        Plan::Net(n) => OwnedRequest::Tool {
            name: n.tool.name().to_string(),
            // A download's file is judged as write_file's would be.
            targets: match &n.what {
                crate::net_action::NetTool::Download(d) => vec![d.target.clone()],
                _ => Vec::new(),
            },
            recursive: false,
            cwd: n.cwd.clone(),
        },
        Plan::File {
            tool,
            targets,
            recursive,
            cwd,
            ..
        } => OwnedRequest::Tool {
            name: tool.clone(),
            targets: targets.clone(),
            recursive: *recursive,
            cwd: cwd.clone(),
        },
    }
}

/// The policy engine's decision about `plan`, made in a confined classifier
/// helper within `limit` (a helper that overruns is killed, and the request
/// denied).
pub fn decide(
    classifier: &ClassifierPool,
    engine: &EngineHandle,
    plan: &Plan,
    limit: std::time::Duration,
) -> Classified {
    let mut classified = classifier.decide(engine, request_of(plan), &plan.display(), limit);
    if let Plan::Net(n) = plan {
        // What a person approving it sees, and what the repeat limit
        // compares: the destination, not just the tool's name.
        classified.decision.normalized = crate::sanitize::one_line(&n.display, 4096);
    }
    classified
}

/// What `sysward policy explain` decides about: a shell script when asked (or
/// when the command is one word with spaces), else an argv.
pub fn plan_for_explain(command: &[String], shell: bool, cwd: &Path) -> Plan {
    let as_shell = shell || (command.len() == 1 && command[0].contains(char::is_whitespace));
    Plan::Command(CommandPlan {
        env: Vec::new(),
        stdin: None,
        argv: if as_shell {
            vec!["bash".to_string(), "-c".to_string(), command.join(" ")]
        } else {
            command.to_vec()
        },
        script: as_shell.then(|| command.join(" ")),
        cwd: cwd.to_path_buf(),
        timeout_secs: None,
        reason: String::new(),
    })
}

/// `secret_files`: where `file PATH` scopes deliver secrets
/// ([`crate::secrets::SecretStore::delivery_files`]); no action reads them.
pub fn engine_for_layout(
    layout: &crate::project::Layout,
    agent_md_path: &Path,
    policy: &sysward_policy::PolicyBlock,
    secret_files: Vec<PathBuf>,
) -> Result<Arc<EngineHandle>, crate::spawn::SpawnSetupError> {
    let bin_dir = crate::spawn::helper_dir()?;
    let mut protected = vec![
        layout.init_conf(),
        agent_md_path.to_path_buf(),
        layout.audit_log(),
        layout.audit_head(),
        layout.agent_dir().join("audit.seal"),
        layout.agent_dir().join("tasks.json"),
        layout.agent_dir().join("file-ops.pending"),
        layout.approvals_dir(),
        layout.secrets_dir.clone(),
        layout.lock_file(),
        PathBuf::from("/etc/sysward"),
        PathBuf::from("/run/sysward"),
        PathBuf::from("/var/lib/sysward"),
        PathBuf::from(crate::project::INSTALLED_TOOLS_DIR),
        PathBuf::from("/usr/lib/systemd/system/sysward.service"),
        PathBuf::from("/usr/lib/systemd/system/sysward-run.service"),
        PathBuf::from("/usr/lib/systemd/system/sysward-run.timer"),
        PathBuf::from("/etc/systemd/system/sysward.service"),
    ];
    // An action that could write the cgroup hierarchy could move itself out
    // of its per-action cgroup and survive the action.
    if let Some(mount) = crate::cgroup::v2_mount() {
        protected.push(mount);
    }
    // The command itself, wherever it is (it is not beside the helpers in
    // the package).
    if let Ok(exe) = std::env::current_exe() {
        protected.push(exe);
    }
    for bin in [
        "sysward",
        "sysward-agent",
        "sysward-exec",
        "sysward-gateway",
        "sysward-net",
        crate::classifier::HELPER_NAME,
    ] {
        protected.push(bin_dir.join(bin));
    }
    if layout.standalone {
        // The project itself stays writable (seed), but not its state that only
        // the broker writes.
        protected.retain(|p| p != &PathBuf::from("/var/lib/sysward"));
        protected.push(layout.state_dir.join("contexto.mem"));
        protected.push(layout.state_dir.join("memoria.md"));
        protected.push(layout.state_dir.join(".context-history"));
    }
    let facts = HostFacts {
        project_root: layout.config_dir.clone(),
        state_dir: layout.state_dir.clone(),
        scratch_dir: layout.tmp_dir(),
        protected,
        secrets_dir: layout.secrets_dir.clone(),
        secret_files,
        action_uid: 0,
        action_gid: 0,
    };
    Ok(EngineHandle::new(policy.clone(), facts))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn command(
        argv: &[&str],
        script: Option<&str>,
        env: &[(&str, &str)],
    ) -> command_plan::CommandPlan {
        command_plan::CommandPlan {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            stdin: None,
            script: script.map(String::from),
            cwd: PathBuf::from("/"),
            timeout_secs: None,
            reason: String::new(),
        }
    }

    #[test]
    fn only_a_confirmed_listing_runs_with_its_capability() {
        if !Path::new("/usr/sbin/nft").is_file() {
            eprintln!("skipped: nft is not installed");
            return;
        }
        let shell = |s: &str| command(&["bash", "-c", s], Some(s), &[]);
        assert_eq!(
            netfilter_listing(&shell("nft -a list ruleset")),
            Some(vec![
                "nft".to_string(),
                "-a".into(),
                "list".into(),
                "ruleset".into()
            ]),
            "a shell listing runs as its words, without the shell"
        );
        assert!(netfilter_listing(&command(&["nft", "list", "tables"], None, &[])).is_some());
        for refused in [
            shell("nft list ruleset | cat"),
            shell("nft list ruleset 2>/dev/null"),
            shell("nft list 'ruleset'"),
            shell("sudo nft list ruleset"),
            shell("nft add table inet x"),
            command(
                &["nft", "list", "ruleset"],
                None,
                &[("LD_PRELOAD", "/tmp/x.so")],
            ),
            command(&["/tmp/nft", "list", "ruleset"], None, &[]),
            command(&["nft", "-f", "/etc/nftables.conf"], None, &[]),
        ] {
            assert_eq!(netfilter_listing(&refused), None, "{refused:?}");
        }
        let mut with_input = command(&["nft", "list", "ruleset"], None, &[]);
        with_input.stdin = Some("flush ruleset\n".into());
        assert_eq!(netfilter_listing(&with_input), None);
    }

    /// The typed refusals read as the strings they replaced, byte for byte.
    #[test]
    fn refusals_read_as_they_always_did() {
        let refusal = |tool: &str, arguments: &str| {
            let req = ToolRequest {
                call_id: "c".into(),
                tool: tool.into(),
                arguments: arguments.into(),
            };
            plan(&req, Path::new("/p")).unwrap_err().to_string()
        };
        for (tool, arguments, said) in [
            (
                "no_such",
                "{}",
                "unknown tool \"no_such\": the broker runs only the tools it knows",
            ),
            (
                "remember",
                "{}",
                "remember is not an action the broker runs",
            ),
            (
                "register_tool",
                "{}",
                "register_tool is planned with the project's tools",
            ),
            (
                "find_program",
                r#"{"programs":[]}"#,
                "find_program needs 1 to 32 program names",
            ),
            (
                "find_program",
                r#"{"programs":["a b"]}"#,
                "find_program: \"a b\" is not a program name",
            ),
            (
                "read_file",
                r#"{"path":""}"#,
                "a path must be non-empty and contain no NUL byte",
            ),
            (
                "diff_files",
                r#"{"path":"a"}"#,
                "diff_files needs exactly one of `other` (a file) or `content`",
            ),
            (
                "tail_file",
                r#"{"path":"a","lines":0}"#,
                "tail_file: lines must be 1 to 5000",
            ),
            (
                "tail_file",
                r#"{"path":"a","follow_seconds":99}"#,
                "tail_file: follow_seconds is at most 30",
            ),
            (
                "apply_patch",
                r#"{"patch":"","directory":""}"#,
                "apply_patch: directory must be a non-empty path",
            ),
        ] {
            assert_eq!(refusal(tool, arguments), said, "{tool} {arguments}");
        }
        assert!(refusal("system_info", "[]").starts_with("invalid arguments for system_info: "));
        assert!(refusal("apply_patch", "{}").starts_with("invalid arguments for apply_patch: "));
    }
}
