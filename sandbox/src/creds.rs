//! Credentials and capabilities.
//!
//! Order matters (as in youki and CRATES.md): the bounding set is reduced while
//! we still hold CAP_SETPCAP, then groups, gid, and uid last; the remaining sets
//! (effective, permitted, inheritable, ambient) are written after the uid change
//! and read back.

use crate::sys;
use crate::SandboxError;
use caps::{CapSet, Capability, CapsHashSet};
use std::str::FromStr;

/// The highest capability number this kernel knows. `caps` only knows 0..=40,
/// so the bounding set is cleared by number up to this value instead.
pub fn cap_last_cap() -> Result<u32, SandboxError> {
    let text = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .map_err(|e| SandboxError::io("capabilities: read cap_last_cap", e))?;
    text.trim()
        .parse::<u32>()
        .map_err(|e| SandboxError::step("capabilities", format!("cap_last_cap: {e}")))
}

/// Parses capability names (`CAP_NET_ADMIN` or `net_admin`).
pub fn parse_caps(names: &[String]) -> Result<CapsHashSet, SandboxError> {
    let mut set = CapsHashSet::new();
    for name in names {
        let canonical = caps::to_canonical(name);
        let cap = Capability::from_str(&canonical).map_err(|_| {
            SandboxError::step("capabilities", format!("unknown capability {name:?}"))
        })?;
        set.insert(cap);
    }
    Ok(set)
}

/// Drops every capability not in `keep` from the bounding set, numbering up to
/// the kernel's `cap_last_cap` (not just the ones `caps` knows), then verifies.
pub fn restrict_bounding(keep: &CapsHashSet) -> Result<(), SandboxError> {
    let last = cap_last_cap()?;
    let keep_idx: Vec<u32> = keep.iter().map(|c| u32::from(c.index())).collect();
    for n in 0..=last {
        if keep_idx.contains(&n) {
            continue;
        }
        sys::prctl(libc::PR_CAPBSET_DROP, n as libc::c_ulong, 0)
            .map_err(|e| SandboxError::io("capabilities: drop bounding", e))?;
    }
    for n in 0..=last {
        let present = sys::prctl(libc::PR_CAPBSET_READ, n as libc::c_ulong, 0)
            .map_err(|e| SandboxError::io("capabilities: read bounding", e))?;
        if present != 0 && !keep_idx.contains(&n) {
            return Err(SandboxError::step(
                "capabilities",
                format!("capability {n} still in the bounding set"),
            ));
        }
    }
    Ok(())
}

/// Keeps permitted capabilities across the coming setresuid (only needed when a
/// non-root uid keeps capabilities).
pub fn keep_caps_across_setuid() -> Result<(), SandboxError> {
    sys::prctl(libc::PR_SET_KEEPCAPS, 1, 0)
        .map_err(|e| SandboxError::io("capabilities: keepcaps", e))?;
    Ok(())
}

/// setgroups, setresgid, setresuid — in that order — then reads all back.
pub fn switch_user(uid: u32, gid: u32, groups: &[u32]) -> Result<(), SandboxError> {
    sys::setgroups(groups).map_err(|e| SandboxError::io("setgroups", e))?;
    sys::setresgid(gid).map_err(|e| SandboxError::io("setresgid", e))?;
    sys::setresuid(uid).map_err(|e| SandboxError::io("setresuid", e))?;
    let u = sys::getresuid().map_err(|e| SandboxError::io("setresuid", e))?;
    let g = sys::getresgid().map_err(|e| SandboxError::io("setresgid", e))?;
    if u != (uid, uid, uid) || g != (gid, gid, gid) {
        return Err(SandboxError::step(
            "setresuid",
            format!("credentials read back as uid {u:?} gid {g:?}"),
        ));
    }
    let n = sys::getgroups_count().map_err(|e| SandboxError::io("setgroups", e))?;
    if n != groups.len() {
        return Err(SandboxError::step(
            "setgroups",
            format!("{n} supplementary groups remain"),
        ));
    }
    Ok(())
}

/// Sets effective, permitted and inheritable to exactly `keep`, the ambient set
/// to `keep` when `ambient` (a non-root uid that must keep them across execve)
/// or to nothing, and verifies every set.
pub fn set_capabilities(keep: &CapsHashSet, ambient: bool) -> Result<(), SandboxError> {
    let err = |what: &'static str| {
        move |e: caps::errors::CapsError| SandboxError::step(what, e.to_string())
    };
    // Inheritable first while permitted still holds what we raise into it.
    caps::set(None, CapSet::Inheritable, keep).map_err(err("capabilities: inheritable"))?;
    caps::set(None, CapSet::Effective, keep).map_err(err("capabilities: effective"))?;
    caps::set(None, CapSet::Permitted, keep).map_err(err("capabilities: permitted"))?;
    sys::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        0,
    )
    .map_err(|e| SandboxError::io("capabilities: clear ambient", e))?;
    if ambient {
        for cap in keep {
            sys::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                cap.index() as libc::c_ulong,
            )
            .map_err(|e| SandboxError::io("capabilities: raise ambient", e))?;
        }
    }
    for set in [CapSet::Effective, CapSet::Permitted, CapSet::Inheritable] {
        let now = caps::read(None, set).map_err(err("capabilities: read back"))?;
        if &now != keep {
            return Err(SandboxError::step(
                "capabilities",
                format!("{set:?} reads back as {now:?}"),
            ));
        }
    }
    // Capabilities `caps` does not know (above 40) cannot be in the sets above
    // because caps::set writes the whole mask; check the raw masks to be sure.
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .map_err(|e| SandboxError::io("capabilities: read status", e))?;
    let expected: u64 = keep.iter().fold(0, |m, c| m | (1u64 << c.index()));
    for line in status.lines() {
        for key in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            if let Some(v) = line.strip_prefix(key) {
                let mask = u64::from_str_radix(v.trim(), 16)
                    .map_err(|e| SandboxError::step("capabilities", format!("{key} {e}")))?;
                let allowed = if key == "CapAmb:" && !ambient {
                    0
                } else {
                    expected
                };
                if mask & !allowed != 0 {
                    return Err(SandboxError::step(
                        "capabilities",
                        format!("{key} {mask:#x} exceeds {allowed:#x}"),
                    ));
                }
            }
        }
    }
    Ok(())
}
