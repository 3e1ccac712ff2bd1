//! Tasks mode: the broker's task files in order, each to a TASK_STATUS.

use crate::link::Stop;
use crate::session::{Session, SessionEnd, TurnError};
use crate::turn::{conflicts, TurnEnd};
use sysward_ipc::agent::{AgentEvent, TaskOutcome, TaskSpec, TaskStatus};

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        s.chars().take(max).collect::<String>() + "…"
    }
}

/// The user message that opens a task.
pub fn task_message(t: &TaskSpec) -> String {
    format!(
        "TASK {} (from the project's task file; instructions from the operator):\n{}",
        t.name,
        t.content.trim()
    )
}

pub fn run_tasks(s: &mut Session, rerun: bool) -> Result<SessionEnd, Stop> {
    let tasks = s.setup.tasks.clone();
    let mut worst = 0;
    for t in &tasks {
        if !rerun && s.state.task_done(&t.name, &t.sha256) {
            s.link.event(AgentEvent::TaskSkipped {
                name: t.name.clone(),
                reason: "DONE and unchanged since (use --rerun to repeat)".into(),
            })?;
            s.link.task_finished(TaskOutcome {
                name: t.name.clone(),
                sha256: t.sha256.clone(),
                status: TaskStatus::Skipped,
                summary: "DONE, skipped".into(),
                steps: 0,
                conflicts: vec![],
            })?;
            continue;
        }
        s.link.event(AgentEvent::TaskStart {
            name: t.name.clone(),
        })?;
        // Read before this run's "started" event, which would hide the last run's.
        s.prior_successes = s.state.prior_successes(&t.name, &t.sha256);
        s.state.journal("task", &format!("{} started", t.name));
        s.turn_steps = 0;
        s.turn_conflicts.clear();
        let result = s.run_turn(&task_message(t), Some(&t.name));
        let (status, summary, steps, conf, stop) = match result {
            Ok(TurnEnd::Answer {
                text,
                steps,
                status,
            }) => {
                let (st, why) = status.unwrap_or((TaskStatus::Failed, None));
                let summary = match why {
                    Some(why) => format!("{}: {why}. The model's answer: {text}", st.as_str()),
                    None => text.clone(),
                };
                (st, summary, steps, conflicts(&text), None)
            }
            Ok(TurnEnd::Incomplete { steps, last_text }) => (
                TaskStatus::Incomplete,
                format!("MAX_STEPS reached before the task finished. {last_text}"),
                steps,
                vec![],
                None,
            ),
            Ok(TurnEnd::Blocked { reason, steps }) => {
                (TaskStatus::Blocked, reason, steps, vec![], None)
            }
            Err(TurnError::Model(m)) => (
                TaskStatus::Error,
                m.clone(),
                s.turn_steps,
                vec![],
                Some(Stop::Protocol(m)),
            ),
            Err(TurnError::Stop(Stop::Cancelled)) => (
                TaskStatus::Error,
                "cancelled by the operator".into(),
                s.turn_steps,
                vec![],
                Some(Stop::Cancelled),
            ),
            Err(TurnError::Stop(other)) => {
                s.state.journal("task", &format!("{}: {other}", t.name));
                return Err(other);
            }
        };
        // Every conflict stated during the task, whatever its ending.
        let mut conf = conf;
        for c in std::mem::take(&mut s.turn_conflicts) {
            if !conf.contains(&c) {
                conf.push(c);
            }
        }
        for c in &conf {
            s.state.journal("conflict", &format!("{}: {c}", t.name));
        }

        s.state.record_task(&t.name, status.as_str(), &t.sha256);
        s.state.journal(
            "task",
            &format!("{} {}: {}", t.name, status.as_str(), clip(&summary, 300)),
        );
        s.save_context()?;
        s.link.task_finished(TaskOutcome {
            name: t.name.clone(),
            sha256: t.sha256.clone(),
            status,
            summary: clip(&summary, 4000),
            steps,
            conflicts: conf,
        })?;
        worst = worst.max(match status {
            TaskStatus::Done | TaskStatus::Skipped => 0,
            TaskStatus::Blocked => 2,
            TaskStatus::Failed => 3,
            TaskStatus::Incomplete => 4,
            TaskStatus::Error => 5,
        });
        match stop {
            None => {}
            Some(Stop::Cancelled) => return Err(Stop::Cancelled),
            Some(Stop::Protocol(m)) => {
                return Ok(SessionEnd::new(
                    5,
                    format!("stopped after a model error: {m}"),
                ))
            }
            Some(other) => return Err(other),
        }
    }
    Ok(SessionEnd::new(worst, "tasks finished"))
}
