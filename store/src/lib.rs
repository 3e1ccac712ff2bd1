//! What the root broker keeps on disk, and how it reads and writes it: the
//! layout of a project or an installed host (`project`), its configuration
//! (`config`), the hash-chained audit log with its sealed head anchor and
//! journald mirror (`audit`, `seal`, `audit_mirror`), approvals, task and
//! action records, and the directories the broker pins at start-up so a
//! confined action cannot swap them (`pinned`).
//!
//! Nothing here starts a process or talks to the agent: it is the part of
//! the broker a reviewer can read as plain file handling, with its own tests.

pub mod approval_view;
pub mod approvals;
pub mod audit;
pub mod audit_mirror;
pub mod config;
pub mod error;
pub mod journal;
pub mod oneshot;
pub mod pinned;
pub mod project;
pub mod record;
pub mod sanitize;
pub mod seal;
pub mod stale_temps;
pub mod tasks;
