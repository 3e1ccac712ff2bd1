//! Hiding systemd's and D-Bus's sockets from an action.
//!
//! Landlock (ABI 7) cannot refuse connect() to a pathname socket, and
//! `systemd-run` over those sockets would run anything outside the
//! confinement. Actions that have no business there find the directories
//! empty: an empty read-only tmpfs over each, in a mount namespace of their
//! own. One implementation for the three places that do it: a confined
//! command's child, `sysward-exec` (file operations) and the broker's shared
//! namespace.

use crate::sys::errno;
use std::ffi::CString;
use sysward_ipc::profile::ConfinementProfile;

/// Where systemd's and D-Bus's sockets live.
pub const SYSTEM_BUS_DIRS: [&str; 2] = ["/run/systemd", "/run/dbus"];

/// Unknown programs, writes, deletes, network and downloads have no business
/// on the buses. Read-only diagnosis keeps them (`systemctl status` needs the
/// bus), as do service, package, admin, reboot and destructive actions, which
/// need systemd.
pub fn hides_system_buses(profile: &ConfinementProfile) -> bool {
    matches!(
        profile.name.as_str(),
        "unknown" | "write" | "delete" | "network" | "download"
    )
}

/// The bus directories this host has (allocates: call before forking).
pub fn present_dirs() -> Vec<CString> {
    SYSTEM_BUS_DIRS
        .iter()
        .filter(|d| std::path::Path::new(d).is_dir())
        .filter_map(|d| CString::new(*d).ok())
        .collect()
}

/// unshare(CLONE_NEWNS); `/` made `propagation` recursively (MS_PRIVATE: the
/// host sees nothing of it; MS_SLAVE: and the host's later mounts still
/// appear); an empty read-only tmpfs over each of `dirs`. Raw system calls on
/// the given strings only, no allocation: a vfork'd child may call it. An
/// error names what failed, with the errno.
pub fn hide_in_new_mount_ns(
    dirs: &[CString],
    propagation: libc::c_ulong,
) -> Result<(), (&'static str, i32)> {
    // SAFETY: integer argument only.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } < 0 {
        return Err(("unshare", errno()));
    }
    // SAFETY: static NUL-terminated strings, null where mount(2) allows it.
    let rc = unsafe {
        libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | propagation,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(("set the propagation of /", errno()));
    }
    for dir in dirs {
        // SAFETY: static or caller-owned NUL-terminated strings that outlive
        // the call.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=0555".as_ptr().cast(),
            )
        };
        if rc < 0 {
            return Err(("hide a bus directory", errno()));
        }
    }
    Ok(())
}
