//! What to do when an action failed for a reason that says nothing about the
//! command itself: retry where it provably did nothing (the dpkg lock, a
//! temporary DNS failure — seed 000), and explain a permission failure.

use crate::action::{Ending, Outcome};
use crate::cancel::CancelToken;
use std::time::Duration;
use sysward_ipc::agent::{ToolResult, ToolStatus};

/// Delays before the retries of each transient failure.
const DPKG_LOCK_DELAYS: &[u64] = &[5, 15, 30];
const DNS_DELAYS: &[u64] = &[2, 5];

/// `Some((reason, delays))` when the action failed only because of a held
/// package-manager lock or a temporary name-resolution failure.
pub fn transient(outcome: &Outcome) -> Option<(&'static str, &'static [u64])> {
    if !matches!(outcome.ending, Ending::Exited(c) if c != 0) {
        return None;
    }
    let text = format!("{}\n{}", outcome.stderr.text, outcome.stdout.text);
    let dpkg = [
        "Could not get lock /var/lib/dpkg/lock",
        "Unable to acquire the dpkg frontend lock",
        "Could not get lock /var/lib/apt/lists/lock",
        "dpkg status database is locked by another process",
    ];
    // Refused the lock file itself (not root, or a confinement that cannot
    // write /var/lib/dpkg): waiting changes nothing, so no retry.
    let refused = ["(13: Permission denied)", "are you root?"];
    if dpkg.iter().any(|m| text.contains(m)) && !refused.iter().any(|m| text.contains(m)) {
        return Some((
            "the dpkg/apt lock is held by another process",
            DPKG_LOCK_DELAYS,
        ));
    }
    let dns = [
        "Temporary failure in name resolution",
        "Temporary failure resolving",
        "Could not resolve host",
    ];
    if dns.iter().any(|m| text.contains(m)) {
        return Some(("a name did not resolve (temporary DNS failure)", DNS_DELAYS));
    }
    None
}

/// Sleeps `d`; true when the operator cancelled meanwhile.
pub fn sleep_unless_cancelled(d: Duration, cancel: &CancelToken) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(cancel.fd(), PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(d.as_millis().min(60_000) as i32).unwrap_or(PollTimeout::MAX);
    let _ = poll(&mut fds, ms);
    cancel.is_cancelled()
}

/// For a command that failed on a permission error: where it likely came from.
/// Actions run as root, so the usual causes are the confinement the policy
/// chose, or the host (read-only filesystem, immutable attribute, MAC, a
/// container), not a missing sudo.
pub fn permission_hint(result: &ToolResult) -> Option<String> {
    if result.status != ToolStatus::Error {
        return None;
    }
    let text = format!("{}\n{}", result.stderr, result.stdout);
    let denied = [
        "Permission denied",
        "Operation not permitted",
        "EACCES",
        "EPERM",
    ];
    if !denied.iter().any(|m| text.contains(m)) {
        return None;
    }
    Some(
        "permission failure: actions run as root inside the confinement profile the policy chose, so the cause is most likely that profile (the path is outside its write set, the capability is not kept, network is off — see `sysward policy explain -- '<command>'`), or the host: a read-only filesystem (mount), an immutable attribute (lsattr), SELinux/AppArmor, or a container"
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::Captured;

    fn failed(stderr: &str) -> Outcome {
        let captured = |text: &str| Captured {
            text: text.to_string(),
            total: text.len() as u64,
            saved: None,
            note: None,
        };
        Outcome {
            ending: Ending::Exited(100),
            stdout: captured(""),
            stderr: captured(stderr),
            duration: Duration::from_millis(5),
            error: None,
            redactions: Default::default(),
            file_result: None,
            stages: Vec::new(),
        }
    }

    /// A lock held by another apt is waited for; a lock file the action may
    /// not open is not (apt's own words for each, as apt 2.6 prints them).
    #[test]
    fn a_held_lock_is_retried_and_a_refused_lock_file_is_not() {
        let held = failed(
            "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)\n\
             E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?\n",
        );
        assert_eq!(transient(&held).map(|t| t.1), Some(DPKG_LOCK_DELAYS));
        let refused = failed(
            "E: Could not open lock file /var/lib/dpkg/lock-frontend - open (13: Permission denied)\n\
             E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), are you root?\n",
        );
        assert_eq!(transient(&refused), None);
        let dns = failed("curl: (6) Could not resolve host: deb.debian.org\n");
        assert_eq!(transient(&dns).map(|t| t.1), Some(DNS_DELAYS));
    }
}
