//! Kernel confinement primitives shared by the agent, the model gateway and the
//! executor: credentials, capabilities, no_new_privs, namespaces, Landlock and
//! seccomp. Every function either applies its layer in full or returns an error;
//! nothing is applied "best effort".
//!
//! SKELETON: the signatures below are the contract other crates build against;
//! the implementations land with the sandbox work.

use std::os::fd::RawFd;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{step}: {detail}")]
    Step { step: &'static str, detail: String },
}

/// How the agent process confines itself, first thing after exec (as root).
#[derive(Debug, Clone)]
pub struct AgentConfinement {
    pub uid: u32,
    pub gid: u32,
    /// Paths the agent may read after confinement (its binary, its libraries).
    pub read_paths: Vec<PathBuf>,
    /// File descriptors to keep open (the broker channel); all others are closed.
    pub keep_fds: Vec<RawFd>,
}

/// How the model gateway confines itself, first thing after exec (as root).
#[derive(Debug, Clone)]
pub struct GatewayConfinement {
    pub uid: u32,
    pub gid: u32,
    /// The only TCP port it may connect to (the API port).
    pub api_port: u16,
    /// Paths the gateway may read after confinement.
    pub read_paths: Vec<PathBuf>,
    /// File descriptors to keep open (the broker channel); all others are closed.
    pub keep_fds: Vec<RawFd>,
}

/// Confines the calling (single-threaded) process as the agent: new empty network
/// namespace, no supplementary groups, uid/gid dropped, every capability set
/// cleared (bounding and ambient included), no_new_privs, Landlock fully
/// enforced, allow-list seccomp. Must run before any thread starts.
pub fn confine_agent(_c: &AgentConfinement) -> Result<(), SandboxError> {
    Err(SandboxError::Step {
        step: "confine_agent",
        detail: "not implemented yet".to_string(),
    })
}

/// Confines the calling (single-threaded) process as the model gateway.
pub fn confine_gateway(_c: &GatewayConfinement) -> Result<(), SandboxError> {
    Err(SandboxError::Step {
        step: "confine_gateway",
        detail: "not implemented yet".to_string(),
    })
}

/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace attach by same-uid
/// processes, `/proc/<pid>/{mem,environ}` owned by root.
pub fn set_non_dumpable() -> Result<(), SandboxError> {
    Err(SandboxError::Step {
        step: "set_non_dumpable",
        detail: "not implemented yet".to_string(),
    })
}
