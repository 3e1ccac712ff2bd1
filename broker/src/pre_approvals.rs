//! Task-scoped pre-approvals (see `sysward_policy::task_rules`): each task's
//! ```approvals block, read from the content the broker itself loaded and
//! bound to its SHA-256, becomes allow rules of that task's engine only, for
//! as long as the task runs; a line with `max=N` stops applying after N uses.

use crate::classifier::EngineHandle;
use std::collections::HashMap;
use std::sync::Arc;
use sysward_ipc::agent::TaskSpec;
use sysward_policy::task_rules::{self, TaskApprovals};

pub struct PreApprovals {
    base: Arc<EngineHandle>,
    tasks: HashMap<String, TaskApprovals>,
    /// Uses of each line of the running task.
    uses: HashMap<usize, u32>,
    current: Option<String>,
}

impl PreApprovals {
    /// Reads every task's block; a block with a mistake is not used, and the
    /// returned warnings say why.
    pub fn new(base: Arc<EngineHandle>, tasks: &[TaskSpec]) -> (PreApprovals, Vec<String>) {
        let mut warnings = Vec::new();
        let mut parsed = HashMap::new();
        for t in tasks {
            let origin = format!(
                "{} (sha256 {})",
                t.name,
                &t.sha256[..t.sha256.len().min(12)]
            );
            match task_rules::parse(&t.content, &origin) {
                Ok(a) if a.is_empty() => {}
                Ok(a) => {
                    parsed.insert(t.name.clone(), a);
                }
                Err(e) => warnings.push(format!(
                    "{}: its approvals block is not used ({e}); its actions ask as usual",
                    t.name
                )),
            }
        }
        (
            PreApprovals {
                base,
                tasks: parsed,
                uses: HashMap::new(),
                current: None,
            },
            warnings,
        )
    }

    /// A new base engine (agent.md's policy changed): returns the engine of
    /// the running task on top of it.
    pub fn rebase(&mut self, base: Arc<EngineHandle>) -> Arc<EngineHandle> {
        self.base = base;
        self.engine()
    }

    /// The engine for the task that starts now (the base one for a task
    /// without pre-approvals, and outside tasks).
    pub fn enter(&mut self, task: Option<&str>) -> Arc<EngineHandle> {
        self.current = task.map(str::to_string);
        self.uses.clear();
        self.engine()
    }

    fn engine(&self) -> Arc<EngineHandle> {
        let Some(a) = self.current.as_ref().and_then(|t| self.tasks.get(t)) else {
            return Arc::clone(&self.base);
        };
        let spent = |line: usize| {
            a.limits
                .iter()
                .any(|(l, max)| *l == line && self.uses.get(&line).copied().unwrap_or(0) >= *max)
        };
        let mut block = self.base.block().clone();
        block
            .rules
            .extend(a.rules.iter().filter(|r| !spent(r.line)).cloned());
        block
            .write_rules
            .extend(a.write_rules.iter().filter(|r| !spent(r.line)).cloned());
        EngineHandle::new(block, self.base.facts().clone())
    }

    /// Counts a decision that a pre-approval made; returns the engine to use
    /// from now on when a limit was reached.
    pub fn used(&mut self, source: &str) -> Option<Arc<EngineHandle>> {
        let line = task_rules::line_of(source)?;
        let count = self.uses.entry(line).or_insert(0);
        *count += 1;
        let a = self.current.as_ref().and_then(|t| self.tasks.get(t))?;
        let limited = a.limits.iter().any(|(l, max)| *l == line && *count >= *max);
        limited.then(|| self.engine())
    }
}
