//! Applies a `ConfinementProfile` to this process, in order, each step named:
//! session → rlimits → cgroup → network → close fds → capabilities (bounding) →
//! groups/gid/uid → capability sets → no_new_privs → Landlock → seccomp.
//! The first failure stops everything: the caller reports it and exits 126.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use sysward_ipc::profile::ConfinementProfile;
use sysward_sandbox::deps::{caps, seccompiler};
use sysward_sandbox::profile_rules as rules;
use sysward_sandbox::{creds, landlock, process, seccomp, sys, SandboxError};

/// A failed step: its name and the error.
#[derive(Debug)]
pub struct StepError {
    pub step: String,
    pub error: String,
}

impl From<SandboxError> for StepError {
    fn from(e: SandboxError) -> Self {
        let step = e.step_name().to_string();
        let error = match e {
            SandboxError::Step { detail, .. } => detail,
        };
        StepError { step, error }
    }
}

fn fail(step: &str, error: impl std::fmt::Display) -> StepError {
    StepError {
        step: step.to_string(),
        error: error.to_string(),
    }
}

/// Where the action's network comes from.
pub enum Network<'a> {
    /// Host network (profile.network).
    Host,
    /// Enter this namespace (the broker's pre-made empty one).
    Enter(&'a str),
    /// Unshare a fresh, empty one.
    Fresh,
}

pub fn network_for<'a>(profile: &ConfinementProfile, netns_path: Option<&'a str>) -> Network<'a> {
    if profile.network {
        Network::Host
    } else if let Some(p) = netns_path {
        Network::Enter(p)
    } else {
        Network::Fresh
    }
}

/// Everything up to (not including) the credential change: these need root.
pub fn prepare(
    profile: &ConfinementProfile,
    network: Network<'_>,
    cgroup_dir: Option<&str>,
    keep_fds: &[i32],
) -> Result<(), StepError> {
    // Its own process group (the broker kills the group, and the cgroup) and
    // no controlling terminal (no /dev/tty to the operator's terminal). Not
    // setsid(): with sched_autogroup a new session gets a new scheduler group,
    // which measured ~3 ms per action on a loaded 2-vCPU host, and a session
    // adds nothing once the terminal is gone (only a session leader can take
    // a new one, and an action that calls setsid itself gains only that).
    sys::new_process_group().map_err(|e| fail("process group", e))?;
    sys::detach_controlling_tty().map_err(|e| fail("controlling terminal", e))?;
    set_rlimits(profile)?;
    if let Some(dir) = cgroup_dir {
        join_cgroup(dir)?;
    }
    match network {
        Network::Host => {}
        Network::Enter(path) => {
            let c = CString::new(path).map_err(|e| fail("network namespace", e))?;
            // SAFETY: valid NUL-terminated path; the fd is checked and owned below.
            let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(fail(
                    "network namespace",
                    format!("{path}: {}", std::io::Error::last_os_error()),
                ));
            }
            // SAFETY: fd was just returned by open and is owned by nobody else.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            sys::setns(fd.as_raw_fd(), libc::CLONE_NEWNET)
                .map_err(|e| fail("network namespace", format!("setns {path}: {e}")))?;
        }
        Network::Fresh => {
            sys::unshare(libc::CLONE_NEWNET)
                .map_err(|e| fail("network namespace", format!("unshare: {e}")))?;
        }
    }
    // Landlock (ABI 7) cannot refuse connect() to a pathname socket, and
    // `systemd-run` over systemd's or D-Bus's sockets would run anything
    // outside this confinement. Actions that have no business there (unknown
    // programs, writes, deletes, network and downloads) find those directories
    // empty: a read-only tmpfs in a private mount namespace. Read-only
    // diagnosis keeps them (`systemctl status` needs the bus), as do service,
    // package, admin, reboot and destructive actions, which need systemd.
    if matches!(
        profile.name.as_str(),
        "unknown" | "write" | "delete" | "network" | "download"
    ) {
        hide_system_buses()?;
    }
    // The broker's namespace fd (4) and anything else inherited go now.
    process::close_fds_except(keep_fds)?;
    Ok(())
}

/// Where systemd's and D-Bus's sockets live.
const SYSTEM_BUS_DIRS: [&str; 2] = ["/run/systemd", "/run/dbus"];

