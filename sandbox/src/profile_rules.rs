//! The Landlock rules of a `ConfinementProfile` (used by `sysward-exec`, and
//! by the broker to build a profile's ruleset once and hand it to every
//! executor of that profile — see [`prebuild_ruleset`]).
//!
//! Reads: `read_paths`, or everything except `read_all_except`. Writes:
//! `write_paths` (read+write), or every write right except beneath
//! `write_all_except`; plus the private scratch directory. Whatever the
//! profile says, a built-in protected set is carved out of every grant:
//! sysward's configuration and secrets are never readable, and its state,
//! runtime directory, binaries and units are never writable — so a profile
//! built wrongly still cannot reach them.

use crate::landlock::{self, LandlockRules};
use crate::SandboxError;
use ::landlock::{AccessFs, BitFlags};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use sysward_ipc::profile::ConfinementProfile;

/// Never readable by any action.
pub const READ_PROTECTED: &[&str] = &["/etc/sysward"];

/// Never writable by any action (the binaries and units are added at run time).
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

    let mut read_ex = strings(READ_PROTECTED);
    if let Some(ex) = &profile.read_all_except {
        read_ex.extend(abs(ex, "read_all_except")?);
    }
    // What may not be read may not be written either.
    let mut write_ex = strings(WRITE_PROTECTED);
    write_ex.extend(own_binaries());
    write_ex.extend(extra.write_protected.iter().cloned());
    write_ex.extend(read_ex.iter().cloned());
    if let Some(ex) = &profile.write_all_except {
        write_ex.extend(abs(ex, "write_all_except")?);
    }

    if profile.read_all_except.is_some() {
        landlock::grant_all_except(&mut rules, &read_ex, read)?;
    }
    for p in abs(&profile.read_paths, "read")?
        .iter()
        .chain(extra.read.iter())
    {
        landlock::grant_beneath_except(&mut rules, p, &read_ex, read)?;
    }
    if profile.write_all_except.is_some() {
        landlock::grant_all_except(&mut rules, &write_ex, write)?;
    }
    for p in &abs(&profile.write_paths, "write")? {
        landlock::grant_beneath_except(&mut rules, p, &write_ex, read | write)?;
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
