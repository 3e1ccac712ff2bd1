//! Process attributes: no_new_privs, dumpability, file descriptors.

use crate::sys;
use crate::SandboxError;
use std::os::fd::RawFd;

/// prctl(PR_SET_NO_NEW_PRIVS, 1), verified by reading it back.
pub fn set_no_new_privs() -> Result<(), SandboxError> {
    sys::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0).map_err(|e| SandboxError::io("no_new_privs", e))?;
    match sys::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0) {
        Ok(1) => Ok(()),
        Ok(v) => Err(SandboxError::step(
            "no_new_privs",
            format!("reads back as {v}"),
        )),
        Err(e) => Err(SandboxError::io("no_new_privs", e)),
    }
}

/// prctl(PR_SET_DUMPABLE, 0), verified. A credential change resets the flag
/// to `fs.suid_dumpable`, so callers set it again after dropping privileges.
pub fn set_non_dumpable() -> Result<(), SandboxError> {
    sys::prctl(libc::PR_SET_DUMPABLE, 0, 0).map_err(|e| SandboxError::io("non_dumpable", e))?;
    match sys::prctl(libc::PR_GET_DUMPABLE, 0, 0) {
        Ok(0) => Ok(()),
        Ok(v) => Err(SandboxError::step(
            "non_dumpable",
            format!("reads back as {v}"),
        )),
        Err(e) => Err(SandboxError::io("non_dumpable", e)),
    }
}

/// Closes every descriptor not in `keep`; 0, 1 and 2 (when not kept) become
/// `/dev/null` so that a stray write can never land in a reused descriptor.
pub fn close_fds_except(keep: &[RawFd]) -> Result<(), SandboxError> {
    if keep.iter().any(|&fd| fd < 0) {
        return Err(SandboxError::step(
            "close_fds",
            "negative fd in keep list".into(),
        ));
    }
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| SandboxError::io("close_fds: open /dev/null", e))?;
    let null_fd = std::os::fd::AsRawFd::as_raw_fd(&devnull);
    for fd in 0..3 {
        if !keep.contains(&fd) && fd != null_fd {
            sys::dup2(null_fd, fd).map_err(|e| SandboxError::io("close_fds: dup2 /dev/null", e))?;
        }
    }
    let mut keep: Vec<u32> = keep
        .iter()
        .map(|&fd| fd as u32)
        .filter(|&fd| fd > 2)
        .collect();
    if null_fd <= 2 && !keep.contains(&(null_fd as u32)) {
        // /dev/null landed on a standard slot: it is that slot now, keep it.
        std::mem::forget(devnull);
    } else {
        drop(devnull);
    }
    keep.sort_unstable();
    keep.dedup();
    let mut first = 3u32;
    for fd in keep {
        if fd > first {
            sys::close_range(first, fd - 1, 0).map_err(|e| SandboxError::io("close_fds", e))?;
        }
        first = fd.saturating_add(1);
    }
    sys::close_range(first, u32::MAX, 0).map_err(|e| SandboxError::io("close_fds", e))?;
    Ok(())
}

/// Landlock (ABI < 8) and seccomp without TSYNC confine the calling thread
/// only: refuse if any other thread exists, so none escapes unconfined.
pub fn ensure_single_threaded() -> Result<(), SandboxError> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| SandboxError::io("single thread", e))?;
    // Field 20 (num_threads), counted after the ")" that ends the comm field.
    let threads = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17))
        .and_then(|n| n.parse::<u32>().ok())
        .ok_or_else(|| SandboxError::step("single thread", "cannot read num_threads".into()))?;
    if threads != 1 {
        return Err(SandboxError::step(
            "single thread",
            format!("{threads} threads exist; confine before starting any thread or runtime"),
        ));
    }
    Ok(())
}
