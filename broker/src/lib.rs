//! The sysward broker as a library: the binary `sysward` is a thin CLI over
//! it, and the end-to-end tests compose sessions from it.

pub mod action;
pub mod approval_view;
pub mod approvals;
pub mod audit;
pub mod audit_mirror;
pub mod cancel;
pub mod capture;
pub mod cgroup;
pub mod client;
pub mod config;
pub mod context;
pub mod control;
pub mod decide;
pub mod doctor;
pub mod gateway_link;
pub mod mountns;
pub mod oneshot;
pub mod operator;
pub mod pinned;
pub mod pre_approvals;
pub mod project;
pub mod record;
pub mod redact;
pub mod retry;
pub mod sanitize;
pub mod seal;
pub mod secrets;
pub mod session;
pub mod signals;
pub mod spawn;
pub mod stale_temps;
pub mod tasks;
pub mod terminal;
pub mod tools;
pub mod watchdog;
