//! The broker's own directories and files, opened once at start-up and kept
//! open; after every action that can write, each path must still name the
//! inode opened then.
//!
//! Actions cannot rename, remove or replace these paths: their mount
//! namespace binds each one read-only onto itself and pins every directory
//! above it (`sysward_sandbox::shield`). This is the second layer. If a path
//! was moved anyway (a kernel or a host where the covers do not hold, an
//! operator's mistake), the broker would otherwise read approvals from, and
//! write its state into, a directory someone else made. Instead the change is
//! audited and the broker stops: no further action runs until a person looks.
//!
//! Writes of the broker's state go through the directory descriptors held
//! here (`openat`/`renameat`), never through a path resolved again.

use crate::project::Layout;
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One directory or file the broker depends on.
struct Entry {
    what: &'static str,
    path: PathBuf,
    /// A directory opened for reading (a usable `openat` base, and `fsync`);
    /// a file opened with O_PATH (it is never read through this).
    file: File,
    is_dir: bool,
    identity: (u64, u64),
}

/// The broker's pinned paths and whether it has stopped.
pub struct Pinned {
    entries: Vec<Entry>,
    stopped: OnceLock<String>,
}

fn open_entry(what: &'static str, path: &Path, dir: bool) -> Result<Entry> {
    let flags = if dir {
        libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC
    } else {
        libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .with_context(|| format!("cannot open the {what} {}", path.display()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("cannot stat the {what} {}", path.display()))?;
    Ok(Entry {
        what,
        path: path.to_path_buf(),
        file,
        is_dir: dir,
        identity: (meta.dev(), meta.ino()),
    })
}

impl Pinned {
    /// Opens the layout's directories (which must exist: the context creates
    /// them), its audit log and anchor, the secrets directory when there is
    /// one, and sysward's own binaries.
    pub fn open(layout: &Layout, binaries: &[&Path]) -> Result<Pinned> {
        let mut entries = Vec::new();
        let mut dir = |what, path: PathBuf| -> Result<()> {
            if !entries.iter().any(|e: &Entry| e.path == path) {
                entries.push(open_entry(what, &path, true)?);
            }
            Ok(())
        };
        dir("configuration directory", layout.config_dir.clone())?;
        dir("state directory", layout.state_dir.clone())?;
        dir("agent state directory", layout.agent_dir())?;
        dir("approvals directory", layout.approvals_dir())?;
        dir("scratch directory", layout.tmp_dir())?;
        if layout.secrets_dir.exists() {
            dir("secrets directory", layout.secrets_dir.clone())?;
        }
        for (what, path) in [
            ("audit log", layout.audit_log()),
            ("audit anchor", layout.audit_head()),
            ("audit sealing state", layout.agent_dir().join("audit.seal")),
            (
                "file-operation note",
                layout.agent_dir().join("file-ops.pending"),
            ),
        ] {
            if path.exists() {
                entries.push(open_entry(what, &path, false)?);
            }
        }
        for path in binaries {
            entries.push(open_entry("sysward binary", path, false)?);
        }
        Ok(Pinned {
            entries,
            stopped: OnceLock::new(),
        })
    }

    /// Every pinned path that no longer names the inode opened at start-up,
    /// described for the audit record and the operator.
    pub fn changes(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| match std::fs::symlink_metadata(&e.path) {
                Ok(m) if (m.dev(), m.ino()) == e.identity => None,
                Ok(m) => Some(format!(
                    "the {} {} is another file now (was inode {}:{}, now {}:{})",
                    e.what,
                    e.path.display(),
                    e.identity.0,
                    e.identity.1,
                    m.dev(),
                    m.ino()
                )),
                Err(err) => Some(format!(
                    "the {} {} is gone ({err})",
                    e.what,
                    e.path.display()
                )),
            })
            .collect()
    }

    /// Stops the broker for `why` (kept: the first reason wins).
    pub fn stop(&self, why: String) {
        let _ = self.stopped.set(why);
    }

    /// Why the broker stopped, if it did: no session may start or go on.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// The held descriptor of `dir`, if it is pinned.
    fn dir(&self, dir: &Path) -> Option<&File> {
        self.entries
            .iter()
            .find(|e| e.is_dir && e.path == dir)
            .map(|e| &e.file)
    }

    /// Writes `path` atomically (see [`crate::project::write_atomic_in`])
    /// through the held descriptor of its directory; a path outside the
    /// pinned directories is written through a descriptor opened now.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let parent = path.parent().context("path has no parent")?;
        let name = path.file_name().context("path has no file name")?;
        match self.dir(parent) {
            Some(dir) => crate::project::write_atomic_in(dir.as_fd(), parent, name, bytes),
            None => crate::project::write_atomic(path, bytes),
        }
    }
}
