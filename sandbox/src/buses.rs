//! Hiding systemd's and D-Bus's sockets from an action.
//!
//! Landlock (ABI 7) cannot refuse connect() to a pathname socket, and
//! `systemd-run` over those sockets would run anything outside the
//! confinement. Actions that have no business there find the directories
//! empty: an empty read-only tmpfs over each, in a mount namespace of their
//! own (one of the steps of `crate::shield`).

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
