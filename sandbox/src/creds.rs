//! Credentials and capabilities.
//!
//! Order matters (as in youki and CRATES.md): the bounding set is reduced while
//! we still hold CAP_SETPCAP, then groups, gid, and uid last; the remaining sets
//! (effective, permitted, inheritable, ambient) are written after the uid change
//! and read back.

use crate::sys;
use crate::SandboxError;
use caps::{Capability, CapsHashSet};
use std::str::FromStr;

/// The highest capability number this kernel knows. `caps` only knows 0..=40,
/// so the bounding set is cleared by number up to this value instead. Read
/// once per process (it is fixed for the running kernel): the broker asks for
/// every confined command.
pub fn cap_last_cap() -> Result<u32, SandboxError> {
    static LAST: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    if let Some(n) = LAST.get() {
        return Ok(*n);
    }
    let text = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .map_err(|e| SandboxError::io("capabilities: read cap_last_cap", e))?;
    let n = text
        .trim()
        .parse::<u32>()
        .map_err(|e| SandboxError::step("capabilities", format!("cap_last_cap: {e}")))?;
    Ok(*LAST.get_or_init(|| n))
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
/// the kernel's `cap_last_cap` (not just the ones `caps` knows). Verified with
/// the other sets by [`set_capabilities`] (one read of CapBnd instead of a
/// prctl per capability).
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

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// capset(2) with the same 64-bit mask for effective, permitted, inheritable.
/// No allocation: the jailed child calls it.
pub(crate) fn capset_all(mask: u64) -> std::io::Result<()> {
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let (lo, hi) = (mask as u32, (mask >> 32) as u32);
    let data = [
        CapData {
            effective: lo,
            permitted: lo,
            inheritable: lo,
        },
        CapData {
            effective: hi,
            permitted: hi,
            inheritable: hi,
        },
    ];
    // SAFETY: header and the two-element data array are live and laid out as
    // the kernel's version-3 structures; the kernel only reads them.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// capget(2): the effective, permitted and inheritable sets as 64-bit masks.
/// No allocation: the jailed child calls it.
pub(crate) fn capget_all() -> std::io::Result<(u64, u64, u64)> {
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: `header` and the two-element `data` are live and laid out as
    // the kernel's version-3 structures; the kernel fills `data`.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let join = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok((
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
        join(data[0].inheritable, data[1].inheritable),
    ))
}

/// Sets effective, permitted and inheritable to exactly `keep` (one capset),
/// the ambient set to `keep` when `ambient` (a non-root uid that must keep
/// them across execve) or to nothing, then reads every set back from the
/// kernel — bounding included, and capabilities above what `caps` knows.
pub fn set_capabilities(keep: &CapsHashSet, ambient: bool) -> Result<(), SandboxError> {
    let mask: u64 = keep.iter().fold(0, |m, c| m | (1u64 << c.index()));
    capset_all(mask).map_err(|e| SandboxError::io("capabilities: capset", e))?;
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
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .map_err(|e| SandboxError::io("capabilities: read status", e))?;
    let mut seen = 0;
    for line in status.lines() {
        for key in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            if let Some(v) = line.strip_prefix(key) {
                seen += 1;
                let now = u64::from_str_radix(v.trim(), 16)
                    .map_err(|e| SandboxError::step("capabilities", format!("{key} {e}")))?;
                // Bounding may lack a kept capability the parent never had;
                // every other set must be exactly what was asked.
                let want = if key == "CapAmb:" && !ambient {
                    0
                } else {
                    mask
                };
                let ok = if key == "CapBnd:" {
                    now & !want == 0
                } else {
                    now == want
                };
                if !ok {
                    return Err(SandboxError::step(
                        "capabilities",
                        format!("{key} reads back {now:#x}, expected {want:#x}"),
                    ));
                }
            }
        }
    }
    if seen != 5 {
        return Err(SandboxError::step(
            "capabilities",
            "cannot read the capability sets back".into(),
        ));
    }
    Ok(())
}

/// Refuses a process that holds any capability (permitted, effective or
/// ambient): what an unprivileged process confining itself checks, since it
/// cannot change its bounding set.
pub fn require_no_capabilities() -> Result<(), SandboxError> {
    let status = std::fs::read_to_string("/proc/thread-self/status")
        .map_err(|e| SandboxError::io("capabilities: read status", e))?;
    let mut seen = 0;
    for line in status.lines() {
        for key in ["CapPrm:", "CapEff:", "CapAmb:"] {
            if let Some(v) = line.strip_prefix(key) {
                seen += 1;
                let now = u64::from_str_radix(v.trim(), 16)
                    .map_err(|e| SandboxError::step("capabilities", format!("{key} {e}")))?;
                if now != 0 {
                    return Err(SandboxError::step(
                        "capabilities",
                        format!(
                            "{key} is {now:#x}: a process that is not root must hold no capability"
                        ),
                    ));
                }
            }
        }
    }
    if seen != 3 {
        return Err(SandboxError::step(
            "capabilities",
            "cannot read the capability sets".into(),
        ));
    }
    Ok(())
}
