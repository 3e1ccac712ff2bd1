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
use crate::{sanitize, tools};
use anyhow::{Context, Result};
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
            "cannot write the audit log, refusing to start: {e:#}"
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
        summary.error = Some(why);
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
            let why = format!("{e:#}");
            if why.contains(STOPPING_ENDS_SESSION) {
                STOPPING_ENDS_SESSION.to_string()
            } else {
                format!("{STOPPING_ENDS_SESSION} ({why})")
            }
        } else {
            format!("{e:#}")
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
) -> Result<(), String> {
    if let Some(why) = ctx.pinned.stopped() {
        return Err(why.to_string());
    }
    let changes = ctx.pinned.changes();
    if changes.is_empty() {
        return Ok(());
    }
    let after = action.map_or("before the session".to_string(), |a| {
        format!("after action {a}")
    });
    let why = format!(
        "the broker stopped: its own paths changed ({after}): {}. No further action runs; inspect the host, restore the paths and restart sysward",
        changes.join("; ")
    );
    let _ = ctx.audit.record(json!({
        "event": "broker_stopped", "session": session, "action": action,
        "reason": "sysward's own paths changed", "changes": changes,
    }));
    ctx.pinned.stop(why.clone());
    Err(why)
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
    /// The diffs of this session's memoria.md changes, shown at its end.
    memory_diffs: Vec<String>,
    _lock: ProjectLock,
}

