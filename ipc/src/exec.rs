//! broker → executor: one spec per action, one report back.
//!
//! The spec travels on an inherited SEQPACKET socket (fd 3). For a command the
//! executor confines itself and `execve`s: the socket is close-on-exec, so EOF
//! without a report means the command is running; a report before EOF means
//! confinement (or the exec) failed and nothing ran. The frame header's protocol
//! version is the handshake: a mismatched executor answers `Refused`.

use crate::impl_message;
use crate::profile::ConfinementProfile;
use serde::{Deserialize, Serialize};

/// The fd number the executor finds its channel on.
pub const EXEC_CHANNEL_FD: i32 = 3;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// argv[0] is resolved by the broker to an absolute path.
    pub argv: Vec<String>,
    /// The complete environment; nothing is inherited.
    pub env: Vec<(String, String)>,
    pub cwd: String,
    /// New network namespace to enter (a path such as `/proc/<pid>/ns/net`), or
    /// None to unshare a fresh one when the profile has no network.
    pub netns_path: Option<String>,
    /// Cgroup directory (v2) to join so every descendant can be killed.
    pub cgroup_dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileOp {
    ReadFile {
        path: String,
        /// First line to show, 1-based.
        offset: u64,
        /// Lines to show; 0 means the default.
        limit: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecSpec {
    Command {
        id: u64,
        profile: ConfinementProfile,
        command: CommandSpec,
    },
    File {
        id: u64,
        profile: ConfinementProfile,
        op: FileOp,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecReport {
    /// Confinement could not be applied in full: nothing ran.
    ConfinementFailed { step: String, error: String },
    /// `execve` of the command itself failed after confinement.
    ExecFailed { error: String },
    /// Result of a file operation performed by the executor.
    FileDone { output: String },
    /// A file operation failed; `error` says why and what to do.
    FileFailed { error: String },
    /// The spec itself was refused (wrong version, undecodable, …).
    Refused { error: String },
}

/// Specs carry up to a 32 MiB file body plus arguments.
pub const EXEC_SPEC_MAX: usize = 40 << 20;
/// Reports carry up to a read file's capped output.
pub const EXEC_REPORT_MAX: usize = 40 << 20;

impl_message!(ExecSpec, "executor spec", EXEC_SPEC_MAX, {
    Command = 2, File = 3,
});
impl_message!(ExecReport, "executor report", EXEC_REPORT_MAX, {
    ConfinementFailed = 1, ExecFailed = 2, FileDone = 3, FileFailed = 4, Refused = 5,
});
