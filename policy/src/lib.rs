//! sysward-policy: the policy engine. Pure: no I/O beyond the path facts the
//! broker hands it.
//!
//! - [`parse_agent_md`]: the ```policy block of agent.md (seed `000`) with
//!   `APPROVAL_MODE` and operator command rules.
//! - [`Engine::decide`]: a request (exec argv, shell script, tool call) →
//!   [`Decision`]: allow / ask / deny, the category and risk, and the
//!   confinement profile the executor applies.
//! - [`explain`]: the one-line answer of `sysward policy explain`.
//!
//! The full decision table is in `policy/DECISIONS.md`.

mod block;
mod catalog;
#[cfg(feature = "engine")]
mod classify;
#[cfg(feature = "engine")]
mod decide;
mod decision;
#[cfg(feature = "engine")]
mod engine;
mod error;
mod facts;
pub mod glob;
pub mod netfilter;
#[cfg(feature = "engine")]
mod paths;
#[cfg(feature = "engine")]
mod profile;
mod request;
#[cfg(feature = "engine")]
mod shell;
pub mod task_rules;
#[cfg(feature = "engine")]
mod tools;
mod types;

pub use block::{
    parse_agent_md, parse_bool, parse_size, ApprovalMode, ExecutionMode, OperatorRule,
    ParsedPolicy, PolicyBlock, RuleAction, WriteRule, ALLOW_FLAGS, MAX_AGENT_MD,
};
pub use catalog::{catalog, tool_names, Access, ToolSpec};
pub use decision::{explain, Decision, EngineSetup, Part};
#[cfg(feature = "engine")]
pub use engine::Engine;
pub use error::PolicyError;
pub use facts::{HostFacts, LexicalPaths, PathFacts};
pub use request::{OwnedRequest, Request, ToolPaths};
#[cfg(feature = "engine")]
pub use shell::limits::{MAX_OPENERS, MAX_SCRIPT_BYTES};
pub use types::{Category, Risk, Verdict};