impl<'a> Session<'a> {
    fn start(
        ctx: &'a BrokerContext,
        req: &SessionRequest,
        id: &str,
        op: &'a dyn Operator,
        gap: Option<serde_json::Value>,
    ) -> Result<Session<'a>> {
        let lock = ProjectLock::acquire(&ctx.layout)?;
        // Only the lock holder may speak of the session before it (another
        // one may be running) or sweep what one left.
        record_leftovers(ctx, id, op, gap);
        let project = Project::load(ctx.layout.clone())?;
        let mut warnings = project.warnings.clone();
        let records = TaskRecords::load(&ctx.layout);
        let mut skipped = Vec::new();
        let tasks = match req.mode {
            SessionMode::Tasks { rerun } => {
                let mut run = Vec::new();
                for t in project.tasks(&mut warnings)? {
                    if !rerun && records.done_and_unchanged(&t) {
                        skipped.push(t);
                    } else {
                        run.push(t);
                    }
                }
                run
            }
            SessionMode::Cli => Vec::new(),
        };
        // A pack that cannot be used stops the session before anything
        // starts, naming its file (and line).
        let skills = crate::skills::load(&ctx.layout.config_dir.join("skills"))
            .context("cannot load the skill packs")?;
        let approvals = Approvals::open(&ctx.layout)?;
        // A project tool that cannot be used, or waits for a person, is a
        // warning: the session goes on without it.
        let mode = project.policy.execution_mode.as_str();
        let tools_dir = ctx.layout.config_dir.join("tools");
        let tools_home = if ctx.layout.standalone {
            crate::project_tools::ToolsHome::Project(tools_dir)
        } else {
            crate::project_tools::ToolsHome::Unavailable(tools_dir)
        };
        let (project_tools, tool_warnings) =
            crate::project_tools::SessionTools::start(tools_home, &skills, &approvals, |t| {
                t.approval_request(id, &ctx.hostname, mode)
            });
        warnings.extend(tool_warnings);
        for w in &warnings {
            op.event(&AgentEvent::Warning(w.clone()));
        }
        let agent_account = spawn::account(&project.conf.agent_user)?;
        let model_account = spawn::account(&project.conf.model_user)?;
        let engine = session_engine(ctx, &project)?;
        let mut secrets = SessionSecrets::new(Arc::clone(&ctx.secrets));
        if !project.conf.api_key.is_empty() {
            secrets.add_redaction("API_KEY", &project.conf.api_key, &project.conf.masked_key());
        }
        let gateway = GatewayLink::start(&ctx.gateway_path, &project.conf, &model_account)
            .context("cannot start the model gateway")?;
        let (chan, agent) = start_agent(ctx, &agent_account)?;
        let banner = format!(
            "sysward {BUILD_VERSION} — session {id}\nModel: {}\nMode: {}\nProject: {}\nHost: {}",
            project.conf.model,
            project.policy.execution_mode.as_str(),
            project.layout.config_dir.display(),
            ctx.hostname
        );
        op.session_started(id, &banner);
        let setup = SessionSetup {
            session_id: id.to_string(),
            // The broker already left out what is DONE and unchanged: the agent
            // runs every task it is given.
            mode: match req.mode {
                SessionMode::Tasks { .. } => SessionMode::Tasks { rerun: true },
                SessionMode::Cli => SessionMode::Cli,
            },
            instructions: project.agent_md.clone(),
            policy_text: project.policy.render(),
            execution_mode: project.policy.execution_mode.as_str().to_string(),
            max_steps: project.policy.max_steps,
            dry_run: req.dry_run,
            hostname: ctx.hostname.clone(),
            project_display: project.layout.config_dir.display().to_string(),
            model: ModelSettings {
                model: project.conf.model.clone(),
                context_size: project.conf.context_size,
                request_timeout_secs: project.conf.request_timeout_secs,
                tool_calling: project.conf.tool_calling,
                max_reply_tokens: project.conf.max_reply_tokens,
                tool_schema: project.conf.tool_schema,
                api_display: format!(
                    "{} (key {})",
                    project.conf.api_url.raw,
                    project.conf.masked_key()
                ),
            },
            tasks,
            warnings,
            skills: skills
                .tools()
                .into_iter()
                .chain(project_tools.offered())
                .collect(),
            unapproved_tools: project_tools.unapproved(),
            withheld_tools: withheld_tools(&project.policy, &project_tools),
        };
        let tasks_expected = setup
            .tasks
            .iter()
            .map(|t| (t.name.clone(), t.sha256.clone()))
            .collect();
        let (pre_approvals, pre_warnings) =
            crate::pre_approvals::PreApprovals::new(Arc::clone(&engine), &setup.tasks);
        for w in pre_warnings {
            op.event(&AgentEvent::Warning(w));
        }
        let mut outcomes = Vec::new();
        for t in skipped {
            op.event(&AgentEvent::TaskSkipped {
                name: t.name.clone(),
                reason: "DONE and unchanged; use --rerun to repeat".to_string(),
            });
            outcomes.push(TaskOutcome {
                name: t.name,
                sha256: t.sha256,
                status: TaskStatus::Skipped,
                summary: "DONE and unchanged".to_string(),
                steps: 0,
                conflicts: Vec::new(),
            });
        }
        let mut session = Session {
            ctx,
            op,
            id: id.to_string(),
            policy_stamp: policy_stamp(&project.agent_md_path),
            project,
            engine,
            skills,
            project_tools,
            pre_approvals,
            mode: req.mode.clone(),
            dry_run: req.dry_run,
            agent,
            chan,
            gateway,
            state: AgentState::AwaitHello,
            tasks_expected,
            agent_reason: None,
            outcomes,
            records,
            actions: 0,
            denials: 0,
            pending: 0,
            session_allowed: HashSet::new(),
            repeats: std::collections::HashMap::new(),
            operator: req.operator.clone(),
            pending_in_task: Vec::new(),
            secrets,
            approvals,
            current_task: None,
            audit_writer: None,
            memory_diffs: Vec::new(),
            _lock: lock,
        };
        session.handshake(setup)?;
        Ok(session)
    }

    fn handshake(&mut self, setup: SessionSetup) -> Result<()> {
        if !self.chan.wait_readable(HELLO_TIMEOUT.as_millis() as i32)? {
            anyhow::bail!(
                "the agent did not say hello within {}s",
                HELLO_TIMEOUT.as_secs()
            );
        }
        let hello = match self.recv() {
            Ok(h) => h,
            Err(e) => return Err(self.agent_lost(e)),
        };
        match hello {
            AgentRequest::Hello { build } if build == BUILD_VERSION => {}
            AgentRequest::Hello { build } => {
                let reason = format!(
                    "version mismatch: agent {build}, broker {BUILD_VERSION}; reinstall sysward so all binaries match"
                );
                let _ = self.chan.send(&AgentAnswer::Goodbye {
                    reason: reason.clone(),
                });
                anyhow::bail!(reason);
            }
            _ => anyhow::bail!("the agent did not open with hello"),
        }
        self.state = AgentState::Ready;
        self.chan.send(&AgentAnswer::Welcome(Box::new(setup)))?;
        Ok(())
    }

    /// Receives one request, checking legality and size from the header first.
    fn recv(&mut self) -> Result<AgentRequest, ChannelError> {
        let state = self.state;
        self.chan.recv_checked::<AgentRequest>(|header| {
            let name = AgentRequest::kind_name(header.kind).unwrap_or("unknown");
            let legal = match state {
                AgentState::AwaitHello => header.kind == 1,
                AgentState::Ready => header.kind != 1,
                AgentState::Closed => false,
            };
            if !legal {
                return Err(ChannelError::Illegal {
                    kind: name.to_string(),
                    state: format!("in state {state:?}"),
                });
            }
            Ok(agent_request_cap(header.kind))
        })
    }

    /// Appends to the audit log with every known secret masked.
    fn audit(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        self.ctx.audit.record(record)
    }

    fn audit_lazy(&self, mut record: serde_json::Value) -> Result<u64> {
        self.secrets.redactor().redact_json(&mut record);
        self.ctx.audit.record_lazy(record)
    }

    fn answer(&mut self, answer: AgentAnswer) -> Result<()> {
        self.chan.send(&answer).context("cannot answer the agent")
    }

    /// The request loop. Returns when the agent shuts down, dies, or misbehaves.
    fn serve(&mut self) -> Result<()> {
        loop {
            let request = match self.recv() {
                Ok(r) => r,
                Err(e) => return Err(self.agent_lost(e)),
            };
            if crate::signals::stopping()
                && matches!(
                    request,
                    AgentRequest::NextInput | AgentRequest::Model(_) | AgentRequest::Tool(_)
                )
            {
                anyhow::bail!(STOPPING_ENDS_SESSION);
            }
            match request {
                AgentRequest::Hello { .. } => unreachable_state(),
                AgentRequest::NextInput => {
                    self.repeats.clear();
                    let input = self.next_input();
                    self.answer(AgentAnswer::Input(input))?;
                }
                AgentRequest::Model(model) => {
                    let reply = self.model(model);
                    let lost = matches!(
                        &reply,
                        ModelReply::Failed {
                            kind: ModelFailure::GatewayLost,
                            ..
                        }
                    );
                    let message = match &reply {
                        ModelReply::Failed { message, .. } => message.clone(),
                        _ => String::new(),
                    };
                    self.answer(AgentAnswer::Model(reply))?;
                    if lost {
                        anyhow::bail!("the model gateway failed: {message}");
                    }
                }
                AgentRequest::Tool(tool) => {
                    let result = self.tool(tool);
                    self.op
                        .event(&crate::record::tool_output(&result.call_id, &result));
                    self.answer(AgentAnswer::Tool(result))?;
                    if let Some(why) = self.ctx.pinned.stopped() {
                        anyhow::bail!("{why}");
                    }
                }
                AgentRequest::LoadState(file) => {
                    let content = self.load_state(file);
                    self.answer(AgentAnswer::State(content))?;
                }
                AgentRequest::SaveState { file, content } => {
                    self.save_state(file, &content)?;
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::Event(event) => {
                    // Only the broker says what an action produced.
                    if matches!(event, AgentEvent::ToolOutput { .. }) {
                        let _ = self.audit(json!({"event": "agent_refused_event", "session": self.id, "reason": "the agent sent an action's output, which only the broker reports"}));
                        self.answer(AgentAnswer::Ack)?;
                        continue;
                    }
                    if let Some(record) = crate::record::agent_event(&self.id, &event) {
                        let _ = self.audit(record);
                    }
                    if let AgentEvent::TaskStart { name } = &event {
                        self.current_task = Some(name.clone());
                        self.repeats.clear();
                        self.engine = self.pre_approvals.enter(Some(name));
                    }
                    if let AgentEvent::Usage {
                        prompt_tokens,
                        completion_tokens,
                    } = &event
                    {
                        let _ = self.audit(json!({"event": "model_usage", "session": self.id, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}));
                    }
                    self.op.event(&event);
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::TaskFinished(mut outcome) => {
                    if !self.pending_in_task.is_empty() && outcome.status == TaskStatus::Done {
                        outcome.status = TaskStatus::Blocked;
                        outcome.summary = format!(
                            "approval required: {}\n{}",
                            self.pending_in_task.join("; "),
                            outcome.summary
                        );
                    }
                    self.pending_in_task.clear();
                    // The hash is the broker's own reading of the file, not
                    // whatever the agent reports.
                    let sha = self
                        .tasks_expected
                        .iter()
                        .find(|(n, _)| *n == outcome.name)
                        .map(|(_, h)| h.clone());
                    if let (Some(sha), true) = (sha, outcome.status != TaskStatus::Skipped) {
                        outcome.sha256 = sha.clone();
                        self.records.set(&outcome.name, &sha, outcome.status);
                        if let Err(e) = self.records.save(&self.ctx.layout, &self.ctx.pinned) {
                            self.op.event(&AgentEvent::Warning(format!(
                                "cannot record the task outcome: {e:#}"
                            )));
                        }
                    }
                    for record in crate::record::conflicts(&self.id, &outcome) {
                        let _ = self.audit(record);
                    }
                    self.audit(json!({
                        "event": "task_end", "session": self.id, "task": outcome.name,
                        "sha256": outcome.sha256, "status": outcome.status.as_str(),
                        "steps": outcome.steps, "conflicts": outcome.conflicts,
                    }))?;
                    self.outcomes.push(outcome);
                    self.answer(AgentAnswer::Ack)?;
                }
                AgentRequest::Shutdown { reason } => {
                    self.state = AgentState::Closed;
                    let _ = self.chan.send(&AgentAnswer::Goodbye {
                        reason: "bye".to_string(),
                    });
                    if !reason.is_empty() && reason != "done" {
                        let reason = if crate::signals::stopping()
                            && reason == "cancelled by the operator"
                        {
                            // The cancel was SIGTERM's, not a person's.
                            "cancelled: the broker is stopping (SIGTERM)".to_string()
                        } else {
                            crate::sanitize::one_line(&reason, 2000)
                        };
                        self.op
                            .event(&AgentEvent::Info(format!("agent finished: {reason}")));
                        self.agent_reason = Some(reason);
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Turns a receive failure into the session's ending, audited.
    fn agent_lost(&mut self, e: ChannelError) -> anyhow::Error {
        let status = self.agent.try_wait().ok().flatten();
        let what = match (&e, status) {
            (e, Some(st)) if e.is_disconnect() => format!("the agent exited unexpectedly ({st})"),
            (e, None) if e.is_disconnect() => "the agent closed its channel".to_string(),
            (ChannelError::Illegal { .. }, _) => {
                format!("the agent sent a request out of turn: {e}")
            }
            _ => format!("the agent sent an invalid frame: {e}"),
        };
        let _ = self
            .ctx
            .audit
            .record(json!({"event": "session_error", "session": self.id, "error": what}));
        anyhow::anyhow!(what)
    }

    fn next_input(&mut self) -> OperatorInput {
        loop {
            self.op.cancel_token().reset();
            match self.op.next_input() {
                None => return OperatorInput::End,
                Some(line) if line.trim() == "/secrets" => {
                    self.op.event(&AgentEvent::Info(self.secrets.describe()));
                }
                Some(line) => {
                    // An operator may paste a known secret into the chat.
                    let (line, _) = self.secrets.redactor().redact_str(&line);
                    return OperatorInput::Line(line);
                }
            }
        }
    }

    /// The permission snapshot of a turn: agent.md's policy as it is now.
    /// A changed policy applies from this turn (audited, and the operator is
    /// told); one that no longer loads refuses the turn.
    fn refresh_policy(&mut self) -> Result<(), String> {
        let stamp = policy_stamp(&self.project.agent_md_path);
        if stamp == self.policy_stamp {
            return Ok(());
        }
        let loaded = Project::load_policy(&self.ctx.layout).and_then(|(path, policy, _)| {
            let engine = crate::decide::engine_for_layout(
                &self.ctx.layout,
                &path,
                &policy,
                self.ctx.secrets.delivery_files(),
            )?;
            Ok((path, policy, engine))
        });
        match loaded {
            Ok((path, policy, engine)) => {
                self.policy_stamp = stamp;
                if policy != self.project.policy {
                    let _ = self.audit(json!({
                        "event": "policy_changed", "session": self.id, "file": path.display().to_string(),
                        "from": self.project.policy.render(), "to": policy.render(),
                    }));
                    self.op.event(&AgentEvent::Warning(format!(
                        "{} changed: its policy applies from this turn",
                        path.display()
                    )));
                    self.project.policy = policy;
                    self.engine = self.pre_approvals.rebase(engine);
                }
                Ok(())
            }
            Err(e) => {
                let why = format!(
                    "agent.md no longer loads ({e:#}): this turn is refused until it is fixed"
                );
                let _ = self
                    .audit(json!({"event": "policy_rejected", "session": self.id, "error": why}));
                self.op.event(&AgentEvent::Warning(why.clone()));
                Err(why)
            }
        }
    }

    fn model(&mut self, model: sysward_ipc::model::ModelRequest) -> ModelReply {
        if let Err(why) = self.refresh_policy() {
            return ModelReply::Failed {
                kind: ModelFailure::Refused,
                message: why,
            };
        }
        if let Err(why) = model.check() {
            let _ = self
                .ctx
                .audit
                .record(json!({"event": "model_refused", "session": self.id, "reason": why}));
            return ModelReply::Failed {
                kind: ModelFailure::Refused,
                message: why,
            };
        }
        let cancel = self.op.cancel_token().clone();
        if cancel.is_cancelled() {
            // The turn was cancelled while an action ran: do not spend a model call.
            return ModelReply::Failed {
                kind: ModelFailure::Cancelled,
                message: "cancelled by the operator".to_string(),
            };
        }
        let reply = self.gateway.forward(model, &cancel);
        if let ModelReply::Failed {
            kind: ModelFailure::Refused,
            message,
        } = &reply
        {
            let _ = self
                .ctx
                .audit
                .record(json!({"event": "model_refused", "session": self.id, "reason": message}));
        }
        if cancel.is_cancelled() {
            return ModelReply::Failed {
                kind: ModelFailure::Cancelled,
                message: "cancelled by the operator".to_string(),
            };
        }
        reply
    }

    fn state_path(&self, file: StateFile) -> PathBuf {
        self.ctx.layout.state_dir.join(file.file_name())
    }

    fn load_state(&self, file: StateFile) -> Option<Vec<u8>> {
        let path = self.state_path(file);
        let f = crate::project::open_regular(&path).ok()?;
        let mut buf = Vec::new();
        f.take(STATE_FILE_MAX as u64).read_to_end(&mut buf).ok()?;
        Some(buf)
    }

    fn save_state(&mut self, file: StateFile, content: &[u8]) -> Result<()> {
        if content.len() > STATE_FILE_MAX {
            anyhow::bail!(
                "the agent tried to save {} bytes of {}",
                content.len(),
                file.file_name()
            );
        }
        // memoria.md is part of every later session's prompt: each change is
        // recorded with its diff before it is written.
        let change = match file {
            StateFile::Memory => {
                crate::record::memory_change(&self.id, self.load_state(file).as_deref(), content)
            }
            StateFile::Context => None,
        };
        if let Some((record, diff)) = change {
            self.audit(record)?;
            let (diff, _) = self.secrets.redactor().redact_str(&diff);
            self.memory_diffs.push(diff);
        }
        self.ctx.pinned.write(&self.state_path(file), content)
    }

    /// Shows the operator what this session changed in memoria.md.
    fn report_memory(&self) {
        if let Some(text) = crate::record::memory_report(&self.memory_diffs) {
            self.op.event(&AgentEvent::Info(text));
        }
    }

    fn fill(&self, summary: &mut SessionSummary) {
        summary.outcomes = self.outcomes.clone();
        // A task the agent never reported did not complete.
        for (name, sha) in &self.tasks_expected {
            if !summary.outcomes.iter().any(|o| &o.name == name)
                && matches!(self.mode, SessionMode::Tasks { .. })
            {
                summary.outcomes.push(TaskOutcome {
                    name: name.clone(),
                    sha256: sha.clone(),
                    status: TaskStatus::Incomplete,
                    summary: "not reached".to_string(),
                    steps: 0,
                    conflicts: Vec::new(),
                });
            }
        }
        summary.actions = self.actions;
        summary.denials = self.denials;
        if summary.error.is_none() {
            summary.error.clone_from(&self.agent_reason);
        }
    }

    /// A tool request: decode, decide, maybe ask, run confined, audit, answer.
    fn tool(&mut self, req: ToolRequest) -> ToolResult {
        let started = Instant::now();
        let call_id = sanitize::one_line(&req.call_id, 64);
        if req.tool == "ask_secret" {
            return self.ask_secret(&call_id, &req.arguments);
        }
        let default_cwd = self.ctx.layout.state_dir.clone();
        let planned = match self.skills.find(&req.tool) {
            Some(skill) => crate::skills::plan(skill, &req.arguments, &default_cwd),
            None => self
                .project_tools
                .plan(&req.tool, &req.arguments, &self.skills)
                .unwrap_or_else(|| crate::decide::plan(&req, &default_cwd)),
        };
        let planned = planned.and_then(|plan| plan.check_secrets(&self.secrets).map(|()| plan));
        let (plan, decision) = match planned {
            Ok(mut plan) => {
                let classified = crate::decide::decide(
                    &self.ctx.classifier,
                    &self.engine,
                    &plan,
                    CLASSIFY_LIMIT,
                );
                if let Some(incident) = &classified.incident {
                    let _ = self.audit(json!({
                        "event": "classifier_killed", "session": self.id, "pid": incident.pid,
                        "what": incident.what, "restarted": incident.restarted,
                        "request": sanitize::one_line(&plan.display(), 2000),
                    }));
                    log_line(
                        self.ctx,
                        &format!(
                            "session {}: the command classifier (pid {}) {}; {}",
                            self.id,
                            incident.pid,
                            incident.what,
                            if incident.restarted {
                                "a fresh one is ready"
                            } else {
                                "none could be started again"
                            }
                        ),
                    );
                }
                let mut decision = classified.decision;
                if let crate::decide::Plan::File { op, .. } = &mut plan {
                    crate::netfilter_check::grant_check_capability(op, &mut decision);
                }
                self.op.decided(
                    &call_id,
                    decision.category.as_str(),
                    decision.risk.as_str(),
                    decision.verdict.as_str(),
                );
                (plan, decision)
            }
            Err(message) => {
                let _ = self.audit(json!({"event": "tool_refused", "session": self.id, "tool": sanitize::one_line(&req.tool, 64), "arguments": sanitize::one_line(&req.arguments, 2000), "error": message}));
                return ToolResult::refused(&call_id, ToolStatus::Error, message);
            }
        };
        let mut record = json!({
            "event": "tool", "session": self.id, "tool": plan.tool_name(),
            "request": plan.display(), "category": decision.category.as_str(),
            "risk": decision.risk.as_str(), "decision": decision.verdict.as_str(),
            "source": decision.source, "reason": decision.reason,
            "profile": decision.profile.as_ref().map(|p| p.to_string()),
            "model_reason": sanitize::one_line(plan.reason(), 500),
        });
        // A project tool runs as the command it is; the record names it too.
        if self.project_tools.is_offered(&req.tool) {
            record["project_tool"] = json!(req.tool);
        }
        // The same action at most twice per task (or CLI message), whether
        // it succeeded or not: a third asks the model to use the result or
        // change approach instead of looping.
        let repeat_key = format!(
            "{}\u{0}{}\u{0}{}",
            plan.tool_name(),
            decision.normalized,
            plan.cwd().display()
        );
        let seen = self.repeats.entry(repeat_key).or_insert(0);
        if *seen >= MAX_SAME_ACTION {
            record["decision"] = json!("refused (repeated)");
            let _ = self.audit(record);
            return ToolResult::refused(
                &call_id,
                ToolStatus::Denied,
                format!("refused: this exact action already ran {MAX_SAME_ACTION} times in this task; use its result, or change approach"),
            );
        }
        *seen += 1;
        let approved_by = match &decision.verdict {
            sysward_policy::Verdict::Deny { .. } => {
                self.denials += 1;
                let _ = self.audit(record);
                return ToolResult::refused(
                    &call_id,
                    ToolStatus::Denied,
                    format!("denied by policy: {}. Do not try to work around this; choose another approach or report the blocker.", decision.reason),
                );
            }
            sysward_policy::Verdict::Ask => {
                let normalized = decision.normalized.clone();
                let key = self.approval_key(&plan, &decision);
                if self.session_allowed.contains(&normalized) {
                    "operator (allowed for this session)".to_string()
                } else if let Some(a) = self.approvals.take_granted(&key, &self.id).ok().flatten() {
                    format!(
                        "pending approval {} by {}",
                        a.id,
                        a.decided_by.clone().unwrap_or_default()
                    )
                } else if let Some(a) = self.approvals.take_denied(&key, &self.id).ok().flatten() {
                    self.denials += 1;
                    record["decision"] = json!("denied (pending approval)");
                    let _ = self.audit(record);
                    return ToolResult::refused(&call_id, ToolStatus::Denied, a.denied_message());
                } else {
                    match self.ask(&plan, &decision) {
                        Ok(who) => who,
                        Err(result) => {
                            record["decision"] = json!(result.status.as_str());
                            let _ = self.audit(record);
                            let mut r = *result;
                            r.call_id = call_id;
                            return r;
                        }
                    }
                }
            }
            _ if decision.source.starts_with("pre-approved by ") => {
                if let Some(next) = self.pre_approvals.used(&decision.source) {
                    self.engine = next;
                }
                decision.source.clone()
            }
            _ => "policy".to_string(),
        };
        record["approved_by"] = json!(approved_by);
        let mut executed = false;
        let mut action_ran = false;
        let result = if self.dry_run && !crate::decide::runs_in_dry_run(decision.category) {
            ToolResult::message(
                &call_id,
                ToolStatus::Ok,
                format!(
                    "dry run: would run `{}` with profile {}",
                    plan.display(),
                    decision
                        .profile
                        .as_ref()
                        .map(|p| p.to_string())
                        .unwrap_or_default()
                ),
            )
        } else {
            // On disk before anything runs (execute waits for it): a crash or
            // a kill during the action still leaves its record.
            let mut start = record.clone();
            start["event"] = json!("action_start");
            executed = true;
            self.actions += 1;
            let (result, change, ran) = match &plan {
                crate::decide::Plan::Net(net) => {
                    let out = self.execute_net(&call_id, net, &decision, start);
                    record["hops"] = json!(out.hops);
                    if let Some(d) = out.download {
                        record["download"] = d;
                    }
                    (out.result, None, out.ran)
                }
                _ => self.execute(&call_id, &plan, &decision, start),
            };
            action_ran = ran;
            if let Some(c) = change {
                record["change"] = json!({"path": c.path, "diff": c.diff, "backup": c.backup, "rollback": c.rollback});
            }
            result
        };
        let result = self.project_tool_result(&req, result);
        record["status"] = json!(result.status.as_str());
        record["redactions"] = json!(result.redactions);
        record["exit_code"] = json!(result.exit_code);
        record["signal"] = json!(result.signal);
        record["duration_ms"] = json!(started.elapsed().as_millis() as u64);
        record["bytes_out"] =
            json!(result.stdout.len() + result.stderr.len() + result.message.len());
        // The outcome of a started action rides on the start record's sync
        // (the next record or the session's end makes it durable).
        let audited = if executed {
            self.audit_lazy(record)
        } else {
            self.audit(record)
        };
        if let Err(e) = audited {
            // Nothing unaudited reaches the model.
            let what = if action_ran {
                "the action ran but the audit log failed"
            } else {
                "nothing ran, and the audit log failed"
            };
            return ToolResult::refused(&call_id, ToolStatus::Error, format!("{what}: {e}"));
        }
        result
    }

    /// A project tool's output is its JSON (as a skill pack's); a tool that
    /// `register_tool` wrote gets its pending approval, which the model is
    /// told how to have decided.
    fn project_tool_result(&mut self, req: &ToolRequest, mut result: ToolResult) -> ToolResult {
        if result.status != ToolStatus::Ok {
            return result;
        }
        if req.tool == sysward_ipc::tools::Tool::RegisterTool.name() && result.exit_code.is_none() {
            let mode = self.project.policy.execution_mode.as_str();
            let (id, host, task) = (&self.id, &self.ctx.hostname, &self.current_task);
            let note = self
                .project_tools
                .registered(&req.arguments, &self.approvals, |t| {
                    let mut r = t.approval_request(id, host, mode);
                    r.task.clone_from(task);
                    r
                });
            let _ = self.audit(
                json!({"event": "project_tool_registered", "session": self.id, "note": note}),
            );
            result.message = format!("{}\n{note}", result.message);
        } else if self.project_tools.is_offered(&req.tool) {
            match crate::skills::result_text(&result.stdout) {
                Ok(text) => result.stdout = text,
                Err(why) => {
                    result.status = ToolStatus::Error;
                    result.stdout.clear();
                    result.message = why;
                }
            }
        }
        result
    }

    /// `ask_secret`: the operator types a value (no echo) for one program and
    /// delivery the model names; the model only ever gets the placeholder.
    fn ask_secret(&mut self, call_id: &str, arguments: &str) -> ToolResult {
        let fail = |m: String| ToolResult::refused(call_id, ToolStatus::Error, m);
        if matches!(self.mode, SessionMode::Tasks { .. }) {
            return fail("ask_secret is not available in tasks mode: no operator is there to type it. End the task as BLOCKED and say which secret is needed (an administrator can add it to the secrets directory with a scope)".to_string());
        }
        let args: crate::secrets::AskSecretArgs = match serde_json::from_str(arguments) {
            Ok(a) => a,
            Err(e) => return fail(format!("invalid arguments for ask_secret: {e}")),
        };
        let program = match args.program.as_deref().map(tools::resolve_program) {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => return fail(e),
            None => None,
        };
        let scope = match crate::secrets::session_scope(program.as_deref(), &args.delivery) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string()),
        };
        let reason = sanitize::one_line(args.reason.as_deref().unwrap_or(""), 500);
        let name = sanitize::one_line(&args.name, 64);
        let answer = self.op.ask_secret(&name, &scope, &reason);
        let record = |outcome: &str| json!({"event": "ask_secret", "session": self.id, "name": name, "scope": scope.lines(), "outcome": outcome});
        match answer {
            Ok(Some(value)) => {
                let bytes = value.len();
                match self.secrets.add_session(&name, value, scope.clone()) {
                    Ok(()) => {
                        let mut r = record("stored");
                        r["bytes"] = json!(bytes);
                        let _ = self.audit(r);
                        ToolResult::message(
                            call_id,
                            ToolStatus::Ok,
                            format!("stored for this session; use {} exactly as a whole argument/value where its scope allows: {}", crate::secrets::placeholder(&name), scope.lines().join("; ")),
                        )
                    }
                    Err(e) => {
                        let _ = self.audit(record("refused"));
                        fail(e.to_string())
                    }
                }
            }
            Ok(None) => {
                let _ = self.audit(record("declined"));
                ToolResult::refused(call_id, ToolStatus::Denied, "the operator gave no value")
            }
            Err(why) => {
                let _ = self.audit(record("unavailable"));
                fail(format!("ask_secret is not available: {why}. Ask the operator to use `sysward cli` at a terminal, or an administrator to add the secret to the secrets directory with a scope"))
            }
        }
    }

    /// The identity of a request for pending approvals: an approval granted for
    /// it lets exactly this request (same command, directory and profile) run.
    fn approval_key(
        &self,
        plan: &crate::decide::Plan,
        decision: &sysward_policy::Decision,
    ) -> String {
        let profile = decision
            .profile
            .as_ref()
            .map(|p| p.to_string())
            .unwrap_or_default();
        approvals::request_key(plan.tool_name(), &decision.normalized, plan.cwd(), &profile)
    }

    /// Asks the operator; `Err` carries the result to return instead of running.
    fn ask(
        &mut self,
        plan: &crate::decide::Plan,
        decision: &sysward_policy::Decision,
    ) -> Result<String, Box<ToolResult>> {
        if self.pending >= MAX_PENDING_APPROVALS {
            self.denials += 1;
            return Err(Box::new(ToolResult::refused(
                "",
                ToolStatus::Denied,
                "denied: too many approvals pending in this session",
            )));
        }
        let prompt = ApprovalPrompt {
            id: format!(
                "{}-{}",
                &self.id[..8.min(self.id.len())],
                self.actions + self.denials + 1
            ),
            mode: self.project.policy.execution_mode.as_str().to_string(),
            host: self.ctx.hostname.clone(),
            category: decision.category.as_str().to_string(),
            risk: decision.risk.as_str().to_string(),
            // Whole: a person approves all of it (the panel elides for
            // display and shows the rest on request).
            command: sanitize::one_line(&decision.normalized, crate::approval_view::WHOLE),
            profile: decision
                .profile
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_default(),
            reason: sanitize::one_line(plan.reason(), 500),
            parts: crate::approval_view::prompt_parts(&decision.parts),
            parts_total: decision.parts.len(),
        };
        self.pending += 1;
        let answer = self.op.approve(&prompt);
        self.pending -= 1;
        if answer.is_none() {
            self.pending_in_task.push(prompt.command.clone());
            let request = ApprovalRequest {
                session: self.id.clone(),
                key: self.approval_key(plan, decision),
                tool: plan.tool_name().to_string(),
                command: prompt.command.clone(),
                cwd: plan.cwd().display().to_string(),
                category: prompt.category.clone(),
                risk: prompt.risk.clone(),
                profile: prompt.profile.clone(),
                reason: prompt.reason.clone(),
                mode: prompt.mode.clone(),
                host: prompt.host.clone(),
                task: self.current_task.clone(),
                parts: prompt.parts.clone(),
                parts_total: prompt.parts_total,
            };
            return match self.approvals.create(request) {
                Ok(created) => {
                    let a = created.approval();
                    let _ = self.audit(json!({"event": "approval_pending", "session": self.id, "approval": a.id, "command": prompt.command}));
                    log_line(
                        self.ctx,
                        &format!(
                            "session {}: approval {} pending: {}",
                            self.id, a.id, prompt.command
                        ),
                    );
                    self.op.event(&AgentEvent::Info(format!(
                        "pending approval {id}: {} ({} · risk {}) — to allow it: sysward approve {id} (then run again); to refuse: sysward deny {id}",
                        crate::approval_view::elide(&prompt.command, 160, 80, ""),
                        prompt.category,
                        prompt.risk,
                        id = a.id
                    )));
                    Err(Box::new(ToolResult::refused(
                        "",
                        ToolStatus::PendingApproval,
                        a.blocked_message(),
                    )))
                }
                Err(e) => {
                    self.denials += 1;
                    Err(Box::new(ToolResult::refused(
                        "",
                        ToolStatus::Denied,
                        e.to_string(),
                    )))
                }
            };
        }
        match answer {
            None => Err(Box::new(ToolResult::refused(
                "",
                ToolStatus::PendingApproval,
                "approval required",
            ))),
            Some((ApprovalDecision::AllowOnce, _)) => {
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} allowed once: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                Ok(format!("operator (once): {}", self.operator))
            }
            Some((ApprovalDecision::AllowSession { confirmed: true }, _)) => {
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} allowed for the session: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                self.session_allowed.insert(decision.normalized.clone());
                Ok(format!("operator (for this session): {}", self.operator))
            }
            Some((ApprovalDecision::AllowSession { confirmed: false }, _))
            | Some((ApprovalDecision::Deny, _)) => {
                self.denials += 1;
                let note = match answer {
                    Some((_, note)) if !note.is_empty() => {
                        format!(": {}", sanitize::one_line(&note, 500))
                    }
                    _ => String::new(),
                };
                let _ = self.audit(json!({"event": "approval_denied", "session": self.id, "command": prompt.command, "by": self.operator}));
                log_line(
                    self.ctx,
                    &format!(
                        "session {}: {} denied: {}",
                        self.id, self.operator, prompt.command
                    ),
                );
                Err(Box::new(ToolResult::refused(
                    "",
                    ToolStatus::Denied,
                    format!("denied by the operator{note}"),
                )))
            }
        }
    }

    /// The start record of an action, on disk before the action runs. For a
    /// command it is written by the audit writer while the command's
    /// confinement steps run; the gate lets it execve only once the record is
    /// durable (or, for an action that changes nothing and sends nothing,
    /// written: see [`crate::audit::OpenGate`]). Returns the gate to hand to
    /// the spawn and the writer's answer.
    fn audit_start(
        &mut self,
        mut start: serde_json::Value,
        gated: Option<crate::audit::OpenGate>,
    ) -> Result<(
        Option<sysward_sandbox::jail::GateWait>,
        Option<PendingStart>,
    )> {
        self.secrets.redactor().redact_json(&mut start);
        if let Some(open) = gated {
            if self.audit_writer.is_none() {
                self.audit_writer = crate::audit::Writer::start(Arc::clone(&self.ctx.audit)).ok();
            }
            if let (Some(writer), Ok((opener, wait))) =
                (&self.audit_writer, sysward_sandbox::jail::gate())
            {
                return Ok((
                    Some(wait),
                    Some(writer.record_then_open(start, open, opener)),
                ));
            }
        }
        self.ctx.audit.record(start)?;
        Ok((None, None))
    }

    /// Runs an allowed network tool call in the network executor.
    fn execute_net(
        &mut self,
        call_id: &str,
        net: &crate::net_action::NetPlan,
        decision: &sysward_policy::Decision,
        start_record: serde_json::Value,
    ) -> crate::net_action::NetOutcome {
        let Some(profile) = &decision.profile else {
            return crate::net_action::NetOutcome {
                result: ToolResult::refused(
                    call_id,
                    ToolStatus::Denied,
                    "denied: the decision carries no confinement profile",
                ),
                ran: false,
                hops: Vec::new(),
                download: None,
            };
        };
        let run = crate::net_action::NetRun {
            runner: &self.ctx.runner,
            audit: &self.ctx.audit,
            cancel: self.op.cancel_token(),
            redactor: self.secrets.redactor(),
            allow: self.engine.block().network_allow.clone(),
            search_url: self.project.conf.search_url.clone(),
            nvd_url: self.project.conf.nvd_url.clone(),
            tracker_url: self.project.conf.tracker_url.clone(),
            extra_roots: self.engine.block().network_extra_roots.clone(),
            max_download: self.engine.block().max_download_size,
            state_dir: self.ctx.layout.state_dir.clone(),
            layout: &self.ctx.layout,
            action_id: format!("{}-{}", self.id, self.actions),
        };
        let timeout = Duration::from_secs(u64::from(profile.timeout_secs.max(1)));
        crate::net_action::execute(&run, net, timeout, start_record, call_id)
    }

    /// Runs an allowed action; also returns the file change to audit, if any.
    fn execute(
        &mut self,
        call_id: &str,
        plan: &crate::decide::Plan,
        decision: &sysward_policy::Decision,
        start_record: serde_json::Value,
    ) -> (ToolResult, Option<FileChange>, bool) {
        let refused =
            |status, msg: String| (ToolResult::refused(call_id, status, msg), None, false);
        let Some(mut profile) = decision.profile.clone() else {
            return refused(
                ToolStatus::Denied,
                "denied: the decision carries no confinement profile".to_string(),
            );
        };
        if let Some(t) = plan.timeout_secs() {
            profile.timeout_secs = t.min(tools::MAX_TIMEOUT_SECS) as u32;
        }
        // The start record goes to disk first thing: for a command, on the
        // audit thread while the rest is prepared and the command confined
        // (its execve waits at the gate); a refusal below still waits for it,
        // so that the outcome record follows it.
        let gated = matches!(
            plan,
            crate::decide::Plan::Command(_)
                | crate::decide::Plan::Builtin { .. }
                | crate::decide::Plan::Skill { .. }
        )
        .then(|| {
            if profile.changes_nothing() {
                crate::audit::OpenGate::WhenWritten
            } else {
                crate::audit::OpenGate::WhenDurable
            }
        });
        let (mut gate, mut pending_audit) = match self.audit_start(start_record, gated) {
            Ok(g) => g,
            Err(e) => {
                return refused(
                    ToolStatus::Error,
                    format!("the audit log cannot be written, so nothing ran: {e:#}"),
                )
            }
        };
        let refused = |pending: &mut Option<_>, status, msg: String| {
            let _ = settle(pending);
            refused(status, msg)
        };
        let action_id = format!("{}-{}", self.id, self.actions);
        let cgroup = self.ctx.runner.cgroup_for(&format!("a{action_id}"));
        let backup = self.project.policy.backup_before_system_edit
            && plan.touches_outside(&self.ctx.layout.config_dir);
        let mut spec = match plan.exec_spec(
            self.actions as u64,
            profile.clone(),
            cgroup.as_ref().map(|c| c.dir().display().to_string()),
            backup,
        ) {
            Ok(s) => s,
            Err(message) => return refused(&mut pending_audit, ToolStatus::Error, message),
        };
        // One-shot secret files of this action; removed when it ends, on
        // every path out of this function.
        let mut one_shot = crate::oneshot::OneShotFiles::new(
            &self.ctx.layout,
            &action_id,
            profile.uid,
            profile.gid,
        );
        if let Err(e) = crate::oneshot::ensure_root(&self.ctx.layout) {
            return refused(
                &mut pending_audit,
                ToolStatus::Error,
                format!("cannot prepare the one-shot secret directory, so nothing ran: {e}"),
            );
        }
        // Only the spec gets values; the plan, the decision and the audit keep
        // the placeholders.
        let substituted = match self
            .secrets
            .substitute_spec_with(&mut spec, Some(&mut one_shot))
        {
            Ok(s) => s,
            Err(e) => return refused(&mut pending_audit, ToolStatus::Error, e.to_string()),
        };
        one_shot.confine(&mut spec);
        let secret_file = crate::secret_files::delivered_file(&substituted);
        if let Some(path) = &secret_file {
            if let Err(message) = crate::secret_files::admit_delivery(&mut spec, path) {
                return refused(&mut pending_audit, ToolStatus::Error, message);
            }
        }
        if !substituted.is_empty() {
            let _ = self.audit(json!({"event": "secrets_delivered", "session": self.id, "deliveries": substituted}));
        }
        let redactor = self.secrets.redactor();
        if let Err(e) = crate::action::ensure_tmp(&self.ctx.runner.tmp_dir) {
            return refused(
                &mut pending_audit,
                ToolStatus::Error,
                format!(
                    "cannot prepare {}: {e:#}",
                    self.ctx.runner.tmp_dir.display()
                ),
            );
        }
        let timeout = Duration::from_secs(u64::from(profile.timeout_secs.max(1)));
        let cancel = self.op.cancel_token().clone();
        // A file operation starts only once its record is on disk, and once
        // the directories where it may leave a temporary are noted.
        let temp_dirs = match &spec {
            sysward_ipc::exec::ExecSpec::File { op, .. } => crate::stale_temps::dirs_of(op),
            sysward_ipc::exec::ExecSpec::Command { .. } => Vec::new(),
        };
        if !matches!(spec, sysward_ipc::exec::ExecSpec::Command { .. }) {
            if let Err(e) = settle(&mut pending_audit) {
                return refused(&mut None, ToolStatus::Error, e.to_string());
            }
        }
        if !temp_dirs.is_empty() {
            if let Err(e) = crate::stale_temps::note(&self.ctx.layout, &temp_dirs) {
                return refused(
                    &mut pending_audit,
                    ToolStatus::Error,
                    format!("cannot note the file operation's directories, so nothing ran: {e:#}"),
                );
            }
        }
        // Retried only where the command provably did nothing (seed 000): the
        // dpkg lock was held, or a name did not resolve for now.
        let mut cgroup = cgroup;
        let mut retries: Vec<String> = Vec::new();
        let mut attempt = 0usize;
        let outcome = loop {
            let outcome = self.ctx.runner.run(
                &spec,
                cgroup.as_ref(),
                crate::action::RunHow {
                    timeout,
                    cancel: &cancel,
                    save_prefix: &format!("{action_id}-{attempt}"),
                    redactor: &redactor,
                    gate: gate.take(),
                },
            );
            // The start record is on disk before any retry and before the
            // result is released.
            if let Err(e) = settle(&mut pending_audit) {
                let ran = e.may_have_run();
                return (
                    ToolResult::refused(call_id, ToolStatus::Error, e.to_string()),
                    None,
                    ran,
                );
            }
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    return refused(
                        &mut pending_audit,
                        ToolStatus::Error,
                        format!("cannot run the action: {e:#}"),
                    )
                }
            };
            let Some((why, delays)) = crate::retry::transient(&outcome) else {
                break outcome;
            };
            let Some(delay) = delays.get(attempt) else {
                break outcome;
            };
            retries.push(format!(
                "attempt {} failed ({why}); retried after {delay} s",
                attempt + 1
            ));
            if crate::retry::sleep_unless_cancelled(Duration::from_secs(*delay), &cancel) {
                break outcome;
            }
            attempt += 1;
            // An emptied cgroup for the next attempt.
            if let Some(c) = cgroup.take() {
                self.ctx.runner.release_cgroup(c);
            }
            cgroup = self
                .ctx
                .runner
                .cgroup_for(&format!("a{action_id}-r{attempt}"));
        };
        if let Some(c) = cgroup {
            self.ctx.runner.release_cgroup(c);
        }
        let one_shot_note = match one_shot.remove() {
            Ok(0) => None,
            Ok(n) => {
                let _ = self.audit(json!({"event": "secret_files_removed", "session": self.id, "action": action_id, "files": n}));
                Some(format!(
                    "the one-shot secret file(s) given to the command ({n}) were removed"
                ))
            }
            Err(e) => {
                let _ = self.audit(json!({"event": "secret_files_removed", "session": self.id, "action": action_id, "error": e.to_string()}));
                Some(format!(
                    "the one-shot secret file(s) could not be removed: {e}"
                ))
            }
        };
        if !temp_dirs.is_empty() {
            let removed: Vec<String> = temp_dirs
                .iter()
                .flat_map(|d| crate::stale_temps::sweep(d))
                .collect();
            if !removed.is_empty() {
                let _ = self.audit(json!({"event": "stale_temp_removed", "session": self.id, "action": action_id, "paths": removed}));
            }
            crate::stale_temps::clear(&self.ctx.layout);
        }
        let mut result = ToolResult::message(call_id, ToolStatus::Ok, String::new());
        result.duration_ms = outcome.duration.as_millis() as u64;
        result.stdout = outcome.stdout.text;
        if matches!(plan, crate::decide::Plan::Builtin { tool, .. } if tool == "read_journal") {
            result.stdout = crate::journal::format(&result.stdout);
        }
        let skill_output = match plan {
            crate::decide::Plan::Skill { .. } if outcome.ending == Ending::Exited(0) => {
                Some(crate::skills::result_text(&result.stdout))
            }
            _ => None,
        };
        result.stderr = outcome.stderr.text;
        result.saved_output = outcome
            .stdout
            .saved
            .or(outcome.stderr.saved)
            .map(|p| p.display().to_string());
        let mut notes: Vec<String> = [outcome.stdout.note, outcome.stderr.note]
            .into_iter()
            .flatten()
            .collect();
        notes.extend(retries);
        notes.extend(one_shot_note);
        if profile.can_write() {
            if let Err(why) = check_pinned(self.ctx, &self.id, Some(&action_id)) {
                notes.push(why);
            }
        }
        let mut change = None;
        let outcome_ran = outcome.ending != Ending::NotRun;
        match outcome.ending {
            Ending::Exited(code) => {
                result.exit_code = Some(code);
                result.status = if code == 0 {
                    ToolStatus::Ok
                } else {
                    ToolStatus::Error
                };
            }
            Ending::Signaled(sig) => {
                result.signal = Some(sig);
                result.status = ToolStatus::Error;
            }
            Ending::TimedOut => {
                result.status = ToolStatus::Timeout;
                notes.push(format!(
                    "killed after the {}s timeout, with every process it started",
                    timeout.as_secs()
                ));
            }
            Ending::Cancelled => {
                result.status = ToolStatus::Cancelled;
                notes.push(if crate::signals::stopping() {
                    "cancelled: the broker is stopping (SIGTERM)".to_string()
                } else {
                    "cancelled by the operator".to_string()
                });
            }
            Ending::NotRun => {
                result.status = ToolStatus::Error;
                notes.push(outcome.error.unwrap_or_default());
            }
            Ending::FileOp => match outcome.file_result {
                Some(Ok((text, mut c))) => {
                    if secret_file.is_some() {
                        if let Some(c) = c.as_mut() {
                            crate::secret_files::conceal_change(c);
                        }
                    }
                    let kept = match plan {
                        crate::decide::Plan::File { op, .. } => {
                            crate::patch_plan::keep(&self.ctx.layout, op, &action_id)
                        }
                        _ => None,
                    };
                    let text = match kept {
                        Some(Ok(path)) => {
                            format!("{text}\nthe patch is kept as {}", path.display())
                        }
                        Some(Err(e)) => format!("{text}\nthe patch could not be kept: {e}"),
                        None => text,
                    };
                    result.message = match &c {
                        Some(c) => format!("{text}\n{}", crate::record::change_for_model(c)),
                        None => text,
                    };
                    change = c.map(|mut c| {
                        redact::redact_file_change(&redactor, &mut c);
                        c
                    });
                }
                Some(Err(text)) => {
                    result.status = ToolStatus::Error;
                    result.message = text;
                }
                None => result.status = ToolStatus::Error,
            },
        }
        match skill_output {
            Some(Ok(text)) => result.stdout = text,
            Some(Err(why)) => {
                result.status = ToolStatus::Error;
                result.stdout.clear();
                notes.push(why);
            }
            None => {}
        }
        if let Some(hint) = crate::retry::permission_hint(&result) {
            notes.push(hint);
        }
        if !notes.is_empty() {
            if !result.message.is_empty() {
                result.message.push('\n');
            }
            result.message.push_str(&notes.join("\n"));
        }
        result.redactions = outcome.redactions.total().min(u64::from(u32::MAX)) as u32;
        redact::redact_tool_result(&redactor, &mut result);
        let ran = outcome_ran;
        (result, change, ran)
    }
}