fn hide_system_buses() -> Result<(), StepError> {
    let present: Vec<&str> = SYSTEM_BUS_DIRS
        .iter()
        .copied()
        .filter(|d| std::path::Path::new(d).is_dir())
        .collect();
    if present.is_empty() {
        return Ok(());
    }
    sys::unshare(libc::CLONE_NEWNS)
        .map_err(|e| fail("mount namespace", format!("unshare: {e}")))?;
    let mount = |src: &std::ffi::CStr,
                 target: &std::ffi::CStr,
                 fstype: Option<&std::ffi::CStr>,
                 flags: libc::c_ulong,
                 data: Option<&std::ffi::CStr>| {
        // SAFETY: every pointer is a valid NUL-terminated string (or null where
        // mount(2) allows it) that outlives the call.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                target.as_ptr(),
                fstype.map_or(std::ptr::null(), |f| f.as_ptr()),
                flags,
                data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    // Nothing done in this namespace may propagate back to the host.
    mount(c"none", c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| fail("mount namespace", format!("make / private: {e}")))?;
    for dir in present {
        let target = CString::new(dir).map_err(|e| fail("mount namespace", e))?;
        mount(
            c"tmpfs",
            &target,
            Some(c"tmpfs"),
            libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            Some(c"size=4k,mode=0555"),
        )
        .map_err(|e| fail("mount namespace", format!("hide {dir}: {e}")))?;
    }
    Ok(())
}

fn set_rlimits(profile: &ConfinementProfile) -> Result<(), StepError> {
    let l = &profile.limits;
    let set = [
        (libc::RLIMIT_NPROC, l.max_processes, "RLIMIT_NPROC"),
        (libc::RLIMIT_NOFILE, l.max_open_files, "RLIMIT_NOFILE"),
        (libc::RLIMIT_FSIZE, l.max_file_size, "RLIMIT_FSIZE"),
        (libc::RLIMIT_AS, l.max_address_space, "RLIMIT_AS"),
        (libc::RLIMIT_CPU, l.max_cpu_seconds, "RLIMIT_CPU"),
        (libc::RLIMIT_CORE, l.max_core, "RLIMIT_CORE"),
    ];
    for (res, value, name) in set {
        if let Some(v) = value {
            sys::setrlimit(res, v).map_err(|e| fail("rlimits", format!("{name}={v}: {e}")))?;
        }
    }
    Ok(())
}

fn join_cgroup(dir: &str) -> Result<(), StepError> {
    let path = std::path::Path::new(dir).join("cgroup.procs");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| fail("cgroup", format!("{}: {e}", path.display())))?;
    // "0" means the writing process.
    f.write_all(b"0")
        .map_err(|e| fail("cgroup", format!("{}: {e}", path.display())))?;
    Ok(())
}

/// Built while still root: the Landlock ruleset (path fds opened as root,
/// before any uid change can hide them) and the seccomp program.
pub struct Prepared {
    ruleset: landlock::BuiltRuleset,
    filters: Vec<seccompiler::BpfProgram>,
    keep: caps::CapsHashSet,
}

/// `prebuilt`: the broker's ruleset for this profile (used as is), or None to
/// build it here.
pub fn build(
    profile: &ConfinementProfile,
    extra: &rules::Extra,
    prebuilt: Option<OwnedFd>,
) -> Result<Prepared, StepError> {
    // Keep what the profile names and this process actually holds: a
    // capability the broker itself lacks cannot be granted (less privilege,
    // never more).
    let wanted = creds::parse_caps(&profile.capabilities)?;
    let held = caps::read(None, caps::CapSet::Permitted)
        .map_err(|e| fail("capabilities", format!("read permitted: {e}")))?;
    let mut keep: caps::CapsHashSet = wanted.intersection(&held).copied().collect();
    // Never CAP_SYS_PTRACE: Landlock (ABI 7) does not stop PTRACE_MODE_READ
    // across domains, so it alone would let an admin action read the
    // non-dumpable broker's and gateway's /proc/<pid>/{environ,maps,…}.
    // ptrace(2) and process_vm_* are denied by seccomp as well.
    keep.remove(&caps::Capability::CAP_SYS_PTRACE);
    // Never CAP_LINUX_IMMUTABLE: an append-only or immutable flag (an audit
    // log, a protected file) must stay set whatever the policy granted, and
    // Landlock does not cover FS_IOC_SETFLAGS on a file it lets be opened.
    keep.remove(&caps::Capability::CAP_LINUX_IMMUTABLE);
    let ruleset = match prebuilt {
        Some(fd) => landlock::BuiltRuleset::from_fd(fd)?,
        None => rules::landlock_rules(profile, extra)?.build()?,
    };
    let protect_pid = if profile.scope_signals {
        None
    } else {
        // The broker is our parent: with no signal scope, seccomp keeps
        // kill/tgkill/pidfd_open away from it (and kill -1).
        // SAFETY: getppid has no preconditions.
        let ppid = unsafe { libc::getppid() };
        (ppid > 1).then_some(ppid)
    };
    // The broker's process group too (kill(-pgid)): it may not lead it.
    let protect_pgid = protect_pid.and_then(|p| sys::getpgid(p).ok());
    let filters = seccomp::executor_programs(seccomp::DenyListOptions {
        allow_mount: profile.allow_mount,
        protect_pid,
        protect_pgid,
        deny_metadata: profile.write_paths.is_empty() && profile.write_all_except.is_none(),
    })?;
    Ok(Prepared {
        ruleset,
        filters,
        keep,
    })
}

/// Credentials, capabilities, no_new_privs, Landlock, seccomp — in that order.
pub fn apply(profile: &ConfinementProfile, prepared: Prepared) -> Result<(), StepError> {
    let Prepared {
        ruleset,
        filters,
        keep,
    } = prepared;
    let ambient = profile.uid != 0 && !keep.is_empty();
    creds::restrict_bounding(&keep)?;
    if ambient {
        creds::keep_caps_across_setuid()?;
    }
    creds::switch_user(profile.uid, profile.gid, &profile.groups)?;
    creds::set_capabilities(&keep, ambient)?;
    if profile.uid != 0 {
        // setresuid away from root reset it; a root action keeps the default.
        process::set_non_dumpable()?;
    }
    process::set_no_new_privs()?;
    landlock::enforce(ruleset)?;
    seccomp::install(&filters)?;
    Ok(())
}
