//! The runner's warm templates: children confined ahead of the next command
//! (see `sysward_sandbox::template`), each in a cgroup of its own that the
//! command then runs in. One is started beside each command; the next
//! command whose confinement is identical takes it instead of confining a
//! child of its own. Anything else — another profile, a ruleset or mount
//! namespace rebuilt since — starts cold, as before.

use crate::cgroup::ActionCgroup;
use std::sync::Mutex;
use sysward_sandbox::jail::Jail;
use sysward_sandbox::template::Template;

/// Templates kept at most (a session seldom alternates between more
/// distinct profiles; each holds a thread and a cgroup).
const WARM_MAX: usize = 4;

#[derive(Default)]
pub struct WarmTemplates {
    slots: Mutex<Vec<(Template, ActionCgroup)>>,
}

impl WarmTemplates {
    /// Takes a template that confines `jail`'s command exactly as a cold
    /// spawn would, with its cgroup.
    pub fn take(&self, jail: &Jail) -> Option<(Template, ActionCgroup)> {
        let mut slots = self.slots.lock().ok()?;
        let i = slots.iter().position(|(t, _)| t.matches(jail))?;
        Some(slots.remove(i))
    }

    /// Whether one for `jail`'s confinement is kept already.
    pub fn has(&self, jail: &Jail) -> bool {
        self.slots
            .lock()
            .map(|s| s.iter().any(|(t, _)| t.matches(jail)))
            .unwrap_or(true)
    }

    /// Keeps `template`; returns the oldest one if that makes too many.
    pub fn keep(
        &self,
        template: Template,
        cgroup: ActionCgroup,
    ) -> Option<(Template, ActionCgroup)> {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.push((template, cgroup));
        (slots.len() > WARM_MAX).then(|| slots.remove(0))
    }

    /// Every template kept, for discarding.
    pub fn take_all(&self) -> Vec<(Template, ActionCgroup)> {
        std::mem::take(
            &mut *self
                .slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}
