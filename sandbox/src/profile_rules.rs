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

/// Never readable by any action (but its skill packs, [`SKILL_PACKS`]).
pub const READ_PROTECTED: &[&str] = &["/etc/sysward"];

/// The operator's skill packs: the one part of `/etc/sysward` an action may
/// read, since a pack's executable runs as an action (its manifest and code
/// are the operator's, not secrets). Written by no action, like the rest.
pub const SKILL_PACKS: &str = "/etc/sysward/skills";

/// [`READ_PROTECTED`] for the read rules: `/etc/sysward` becomes every entry
/// it has but `skills/`, when that is a real directory of root's that nobody
/// else may write. The walk then grants `skills/` alone: an entry created
/// later is under no rule, and the cached ruleset is rebuilt when the
/// directory changes (`read_walk_dirs`).
fn read_protected_for_reads(config: &Path, packs: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let whole = vec![config.to_path_buf()];
    let Ok(meta) = std::fs::symlink_metadata(packs) else {
        return whole;
    };
    if !meta.is_dir() || meta.uid() != 0 || meta.mode() & 0o022 != 0 {
        return whole;
    }
    let Ok(entries) = std::fs::read_dir(config) else {
        return whole;
    };
    let mut out = Vec::new();
    for e in entries {
        let Ok(e) = e else {
            return whole;
        };
        let path = e.path();
        if path != packs {
            out.push(path);
        }
    }
    if out.is_empty() {
        // Nothing else is there now; an empty list would leave
        // `/etc/sysward` itself out of the walk.
        out.push(config.join(".sysward-nothing-else"));
    }
    out
}

/// Never writable by any action (the binaries are added at run time). The
/// unit files, their drop-in directories (the package creates them empty so
/// that they exist to be covered) and the units' overrides.
pub const WRITE_PROTECTED: &[&str] = &[
    "/etc/sysward",
    "/var/lib/sysward",
    // The installed layout's project tools: only the broker writes them.
    "/var/lib/sysward-tools",
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
        landlock::grant_beneath_except(&mut rules, &deepest_existing(p), &[], read | write)?;
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

/// The deepest directory of `p`'s path that exists: Landlock places a rule
/// on an existing directory only, so a write grant of a tree not created yet
/// (`mkdir -p /var/tmp/a/b/c`, granted `/var/tmp/a/b`) goes to the directory
/// it will be created in (`/var/tmp`). The policy judged the targets; the
/// action's mount namespace keeps sysward's own paths read-only there.
fn deepest_existing(p: &Path) -> PathBuf {
    let mut cur = p;
    loop {
        match std::fs::symlink_metadata(cur) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match cur.parent() {
                Some(parent) => cur = parent,
                None => return cur.to_path_buf(),
            },
            _ => return cur.to_path_buf(),
        }
    }
}

/// True when every write grant of `profile` names a directory that exists,
/// so that its ruleset grants exactly those (one that does not exist yet is
/// placed on an ancestor, [`deepest_existing`], and a ruleset built then
/// must not be kept for later actions: once the directory exists a fresh
/// build grants less).
pub fn write_grants_exist(profile: &ConfinementProfile) -> bool {
    profile
        .write_paths
        .iter()
        .all(|w| std::fs::symlink_metadata(w).is_ok())
}

/// What reads never reach: the built-in set, the hidden paths and
/// `read_all_except`.
fn read_excluded(profile: &ConfinementProfile) -> Result<Vec<PathBuf>, SandboxError> {
    let mut listed = strings(READ_PROTECTED);
    listed.extend(abs(&profile.hidden_paths, "hidden")?);
    if let Some(ex) = &profile.read_all_except {
        listed.extend(abs(ex, "read_all_except")?);
    }
    // The configuration directory, whichever list names it, is left out
    // but for its skill packs.
    let packs = Path::new(SKILL_PACKS);
    let mut excluded: Vec<PathBuf> = Vec::new();
    for p in listed {
        let expanded = if Some(p.as_path()) == packs.parent() {
            read_protected_for_reads(&p, packs)
        } else {
            vec![p]
        };
        for e in expanded {
            if !excluded.contains(&e) {
                excluded.push(e);
            }
        }
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
/// after the walk are not granted), never more, as long as every write grant
/// existed when it was built (one that did not is placed on its deepest
/// existing ancestor, which the broker therefore does not cache).
pub fn prebuild_ruleset(
    profile: &ConfinementProfile,
    extra: &Extra,
) -> Result<OwnedFd, SandboxError> {
    Ok(landlock_rules(profile, extra)?.build()?.into_fd())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_grant_not_created_yet_goes_to_its_deepest_existing_directory() {
        let base = sysward_testdir::RemoveOnDrop::fresh_dir("sysward-deepest");
        std::fs::create_dir_all(base.join("a")).unwrap();
        assert_eq!(deepest_existing(&base.join("a/b/c")), base.join("a"));
        assert_eq!(deepest_existing(&base.join("a")), base.join("a"));
        // A dangling symlink exists as an entry: the rule builder refuses
        // it by name rather than a grant moving above it.
        std::os::unix::fs::symlink(base.join("nowhere"), base.join("link")).unwrap();
        assert_eq!(deepest_existing(&base.join("link")), base.join("link"));
    }

    /// The configuration directory is left out of reads whole, but for its
    /// skill packs when those are a directory only root may change.
    #[test]
    fn only_the_skill_packs_of_the_configuration_are_readable() {
        use std::os::unix::fs::PermissionsExt;
        let base = sysward_testdir::RemoveOnDrop::fresh_dir("sysward-packs");
        let config = base.join("sysward");
        let packs = config.join("skills");
        std::fs::create_dir_all(packs.join("disk_usage")).unwrap();
        std::fs::create_dir_all(config.join("secrets")).unwrap();
        std::fs::write(config.join("init.conf"), "API_KEY=x\n").unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        std::fs::set_permissions(&packs, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut got = read_protected_for_reads(&config, &packs);
        got.sort();
        if root {
            assert_eq!(got, vec![config.join("init.conf"), config.join("secrets")]);
        } else {
            // Not root's: the whole directory stays out.
            assert_eq!(got, vec![config.clone()]);
        }
        std::fs::set_permissions(&packs, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(
            read_protected_for_reads(&config, &packs),
            vec![config.clone()]
        );
        std::fs::remove_dir_all(&packs).unwrap();
        assert_eq!(
            read_protected_for_reads(&config, &packs),
            vec![config.clone()]
        );
    }
}
