//! Peer identification. SO_PEERCRED is only meaningful on a named socket at
//! accept: on a socketpair it names whoever called socketpair() (the broker), so
//! a child spawned over a socketpair is identified by the pid we spawned.

use nix::sys::socket::{getsockopt, sockopt};
use std::os::fd::AsFd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error("cannot read peer credentials: {0}")]
    Sockopt(#[from] nix::errno::Errno),
    #[error("peer credentials are invalid (pid {pid}, uid {uid}): an unbound or foreign socket")]
    Invalid { pid: i32, uid: u32 },
    #[error("cannot read /proc/{pid}/status: {error}")]
    Proc { pid: i32, error: String },
}

/// SO_PEERCRED of a connected named socket, validated: pid 0 or uid u32::MAX
/// (what an unbound socket reports) is refused.
pub fn peer_cred(fd: impl AsFd) -> Result<PeerCred, PeerError> {
    let cred = getsockopt(&fd, sockopt::PeerCredentials)?;
    let (pid, uid, gid) = (cred.pid(), cred.uid(), cred.gid());
    if pid <= 0 || uid == u32::MAX {
        return Err(PeerError::Invalid { pid, uid });
    }
    Ok(PeerCred { pid, uid, gid })
}

/// The parent pid of `pid`, from `/proc/<pid>/status`.
pub fn parent_pid(pid: i32) -> Result<i32, PeerError> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| PeerError::Proc {
            pid,
            error: e.to_string(),
        })?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(PeerError::Proc {
            pid,
            error: "no PPid line".to_string(),
        })
}

/// Supplementary and primary groups of `pid` (from `/proc/<pid>/status`).
pub fn process_groups(pid: i32) -> Result<Vec<u32>, PeerError> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| PeerError::Proc {
            pid,
            error: e.to_string(),
        })?;
    let mut groups = Vec::new();
    for line in status.lines() {
        if let Some(rest) = line.strip_prefix("Groups:") {
            groups.extend(
                rest.split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok()),
            );
        }
        if let Some(rest) = line.strip_prefix("Gid:") {
            // real, effective, saved, fs
            groups.extend(
                rest.split_whitespace()
                    .filter_map(|g| g.parse::<u32>().ok()),
            );
        }
    }
    Ok(groups)
}

/// The chain of ancestors of `pid` (itself first, up to pid 1). A process whose
/// ancestry cannot be read is reported as an error: callers must refuse it.
pub fn ancestry(pid: i32) -> Result<Vec<i32>, PeerError> {
    let mut chain = vec![pid];
    let mut current = pid;
    // Bounded walk: pid_max is at most 2^22, ancestry depth far less.
    for _ in 0..4096 {
        if current <= 1 {
            return Ok(chain);
        }
        let parent = parent_pid(current)?;
        if parent <= 0 {
            return Ok(chain);
        }
        chain.push(parent);
        current = parent;
    }
    Err(PeerError::Proc {
        pid,
        error: "ancestry deeper than 4096".to_string(),
    })
}
