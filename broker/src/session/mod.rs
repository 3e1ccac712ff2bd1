//! One session: the agent, its model gateway, and every request the agent
//! makes, each decided, audited and answered here.

use crate::action::{Ending, Runner};
use crate::approvals::{self, ApprovalRequest, Approvals};
use crate::audit::Audit;
use crate::gateway_link::GatewayLink;
use crate::operator::Operator;
use crate::project::{Layout, Project, ProjectLock};
use crate::redact;
use crate::secrets::SessionSecrets;
use crate::spawn::{self, Account};
use crate::tasks::TaskRecords;
use crate::{command_plan, sanitize};
use error::Result;
pub use error::{PinnedStop, PolicyRefusal, SessionError};
use serde_json::json;
use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::agent::{
    agent_request_cap, AgentAnswer, AgentEvent, AgentRequest, ModelSettings, OperatorInput,
    SessionMode, SessionSetup, StateFile, TaskOutcome, TaskStatus, ToolRequest, ToolResult,
    ToolStatus, AGENT_ANSWER_MAX, AGENT_REQUEST_MAX, STATE_FILE_MAX,
};
use sysward_ipc::exec::FileChange;
use sysward_ipc::model::{ModelFailure, ModelReply};
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt, SessionSummary};
use sysward_ipc::{Channel, ChannelError, Message, BUILD_VERSION};

mod ask;
mod ask_secret;
mod dispatch;
mod error;
mod events;
mod execute;
mod model;
mod register_tool;
mod serve;
mod start;
mod state_files;
mod tool;

/// Why a session ended when the broker got SIGTERM (`systemctl stop` or
/// `restart`, a shutdown, Ctrl+C of `run`): what happened and what to do.
const STOPPING_ENDS_SESSION: &str = "the broker is stopping (SIGTERM: a stop, restart or shutdown of sysward): the session ends here; run it again once sysward is back";

/// How long a freshly started agent has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// A classification not done in this time is a denial.
pub const CLASSIFY_LIMIT: Duration = Duration::from_millis(1500);
/// Pending approvals one session may have open at once.
pub const MAX_PENDING_APPROVALS: u32 = 3;
/// What the agent writes to stderr is shown, sanitized, up to this much.
const AGENT_STDERR_MAX: usize = 64 << 10;

/// Exit codes of `sysward run`, so timers and scripts can act on the outcome.
/// agent.md's identity and change time, to notice an edit cheaply.
fn policy_stamp(path: &std::path::Path) -> Option<(u64, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.ino(), m.size(), m.ctime(), m.ctime_nsec()))
}

/// How often one task (or CLI message) may run the same action.
const MAX_SAME_ACTION: u32 = 2;

pub mod exit {
    pub const DONE: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const BLOCKED: i32 = 2;
    pub const FAILED: i32 = 3;
    pub const INCOMPLETE: i32 = 4;
    /// The broker stopped: its own paths changed under it (see
    /// `crate::pinned`). The service unit does not restart it on this code.
    pub const STOPPED: i32 = 5;
    pub const CANCELLED: i32 = 130;
}

/// When the broker process started (set first thing in `main`), so the audit
/// can tell how long a session took to reach the agent's handshake.
pub static PROCESS_START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// What every session of one broker shares.
pub struct BrokerContext {
    pub layout: Layout,
    pub audit: Arc<Audit>,
    /// The secret store (values never leave the broker except into an
    /// executor spec, by whole-string substitution within each secret's scope).
    pub secrets: Arc<crate::secrets::SecretStore>,
    pub runner: Runner,
    /// The confined helpers that classify commands (started before the
    /// secrets were loaded).
    pub classifier: Arc<crate::classifier::ClassifierPool>,
    pub agent_path: PathBuf,
    pub gateway_path: PathBuf,
    pub hostname: String,
    /// This broker's cgroup directory, removed when the context is dropped.
    pub cgroup_dir: Option<crate::cgroup::BrokerDir>,
    /// Its own paths as opened at start-up, checked after every action that
    /// can write.
    pub pinned: crate::pinned::Pinned,
    /// The daemon logs each session's start and end, each approval decision
    /// and each error on stderr (the journal under systemd); a standalone
    /// run's terminal shows them already.
    pub log_to_stderr: bool,
}

/// One line of the daemon's own log.
fn log_line(ctx: &BrokerContext, line: &str) {
    if ctx.log_to_stderr {
        eprintln!("sysward: {}", sanitize::one_line(line, 2000));
    }
}

