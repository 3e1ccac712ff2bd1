//! The loop of one task or message: model → tool calls → broker → results → …
//! until a reply without calls, with the step budget, loop guard, checkpoints
//! and observation caps.

use crate::conversation::{Call, Msg};
use crate::link::Stop;
use crate::memory;
use crate::observe::{self, Budget};
use crate::session::{Session, TurnError};
use crate::status;
use crate::toolcall::{self, strip_think};
use crate::tools::{self, ToolMeta};
use serde_json::{Map, Value};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::Instant;
use sysward_ipc::agent::{
    AgentEvent, RefusalKind, TaskStatus, ToolRequest, ToolResult, ToolStatus,
};

/// Step at which the model is asked whether it has enough evidence.
pub const CHECKPOINT_STEP: u32 = 6;
/// Identical call + identical result: warn at the 3rd, stop at the 5th.
pub const LOOP_WARN: u32 = 3;
pub const LOOP_BLOCK: u32 = 5;
/// Calls run from one model reply; more are refused.
pub const MAX_CALLS_PER_STEP: usize = 16;
/// Characters of a truncated reply kept in the history.
pub const TRUNCATED_KEEP: usize = 1500;
/// Largest arguments of one call (the seed's 40 MiB, less the frame overhead).
pub const TOOL_ARGS_MAX: usize = (40 << 20) - (64 << 10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnEnd {
    /// A reply without tool calls. In a task, `status` is the judged status
    /// (see [`crate::status`]) and, when it is FAILED for want of a believable
    /// status, why.
    Answer {
        text: String,
        steps: u32,
        status: Option<(TaskStatus, Option<String>)>,
    },
    /// The step budget ran out while the model still wanted tools.
    Incomplete { steps: u32, last_text: String },
    /// The loop guard stopped it.
    Blocked { reason: String, steps: u32 },
}

fn hash_of(parts: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
        0xffu8.hash(&mut h);
    }
    h.finish()
}

/// JSON with object keys sorted at every level, whatever map order serde_json
/// was built with.
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// Call identity: tool name and canonical arguments.
pub fn call_key(tool: &str, args: &Map<String, Value>) -> u64 {
    hash_of(&[tool, &canonical(&Value::Object(args.clone()))])
}

pub fn result_key(r: &ToolResult) -> u64 {
    hash_of(&[
        r.status.as_str(),
        &format!("{:?}/{:?}", r.exit_code, r.signal),
        &r.stdout,
        &r.stderr,
        &r.message,
    ])
}

fn failed(status: ToolStatus) -> bool {
    !matches!(status, ToolStatus::Ok)
}

/// What the loop guard says after a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    Warn(u32),
    Block(u32),
}

#[derive(Debug, Default)]
pub struct LoopGuard {
    pairs: HashMap<(u64, u64), u32>,
    /// Per call: (failed, result) of its runs, oldest first.
    runs: HashMap<u64, Vec<(bool, u64)>>,
}

impl LoopGuard {
    /// Refuses a call whose last two runs failed the same way.
    pub fn precheck(&self, call: u64) -> bool {
        match self.runs.get(&call) {
            Some(r) if r.len() >= 2 => {
                let a = r[r.len() - 1];
                let b = r[r.len() - 2];
                a.0 && b.0 && a.1 == b.1
            }
            _ => false,
        }
    }

    /// Records a run that reached the broker.
    pub fn record(&mut self, call: u64, result: u64, failed: bool) -> Verdict {
        self.runs.entry(call).or_default().push((failed, result));
        self.count(call, result)
    }

    /// Records a call refused before it ran (not a run of its own).
    pub fn record_refusal(&mut self, call: u64) -> Verdict {
        self.count(call, hash_of(&["refused before it ran"]))
    }

    fn count(&mut self, call: u64, result: u64) -> Verdict {
        let n = self.pairs.entry((call, result)).or_insert(0);
        *n += 1;
        match *n {
            n if n >= LOOP_BLOCK => Verdict::Block(n),
            n if n >= LOOP_WARN => Verdict::Warn(n),
            _ => Verdict::Fine,
        }
    }
}

/// `CONFLICT:` lines of an answer.
pub fn conflicts(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let t = l.trim().trim_start_matches(['*', '-', ' ']);
            t.strip_prefix("CONFLICT:").map(|c| c.trim().to_string())
        })
        .filter(|c| !c.is_empty())
        .collect()
}