/// Waits for a start record handed to the audit thread; the error says that
/// nothing ran.
/// The audit writer's answer for an action's start record.
type PendingStart = std::sync::mpsc::Receiver<Result<u64, crate::audit::StartRecordError>>;

/// Waits until the start record is on disk.
fn settle(pending: &mut Option<PendingStart>) -> Result<(), crate::audit::StartRecordError> {
    let Some(answer) = pending.take() else {
        return Ok(());
    };
    answer
        .recv()
        .unwrap_or(Err(crate::audit::StartRecordError::WriterGone))
        .map(|_| ())
}

fn unreachable_state() {
    // recv() refuses Hello after the handshake; nothing to do here.
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
            .context("cannot start the agent stderr relay")?;
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
    crate::decide::engine_for_layout(
        &ctx.layout,
        &project.agent_md_path,
        &project.policy,
        ctx.secrets.delivery_files(),
    )
}

/// The tools left out of the model's prompt: those a policy flag turns off,
/// and `register_tool` where the layout has no project tools.
fn withheld_tools(
    policy: &sysward_policy::PolicyBlock,
    project_tools: &crate::project_tools::SessionTools,
) -> Vec<String> {
    let mut withheld = sysward_ipc::tools::withheld(|flag| policy.flag(flag).unwrap_or(false));
    let register = sysward_ipc::tools::Tool::RegisterTool.name().to_string();
    if !project_tools.can_register() && !withheld.contains(&register) {
        withheld.push(register);
    }
    withheld
}
