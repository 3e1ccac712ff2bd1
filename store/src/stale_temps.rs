//! Temporary files that a killed file operation left behind.
//!
//! The executor replaces a file atomically through a temporary next to it,
//! `.<name>.sysward-<tag>.<pid>.<n>` (the executor's pid), removed when the
//! operation ends or fails; a `download`'s temporaries have the same form,
//! with the broker's pid. An executor killed mid-write (or a broker killed
//! with it) leaves it there: up to the size of the content, possibly in
//! `/etc`. The broker notes the directories of each file operation before it
//! runs (in `.agent/file-ops.pending`, which actions see read-only), sweeps
//! them when it ends, and a later
//! session sweeps whatever a killed broker noted. Only files of that exact
//! name pattern, regular, owned by root, whose pid no longer runs, are removed.

use crate::project::Layout;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use sysward_ipc::exec::FileOp;

/// At most this many directories are noted (a file operation has one or two).
const PENDING_MAX: usize = 64;

fn pending_path(layout: &Layout) -> PathBuf {
    layout.agent_dir().join("file-ops.pending")
}

/// The directories where `op` may create a temporary: the parent of the file
/// it replaces, and the destination itself when that may be a directory.
pub fn dirs_of(op: &FileOp) -> Vec<PathBuf> {
    let targets: Vec<&str> = match op {
        FileOp::WriteFile(a) => vec![&a.path],
        FileOp::EditFile(a) => vec![&a.path],
        FileOp::AppendFile(a) => vec![&a.path],
        FileOp::CopyFile(a) => vec![&a.destination],
        FileOp::MoveFile(a) => vec![&a.destination],
        FileOp::ApplyPatch(a) => a.files.iter().map(|f| f.path.as_str()).collect(),
        FileOp::RegisterTool(a) => {
            let mut dirs = vec![PathBuf::from(&a.directory)];
            dirs.retain(|d| d.is_absolute());
            return dirs;
        }
        _ => Vec::new(),
    };
    let mut dirs = Vec::new();
    for t in targets {
        let p = Path::new(t);
        if let Some(parent) = p.parent() {
            dirs.push(parent.to_path_buf());
        }
        if matches!(op, FileOp::CopyFile(_) | FileOp::MoveFile(_)) {
            dirs.push(p.to_path_buf());
        }
    }
    dirs.retain(|d| d.is_absolute());
    dirs.dedup();
    dirs
}

/// The pid in a temporary's name, if `name` is one:
/// `.<anything>.sysward-<tag>.<pid>.<n>` with a lowercase tag.
fn temp_pid(name: &[u8]) -> Option<u32> {
    let rest = name.strip_prefix(b".")?;
    let at = rest.windows(9).rposition(|w| w == b".sysward-")?;
    if at == 0 {
        return None;
    }
    let tail = std::str::from_utf8(&rest[at + 9..]).ok()?;
    let mut parts = tail.split('.');
    let (tag, pid, n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some()
        || tag.is_empty()
        || !tag.bytes().all(|b| b.is_ascii_lowercase())
        || n.is_empty()
        || !n.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    pid.parse().ok()
}

/// Removes the stale temporaries in `dir`; returns the removed paths.
pub fn sweep(dir: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = temp_pid(name.as_bytes()) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue; // its executor still runs (or the pid was reused)
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_file() || meta.uid() != 0 {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed.push(path.display().to_string());
        }
    }
    removed
}

/// Opens the note file, creating it (0600) if needed. It is written in
/// place, never replaced: its inode is what actions see covered read-only.
fn open_note(layout: &Layout) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(pending_path(layout))
}

/// Why the note cannot be made or written.
#[derive(Debug, thiserror::Error)]
pub enum StaleTempsError {
    /// The cause is part of the message.
    #[error("cannot create {}: {error}", .path.display())]
    Create {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Creates the (empty) note at start-up, so that it exists to be covered.
pub fn prepare(layout: &Layout) -> Result<(), StaleTempsError> {
    open_note(layout)
        .map(drop)
        .map_err(|error| StaleTempsError::Create {
            path: pending_path(layout),
            error,
        })
}

/// Notes `dirs` before a file operation runs (durably: the operation may
/// take the broker down with it).
pub fn note(layout: &Layout, dirs: &[PathBuf]) -> Result<(), StaleTempsError> {
    use std::os::unix::fs::FileExt;
    let mut text = String::new();
    for d in dirs.iter().take(PENDING_MAX) {
        let Some(s) = d.to_str() else { continue };
        if s.contains('\n') {
            continue;
        }
        text.push_str(s);
        text.push('\n');
    }
    let file = open_note(layout)?;
    file.set_len(0)?;
    file.write_all_at(text.as_bytes(), 0)?;
    file.sync_data()?;
    Ok(())
}

/// Sweeps the directories a broker noted and never cleared (it was killed
/// during a file operation), then clears the note. Returns the removed paths.
pub fn sweep_noted(layout: &Layout) -> Vec<String> {
    let Ok(file) = crate::project::open_regular(&pending_path(layout)) else {
        return Vec::new();
    };
    let mut text = String::new();
    if std::io::Read::read_to_string(&mut std::io::Read::take(&file, 64 << 10), &mut text).is_err()
    {
        return Vec::new();
    }
    let removed = text
        .lines()
        .take(PENDING_MAX)
        .map(Path::new)
        .filter(|d| d.is_absolute())
        .flat_map(sweep)
        .collect();
    clear(layout);
    removed
}

/// Clears the note after the operation ended (and its directories were swept).
pub fn clear(layout: &Layout) {
    if let Ok(file) = open_note(layout) {
        let _ = file.set_len(0);
    }
}

#[cfg(test)]
mod tests {
    use super::temp_pid;

    #[test]
    fn only_the_executors_temporary_names_match() {
        assert_eq!(temp_pid(b".hosts.sysward-tmp.4242.0"), Some(4242));
        assert_eq!(temp_pid(b".a.b.conf.sysward-tmp.7.12"), Some(7));
        // A download's temporaries (actions/src/download.rs) follow the pattern.
        assert_eq!(temp_pid(b".tool.tar.gz.sysward-download.99.123"), Some(99));
        assert_eq!(temp_pid(b".tool.tar.gz.sysward-sums.99.0"), Some(99));
        for other in [
            &b"hosts.sysward-tmp.4242.0"[..],
            b".sysward-tmp.4242.0",
            b".hosts.sysward-tmp.4242",
            b".hosts.sysward-tmp.x.0",
            b".hosts.sysward-TMP.1.0",
            b".hosts.sysward-tmp.1.0.extra",
            b".hosts.sysward.20261201-101010.bak",
            b"hosts",
        ] {
            assert_eq!(temp_pid(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
