//! Namespaces the broker makes once and every action enters: entering costs
//! almost nothing, creating one per action costs ~0.2–0.45 ms with
//! multi-millisecond tails when it is torn down (CRATES.md). One empty network
//! namespace for actions without network; one mount namespace where systemd's
//! and D-Bus's sockets are hidden, for the profiles that must not reach them.

use anyhow::{Context, Result};
use std::os::fd::OwnedFd;

/// Creates the namespace on a short-lived thread (unshare affects only the
/// calling thread's namespace) and returns an fd that keeps it alive.
pub fn create_empty() -> Result<OwnedFd> {
    std::thread::Builder::new()
        .name("netns".to_string())
        .spawn(|| -> Result<OwnedFd> {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
                .context("unshare(CLONE_NEWNET)")?;
            let file = std::fs::File::open("/proc/thread-self/ns/net")
                .context("cannot open the new network namespace")?;
            Ok(OwnedFd::from(file))
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))?
}

/// A mount namespace like the host's — a slave of it, so mounts made on the
/// host later still appear — except that the system bus directories
/// (`sysward_sandbox::buses`) are an empty read-only tmpfs.
/// Made on a short-lived thread (unshare of the mount namespace affects only
/// the calling thread); the returned fd keeps it alive.
///
/// Only where every host mount is shared (systemd makes them so): a private
/// one would not pass on what is mounted beneath it later, and actions would
/// see a stale tree. Elsewhere this refuses, and each action makes its own
/// namespace from the current tree.
pub fn create_hidden_buses() -> Result<OwnedFd> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").context("cannot read mountinfo")?;
    if let Some(private) = first_private_mount(&mountinfo) {
        anyhow::bail!(
            "{private} is not a shared mount, so later mounts would not reach a long-lived namespace"
        );
    }
    let dirs = sysward_sandbox::buses::present_dirs();
    std::thread::Builder::new()
        .name("mntns".to_string())
        .spawn(move || -> Result<OwnedFd> {
            // Nothing done here propagates to the host; the host's later
            // mounts still propagate here.
            sysward_sandbox::buses::hide_in_new_mount_ns(&dirs, libc::MS_SLAVE).map_err(
                |(what, errno)| {
                    anyhow::anyhow!("{what}: {}", std::io::Error::from_raw_os_error(errno))
                },
            )?;
            let file = std::fs::File::open("/proc/thread-self/ns/mnt")
                .context("cannot open the new mount namespace")?;
            Ok(OwnedFd::from(file))
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))?
}

/// The mount point of the first mount in `mountinfo` without a `shared:`
/// peer group (mount propagation does not reach a copy of it).
fn first_private_mount(mountinfo: &str) -> Option<String> {
    mountinfo.lines().find_map(|line| {
        let (left, _) = line.split_once(" - ")?;
        let mut fields = left.split(' ');
        let point = fields.nth(4)?;
        // Fields 7.. (after the mount options) are the optional tags.
        let shared = fields.skip(1).any(|tag| tag.starts_with("shared:"));
        (!shared).then(|| point.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_mounts_are_found() {
        let systemd = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                       23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw\n";
        assert_eq!(first_private_mount(systemd), None);
        let container = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                         30 22 0:40 / /mnt/x rw - tmpfs none rw\n";
        assert_eq!(first_private_mount(container).as_deref(), Some("/mnt/x"));
        let master_only = "22 1 8:1 / / rw master:1 - ext4 /dev/sda1 rw\n";
        assert_eq!(first_private_mount(master_only).as_deref(), Some("/"));
    }
}
