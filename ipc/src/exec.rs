//! What the broker runs for an approved action: an [`ExecSpec`].
//!
//! A command is started by the broker itself (`sysward_sandbox::jail`: one
//! fork, the profile applied in the child, one exec). A file operation goes to
//! `sysward-exec` on an inherited SEQPACKET socket (fd 3): one spec, one
//! report back. The frame header's protocol version is the handshake: a
//! mismatched executor answers `Refused`.
//!
//! The `*Args` structs are the model's tool arguments exactly as the tools
//! declare them: the broker decodes the JSON straight into them
//! (`deny_unknown_fields`: an unknown field is an error), makes every path
//! absolute, and wraps them in a [`FileOp`]. Optional fields are `Option`s so
//! that serde_json treats them as omittable while bincode stays positional.

use crate::impl_message;
use crate::profile::ConfinementProfile;
use serde::{Deserialize, Serialize};

/// The fd number the executor finds its channel on.
pub const EXEC_CHANNEL_FD: i32 = 3;

/// Largest file body a write may produce (seed: 32 MiB).
pub const FILE_WRITE_MAX: usize = 32 << 20;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandSpec {
    /// argv[0] is resolved by the broker to an absolute path.
    pub argv: Vec<String>,
    /// The complete environment; nothing is inherited.
    pub env: Vec<(String, String)>,
    pub cwd: String,
    /// Cgroup directory (v2) to join so every descendant can be killed.
    pub cgroup_dir: Option<String>,
    /// Fed to the command's standard input through a pipe; `None`: it reads
    /// /dev/null.
    #[serde(default)]
    pub stdin: Option<String>,
}

