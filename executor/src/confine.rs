//! Applies a `ConfinementProfile` to this process, in order, each step named:
//! process group → rlimits → mount namespace → close fds → capabilities (bounding) →
//! groups/gid/uid → capability sets → no_new_privs → Landlock → seccomp.
//! The first failure stops everything: the caller reports it and exits 126.

use std::os::fd::OwnedFd;
use sysward_ipc::profile::ConfinementProfile;
use sysward_sandbox::deps::{caps, seccompiler};
use sysward_sandbox::profile_rules as rules;
use sysward_sandbox::{creds, jail, landlock, process, seccomp, sys, SandboxError};

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

/// Everything up to (not including) the credential change: these need root.
/// The action stays in the host's network namespace (seccomp and Landlock
/// keep one without network from sending).
pub fn prepare(profile: &ConfinementProfile, keep_fds: &[i32]) -> Result<(), StepError> {
    // Its own process group (the broker kills the group, and the cgroup) and
    // no controlling terminal (no /dev/tty to the operator's terminal). Not
    // setsid(): with sched_autogroup a new session gets a new scheduler group,
    // which measured ~3 ms per action on a loaded 2-vCPU host, and a session
    // adds nothing once the terminal is gone (only a session leader can take
    // a new one, and an action that calls setsid itself gains only that).
    sys::new_process_group().map_err(|e| fail("process group", e))?;
    sys::detach_controlling_tty().map_err(|e| fail("controlling terminal", e))?;
    set_rlimits(profile)?;
    // sysward's own paths read-only and its secrets covered (a profile that
    // can write), the system buses hidden (`buses::hides_system_buses`).
    if let Some(plan) = rules::shield_plan(profile, &rules::Extra::default())? {
        plan.enter_new_namespace().map_err(|(what, errno)| {
            fail(
                "mount namespace (sysward's own paths)",
                format!("{what}: {}", std::io::Error::from_raw_os_error(errno)),
            )
        })?;
    }
    process::close_fds_except(keep_fds)?;
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
    let keep = jail::kept_capabilities(profile)?;
    let ruleset = match prebuilt {
        Some(fd) => landlock::BuiltRuleset::from_fd(fd)?,
        None => rules::landlock_rules(profile, extra)?.build()?,
    };
    // The broker is our parent: with no signal scope, seccomp keeps
    // kill/tgkill/pidfd_open away from it (and kill -1).
    // SAFETY: getppid has no preconditions.
    let filters = vec![jail::seccomp_program(profile, unsafe { libc::getppid() })?];
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
