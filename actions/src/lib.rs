//! Running what the broker approved. An approved command or file operation
//! runs in a one-shot confined executor (`action`, with `retry` for the
//! failures that provably did nothing); `download`, CVE lookups and other
//! network hops run in the confined network helper (`net_action`,
//! `net_hops`, `download_action`, `cve_action`). Underneath is the process
//! plumbing the broker's other children share: `spawn` (empty environment,
//! channel on fd 3), `cgroup` (one cgroup per action), `mountns` (the
//! prepared mount namespaces that keep sysward's paths read-only), `capture`,
//! `cancel` and `wake_latency` (idle CPUs kept polling while a command
//! starts).
//!
//! The decision about *whether* something runs is not made here: the broker
//! plans and decides (its `planner`), asks a person where the policy says
//! so, writes the audit start record, and only then calls in.

// The broker's on-disk state and its redactor, named the way the rest of the
// broker names them.
use sysward_secrets::redact;
use sysward_store::{audit, error, project, sanitize, stale_temps};

pub mod action;
pub mod cancel;
pub mod capture;
pub mod cgroup;
pub mod command_plan;
pub mod cve_action;
pub mod cve_render;
pub mod download;
pub mod download_action;
pub mod mountns;
pub mod net_action;
pub mod net_hops;
pub mod retry;
pub mod spawn;
pub mod wake_latency;