/// `{"command": "sshd", "args": ["-t", "-f", "{file}"]}`: run on the temporary
/// file before it replaces the original; `{file}` is replaced by its path.
/// A non-absolute `command` is looked up in the executor's fixed PATH.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateCommand {
    pub command: String,
    #[serde(default)]
    pub args: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    pub path: String,
    /// First line to show, 1-based (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// Lines to show (default 2000).
    #[serde(default)]
    pub limit: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    pub path: String,
    pub content: String,
    /// Octal, e.g. "0644". Default: the original's mode, or 0644 for a new file.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub validate: Option<ValidateCommand>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    pub path: String,
    /// Must occur exactly once in the file.
    pub old_text: String,
    pub new_text: String,
    #[serde(default)]
    pub validate: Option<ValidateCommand>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendFileArgs {
    pub path: String,
    pub content: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CopyFileArgs {
    pub source: String,
    pub destination: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveFileArgs {
    pub source: String,
    pub destination: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoveFileArgs {
    pub path: String,
    /// Remove a directory and everything beneath it (needs ALLOW_DELETE; the
    /// broker decides).
    #[serde(default)]
    pub recursive: Option<bool>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `register_tool`: a project tool's directory, created if needed (0755),
/// its script written as `run` (0755) and then its manifest `skill.json`
/// (0644), each atomically, so a manifest never names a missing script.
/// The broker builds it (the manifest from the model's checked fields); the
/// model never names these paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterToolArgs {
    pub directory: String,
    pub manifest: String,
    pub script: String,
}

impl RegisterToolArgs {
    /// The script's file name inside the tool's directory.
    pub const SCRIPT: &'static str = "run";
    /// The manifest's file name inside the tool's directory.
    pub const MANIFEST: &'static str = "skill.json";
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MkdirArgs {
    pub path: String,
    /// Octal, default "0755". Parents are created as needed.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListDirArgs {
    pub path: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatArgs {
    pub path: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChmodArgs {
    pub path: String,
    /// Octal, e.g. "0600".
    pub mode: String,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChownArgs {
    pub path: String,
    /// User name or numeric uid.
    #[serde(default)]
    pub owner: Option<String>,
    /// Group name or numeric gid.
    #[serde(default)]
    pub group: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffFilesArgs {
    pub path: String,
    /// The file to compare with; or give `content` instead.
    #[serde(default)]
    pub other: Option<String>,
    /// Proposed content to compare `path` with.
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailFileArgs {
    pub path: String,
    /// Last lines to show (default 100).
    #[serde(default)]
    pub lines: Option<u64>,
    /// Keep reading what is appended for this many seconds (default 0).
    #[serde(default)]
    pub follow_seconds: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The files a patch changes, as the broker read them from its headers and
/// judged them: the executor applies the patch only when its own reading of
/// the same text names exactly these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchFile {
    /// Absolute path.
    pub path: String,
    /// The patch creates it (`--- /dev/null`).
    pub create: bool,
}

/// Unlike the other `*Args`, not the model's arguments as such: the broker
/// decodes those (`patch`, `directory`, `strip`, `reason`) itself and adds
/// the files it read from the patch and judged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyPatchArgs {
    /// A unified diff of one or more files.
    pub patch: String,
    /// Absolute directory relative names in the patch are taken from.
    pub directory: String,
    /// Leading path components stripped from the patch's names.
    pub strip: u64,
    pub files: Vec<PatchFile>,
}

/// A file operation the executor performs itself, under the profile's
/// confinement. Every path must be absolute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileOp {
    ReadFile(ReadFileArgs),
    WriteFile(WriteFileArgs),
    EditFile(EditFileArgs),
    AppendFile(AppendFileArgs),
    CopyFile(CopyFileArgs),
    MoveFile(MoveFileArgs),
    RemoveFile(RemoveFileArgs),
    Mkdir(MkdirArgs),
    ListDir(ListDirArgs),
    Stat(StatArgs),
    Chmod(ChmodArgs),
    Chown(ChownArgs),
    DiffFiles(DiffFilesArgs),
    TailFile(TailFileArgs),
    ApplyPatch(ApplyPatchArgs),
    RegisterTool(RegisterToolArgs),
}

impl FileOp {
    /// The tool name, as the model calls it.
    pub fn tool_name(&self) -> &'static str {
        match self {
            FileOp::ReadFile(_) => "read_file",
            FileOp::WriteFile(_) => "write_file",
            FileOp::EditFile(_) => "edit_file",
            FileOp::AppendFile(_) => "append_file",
            FileOp::CopyFile(_) => "copy_file",
            FileOp::MoveFile(_) => "move_file",
            FileOp::RemoveFile(_) => "remove_file",
            FileOp::Mkdir(_) => "mkdir",
            FileOp::ListDir(_) => "list_dir",
            FileOp::Stat(_) => "stat",
            FileOp::Chmod(_) => "chmod",
            FileOp::Chown(_) => "chown",
            FileOp::DiffFiles(_) => "diff_files",
            FileOp::TailFile(_) => "tail_file",
            FileOp::ApplyPatch(_) => "apply_patch",
            FileOp::RegisterTool(_) => "register_tool",
        }
    }

    /// True for the operations that change the filesystem.
    pub fn is_modifying(&self) -> bool {
        !matches!(
            self,
            FileOp::ReadFile(_)
                | FileOp::ListDir(_)
                | FileOp::Stat(_)
                | FileOp::DiffFiles(_)
                | FileOp::TailFile(_)
        )
    }
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
        /// Copy an existing file to `name.sysward.YYYYMMDD-HHMMSS.bak` (same
        /// mode and owner) before changing or removing it
        /// (BACKUP_BEFORE_SYSTEM_EDIT for a path outside the project).
        backup: bool,
        /// Environment of a `validate` command (PATH etc.); nothing else is
        /// inherited.
        env: Vec<(String, String)>,
    },
}

/// What a modifying file operation changed, for the result and the audit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    /// The path changed (the destination for copy/move).
    pub path: String,
    /// Unified diff (old → new) generated with `similar`; empty when the
    /// change is not textual (mode, owner, directory, binary content).
    pub diff: String,
    /// The backup written before the change, if any.
    pub backup: Option<String>,
    /// How to undo the change, as a command or instruction for the operator.
    pub rollback: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExecReport {
    /// Confinement could not be applied in full: nothing ran.
    ConfinementFailed { step: String, error: String },
    /// `execve` of the command itself failed after confinement.
    ExecFailed { error: String },
    /// Result of a file operation performed by the executor. `change` is None
    /// for reads and for an idempotent no-op.
    FileDone {
        output: String,
        change: Option<FileChange>,
    },
    /// A file operation failed; `error` says why and what to do. Nothing was
    /// changed unless `error` says otherwise.
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
