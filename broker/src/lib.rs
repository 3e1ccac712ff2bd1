//! The sysward broker as a library: the root binary `sysward-broker` is a
//! thin entry over it, the `sysward` console (crate `console/`) reads the
//! root-only files through it, and the end-to-end tests compose sessions
//! from it. No terminal code lives here.

pub mod action;
pub mod approval_view;
pub mod approvals;
pub mod audit;
pub mod audit_mirror;
pub mod cancel;
pub mod capture;
pub mod cgroup;
pub mod classifier;
pub mod command_plan;
pub mod config;
pub mod context;
pub mod control;
pub mod cve_action;
pub mod cve_render;
pub mod download;
pub mod download_action;
pub mod error;
pub mod gateway_link;
pub mod init;
pub mod journal;
pub mod mountns;
pub mod net_action;
pub mod net_hops;
pub mod netfilter_check;
pub mod oneshot;
pub mod operator;
pub mod operator_channel;
pub mod operator_dispatch;
pub mod patch_plan;
pub mod pinned;
pub mod planner;
pub mod pre_approvals;
pub mod project;
pub mod project_tools;
pub mod record;
pub mod redact;
pub mod retry;
pub mod sanitize;
pub mod seal;
pub mod secret_files;
pub mod secrets;
pub mod session;
pub mod signals;
pub mod skills;
pub mod spawn;
pub mod stage_clock;
pub mod stale_temps;
pub mod standalone;
pub mod tasks;