struct Pending {
    id: String,
    tool: String,
    arguments: String,
}

/// One executed (or refused) call, ready for the history.
struct Done {
    id: String,
    text: String,
    failed: bool,
    /// The broker holds it for a person's approval.
    pending: bool,
    /// It ran and succeeded: evidence behind DONE (a memoria.md edit too: it
    /// is what a "remember this" task asks for).
    evidence: bool,
    verdict: Verdict,
}

impl Session {
    /// Runs one task or operator message to its end.
    pub fn run_turn(&mut self, input: &str, task: Option<&str>) -> Result<TurnEnd, TurnError> {
        self.current_input = input.to_string();
        self.repair_history();
        self.msgs.push(Msg::user(input));
        let max = self.setup.max_steps.max(1);
        let mut guard = LoopGuard::default();
        let mut budget = Budget::new(self.opts_per_step, self.opts_per_task);
        let mut consecutive_failures = 0u32;
        let mut status_asked = false;
        // Actions of this turn whose result was ok: the evidence behind DONE.
        let mut successes = std::mem::take(&mut self.prior_successes);
        // Actions held for a person: DONE without evidence then means BLOCKED.
        let mut pending_approvals = 0u32;
        let mut step = 0u32;
        // A status restate repeats a step number: it is announced once.
        let mut announced = 0u32;
        loop {
            step += 1;
            if step > announced {
                announced = step;
                self.link.event(AgentEvent::Step {
                    task: task.map(str::to_string),
                    step: step.min(max),
                    max,
                })?;
            }
            self.turn_steps = step;
            self.maybe_compact()?;
            let c = self.complete()?;
            if c.truncated() {
                // A reply cut at max_tokens is neither run nor believed: its
                // last call may be cut mid-argument and its answer mid-word.
                // Only its head stays in the history, marked.
                let limit = self.reply_tokens();
                let head = crate::link::clip_text(&strip_think(&c.content), TRUNCATED_KEEP);
                self.link.warn(format!(
                    "the model's reply was cut at {limit} tokens (max_tokens; MAX_REPLY_TOKENS in init.conf) and was not used; asking for a shorter one"
                ))?;
                self.state
                    .journal("truncated", &format!("reply cut at {limit} tokens"));
                self.msgs.push(Msg::assistant(
                    format!(
                        "{head}\n[sysward: this reply was cut at the output limit and discarded]"
                    ),
                    Vec::new(),
                ));
                self.msgs.push(Msg::results(format!(
                    "[sysward] Your last reply was cut at the output limit ({limit} tokens) and nothing in it was used. Reply again, shorter: one tool call, or a brief final answer."
                )));
                if step >= max {
                    return Ok(TurnEnd::Incomplete {
                        steps: step,
                        last_text: String::new(),
                    });
                }
                continue;
            }
            let content = strip_think(&c.content);
            let parsed = toolcall::parse(&content);
            // Calls were read from the raw text; what is kept and shown is the
            // model's text with sysward's markers tagged.
            let content = observe::model_text(&content);
            let parsed = toolcall::Parsed {
                text: observe::model_text(&parsed.text),
                ..parsed
            };
            let (pending, errors, shown, native_calls) = if !c.calls.is_empty() {
                let mut calls: Vec<Call> = Vec::new();
                for k in &c.calls {
                    // Some servers send no id, or the same id every step.
                    let id = if k.id.is_empty()
                        || k.id.len() > 64
                        || calls.iter().any(|x| x.id == k.id)
                        || self.call_id_used(&k.id)
                    {
                        self.next_call_id()
                    } else {
                        k.id.clone()
                    };
                    calls.push(Call {
                        id,
                        tool: k.tool.clone(),
                        arguments: k.arguments.clone(),
                    });
                }
                let pending = calls
                    .iter()
                    .map(|k| Pending {
                        id: k.id.clone(),
                        tool: k.tool.clone(),
                        arguments: k.arguments.clone(),
                    })
                    .collect::<Vec<_>>();
                // What is run is decided from the arguments as sent; only the
                // history's copy is shortened.
                for k in &mut calls {
                    k.arguments = crate::conversation::history_arguments(&k.arguments);
                }
                (pending, Vec::new(), parsed.text.clone(), calls)
            } else {
                let pending = parsed
                    .calls
                    .iter()
                    .map(|k| Pending {
                        id: String::new(),
                        tool: k.tool.clone(),
                        arguments: k.arguments.clone(),
                    })
                    .collect::<Vec<_>>();
                (
                    pending,
                    parsed.errors.clone(),
                    parsed.text.clone(),
                    Vec::new(),
                )
            };
            let native_turn = !native_calls.is_empty();
            // A conflict the model states while it works counts as much as
            // one in its final answer.
            for c in conflicts(&shown) {
                if !self.turn_conflicts.contains(&c) && self.turn_conflicts.len() < 50 {
                    self.turn_conflicts.push(c);
                }
            }
            // History keeps the think-stripped content; native calls ride along.
            let history_content = if native_turn {
                shown.clone()
            } else {
                content.clone()
            };
            self.msgs
                .push(Msg::assistant(history_content, native_calls));

            if pending.is_empty() && errors.is_empty() {
                // Final answer.
                let mut judged = None;
                if task.is_some() {
                    match status::judge(&shown, successes, input) {
                        Ok(st) => judged = Some((st, None)),
                        Err(status::Problem::DoneWithoutEvidence) if pending_approvals > 0 => {
                            let why = "an action of the task waits for a person's approval (sysward approvals)";
                            self.state.journal("status", why);
                            judged = Some((TaskStatus::Blocked, Some(why.to_string())));
                        }
                        Err(problem) if !status_asked => {
                            status_asked = true;
                            // The operator sees what the model said before
                            // it is asked to restate.
                            if !shown.trim().is_empty() {
                                self.link
                                    .event(AgentEvent::Info(format!("model: {shown}")))?;
                            }
                            self.link.warn(format!(
                                "status not accepted ({}): asking the model once to restate",
                                problem.what()
                            ))?;
                            self.msgs.push(Msg::results(problem.restate_prompt()));
                            step -= 1; // asking for the status is not a working step
                            continue;
                        }
                        Err(problem) => {
                            let why = problem.failure_reason();
                            self.state.journal("status", &why);
                            judged = Some((TaskStatus::Failed, Some(why)));
                        }
                    }
                }
                self.link.event(AgentEvent::Answer(shown.clone()))?;
                return Ok(TurnEnd::Answer {
                    text: shown,
                    steps: step,
                    status: judged,
                });
            }
            if !shown.is_empty() {
                self.link
                    .event(AgentEvent::Info(format!("model: {shown}")))?;
            }
            if step >= max {
                let msg = format!(
                    "MAX_STEPS={max} reached with tool calls still pending: the work is INCOMPLETE (raise MAX_STEPS in agent.md or split the task)"
                );
                self.link.warn(msg.clone())?;
                self.state.journal("budget", &msg);
                // Answer the pending native calls so the history stays well-formed.
                for p in &pending {
                    self.refused_event(
                        &p.id,
                        &p.tool,
                        &p.arguments,
                        RefusalKind::StepBudget,
                        "step budget exhausted",
                    )?;
                    if native_turn {
                        self.msgs.push(Msg::tool(
                            &p.id,
                            observe::agent_error(&p.id, &p.tool, "step budget exhausted"),
                        ));
                    }
                }
                return Ok(TurnEnd::Incomplete {
                    steps: step,
                    last_text: shown,
                });
            }

            for e in &errors {
                self.refused_event("", "", "", RefusalKind::Malformed, e)?;
            }
            let n = pending.len().max(1);
            let mut done: Vec<Done> = Vec::new();
            let mut step_chars = 0usize;
            for (i, p) in pending.into_iter().enumerate() {
                if i >= MAX_CALLS_PER_STEP {
                    let id = if p.id.is_empty() {
                        self.next_call_id()
                    } else {
                        p.id.clone()
                    };
                    self.refused_event(
                        &id,
                        &p.tool,
                        &p.arguments,
                        RefusalKind::TooManyCalls,
                        &format!("over {MAX_CALLS_PER_STEP} calls in one step"),
                    )?;
                    done.push(Done {
                        text: observe::agent_error(
                            &id,
                            &p.tool,
                            &format!("at most {MAX_CALLS_PER_STEP} calls run per step; repeat it in the next step if still needed"),
                        ),
                        id,
                        failed: true,
                        pending: false,
                        evidence: false,
                        verdict: Verdict::Fine,
                    });
                    continue;
                }
                let d = self.execute(p, &mut guard, &mut budget, n.min(MAX_CALLS_PER_STEP))?;
                step_chars += d.text.chars().count();
                done.push(d);
            }
            self.step_observations.push(step_chars);
            successes += done.iter().filter(|d| d.evidence).count() as u32;
            pending_approvals += done.iter().filter(|d| d.pending).count() as u32;

            // Notes for the next step.
            let mut notes: Vec<String> = errors
                .iter()
                .map(|e| format!("{e}. Write a call exactly as: ```tool\\n{{\"tool\": \"NAME\", \"arguments\": {{...}}}}\\n``` — nothing was executed for it."))
                .collect();
            let mut block: Option<String> = None;
            for d in &done {
                match d.verdict {
                    Verdict::Warn(k) => notes.push(format!(
                        "[sysward] Loop warning: you made the same call with the same result {k} times. Change approach; at {LOOP_BLOCK} the task stops as BLOCKED."
                    )),
                    Verdict::Block(k) => {
                        block = Some(format!(
                            "loop detected: the same call returned the same result {k} times"
                        ))
                    }
                    Verdict::Fine => {}
                }
                if d.failed {
                    consecutive_failures += 1;
                } else {
                    consecutive_failures = 0;
                }
            }
            if !errors.is_empty() {
                consecutive_failures += 1;
            }
            if consecutive_failures >= 2 {
                notes.push("[sysward] Several consecutive failures: stop and take another approach (check assumptions, read the error, try a different tool or path) instead of repeating.".into());
            }
            if step + 1 == CHECKPOINT_STEP && step + 1 < max {
                notes.push(format!(
                    "[sysward] Checkpoint (step {CHECKPOINT_STEP}/{max}): do you already have enough evidence? If so, conclude now; otherwise gather only what is missing."
                ));
            }
            if step + 1 == max {
                notes.push(format!(
                    "[sysward] Last step ({max}/{max}): converge now. Give your final answer without tool calls, with what is EXECUTED and VERIFIED so far."
                ));
            }
            if budget.exhausted() {
                notes.push("[sysward] The observation budget of this task is spent: further outputs are withheld. Conclude.".into());
            }
            if native_turn {
                // Notes ride in the last tool message, after its fence, so the
                // history keeps the tool-call/tool-result shape templates expect.
                let last = done.len().saturating_sub(1);
                for (i, d) in done.into_iter().enumerate() {
                    let mut text = d.text;
                    if i == last && !notes.is_empty() {
                        text.push_str("\n\n");
                        text.push_str(&notes.join("\n"));
                    }
                    self.msgs.push(Msg::tool(&d.id, text));
                }
            } else {
                let mut body: Vec<String> = done.into_iter().map(|d| d.text).collect();
                body.extend(notes);
                self.msgs.push(Msg::results(body.join("\n\n")));
            }
            if let Some(reason) = block {
                self.link.warn(reason.clone())?;
                self.state.journal("loop", &reason);
                return Ok(TurnEnd::Blocked {
                    reason,
                    steps: step,
                });
            }
        }
    }

