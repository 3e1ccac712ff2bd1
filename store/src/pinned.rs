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
use crate::project::ProjectError;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why a pinned path cannot be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum PinnedError {
    #[error("cannot open the {what} {}", .path.display())]
    Open {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot stat the {what} {}", .path.display())]
    Stat {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not one of the broker's directories", .0.display())]
    NotPinned(PathBuf),
    #[error("cannot create {}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("cannot open {}", .path.display())]
    OpenAt {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("cannot stat {}", .path.display())]
    StatAt {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error(
        "{} is not a directory of root's that only root may write; refusing to write into it",
        .0.display()
    )]
    NotRootsOnly(PathBuf),
    #[error("cannot chmod {}", .path.display())]
    Chmod {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("path has no parent")]
    NoParent,
    #[error("path has no file name")]
    NoFileName,
    #[error(transparent)]
    Project(#[from] ProjectError),
}

type Result<T> = std::result::Result<T, PinnedError>;

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
        .map_err(|source| PinnedError::Open {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    let meta = file.metadata().map_err(|source| PinnedError::Stat {
        what,
        path: path.to_path_buf(),
        source,
    })?;
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
        if !layout.standalone {
            dir("tools directory", layout.tools_dir())?;
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

    /// Writes each `(name, bytes, mode)` atomically into the subdirectory
    /// `sub` of the pinned directory `dir`, creating it (0755) when it is
    /// missing: opened relative to the held descriptor, never through a
    /// symlink, and refused unless it is a directory of root's that nobody
    /// else may write.
    pub fn write_in_subdir(
        &self,
        dir: &Path,
        sub: &str,
        files: &[(&str, &[u8], u32)],
    ) -> Result<()> {
        use nix::fcntl::{openat, OFlag};
        use nix::sys::stat::{fstat, mkdirat, Mode};
        let held = self
            .dir(dir)
            .ok_or_else(|| PinnedError::NotPinned(dir.to_path_buf()))?;
        let shown = dir.join(sub);
        let created = match mkdirat(held.as_fd(), sub, Mode::from_bits_truncate(0o755)) {
            Ok(()) => true,
            Err(nix::errno::Errno::EEXIST) => false,
            Err(source) => {
                return Err(PinnedError::Create {
                    path: shown,
                    source,
                })
            }
        };
        let fd = openat(
            held.as_fd(),
            sub,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|source| PinnedError::OpenAt {
            path: shown.clone(),
            source,
        })?;
        let st = fstat(&fd).map_err(|source| PinnedError::StatAt {
            path: shown.clone(),
            source,
        })?;
        if st.st_uid != 0 || st.st_mode & 0o022 != 0 {
            return Err(PinnedError::NotRootsOnly(shown));
        }
        if created {
            // mkdirat's mode went through the broker's umask (0077 under
            // systemd): actions must be able to enter the directory.
            nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o755)).map_err(|source| {
                PinnedError::Chmod {
                    path: shown.clone(),
                    source,
                }
            })?;
        }
        for (name, bytes, mode) in files {
            crate::project::write_atomic_mode_in(
                fd.as_fd(),
                &shown,
                std::ffi::OsStr::new(name),
                bytes,
                *mode,
            )?;
        }
        Ok(())
    }

    /// Writes `path` atomically (see [`crate::project::write_atomic_in`])
    /// through the held descriptor of its directory; a path outside the
    /// pinned directories is written through a descriptor opened now.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let parent = path.parent().ok_or(PinnedError::NoParent)?;
        let name = path.file_name().ok_or(PinnedError::NoFileName)?;
        Ok(match self.dir(parent) {
            Some(dir) => crate::project::write_atomic_in(dir.as_fd(), parent, name, bytes),
            None => crate::project::write_atomic(path, bytes),
        }?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    use sysward_testdir::RemoveOnDrop;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_subdirectory_is_written_through_the_held_descriptor_with_its_modes() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED (needs root: the directory must be root's)");
            return;
        }
        let root = RemoveOnDrop::fresh_dir("sysward-pinned");
        std::fs::create_dir_all(root.join(".agent/approvals")).unwrap();
        std::fs::create_dir_all(root.join(".agent/tmp")).unwrap();
        let layout = Layout::standalone(&root).unwrap();
        let pinned = Pinned::open(&layout, &[]).unwrap();
        let dir = layout.state_dir.clone();
        // The broker's umask does not reach the modes asked for.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
        let written = pinned.write_in_subdir(
            &dir,
            "tool_a",
            &[
                ("run", b"#!/bin/sh\n", 0o755),
                ("skill.json", b"{}\n", 0o644),
            ],
        );
        nix::sys::stat::umask(old);
        written.unwrap();
        assert_eq!(mode(&dir.join("tool_a")), 0o755);
        assert_eq!(mode(&dir.join("tool_a/run")), 0o755);
        assert_eq!(mode(&dir.join("tool_a/skill.json")), 0o644);
        assert_eq!(
            std::fs::read(dir.join("tool_a/run")).unwrap(),
            b"#!/bin/sh\n"
        );
        // A symlink in the subdirectory's place is not followed.
        let elsewhere = root.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("tool_b")).unwrap();
        assert!(pinned
            .write_in_subdir(&dir, "tool_b", &[("run", b"x", 0o755)])
            .is_err());
        assert!(!elsewhere.join("run").exists());
        // Nor is a directory someone else may write.
        std::fs::create_dir(dir.join("tool_c")).unwrap();
        std::fs::set_permissions(dir.join("tool_c"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        assert!(pinned
            .write_in_subdir(&dir, "tool_c", &[("run", b"x", 0o755)])
            .is_err());
        assert!(!dir.join("tool_c/run").exists());
        // Only the pinned directories are written this way.
        assert!(pinned
            .write_in_subdir(&elsewhere, "tool_d", &[("run", b"x", 0o755)])
            .is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
