//! The broker's record of task outcomes (`.agent/tasks.json`): which task files
//! ended DONE with which content hash. The broker, not the agent, decides what
//! is skipped: a task whose run needed an approval that nobody gave ends
//! BLOCKED whatever the model claimed, and must run again next time.

use crate::project::Layout;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use sysward_ipc::agent::{TaskSpec, TaskStatus};

/// Why the records could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum TasksError {
    #[error(transparent)]
    Serialize(#[from] serde_json::Error),
    #[error(transparent)]
    Pinned(#[from] crate::pinned::PinnedError),
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskRecord {
    pub sha256: String,
    pub status: String,
    pub time: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TaskRecords {
    pub tasks: BTreeMap<String, TaskRecord>,
}

fn path(layout: &Layout) -> std::path::PathBuf {
    layout.agent_dir().join("tasks.json")
}

impl TaskRecords {
    /// Loads the records; an unreadable file means "nothing recorded" (every
    /// task runs), never a skipped task.
    pub fn load(layout: &Layout) -> TaskRecords {
        let mut bytes = Vec::new();
        crate::project::open_regular(&path(layout))
            .and_then(|f| {
                std::io::Read::read_to_end(&mut std::io::Read::take(f, 16 << 20), &mut bytes)
            })
            .ok()
            .and_then(|_| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    }

    /// Written through the broker's held directory (see [`crate::pinned`]).
    pub fn save(&self, layout: &Layout, pinned: &crate::pinned::Pinned) -> Result<(), TasksError> {
        Ok(pinned.write(&path(layout), &serde_json::to_vec_pretty(self)?)?)
    }

    /// True when `task` ended DONE with exactly this content.
    pub fn done_and_unchanged(&self, task: &TaskSpec) -> bool {
        self.tasks
            .get(&task.name)
            .is_some_and(|r| r.status == TaskStatus::Done.as_str() && r.sha256 == task.sha256)
    }

    pub fn set(&mut self, name: &str, sha256: &str, status: TaskStatus) {
        self.tasks.insert(
            name.to_string(),
            TaskRecord {
                sha256: sha256.to_string(),
                status: status.as_str().to_string(),
                time: crate::audit::now_rfc3339(),
            },
        );
    }
}