    fn execute(
        &mut self,
        p: Pending,
        guard: &mut LoopGuard,
        budget: &mut Budget,
        calls_in_step: usize,
    ) -> Result<Done, TurnError> {
        // The broker sees our own unique ids; the model's id maps the result.
        let req_id = self.next_call_id();
        let id = if p.id.is_empty() {
            req_id.clone()
        } else {
            p.id.clone()
        };
        let refuse = |id: &str, tool: &str, msg: &str| Done {
            id: id.to_string(),
            text: observe::agent_error(id, tool, msg),
            failed: true,
            pending: false,
            evidence: false,
            verdict: Verdict::Fine,
        };
        if p.arguments.len() > TOOL_ARGS_MAX {
            self.refused_event(
                &id,
                &p.tool,
                "",
                RefusalKind::TooLarge,
                &format!("arguments of {} bytes", p.arguments.len()),
            )?;
            return Ok(refuse(
                &id,
                &p.tool,
                &format!(
                    "arguments of {} bytes exceed the {} MiB limit; split the work",
                    p.arguments.len(),
                    TOOL_ARGS_MAX >> 20
                ),
            ));
        }
        // A built-in tool, or a tool of the operator's skill packs.
        let skill = self.setup.skills.iter().find(|s| s.name == p.tool).cloned();
        let meta = tools::find(&p.tool);
        let (name, checked) = match (meta, &skill) {
            (Some(m), _) => (m.name().to_string(), tools::check_args(m, &p.arguments)),
            (None, Some(s)) => (s.name.clone(), tools::check_skill_args(s, &p.arguments)),
            // A project tool waiting for a person: the broker refuses the
            // call, saying how to have it approved, and records it.
            (None, None) if self.setup.unapproved_tools.contains(&p.tool) => {
                (p.tool.clone(), Ok(Map::new()))
            }
            (None, None) => {
                self.refused_event(
                    &id,
                    &p.tool,
                    &p.arguments,
                    RefusalKind::UnknownTool,
                    "unknown tool",
                )?;
                let mut names: Vec<&str> = tools::TOOLS.iter().map(|t| t.name()).collect();
                names.extend(self.setup.skills.iter().map(|s| s.name.as_str()));
                return Ok(refuse(
                    &id,
                    &p.tool,
                    &format!("unknown tool {:?}; tools: {}", p.tool, names.join(", ")),
                ));
            }
        };
        let args = match checked {
            Ok(a) => a,
            Err(e) => {
                let msg = format!("malformed tool call: {e}");
                self.refused_event(&id, &name, &p.arguments, RefusalKind::Malformed, &msg)?;
                return Ok(refuse(&id, &name, &msg));
            }
        };
        let key = call_key(name.as_str(), &args);
        let summary = tools::summary(name.as_str(), &args);
        if guard.precheck(key) {
            let msg = "this exact call already failed twice the same way; it was not run again. Change approach.";
            let verdict = guard.record_refusal(key);
            self.link
                .warn(format!("refused repeated failing call: {summary}"))?;
            self.refused_event(&id, name.as_str(), &p.arguments, RefusalKind::Loop, msg)?;
            return Ok(Done {
                verdict,
                ..refuse(&id, name.as_str(), msg)
            });
        }
        self.link.event(AgentEvent::ToolStart {
            call_id: req_id.clone(),
            summary: crate::redact::redact(&summary).text,
        })?;
        let local = meta.filter(|m| m.is_local());
        let result = if let Some(meta) = local {
            let r = self.local_tool(&req_id, meta, &args)?;
            self.link.event(AgentEvent::MemoryEdit {
                call_id: req_id.clone(),
                tool: name.clone(),
                arguments: crate::redact::redact(&Value::Object(args.clone()).to_string()).text,
                status: r.status,
                message: crate::redact::redact(&r.message).text,
            })?;
            r
        } else {
            let arguments = Value::Object(args.clone()).to_string();
            match self.link.tool(ToolRequest {
                call_id: req_id.clone(),
                tool: name.clone(),
                arguments,
            }) {
                Ok(r) => r,
                Err(Stop::Cancelled) => {
                    let _ = self.link.event(AgentEvent::ToolEnd {
                        call_id: req_id.clone(),
                        status: ToolStatus::Cancelled,
                        duration_ms: 0,
                    });
                    return Err(Stop::Cancelled.into());
                }
                Err(e) => return Err(e.into()),
            }
        };
        self.link.event(AgentEvent::ToolEnd {
            call_id: req_id.clone(),
            status: result.status,
            duration_ms: result.duration_ms,
        })?;
        if name == "register_tool" && result.status == ToolStatus::Ok {
            self.note_registered_tool(&args)?;
        }
        // File changes keep the broker's note (backup path, rollback) in the journal.
        let writes = meta.is_some_and(|m| m.effect == tools::Effect::Write);
        let note = if writes && !result.message.is_empty() {
            format!(": {}", crate::link::clip_text(&result.message, 400))
        } else {
            String::new()
        };
        let exit = result
            .exit_code
            .map(|c| format!(" (exit {c})"))
            .unwrap_or_default();
        let entry = format!("{summary} → {}{exit}{note}", result.status.as_str());
        self.state.journal(
            if result.status == ToolStatus::Denied {
                "denied"
            } else {
                "tool"
            },
            &crate::redact::redact(&entry).text,
        );
        let share = budget.share(calls_in_step);
        let text = if budget.exhausted() || share < 300 {
            observe::render_minimal(name.as_str(), &result)
        } else {
            let o = observe::render(name.as_str(), &summary, &result, share);
            if o.redactions > 0 {
                self.redactions += u64::from(o.redactions);
                self.link.warn(format!(
                    "{} credential-like value(s) masked in the output of {} before it reached the model",
                    o.redactions, name.as_str()
                ))?;
            }
            o.text
        };
        budget.used += text.chars().count();
        let verdict = guard.record(key, result_key(&result), failed(result.status));
        Ok(Done {
            id,
            text,
            failed: failed(result.status),
            pending: result.status == ToolStatus::PendingApproval,
            evidence: !failed(result.status),
            verdict,
        })
    }

