//! What the broker tells the pure engine about the host.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Fixed facts about this installation, handed to [`crate::Engine::new`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    /// PROJECT_ROOT (`/etc/sysward` on a packaged host, `--root DIR` otherwise).
    pub project_root: PathBuf,
    /// The broker's state directory (audit log, approvals, memory, `.agent/`).
    pub state_dir: PathBuf,
    /// The action's private scratch directory (its TMPDIR).
    pub scratch_dir: PathBuf,
    /// sysward's own files: `/etc/sysward`, the audit log and its anchor,
    /// approvals, binaries, units. Never writable by any action in any mode.
    pub protected: Vec<PathBuf>,
    /// Where secrets live; never readable by any action.
    pub secrets_dir: PathBuf,
    /// Files that secret scopes let `write_file` deliver a value to (`file
    /// PATH`): they stay on the host for the service that reads them, and no
    /// action reads them (the delivering write is the broker's own).
    pub secret_files: Vec<PathBuf>,
    pub action_uid: u32,
    pub action_gid: u32,
}

impl HostFacts {
    /// A packaged host's layout (DESIGN.md), for tools and tests.
    pub fn packaged(action_uid: u32, action_gid: u32) -> HostFacts {
        HostFacts {
            project_root: PathBuf::from("/etc/sysward"),
            state_dir: PathBuf::from("/var/lib/sysward"),
            scratch_dir: PathBuf::from("/var/lib/sysward/.agent/tmp"),
            protected: vec![
                PathBuf::from("/etc/sysward"),
                PathBuf::from("/var/lib/sysward/audit.log"),
                PathBuf::from("/var/lib/sysward/audit.head"),
                PathBuf::from("/var/lib/sysward/approvals"),
                PathBuf::from("/var/lib/sysward-tools"),
                PathBuf::from("/usr/bin/sysward"),
                PathBuf::from("/usr/libexec/sysward"),
                PathBuf::from("/usr/lib/systemd/system/sysward.service"),
                PathBuf::from("/run/sysward"),
            ],
            secrets_dir: PathBuf::from("/etc/sysward/secrets"),
            secret_files: Vec::new(),
            action_uid,
            action_gid,
        }
    }
}

/// Symlink resolution, done by the broker (the engine never touches the
/// filesystem). Paths are judged by their real target: a project symlink to
/// `/etc` counts as `/etc`.
pub trait PathFacts: Sync {
    /// The canonical real path of `p` (absolute, normalized), or None when it
    /// does not exist or cannot be resolved.
    fn real_path(&self, p: &Path) -> Option<PathBuf>;
}

/// For tests and `policy explain` without a host: every path is its own real path.
#[derive(Debug, Clone, Copy, Default)]
pub struct LexicalPaths;

impl PathFacts for LexicalPaths {
    fn real_path(&self, _p: &Path) -> Option<PathBuf> {
        None
    }
}
