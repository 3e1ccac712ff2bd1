//! The network executor's parts, as a library so that its confinement can
//! be tested in a process of its own (`tests/confinement.rs`); the binary is
//! `src/main.rs`.

pub mod address;
pub mod confine;
pub mod cve;
pub mod dpkg;
pub mod http;
pub mod probe;
pub mod render;
pub mod resolve;

/// A failure before anything was sent over the network.
pub enum Stop {
    Confinement(sysward_sandbox::SandboxError),
    Failed(String),
}

impl From<sysward_sandbox::SandboxError> for Stop {
    fn from(e: sysward_sandbox::SandboxError) -> Self {
        Stop::Confinement(e)
    }
}

impl From<String> for Stop {
    fn from(e: String) -> Self {
        Stop::Failed(e)
    }
}

/// A current-thread runtime: every task on this (confined) thread.
pub fn runtime() -> Result<tokio::runtime::Runtime, Stop> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Stop::Failed(format!("cannot start the I/O runtime: {e}")))
}
