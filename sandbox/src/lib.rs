//! Kernel confinement primitives shared by the agent, the model gateway and the
//! executor: credentials, capabilities, no_new_privs, namespaces, Landlock and
//! seccomp. Every function either applies its layer in full or returns an error;
//! nothing is applied "best effort".
//!
//! `confine_agent`, `confine_gateway` and `confine_classifier` are complete
//! recipes. The modules are
//! the building blocks `sysward-exec` composes per profile.

use std::os::fd::RawFd;
use std::path::PathBuf;

pub mod buses;
mod child_steps;
mod clone3;
pub mod creds;
pub mod denylist;
pub mod jail;
pub mod landlock;
pub mod process;
pub mod profile_rules;
pub mod seccomp;
pub mod shield;
pub mod sys;

/// The crates whose types appear in this crate's API, re-exported so callers
/// use exactly the pinned versions.
pub mod deps {
    pub use ::caps;
    pub use ::landlock;
    pub use ::seccompiler;
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("{step}: {detail}")]
    Step { step: &'static str, detail: String },
}

impl SandboxError {
    pub fn step(step: &'static str, detail: String) -> Self {
        SandboxError::Step { step, detail }
    }

    pub fn io(step: &'static str, e: std::io::Error) -> Self {
        SandboxError::Step {
            step,
            detail: e.to_string(),
        }
    }

    /// The name of the step that failed.
    pub fn step_name(&self) -> &'static str {
        match self {
            SandboxError::Step { step, .. } => step,
        }
    }
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

fn refuse_root(uid: u32, gid: u32, what: &'static str) -> Result<(), SandboxError> {
    if uid == 0 || gid == 0 {
        return Err(SandboxError::step(
            what,
            "refusing to run as uid or gid 0".into(),
        ));
    }
    Ok(())
}

/// Drops to `uid`/`gid` with no groups, clears every capability set (bounding
/// up to the kernel's `cap_last_cap`, ambient included), and makes the process
/// non-dumpable again (a credential change resets that flag).
fn drop_everything(uid: u32, gid: u32) -> Result<(), SandboxError> {
    let none = caps::CapsHashSet::new();
    creds::restrict_bounding(&none)?;
    creds::switch_user(uid, gid, &[])?;
    creds::set_capabilities(&none, false)?;
    process::set_non_dumpable()?;
    Ok(())
}

/// Confines the calling (single-threaded) process as the agent: every fd but
/// `keep_fds` closed (0–2 → /dev/null), a new empty network namespace (only a
/// down `lo`), no supplementary groups, uid/gid dropped, every capability set
/// cleared (bounding and ambient included), non-dumpable, no_new_privs,
/// Landlock fully enforced (read-only `read_paths`, nothing else; no TCP bind
/// or connect; signal and abstract-unix scopes), then an allow-list seccomp
/// filter (no exec, no clone, no sockets, no ptrace, no mount, no namespaces).
/// Must run before any thread starts.
pub fn confine_agent(c: &AgentConfinement) -> Result<(), SandboxError> {
    refuse_root(c.uid, c.gid, "confine_agent")?;
    process::ensure_single_threaded()?;
    process::close_fds_except(&c.keep_fds)?;
    sys::unshare(libc::CLONE_NEWNET)
        .map_err(|e| SandboxError::io("unshare network namespace", e))?;
    // Ruleset and seccomp program are built while still root (the paths may sit
    // under directories the agent's uid cannot traverse; building allocates).
    let mut rules = landlock::LandlockRules {
        restrict_tcp: true,
        scope_signals: true,
        scope_abstract_unix: true,
        ..Default::default()
    };
    for p in &c.read_paths {
        rules.grant_path(p, landlock::read_access())?;
    }
    let ruleset = rules.build()?;
    let filters = seccomp::agent_programs(sys::getpid())?;
    drop_everything(c.uid, c.gid)?;
    process::set_no_new_privs()?;
    landlock::enforce(ruleset)?;
    seccomp::install(&filters)?;
    Ok(())
}

