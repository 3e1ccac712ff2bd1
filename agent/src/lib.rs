//! sysward-agent: the model loop, run confined with no host access. Everything
//! that touches the host, the model or the agent's own files is a typed request
//! to the broker over one SEQPACKET channel (see `sysward_ipc::agent`).
//!
//! Protocol, in order: `Hello` → `Welcome`; `LoadState(Memory)`,
//! `LoadState(Context)`; model discovery (`Model` requests for `models` and
//! `/props`) unless CONTEXT_SIZE is set; then per task (tasks mode) or per
//! `NextInput` line (CLI mode): `Event`s, `Model`, `Tool`, `SaveState`,
//! `TaskFinished`; finally `Shutdown`. A `Cancelled` answer abandons the turn
//! (CLI) or the run (tasks); `Goodbye` saves state if it can and ends.

pub mod cli;
pub mod client;
pub mod context;
pub mod conversation;
pub mod link;
pub mod memory;
pub mod observe;
pub mod prompt;
pub mod redact;
pub mod session;
pub mod state;
pub mod status;
pub mod tasks;
pub mod toolcall;
pub mod tools;
pub mod turn;

pub use session::{run, Options, SessionEnd};
