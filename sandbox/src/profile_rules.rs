//! The Landlock rules of a `ConfinementProfile` (used by `sysward-exec`, and
//! by the broker to build a profile's ruleset once and hand it to every
//! executor of that profile — see [`prebuild_ruleset`]).
//!
//! Reads: `read_paths`, or everything except `read_all_except` and the
//! hidden paths. Writes: whole subtrees, `write_paths` or `/`
//! (`write_everywhere`), plus the private scratch directory. Whatever the
//! profile says, a built-in protected set is added to the action's mount
//! namespace ([`shield_plan`]): sysward's configuration and secrets are never
//! readable, and its state, runtime directory, binaries and units are never
//! writable — so a profile built wrongly still cannot reach them.

use crate::landlock::{self, LandlockRules};
use crate::shield::{ShieldInput, ShieldPlan};
use crate::SandboxError;
use ::landlock::{AccessFs, BitFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use sysward_ipc::profile::ConfinementProfile;

/// Never readable by any action.
pub const READ_PROTECTED: &[&str] = &["/etc/sysward"];

/// Never writable by any action (the binaries are added at run time). The
/// unit files, their drop-in directories (the package creates them empty so
/// that they exist to be covered) and the units' overrides.
pub const WRITE_PROTECTED: &[&str] = &[
    "/etc/sysward",
    "/var/lib/sysward",
    "/run/sysward",
    "/usr/lib/systemd/system/sysward.service",
    "/usr/lib/systemd/system/sysward-run.service",
    "/usr/lib/systemd/system/sysward-run.timer",
    "/etc/systemd/system/sysward.service",
    "/etc/systemd/system/sysward-run.service",
    "/etc/systemd/system/sysward-run.timer",
    "/etc/systemd/system/sysward.service.d",
    "/etc/systemd/system/sysward-run.service.d",
    "/etc/systemd/system/sysward-run.timer.d",
    "/usr/lib/systemd/system/sysward.service.d",
    "/run/systemd/system/sysward.service",
    "/run/systemd/system/sysward.service.d",
];

/// Device files every action may read and write (`2>/dev/null`).
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What a caller adds to a profile's rules.
#[derive(Debug, Default, Clone)]
pub struct Extra {
    /// Extra read grants (none so far).
    pub read: Vec<PathBuf>,
    /// More paths never writable: the sysward binaries where this process
    /// does not live (a test harness, or the broker running the binaries of
    /// another directory).
    pub write_protected: Vec<PathBuf>,
}

/// The sysward programs of `dir` (where the executor lives).
pub fn binaries_in(dir: &Path) -> Vec<PathBuf> {
    BINARY_NAMES.iter().map(|n| dir.join(n)).collect()
}

const BINARY_NAMES: [&str; 4] = [
    "sysward",
    "sysward-agent",
    "sysward-exec",
    "sysward-gateway",
];

fn strings(v: &[&str]) -> Vec<PathBuf> {
    v.iter().map(PathBuf::from).collect()
}

/// sysward's own binaries, when this process is one of them: it and the
/// `sysward*` programs beside it (the broker and the executor live side by
/// side). Another program (a test harness) passes them in
/// [`Extra::write_protected`]: walking its own directory would grant, file by
/// file, hard links of the binaries that live there (Landlock file rules
/// follow the inode, not the path).
fn own_binaries() -> Vec<PathBuf> {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return Vec::new();
    };
    let ours = exe
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().starts_with(b"sysward"));
    match (ours, exe.parent()) {
        (true, Some(dir)) => {
            let mut out = binaries_in(dir);
            out.push(exe.clone());
            out
        }
        _ => Vec::new(),
    }
}

fn abs(list: &[String], what: &str) -> Result<Vec<PathBuf>, SandboxError> {
    list.iter()
        .map(|s| {
            let p = PathBuf::from(s);
            if p.is_absolute() {
                Ok(p)
            } else {
                Err(SandboxError::step(
                    "landlock",
                    format!("{what} path {s:?} is not absolute"),
                ))
            }
        })
        .collect()
}