/// Confines the calling (single-threaded) process as the model gateway: like
/// the agent but in the host network namespace, with TCP connect allowed to
/// `api_port` only (bind to none), and a seccomp allow-list that permits
/// threads and AF_INET/AF_INET6 stream sockets. Start the tokio runtime after.
pub fn confine_gateway(c: &GatewayConfinement) -> Result<(), SandboxError> {
    refuse_root(c.uid, c.gid, "confine_gateway")?;
    process::ensure_single_threaded()?;
    process::close_fds_except(&c.keep_fds)?;
    sys::setrlimit(libc::RLIMIT_CORE, 0).map_err(|e| SandboxError::io("rlimit core", e))?;
    let mut rules = landlock::LandlockRules {
        restrict_tcp: true,
        connect_ports: vec![c.api_port],
        scope_signals: true,
        scope_abstract_unix: true,
        ..Default::default()
    };
    for p in &c.read_paths {
        rules.grant_path(p, landlock::read_access())?;
    }
    let ruleset = rules.build()?;
    let filters = seccomp::gateway_programs(sys::getpid())?;
    drop_everything(c.uid, c.gid)?;
    process::set_no_new_privs()?;
    landlock::enforce(ruleset)?;
    seccomp::install(&filters)?;
    Ok(())
}

/// How the command classifier confines itself, first thing after exec (as
/// root).
#[derive(Debug, Clone)]
pub struct ClassifierConfinement {
    /// RLIMIT_AS: an analysis that allocates without bound fails its
    /// allocation (and the helper aborts) instead of growing.
    pub address_space_bytes: u64,
    /// RLIMIT_CPU, soft and hard: the kernel kills the helper past it.
    pub cpu_seconds: u64,
    /// File descriptors to keep open (the broker channel); all others are closed.
    pub keep_fds: Vec<RawFd>,
}

/// Confines the calling (single-threaded) process as the command classifier.
/// Started by root, it stays uid 0 (paths are resolved as the root broker resolves them) but
/// keeps one capability, CAP_DAC_READ_SEARCH (to traverse directories such
/// as a 0700 home as root does), in every set including bounding; no
/// supplementary groups; non-dumpable; no_new_privs; address-space, CPU-time,
/// core and file-descriptor limits; Landlock fully enforced with every file
/// access handled and none granted (resolving a path needs no Landlock right;
/// reading, writing, executing and listing are all denied), no TCP, signal
/// and abstract-unix scopes; then an allow-list seccomp filter (threads, no
/// sockets, no exec, no new processes, no ptrace, no mount, no namespaces).
/// Must run before any thread starts.
pub fn confine_classifier(c: &ClassifierConfinement) -> Result<(), SandboxError> {
    process::ensure_single_threaded()?;
    process::close_fds_except(&c.keep_fds)?;
    sys::setrlimit(libc::RLIMIT_CORE, 0).map_err(|e| SandboxError::io("rlimit core", e))?;
    sys::setrlimit(libc::RLIMIT_NOFILE, 64).map_err(|e| SandboxError::io("rlimit nofile", e))?;
    sys::setrlimit(libc::RLIMIT_CPU, c.cpu_seconds)
        .map_err(|e| SandboxError::io("rlimit cpu", e))?;
    sys::setrlimit(libc::RLIMIT_AS, c.address_space_bytes)
        .map_err(|e| SandboxError::io("rlimit address space", e))?;
    let ruleset = landlock::LandlockRules {
        restrict_tcp: true,
        scope_signals: true,
        scope_abstract_unix: true,
        ..Default::default()
    }
    .build()?;
    let filters = seccomp::classifier_programs(sys::getpid())?;
    if sys::getresuid().map_err(|e| SandboxError::io("getresuid", e))? == (0, 0, 0) {
        let mut keep = caps::CapsHashSet::new();
        keep.insert(caps::Capability::CAP_DAC_READ_SEARCH);
        creds::restrict_bounding(&keep)?;
        creds::switch_user(0, 0, &[])?;
        creds::set_capabilities(&keep, false)?;
    } else {
        // Started by an operator who is not root (`sysward policy explain`):
        // it resolves paths as that user, and must hold no capability.
        creds::require_no_capabilities()?;
    }
    process::set_non_dumpable()?;
    process::set_no_new_privs()?;
    landlock::enforce(ruleset)?;
    seccomp::install(&filters)?;
    Ok(())
}

/// prctl(PR_SET_DUMPABLE, 0): no core dumps, no ptrace attach by same-uid
/// processes, `/proc/<pid>/{mem,environ}` owned by root.
pub fn set_non_dumpable() -> Result<(), SandboxError> {
    process::set_non_dumpable()
}
