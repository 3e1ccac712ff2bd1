//! `apply_patch`: the model's arguments decoded strictly, the files the
//! patch changes read from its headers (`sysward_ipc::patch`, the parser the
//! executor uses too), and those files as the targets the policy judges.

use crate::project::Layout;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use sysward_ipc::exec::{ApplyPatchArgs, FileOp};
use sysward_ipc::patch;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    patch: String,
    #[serde(default)]
    directory: Option<String>,
    #[serde(default)]
    strip: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

/// Why an apply_patch request cannot be planned: what the model is told (as
/// part of the planner's refusal), in the words it has always read.
#[derive(Debug, thiserror::Error)]
pub enum PatchPlanError {
    #[error("invalid arguments for apply_patch: {0}")]
    InvalidArguments(serde_json::Error),
    #[error("apply_patch: directory must be a non-empty path")]
    Directory,
    #[error("apply_patch: {0}")]
    Patch(patch::PatchError),
}

/// `(reason, targets, op)` of an apply_patch request.
pub fn plan(
    arguments: &str,
    cwd: &Path,
) -> Result<(Option<String>, Vec<PathBuf>, FileOp), PatchPlanError> {
    let r: Request = serde_json::from_str(arguments).map_err(PatchPlanError::InvalidArguments)?;
    let directory = match &r.directory {
        Some(d) if d.is_empty() || d.contains('\0') => return Err(PatchPlanError::Directory),
        Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
        Some(d) => cwd.join(d),
        None => cwd.to_path_buf(),
    };
    let (strip, sections) =
        patch::sections(&r.patch, &directory, r.strip).map_err(PatchPlanError::Patch)?;
    let files: Vec<_> = sections.into_iter().map(|s| s.file).collect();
    let targets = files.iter().map(|f| PathBuf::from(&f.path)).collect();
    let op = FileOp::ApplyPatch(ApplyPatchArgs {
        patch: r.patch,
        directory: directory.display().to_string(),
        strip,
        files,
    });
    Ok((r.reason, targets, op))
}

/// Keeps an applied patch as `.agent/patches/ACTION.patch` (mode 0600, in
/// the broker's own state directory, which no action can write). None for
/// any other operation.
pub fn keep(layout: &Layout, op: &FileOp, action_id: &str) -> Option<std::io::Result<PathBuf>> {
    let FileOp::ApplyPatch(a) = op else {
        return None;
    };
    Some(write_kept(layout, action_id, &a.patch))
}

fn write_kept(layout: &Layout, action_id: &str, patch: &str) -> std::io::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = layout.agent_dir().join("patches");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let name: String = action_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{name}.patch"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    f.write_all(patch.as_bytes())?;
    f.sync_all()?;
    Ok(path)
}