pub fn landlock_rules(
    profile: &ConfinementProfile,
    extra: &Extra,
) -> Result<LandlockRules, SandboxError> {
    let mut rules = LandlockRules {
        restrict_tcp: !profile.network,
        scope_signals: profile.scope_signals,
        scope_abstract_unix: true,
        ..Default::default()
    };
    let read = landlock::read_access();
    let write = landlock::write_access();

    let read_ex = read_excluded(profile)?;
    if profile.read_all_except.is_some() {
        landlock::grant_all_except(&mut rules, &read_ex, read)?;
    }
    for p in abs(&profile.read_paths, "read")?
        .iter()
        .chain(extra.read.iter())
    {
        landlock::grant_beneath_except(&mut rules, p, &read_ex, read)?;
    }
    // Writes are granted as whole subtrees: sysward's own paths inside them
    // are protected by the action's mount namespace (`crate::shield`), not by
    // carving them out here, which would take the right to create, remove
    // and rename entries from every directory above them.
    if profile.write_everywhere {
        landlock::grant_beneath_except(&mut rules, Path::new("/"), &[], read | write)?;
    }
    for p in &abs(&profile.write_paths, "write")? {
        landlock::grant_beneath_except(&mut rules, p, &[], read | write)?;
    }
    if let Some(s) = &profile.scratch_dir {
        // The scratch directory may sit under the state directory: only the
        // configuration and the binaries are carved out of it.
        let mut ex = strings(READ_PROTECTED);
        ex.extend(own_binaries());
        ex.extend(extra.write_protected.iter().cloned());
        landlock::grant_beneath_except(&mut rules, Path::new(s), &ex, read | write)?;
    }
    let dev: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
    for d in DEVICES {
        landlock::grant_beneath_except(&mut rules, Path::new(d), &[], dev)?;
    }
    Ok(rules)
}

/// What reads never reach: the built-in set, the hidden paths and
/// `read_all_except`.
fn read_excluded(profile: &ConfinementProfile) -> Result<Vec<PathBuf>, SandboxError> {
    let mut excluded = strings(READ_PROTECTED);
    excluded.extend(abs(&profile.hidden_paths, "hidden")?);
    if let Some(ex) = &profile.read_all_except {
        excluded.extend(abs(ex, "read_all_except")?);
    }
    Ok(excluded)
}

/// The directories the read allow-list is walked through (every ancestor of
/// a path left out of reads): their entries get rules of their own, so an
/// entry created or replaced there since the walk is not granted. A caller
/// that caches the ruleset watches these directories' change times.
/// A profile whose lists are invalid names none (its ruleset cannot be built).
pub fn read_walk_dirs(profile: &ConfinementProfile) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in &read_excluded(profile).unwrap_or_default() {
        let mut cur = p.parent();
        while let Some(d) = cur {
            if !dirs.iter().any(|x| x == d) {
                dirs.push(d.to_path_buf());
            }
            cur = d.parent();
        }
    }
    dirs
}

/// What the action's mount namespace must protect, or None when it needs
/// none: a profile that can write outside its scratch directory gets
/// sysward's own paths read-only and its secrets covered; a profile that
/// must not reach systemd's or D-Bus's sockets finds their directories empty.
pub fn shield_input(profile: &ConfinementProfile, extra: &Extra) -> Option<ShieldInput> {
    if !needs_mount_namespace(profile) {
        return None;
    }
    let hides_buses = crate::buses::hides_system_buses(profile);
    let mut input = ShieldInput::default();
    if hides_buses {
        input.hide_dirs = crate::buses::SYSTEM_BUS_DIRS
            .iter()
            .map(PathBuf::from)
            .collect();
    }
    if profile.can_write() {
        let mut read_only = strings(WRITE_PROTECTED);
        read_only.extend(own_binaries());
        read_only.extend(extra.write_protected.iter().cloned());
        read_only.extend(profile.protected_paths.iter().map(PathBuf::from));
        let mut hidden = strings(READ_PROTECTED);
        hidden.extend(profile.hidden_paths.iter().map(PathBuf::from));
        input.read_only = read_only;
        input.hidden = hidden;
        input.writable = profile.scratch_dir.iter().map(PathBuf::from).collect();
    }
    Some(input)
}

/// True when an action of `profile` runs in a mount namespace of its own
/// (it can write, or must not reach the system buses).
pub fn needs_mount_namespace(profile: &ConfinementProfile) -> bool {
    profile.can_write() || crate::buses::hides_system_buses(profile)
}

/// The mount steps of [`shield_input`], or None when the profile needs no
/// mount namespace of its own.
pub fn shield_plan(
    profile: &ConfinementProfile,
    extra: &Extra,
) -> Result<Option<ShieldPlan>, SandboxError> {
    shield_input(profile, extra)
        .map(|input| ShieldPlan::new(&input))
        .transpose()
}

/// Builds the complete ruleset of `profile` (and `extra`) without
/// enforcing it, and returns its descriptor. The broker may build it once per
/// distinct profile, keep it, and hand it to each confined command
/// (`jail::JailParts`), skipping the walk (the expensive part). A
/// cached ruleset can only go stale towards less access (entries created
/// after the walk are not granted), never more.
pub fn prebuild_ruleset(
    profile: &ConfinementProfile,
    extra: &Extra,
) -> Result<OwnedFd, SandboxError> {
    Ok(landlock_rules(profile, extra)?.build()?.into_fd())
}
