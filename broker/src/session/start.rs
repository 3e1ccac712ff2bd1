//! Starting a session: the agent, its gateway and the handshake; the summary
//! at its end.

use super::dispatch::{self, Flow};
use super::*;

impl<'a> Session<'a> {
    pub(super) fn start(
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
            .map_err(SessionError::Skills)?;
        let approvals = Approvals::open(&ctx.layout)?;
        // A project tool that cannot be used, or waits for a person, is a
        // warning: the session goes on without it.
        let mode = project.policy.execution_mode.as_str();
        let tools_home = if ctx.layout.standalone {
            crate::project_tools::ToolsHome::Project(ctx.layout.tools_dir())
        } else {
            crate::project_tools::ToolsHome::Broker {
                dir: ctx.layout.tools_dir(),
                ignored: ctx.layout.config_dir.join("tools"),
            }
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
            .map_err(SessionError::Gateway)?;
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
            tools_dir: if ctx.layout.standalone {
                "tools".to_string()
            } else {
                ctx.layout.tools_dir().display().to_string()
            },
            withheld_tools: withheld_tools(&project.policy),
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
        // Off in init.conf: the CPUs' idle states are left alone.
        let wake_latency = if project.conf.cpu_latency_request {
            sysward_actions::wake_latency::WakeLatency::open()
        } else {
            sysward_actions::wake_latency::WakeLatency::none()
        };
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
            welcome: Some(Box::new(setup)),
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
            wake_latency,
            memory_diffs: Vec::new(),
            _lock: lock,
        };
        session.handshake()?;
        Ok(session)
    }

    pub(super) fn handshake(&mut self) -> Result<()> {
        if !self.chan.wait_readable(HELLO_TIMEOUT.as_millis() as i32)? {
            return Err(SessionError::Ended(format!(
                "the agent did not say hello within {}s",
                HELLO_TIMEOUT.as_secs()
            )));
        }
        // Only Hello is legal now (the dispatch table), so this is its handler.
        let hello = match self.recv() {
            Ok(h) => h,
            Err(e) => return Err(self.agent_lost(e)),
        };
        on_hello(self, hello)?;
        Ok(())
    }

    /// Shows the operator what this session changed in memoria.md.
    pub(super) fn report_memory(&self) {
        if let Some(text) = crate::record::memory_report(&self.memory_diffs) {
            self.op.event(&AgentEvent::Info(text));
        }
    }

    pub(super) fn fill(&self, summary: &mut SessionSummary) {
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
}

/// Hello: the agent's build must be the broker's; the answer is the session
/// setup, once.
pub(super) fn on_hello(s: &mut Session<'_>, request: AgentRequest) -> Result<Flow> {
    let AgentRequest::Hello { build } = request else {
        return Err(dispatch::wrong_kind(&request));
    };
    if build != BUILD_VERSION {
        let reason = format!(
            "version mismatch: agent {build}, broker {BUILD_VERSION}; reinstall sysward so all binaries match"
        );
        let _ = s.chan.send(&AgentAnswer::Goodbye {
            reason: reason.clone(),
        });
        return Err(SessionError::Ended(reason));
    }
    let setup = s
        .welcome
        .take()
        .ok_or_else(|| SessionError::Ended("the agent said hello twice".to_string()))?;
    s.state = AgentState::Ready;
    s.chan.send(&AgentAnswer::Welcome(setup))?;
    Ok(Flow::Next)
}
