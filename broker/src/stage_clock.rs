//! Where one action's time went, stage by stage, for its outcome record
//! (`stages_us`): an operator sees what a slow action waited for, and the
//! actions bench reports the median of each stage.

use std::time::{Duration, Instant};

/// Durations of named stages, each from the end of the one before.
#[derive(Debug)]
pub struct StageClock {
    last: Instant,
    stages: Vec<(&'static str, u64)>,
}

impl StageClock {
    pub fn start() -> StageClock {
        StageClock {
            last: Instant::now(),
            stages: Vec::new(),
        }
    }

    /// Ends the stage `name` now.
    pub fn mark(&mut self, name: &'static str) {
        let now = Instant::now();
        self.push(name, now.duration_since(self.last));
        self.last = now;
    }

    /// Adds stages measured elsewhere (the runner's) and restarts the
    /// current stage now, so that their time is not counted twice.
    pub fn extend(&mut self, stages: &[(&'static str, Duration)]) {
        for (name, d) in stages {
            self.push(name, *d);
        }
        self.last = Instant::now();
    }

    fn push(&mut self, name: &'static str, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        match self.stages.iter_mut().find(|(n, _)| *n == name) {
            // A stage met twice (a retried attempt) adds up.
            Some((_, total)) => *total = total.saturating_add(us),
            None => self.stages.push((name, us)),
        }
    }

    /// `{"stage": microseconds, ...}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.stages
                .iter()
                .map(|(n, us)| ((*n).to_string(), serde_json::json!(us)))
                .collect(),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_stage_is_counted_once_and_a_repeated_one_adds_up() {
        let mut c = StageClock::start();
        c.mark("plan");
        c.extend(&[
            ("spawn", Duration::from_micros(300)),
            ("run", Duration::from_micros(700)),
        ]);
        c.extend(&[("spawn", Duration::from_micros(5))]);
        c.mark("finish");
        let v = c.to_json();
        let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["finish", "plan", "run", "spawn"]);
        assert_eq!(v["spawn"], 305);
        assert_eq!(v["run"], 700);
    }
}
