//! The network executor's confinement, in two layers.
//!
//! First, before any name is resolved (as root, single-threaded): every fd
//! but the channel closed, no core files, the unprivileged account with every
//! capability set cleared, non-dumpable, no_new_privs, and Landlock: the
//! resolver's files readable (and, for `cve_lookup`'s tracker request, the
//! dpkg status database and os-release) and nothing else, TCP bind to no
//! port, TCP
//! connect only to the destination's port (and 53 for DNS over TCP), no
//! signals or abstract unix sockets outside; then a seccomp deny-list: the
//! executor's (no ptrace, mount, modules, bpf, namespaces, metadata
//! changes…), no exec, and sockets of AF_INET, AF_INET6 (DNS over UDP and
//! TCP) and AF_NETLINK (getaddrinfo's interface check) only — no unix
//! socket (no system bus, no local daemon) and no packet socket.
//!
//! Then, once the destination's addresses are known and checked, before the
//! connection: a second Landlock layer (no file at all, TCP connect to the
//! destination port only) and the seccomp allow-list of the model gateway
//! (AF_INET/AF_INET6 stream sockets only: no UDP, no unix, no netlink, no
//! packet sockets; no exec, no new processes). Landlock layers intersect, so
//! the second can only narrow the first.

use std::path::Path;
use sysward_sandbox::denylist::{self, When};
use sysward_sandbox::deps::caps;
use sysward_sandbox::landlock::{self, LandlockRules};
use sysward_sandbox::seccomp::DenyListOptions;
use sysward_sandbox::{creds, process, seccomp, sys, SandboxError};

/// What the resolver (glibc's getaddrinfo, or hickory for probe_dns) reads.
const RESOLVER_FILES: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
];

/// The executor's address space limit (RLIMIT_AS).
pub const MAX_ADDRESS_SPACE: u64 = 1 << 30;

/// Our own status file: the single-thread check before the second layer.
const OWN_STAT: &str = "/proc/self/stat";

fn scoped(connect_ports: Vec<u16>) -> LandlockRules {
    LandlockRules {
        restrict_tcp: true,
        connect_ports,
        scope_signals: true,
        scope_abstract_unix: true,
        ..Default::default()
    }
}

/// The first layer. `ports`: the TCP ports it may connect to from now on;
/// `reads`: files it may read besides the resolver's (the host's package
/// database for `cve_lookup`), until the second layer takes every file away.
pub fn before_resolving(
    uid: u32,
    gid: u32,
    keep_fd: i32,
    ports: &[u16],
    reads: &[&str],
) -> Result<(), SandboxError> {
    before_resolving_keeping(uid, gid, &[keep_fd], ports, reads)
}

/// [`before_resolving`], keeping more than the channel open (a download's
/// file). Landlock checks a file when it is opened, so a descriptor the
/// broker opened stays writable while the process can open no file itself.
pub fn before_resolving_keeping(
    uid: u32,
    gid: u32,
    keep_fds: &[i32],
    ports: &[u16],
    reads: &[&str],
) -> Result<(), SandboxError> {
    if uid == 0 || gid == 0 {
        return Err(SandboxError::step(
            "account",
            "refusing to run network operations as uid or gid 0".into(),
        ));
    }
    process::ensure_single_threaded()?;
    process::close_fds_except(keep_fds)?;
    sys::setrlimit(libc::RLIMIT_CORE, 0).map_err(|e| SandboxError::io("rlimit core", e))?;
    // Bodies are capped at a few MiB, but turning hostile HTML into text can
    // take far more memory than its size: the address space is bounded too.
    sys::setrlimit(libc::RLIMIT_AS, MAX_ADDRESS_SPACE)
        .map_err(|e| SandboxError::io("rlimit address space", e))?;
    let mut ports = ports.to_vec();
    ports.sort_unstable();
    ports.dedup();
    let mut rules = scoped(ports);
    for file in RESOLVER_FILES
        .iter()
        .chain(std::iter::once(&OWN_STAT))
        .chain(reads)
    {
        // A resolver file the host lacks is simply not granted.
        if Path::new(file).exists() {
            rules.grant_path(Path::new(file), landlock::read_access())?;
        }
    }
    // Built as root (the files may sit where the account cannot look).
    let ruleset = rules.build()?;
    let filter = resolving_filter()?;
    let none = caps::CapsHashSet::new();
    creds::restrict_bounding(&none)?;
    creds::switch_user(uid, gid, &[])?;
    creds::set_capabilities(&none, false)?;
    process::set_non_dumpable()?;
    process::set_no_new_privs()?;
    landlock::enforce(ruleset)?;
    seccomp::install(&[filter])?;
    Ok(())
}

/// The first layer's seccomp program (see the module comment).
fn resolving_filter() -> Result<sysward_sandbox::deps::seccompiler::BpfProgram, SandboxError> {
    let mut list = seccomp::executor_deny_list(DenyListOptions {
        allow_mount: false,
        protect_pid: None,
        protect_pgid: None,
        deny_metadata: true,
        deny_inet: false,
    });
    list.insert(libc::SYS_execve, When::Always);
    list.insert(libc::SYS_execveat, When::Always);
    list.insert(
        libc::SYS_socket,
        When::Arg32NotIn {
            arg: 0,
            values: vec![
                libc::AF_INET as u32,
                libc::AF_INET6 as u32,
                libc::AF_NETLINK as u32,
            ],
        },
    );
    denylist::compile(&list)
}

/// The second layer, for exactly one destination port. Must run while the
/// process has one thread.
pub fn before_connecting(port: u16) -> Result<(), SandboxError> {
    process::ensure_single_threaded()?;
    let ruleset = scoped(vec![port]).build()?;
    let filters = seccomp::gateway_programs(sys::getpid())?;
    landlock::enforce(ruleset)?;
    seccomp::install(&filters)?;
    Ok(())
}
