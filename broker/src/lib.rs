//! The sysward broker as a library: the root binary `sysward-broker` is a
//! thin entry over it, the `sysward` console (crate `console/`) reads the
//! root-only files through it, and the end-to-end tests compose sessions
//! from it. No terminal code lives here.
//!
//! This crate is the request handling a reviewer reads first: the agent
//! protocol (`session/`: serve loop, dispatch table, one file per request),
//! the operator protocol (`operator_channel`, `operator_dispatch`, `control`,
//! `standalone`), the planner that turns a tool call into a plan and a
//! decision (`planner`, `skills`, `project_tools`), the classifier helper's
//! client (`classifier`) and the model gateway's link (`gateway_link`).

pub mod classifier;
pub mod context;
pub mod control;
pub mod gateway_link;
pub mod init;
pub mod netfilter_check;
pub mod operator;
pub mod operator_channel;
pub mod operator_dispatch;
pub mod patch_plan;
pub mod planner;
pub mod pre_approvals;
pub mod project_tools;
pub mod session;
pub mod signals;
pub mod skills;
pub mod stage_clock;
pub mod standalone;

// The crates the broker is built from, re-exported so that a path such as
// `sysward_broker::audit` or `crate::action` names the same module wherever
// it is read: the on-disk state (`sysward-store`), the secret store and
// redaction (`sysward-secrets`), and the running of approved actions
// (`sysward-actions`).
pub use sysward_actions::{
    action, cancel, capture, cgroup, command_plan, cve_action, cve_render, download,
    download_action, mountns, net_action, net_hops, retry, spawn,
};
pub use sysward_secrets::{redact, secret_files, secrets};
pub use sysward_store::{
    approval_view, approvals, audit, audit_mirror, config, error, journal, oneshot, pinned,
    project, record, sanitize, seal, stale_temps, tasks,
};