    /// Tells the broker (for the audit) about a call refused here; secrets
    /// the model may have written are masked first.
    fn refused_event(
        &mut self,
        call_id: &str,
        tool: &str,
        arguments: &str,
        kind: RefusalKind,
        message: &str,
    ) -> Result<(), Stop> {
        let head = crate::link::clip_text(arguments, 2000);
        self.link.event(AgentEvent::CallRefused {
            call_id: crate::link::clip_text(call_id, 64),
            tool: crate::link::clip_text(tool, 128),
            arguments: crate::redact::redact(&head).text,
            kind,
            message: crate::redact::redact(message).text,
        })
    }

    /// A tool `register_tool` wrote: a call of it now goes to the broker
    /// (which refuses it until a person approves it), and memoria.md's
    /// Tools section documents it (the seed: path, description, usage,
    /// language) so that later sessions know it exists.
    fn note_registered_tool(&mut self, args: &Map<String, Value>) -> Result<(), TurnError> {
        let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
        let name = s("name").to_string();
        if !self.setup.unapproved_tools.contains(&name) {
            self.setup.unapproved_tools.push(name.clone());
        }
        let params: Vec<String> = args
            .get("parameters")
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object)
            .map(|props| props.keys().cloned().collect())
            .unwrap_or_default();
        let language = s("script")
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("#!"))
            .unwrap_or("")
            .trim()
            .to_string();
        let facts = vec![
            format!(
                "Path: {0}/{name}/run (manifest {0}/{name}/skill.json)",
                self.setup.tools_dir
            ),
            format!("Description: {}", s("description")),
            format!(
                "Usage: call the tool {name} with {{{}}} (JSON on its stdin, JSON out)",
                params.join(", ")
            ),
            format!("Language: {language}"),
            "Status: usable once a person approves it (sysward approvals); any change needs a new approval".to_string(),
        ];
        self.reload_memory()?;
        if let Ok((text, report)) =
            memory::remember(&self.memory, "Tools", Some(&name), &facts, true, false)
        {
            if text.len() <= sysward_ipc::agent::STATE_FILE_MAX {
                self.memory = text;
                self.save_memory()?;
                self.state.journal("memory", &report);
            }
        }
        Ok(())
    }

    /// remember / forget: edited here, stored by the broker.
    fn local_tool(
        &mut self,
        id: &str,
        meta: &ToolMeta,
        args: &Map<String, Value>,
    ) -> Result<ToolResult, TurnError> {
        let started = Instant::now();
        // Edit what is stored now: the operator may have changed the file.
        self.reload_memory()?;
        let s = |k: &str| args.get(k).and_then(Value::as_str);
        let b = |k: &str| args.get(k).and_then(Value::as_bool).unwrap_or(false);
        let outcome = match meta.name() {
            "remember" => {
                let facts: Vec<String> = args
                    .get("facts")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                memory::remember(
                    &self.memory,
                    s("section").unwrap_or(""),
                    s("entry"),
                    &facts,
                    b("replace"),
                    b("sensitive"),
                )
            }
            _ => memory::forget(
                &self.memory,
                s("section").unwrap_or(""),
                s("entry"),
                s("fact"),
            ),
        };
        let (status, message) = match outcome {
            Ok((text, report)) => {
                if text.len() > sysward_ipc::agent::STATE_FILE_MAX {
                    (
                        ToolStatus::Error,
                        "memoria.md would exceed its size limit; forget obsolete facts first"
                            .to_string(),
                    )
                } else {
                    let old = std::mem::replace(&mut self.memory, text);
                    match self.save_memory() {
                        Ok(()) => {
                            self.state.journal("memory", &report);
                            (ToolStatus::Ok, report)
                        }
                        Err(e) => {
                            self.memory = old;
                            return Err(e.into());
                        }
                    }
                }
            }
            Err(e) => (ToolStatus::Error, e),
        };
        Ok(ToolResult {
            duration_ms: started.elapsed().as_millis() as u64,
            ..ToolResult::refused(id, status, message)
        })
    }
}
