//! Running an approved action: its start record, the confined run, its
//! outcome record.

use super::*;

impl<'a> Session<'a> {
    /// The start record of an action, on disk before the action runs. For a
    /// command it is written by the audit writer while the command's
    /// confinement steps run; the gate lets it execve only once the record is
    /// durable (or, for an action that changes nothing and sends nothing,
    /// written: see [`crate::audit::OpenGate`]). Returns the gate to hand to
    /// the spawn and the writer's answer.
    pub(super) fn audit_start(
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
                self.audit_writer = start_audit_writer(&self.ctx.audit);
            }
            if let (Some(writer), Ok((opener, wait))) =
                (&self.audit_writer, sysward_sandbox::jail::gate())
            {
                let pending = writer.record_then_open(start, open, opener);
                // The action execs only once the record is written (or
                // durable): the writer (a batch thread, see
                // `start_audit_writer`, on this CPU) writes and syncs it
                // while this thread sleeps in the child's clone, so that
                // the sync overlaps the action's confinement. Yielding to it
                // here first was slower for writes once the writer followed
                // this CPU (bench: 7 of 10 alternating runs).
                return Ok((Some(wait), Some(pending)));
            }
        }
        self.ctx.audit.record(start)?;
        Ok((None, None))
    }

    /// Runs an allowed network tool call in the network executor.
    pub(super) fn execute_net(
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
    pub(super) fn execute(
        &mut self,
        call_id: &str,
        plan: &crate::planner::Plan,
        decision: &sysward_policy::Decision,
        start_record: serde_json::Value,
        clock: &mut crate::stage_clock::StageClock,
    ) -> Result<Ran, ActionError> {
        let Some(mut profile) = decision.profile.clone() else {
            return Err(ActionError::Refused {
                message: "denied: the decision carries no confinement profile".to_string(),
            });
        };
        if let Some(t) = plan.timeout_secs() {
            profile.timeout_secs = t.min(command_plan::MAX_TIMEOUT_SECS) as u32;
        }
        // The start record goes to disk first thing: for a command, on the
        // audit thread while the rest is prepared and the command confined
        // (its execve waits at the gate); a refusal below still waits for it,
        // so that the outcome record follows it.
        let gated = matches!(
            plan,
            crate::planner::Plan::Command(_)
                | crate::planner::Plan::Builtin { .. }
                | crate::planner::Plan::Skill { .. }
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
                return Err(ActionError::AuditFailed {
                    message: format!(
                        "the audit log cannot be written, so nothing ran: {}",
                        crate::error::chain(&e)
                    ),
                    ran: false,
                })
            }
        };
        // A step that fails before the run: the start record is still
        // settled first, so that the outcome record follows it.
        let not_run = |pending: &mut Option<_>, message: String| {
            let _ = settle(pending);
            Err(ActionError::NotRun { message })
        };
        clock.mark("start_record");
        let action_id = format!("{}-{}", self.id, self.actions);
        let cgroup = self.ctx.runner.cgroup_for(&format!("a{action_id}"));
        clock.mark("cgroup");
        let backup = self.project.policy.backup_before_system_edit
            && plan.touches_outside(&self.ctx.layout.config_dir);
        // What the rest needs of the profile, read before the spec takes it.
        let (uid, gid, can_write) = (profile.uid, profile.gid, profile.can_write());
        let timeout = Duration::from_secs(u64::from(profile.timeout_secs.max(1)));
        let mut spec = match plan.exec_spec(
            self.actions as u64,
            profile,
            cgroup.as_ref().map(|c| c.dir().display().to_string()),
            backup,
        ) {
            Ok(s) => s,
            Err(e) => return not_run(&mut pending_audit, e.to_string()),
        };
        // One-shot secret files of this action; removed when it ends, on
        // every path out of this function.
        let mut one_shot =
            crate::oneshot::OneShotFiles::new(&self.ctx.layout, &action_id, uid, gid);
        if let Err(e) = crate::oneshot::ensure_root(&self.ctx.layout) {
            return not_run(
                &mut pending_audit,
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
            Err(e) => return not_run(&mut pending_audit, e.to_string()),
        };
        one_shot.confine(&mut spec);
        let secret_file = crate::secret_files::delivered_file(&substituted);
        if let Some(path) = &secret_file {
            if let Err(message) = crate::secret_files::admit_delivery(&mut spec, path) {
                return not_run(&mut pending_audit, message);
            }
        }
        if !substituted.is_empty() {
            let _ = self.audit(json!({"event": "secrets_delivered", "session": self.id, "deliveries": substituted}));
        }
        let redactor = self.secrets.redactor();
        if let Err(e) = crate::action::ensure_tmp(&self.ctx.runner.tmp_dir) {
            return not_run(
                &mut pending_audit,
                format!(
                    "cannot prepare {}: {}",
                    self.ctx.runner.tmp_dir.display(),
                    crate::error::chain(&e)
                ),
            );
        }
        let cancel = self.op.cancel_token().clone();
        // A file operation starts only once its record is on disk, and once
        // the directories where it may leave a temporary are noted.
        let temp_dirs = match &spec {
            sysward_ipc::exec::ExecSpec::File { op, .. } => crate::stale_temps::dirs_of(op),
            sysward_ipc::exec::ExecSpec::Command { .. } => Vec::new(),
        };
        if !matches!(spec, sysward_ipc::exec::ExecSpec::Command { .. }) {
            if let Err(e) = settle(&mut pending_audit) {
                return Err(ActionError::AuditFailed {
                    message: e.to_string(),
                    ran: false,
                });
            }
        }
        if !temp_dirs.is_empty() {
            if let Err(e) = crate::stale_temps::note(&self.ctx.layout, &temp_dirs) {
                return not_run(
                    &mut pending_audit,
                    format!(
                        "cannot note the file operation's directories, so nothing ran: {}",
                        crate::error::chain(&e)
                    ),
                );
            }
        }
        // Retried only where the command provably did nothing (seed 000): the
        // dpkg lock was held, or a name did not resolve for now.
        clock.mark("spec");
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
                    wake_latency: &self.wake_latency,
                },
            );
            if let Ok(o) = &outcome {
                clock.extend(&o.stages);
            }
            // The start record is on disk before any retry and before the
            // result is released.
            let settled = settle(&mut pending_audit);
            clock.mark("start_record_wait");
            if let Err(e) = settled {
                return Err(ActionError::AuditFailed {
                    ran: e.may_have_run(),
                    message: e.to_string(),
                });
            }
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => {
                    return not_run(
                        &mut pending_audit,
                        format!("cannot run the action: {}", crate::error::chain(&e)),
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
            // Seconds of waiting: the CPUs may halt meanwhile.
            self.wake_latency.release();
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
        if matches!(plan, crate::planner::Plan::Builtin { tool, .. } if tool == "read_journal") {
            result.stdout = crate::journal::format(&result.stdout);
        }
        let skill_output = match plan {
            crate::planner::Plan::Skill { .. } if outcome.ending == Ending::Exited(0) => {
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
        if can_write {
            if let Err(why) = check_pinned(self.ctx, &self.id, Some(&action_id)) {
                notes.push(why.to_string());
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
                        crate::planner::Plan::File { op, .. } => {
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
                notes.push(why.to_string());
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
        if !outcome_ran {
            // Confinement or exec failed: the message says at which step.
            return Err(ActionError::NotRun {
                message: result.message,
            });
        }
        Ok(Ran { result, change })
    }
}

/// An action that ran: what the model is told, and the file it changed.
pub(super) struct Ran {
    pub result: ToolResult,
    pub change: Option<FileChange>,
}

/// Why an action the session tried to run produced no result of its own.
#[derive(Debug, thiserror::Error)]
pub(super) enum ActionError {
    /// The decision gave it nothing to run with.
    #[error("{message}")]
    Refused { message: String },
    /// A step before the run failed (preparing its secrets or directories,
    /// confining it, starting it): nothing ran.
    #[error("{message}")]
    NotRun { message: String },
    /// The audit log failed; `ran` says whether the action may have run
    /// (its start record was written but could not be made durable).
    #[error("{message}")]
    AuditFailed { message: String, ran: bool },
}

impl ActionError {
    /// Whether the action may have run.
    pub fn ran(&self) -> bool {
        matches!(self, ActionError::AuditFailed { ran: true, .. })
    }

    /// What the model is told.
    pub fn into_result(self, call_id: &str) -> ToolResult {
        let status = match &self {
            ActionError::Refused { .. } => ToolStatus::Denied,
            ActionError::NotRun { .. } | ActionError::AuditFailed { .. } => ToolStatus::Error,
        };
        ToolResult::refused(call_id, status, self.to_string())
    }
}

/// Starts the session's audit writer as a `SCHED_BATCH` thread (it inherits
/// the policy of this thread, set for the spawn only). Its work is meant to
/// overlap the action's confinement; as an ordinary thread, woken on this
/// CPU while the other one idled, it preempted this thread at every start
/// record (about 30 µs before the spawn could go on, measured with
/// `perf sched`). A batch thread does not preempt on wakeup: it runs once
/// this thread waits for the child's execve, beside the confinement steps.
/// Where this thread runs under another policy, the writer simply inherits
/// that one.
fn start_audit_writer(audit: &Arc<crate::audit::Audit>) -> Option<crate::audit::Writer> {
    let set_policy = |policy: libc::c_int| {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: 0 names the calling thread; `param` is a live local the
        // kernel only reads.
        unsafe { libc::sched_setscheduler(0, policy, &param) == 0 }
    };
    // SAFETY: 0 names the calling thread; no memory is passed.
    let batch = unsafe { libc::sched_getscheduler(0) } == libc::SCHED_OTHER
        && set_policy(libc::SCHED_BATCH);
    let writer = crate::audit::Writer::start(Arc::clone(audit)).ok();
    if batch {
        set_policy(libc::SCHED_OTHER);
    }
    writer
}

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