#[derive(Debug, Clone)]
pub struct SessionRequest {
    pub mode: SessionMode,
    pub dry_run: bool,
    /// Who asked: `uid N` of the operator.
    pub operator: String,
}

fn random_id() -> String {
    crate::project::random_hex(8).unwrap_or_else(|_| "0".repeat(16))
}

/// Runs a whole session and returns its summary; never panics on agent input.
pub fn run_session(ctx: &BrokerContext, req: SessionRequest, op: &dyn Operator) -> SessionSummary {
    let started = Instant::now();
    let id = random_id();
    let mut summary = SessionSummary {
        session_id: id.clone(),
        outcomes: Vec::new(),
        exit_code: exit::ERROR,
        actions: 0,
        denials: 0,
        duration_ms: 0,
        error: None,
    };
    if let Err(why) = crate::project::check_free_space(&ctx.layout.state_dir) {
        summary.error = Some(why);
        op.finished(&summary);
        return summary;
    }
    log_line(
        ctx,
        &format!(
            "session {id} started by {} ({})",
            req.operator,
            match req.mode {
                SessionMode::Cli => "cli",
                SessionMode::Tasks { .. } => "tasks",
            }
        ),
    );
    let gap = ctx.audit.gap_note();
    let audit_start = ctx.audit.record(json!({
        "event": "session_start", "session": id, "operator": req.operator,
        "mode": match req.mode { SessionMode::Cli => "cli", SessionMode::Tasks { .. } => "tasks" },
        "dry_run": req.dry_run,
    }));
    if let Err(e) = audit_start {
        summary.error = Some(format!(
            "cannot write the audit log, refusing to start: {}",
            crate::error::chain(&e)
        ));
        op.finished(&summary);
        return summary;
    }
    if crate::signals::stopping() {
        summary.error = Some("the broker is stopping (SIGTERM): no new session starts".to_string());
        op.finished(&summary);
        return summary;
    }
    let _running = crate::signals::register(op.cancel_token());
    if let Err(why) = check_pinned(ctx, &id, None) {
        summary.error = Some(why.to_string());
        summary.exit_code = exit::STOPPED;
        let _ = ctx.audit.record(json!({"event": "session_end", "session": id, "exit_code": exit::STOPPED, "error": summary.error}));
        op.finished(&summary);
        return summary;
    }
    let result = Session::start(ctx, &req, &id, op, gap).and_then(|mut s| {
        let _ = ctx.audit.record(json!({
            "event": "session_ready", "session": id,
            "agent_pid": s.agent.id(), "gateway_pid": s.gateway.pid,
            "setup_ms": started.elapsed().as_secs_f64() * 1e3,
            "since_start_ms": PROCESS_START.get().unwrap_or(&started).elapsed().as_secs_f64() * 1e3,
        }));
        let r = s.serve();
        s.report_memory();
        s.fill(&mut summary);
        r
    });
    let cancelled = op.cancel_token().is_cancelled();
    if result.is_ok() && cancelled && crate::signals::stopping() {
        // SIGTERM cancelled the turn: the agent reports a cancel, which it
        // cannot tell from the operator's Ctrl+C. Say what happened.
        summary.error = Some(STOPPING_ENDS_SESSION.to_string());
    }
    if let Err(e) = result {
        summary.error = Some(if crate::signals::stopping() {
            // Said once, whatever else the stop made fail on the way.
            let why = crate::error::chain(&e);
            if why.contains(STOPPING_ENDS_SESSION) {
                STOPPING_ENDS_SESSION.to_string()
            } else {
                format!("{STOPPING_ENDS_SESSION} ({why})")
            }
        } else {
            crate::error::chain(&e)
        });
    }
    ctx.runner.forget_rulesets();
    summary.duration_ms = started.elapsed().as_millis() as u64;
    if let Some(e) = &summary.error {
        log_line(ctx, &format!("session {id} error: {e}"));
    }
    let stopped = ctx.pinned.stopped().is_some();
    summary.exit_code = if cancelled && crate::signals::stopping() && !stopped {
        // As `sysward run --root` exits after SIGTERM.
        crate::signals::EXIT_TERMINATED
    } else {
        exit_code(&summary, cancelled, stopped)
    };
    let _ = ctx.audit.record(json!({
        "event": "session_end", "session": id, "exit_code": summary.exit_code,
        "actions": summary.actions, "denials": summary.denials,
        "error": summary.error, "duration_ms": summary.duration_ms,
        "tasks": summary.outcomes.iter().map(|o| json!({"task": o.name, "status": o.status.as_str(), "steps": o.steps})).collect::<Vec<_>>(),
    }));
    log_line(
        ctx,
        &format!(
            "session {id} of {} ended: exit {}, {} action(s), {} denial(s), {}",
            req.operator,
            summary.exit_code,
            summary.actions,
            summary.denials,
            summary
                .outcomes
                .iter()
                .map(|o| format!("{} {}", o.name, o.status.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    // A stopped broker's paths may lead elsewhere: the anchor stays behind
    // the log (which is written through the descriptor opened at start-up).
    if !stopped {
        let _ = ctx.audit.anchor();
    }
    op.finished(&summary);
    summary
}

/// Checks that the broker's own paths still name what it opened at start-up
/// (see [`crate::pinned`]). On the first change the broker stops: the change
/// is audited, and this and every later check fail with the reason.
pub fn check_pinned(
    ctx: &BrokerContext,
    session: &str,
    action: Option<&str>,
) -> Result<(), PinnedStop> {
    if let Some(why) = ctx.pinned.stopped() {
        return Err(PinnedStop::Stopped(why.to_string()));
    }
    let changes = ctx.pinned.changes();
    if changes.is_empty() {
        return Ok(());
    }
    let _ = ctx.audit.record(json!({
        "event": "broker_stopped", "session": session, "action": action,
        "reason": "sysward's own paths changed", "changes": changes,
    }));
    let stop = PinnedStop::Changed {
        action: action.map(str::to_string),
        changes,
    };
    ctx.pinned.stop(stop.to_string());
    Err(stop)
}

/// Records what the session before this one left unsaid (see
/// [`crate::audit::Audit::gap_note`]) and removes the temporaries a killed
/// broker left (see [`crate::stale_temps`]).
fn record_leftovers(
    ctx: &BrokerContext,
    id: &str,
    op: &dyn Operator,
    gap: Option<serde_json::Value>,
) {
    if let Some(mut note) = gap {
        note["session"] = json!(id);
        let text = note["note"].as_str().map(str::to_string).or_else(|| {
            note["failure"]
                .as_str()
                .map(|f| format!("an audit record could not be written: {f}"))
        });
        let _ = ctx.audit.record(note);
        if let Some(text) = text {
            op.event(&AgentEvent::Warning(text));
        }
    }
    // One-shot secret files of an action a killed broker was running.
    let files = crate::oneshot::sweep(&ctx.layout);
    if !files.is_empty() {
        let _ = ctx
            .audit
            .record(json!({"event": "secret_files_removed", "session": id, "leftover": files}));
    }
    // What a broker killed during a file operation left behind.
    let removed = crate::stale_temps::sweep_noted(&ctx.layout);
    if !removed.is_empty() {
        let _ = ctx
            .audit
            .record(json!({"event": "stale_temp_removed", "session": id, "paths": removed}));
        op.event(&AgentEvent::Info(format!(
            "removed {} temporary file(s) an interrupted file operation left: {}",
            removed.len(),
            removed.join(", ")
        )));
    }
}

fn exit_code(summary: &SessionSummary, cancelled: bool, stopped: bool) -> i32 {
    if stopped {
        return exit::STOPPED;
    }
    if cancelled {
        return exit::CANCELLED;
    }
    if summary.error.is_some() {
        return exit::ERROR;
    }
    let has = |s: TaskStatus| summary.outcomes.iter().any(|o| o.status == s);
    if has(TaskStatus::Error) {
        exit::ERROR
    } else if has(TaskStatus::Failed) {
        exit::FAILED
    } else if has(TaskStatus::Incomplete) {
        exit::INCOMPLETE
    } else if has(TaskStatus::Blocked) {
        exit::BLOCKED
    } else {
        exit::DONE
    }
}

/// The agent's protocol state, as OpenSSH's monitor keeps it: which request
/// kinds are legal now is decided from the header, before the body is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AgentState {
    AwaitHello,
    Ready,
    Closed,
}

struct Session<'a> {
    ctx: &'a BrokerContext,
    op: &'a dyn Operator,
    id: String,
    project: Project,
    /// What agent.md's inode, size and change time were when its policy was
    /// last read: a change is read before the next turn.
    policy_stamp: Option<(u64, u64, i64, i64)>,
    engine: Arc<crate::classifier::EngineHandle>,
    /// The operator's skill packs, as loaded when the session started.
    skills: crate::skills::Skills,
    /// The project's tools (`tools/NAME/`): those a person approved are
    /// offered.
    project_tools: crate::project_tools::SessionTools,
    /// The tasks' pre-approvals; `engine` is the running task's.
    pre_approvals: crate::pre_approvals::PreApprovals,
    mode: SessionMode,
    dry_run: bool,
    agent: Child,
    chan: Channel,
    gateway: GatewayLink,
    state: AgentState,
    /// The setup Hello is answered with (taken then).
    welcome: Option<Box<SessionSetup>>,
    /// The tasks handed to the agent, with the content hash the broker read.
    tasks_expected: Vec<(String, String)>,
    /// Why the agent ended the session, when it was not a normal end (a
    /// model error): kept for the summary and the session_end record.
    agent_reason: Option<String>,
    outcomes: Vec<TaskOutcome>,
    records: TaskRecords,
    actions: u32,
    denials: u32,
    pending: u32,
    session_allowed: HashSet<String>,
    /// How often each action (tool, normalized request, cwd) was asked in
    /// the current task or CLI message.
    repeats: std::collections::HashMap<String, u32>,
    /// Who runs the session (uid, login, terminal): recorded with each of
    /// their decisions.
    operator: String,
    /// Requests of the current task that needed a person who was not there: the
    /// task cannot end DONE, whatever the model claims.
    pending_in_task: Vec<String>,
    secrets: SessionSecrets,
    approvals: Approvals,
    /// The task being worked on (for pending approvals).
    current_task: Option<String>,
    /// Started at the first action.
    audit_writer: Option<crate::audit::Writer>,
    /// Held while an approved command starts (see `sysward_actions::wake_latency`).
    wake_latency: sysward_actions::wake_latency::WakeLatency,
    /// The diffs of this session's memoria.md changes, shown at its end.
    memory_diffs: Vec<String>,
    _lock: ProjectLock,
}

/// Starts the agent with a fresh channel, as root, so that it confines itself
/// (uid, namespaces, Landlock, seccomp) before reading anything.
fn start_agent(ctx: &BrokerContext, account: &Account) -> Result<(Channel, Child)> {
    let (ours, theirs) = Channel::pair()?;
    ours.force_send_buffer(AGENT_ANSWER_MAX)?;
    theirs.force_send_buffer(AGENT_REQUEST_MAX)?;
    let args = vec![
        "--uid".to_string(),
        account.uid.to_string(),
        "--gid".to_string(),
        account.gid.to_string(),
    ];
    let mut child = spawn::spawn_with_channel(
        &ctx.agent_path,
        &args,
        theirs.into_fd(),
        Stdio::null(),
        Stdio::piped(),
    )?;
    if let Some(stderr) = child.stderr.take() {
        std::thread::Builder::new()
            .name("agent-stderr".to_string())
            .spawn(move || relay_agent_stderr(stderr))
            .map_err(SessionError::StderrRelay)?;
    }
    Ok((ours, child))
}

/// The agent's stderr reaches the broker's stderr sanitized and capped.
fn relay_agent_stderr(stderr: std::process::ChildStderr) {
    use std::io::BufRead;
    let mut shown = 0usize;
    for line in std::io::BufReader::new(stderr.take(AGENT_STDERR_MAX as u64 * 4)).lines() {
        let Ok(line) = line else { break };
        if shown < AGENT_STDERR_MAX {
            shown += line.len();
            eprintln!("agent: {}", sanitize::one_line(&line, 1000));
        }
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // The agent has no reason to outlive its session.
        let _ = self.agent.kill();
        let _ = self.agent.wait();
    }
}

pub fn default_cwd(layout: &Layout) -> &Path {
    &layout.state_dir
}

/// The policy engine for one session, with this host's facts.
fn session_engine(
    ctx: &BrokerContext,
    project: &Project,
) -> Result<Arc<crate::classifier::EngineHandle>> {
    crate::planner::engine_for_layout(
        &ctx.layout,
        &project.agent_md_path,
        &project.policy,
        ctx.secrets.delivery_files(),
    )
    .map_err(SessionError::from)
}

/// The tools left out of the model's prompt: those a policy flag turns off.
fn withheld_tools(policy: &sysward_policy::PolicyBlock) -> Vec<String> {
    sysward_ipc::tools::withheld(|flag| policy.flag(flag).unwrap_or(false))
}
