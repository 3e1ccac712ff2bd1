//! One-shot secret files (`tmpfile PROGRAM` grants): the value is written by
//! the broker to a file in a directory of its own for one action, and the
//! argument that was the placeholder becomes that file's path.
//!
//! The directory lives under `.agent/deliver/` (root, 0700). Every action is
//! kept out of that tree (a Landlock read exclusion, and a mount cover for an
//! action in a mount namespace), except the receiving action, which is
//! granted reads beneath its own directory only. The directory is removed
//! when the action ends, on every path out of it (the holder's `Drop`), and
//! what a killed broker left is removed by the next session
//! ([`sweep`]).

use crate::project::Layout;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use sysward_ipc::exec::ExecSpec;

/// Largest number of one-shot files one action may receive.
const MAX_FILES: u32 = 16;

/// The directory that holds every action's one-shot directory.
pub fn root(layout: &Layout) -> PathBuf {
    layout.agent_dir().join("deliver")
}

/// Errors of preparing or removing one-shot files.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    Unsafe { path: PathBuf, problem: String },
    #[error("at most {MAX_FILES} one-shot secret files per action")]
    TooMany,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OneShotError + '_ {
    move |source| OneShotError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn cstr(path: &Path) -> Result<CString, OneShotError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| OneShotError::Unsafe {
        path: path.to_path_buf(),
        problem: "contains a NUL byte".to_string(),
    })
}

/// Opens `path` as a directory without following a symlink and checks that
/// it is root's and private (an action that may write there could otherwise
/// have put a symlink or a directory of its own in its place).
fn open_private_dir(path: &Path) -> Result<OwnedFd, OneShotError> {
    let c = cstr(path)?;
    // SAFETY: a valid C string; the descriptor is owned below.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(OneShotError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = nix::sys::stat::fstat(&fd).map_err(|e| OneShotError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    if st.st_uid != 0 || st.st_mode & 0o077 != 0 {
        return Err(OneShotError::Unsafe {
            path: path.to_path_buf(),
            problem: format!(
                "must be root's with mode 0700 (owner {}, mode {:o})",
                st.st_uid,
                st.st_mode & 0o7777
            ),
        });
    }
    Ok(fd)
}

/// Creates the delivery root (root, 0700) if it is missing and checks it.
pub fn ensure_root(layout: &Layout) -> Result<PathBuf, OneShotError> {
    let root = root(layout);
    // Checked before every action: one open and one fstat when it is there.
    match open_private_dir(&root) {
        Ok(_) => return Ok(root),
        Err(OneShotError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&root)
        .map_err(io(&root))?;
    open_private_dir(&root)?;
    Ok(root)
}

/// Removes whatever an earlier broker left under the delivery root (it was
/// killed during an action). Returns the directories removed.
pub fn sweep(layout: &Layout) -> Vec<String> {
    let root = root(layout);
    if open_private_dir(&root).is_err() {
        return Vec::new();
    }
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let p = entry.path();
        let gone = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&p),
            _ => std::fs::remove_file(&p),
        };
        if gone.is_ok() {
            removed.push(p.display().to_string());
        }
    }
    removed
}

/// The one-shot files of one action. The directory is made on the first
/// file and removed, with everything in it, by [`OneShotFiles::remove`] or
/// when the holder is dropped.
pub struct OneShotFiles {
    root: PathBuf,
    dir: PathBuf,
    uid: u32,
    gid: u32,
    dir_fd: Option<OwnedFd>,
    files: u32,
}

impl OneShotFiles {
    /// The holder for action `action_id`, whose files belong to `uid:gid`
    /// (the action's own uid, so a program that drops privileges to it can
    /// still read them; nobody else but root can).
    pub fn new(layout: &Layout, action_id: &str, uid: u32, gid: u32) -> OneShotFiles {
        let root = root(layout);
        let name: String = action_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(80)
            .collect();
        OneShotFiles {
            dir: root.join(format!("a-{name}")),
            root,
            uid,
            gid,
            dir_fd: None,
            files: 0,
        }
    }

    /// The action's directory (it exists once a file was written).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many files were written.
    pub fn count(&self) -> u32 {
        self.files
    }

    fn open_dir(&mut self) -> Result<i32, OneShotError> {
        if let Some(fd) = &self.dir_fd {
            return Ok(fd.as_raw_fd());
        }
        let root_fd = open_private_dir(&self.root)?;
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_default();
        let c = cstr(Path::new(&name))?;
        // A directory of that name is a leftover: nothing else makes one.
        let _ = std::fs::remove_dir_all(&self.dir);
        // SAFETY: valid descriptor and C string.
        if unsafe { libc::mkdirat(root_fd.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
            return Err(io(&self.dir)(std::io::Error::last_os_error()));
        }
        // SAFETY: valid descriptor and C string; the result is owned below.
        let fd = unsafe {
            libc::openat(
                root_fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io(&self.dir)(std::io::Error::last_os_error()));
        }
        // SAFETY: just opened, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: valid descriptor.
        if unsafe { libc::fchown(fd.as_raw_fd(), self.uid, self.gid) } != 0 {
            return Err(io(&self.dir)(std::io::Error::last_os_error()));
        }
        let raw = fd.as_raw_fd();
        self.dir_fd = Some(fd);
        Ok(raw)
    }

    /// Writes `value` to a new file (0600, the action's uid) and returns its
    /// path.
    pub fn write(&mut self, value: &[u8]) -> Result<PathBuf, OneShotError> {
        if self.files >= MAX_FILES {
            return Err(OneShotError::TooMany);
        }
        let dir = self.open_dir()?;
        let name = format!("secret-{}", self.files + 1);
        let path = self.dir.join(&name);
        let c = cstr(Path::new(&name))?;
        // SAFETY: valid descriptor and C string; the result is owned below.
        let fd = unsafe {
            libc::openat(
                dir,
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io(&path)(std::io::Error::last_os_error()));
        }
        // SAFETY: just opened, owned by nobody else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        self.files += 1;
        // SAFETY: valid descriptor.
        if unsafe { libc::fchown(file.as_raw_fd(), self.uid, self.gid) } != 0 {
            return Err(io(&path)(std::io::Error::last_os_error()));
        }
        file.write_all(value).map_err(io(&path))?;
        Ok(path)
    }

    /// Puts the delivery tree out of the action's reach, except its own
    /// directory when it received files. Applied to every action's profile,
    /// so that no other action can read a one-shot file.
    pub fn confine(&self, spec: &mut ExecSpec) {
        let profile = match spec {
            ExecSpec::Command { profile, .. } | ExecSpec::File { profile, .. } => profile,
        };
        // The receiving action cannot be kept out of the tree and granted its
        // own directory (a grant inside an exclusion is dropped): it is kept
        // out of every other entry there instead. Actions of a project run
        // one at a time, so there is normally none.
        let out_of_reach: Vec<String> = if self.files > 0 {
            std::fs::read_dir(&self.root)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p != &self.dir)
                .map(|p| p.display().to_string())
                .collect()
        } else {
            vec![self.root.display().to_string()]
        };
        for p in out_of_reach {
            if let Some(except) = profile.read_all_except.as_mut() {
                if !except.contains(&p) {
                    except.push(p.clone());
                }
            }
            if !profile.hidden_paths.contains(&p) {
                profile.hidden_paths.push(p);
            }
        }
    }

    /// Removes the action's directory with everything in it. Returns how
    /// many one-shot files it had held.
    pub fn remove(&mut self) -> Result<u32, OneShotError> {
        let files = self.files;
        if self.dir_fd.take().is_some() || files > 0 {
            self.files = 0;
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(&self.dir)(e)),
            }
        }
        Ok(files)
    }
}

impl Drop for OneShotFiles {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use sysward_testdir::RemoveOnDrop;

    #[test]
    fn the_delivery_root_is_made_private_kept_and_refused_when_it_is_not_roots_own() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED (needs root: the delivery root must be root's)");
            return;
        }
        let project = RemoveOnDrop::fresh_dir("sysward-oneshot-root");
        std::fs::create_dir_all(project.join(".agent")).unwrap();
        let layout = Layout::standalone(&project).unwrap();
        let deliver = root(&layout);
        // Missing: made, root's, 0700; there: kept as it is.
        assert_eq!(ensure_root(&layout).unwrap(), deliver);
        let meta = std::fs::symlink_metadata(&deliver).unwrap();
        assert!(meta.is_dir());
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o700));
        std::fs::write(deliver.join("kept"), b"").unwrap();
        ensure_root(&layout).unwrap();
        assert!(deliver.join("kept").exists());
        // Open to others: refused, not repaired.
        std::fs::set_permissions(&deliver, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(
            ensure_root(&layout),
            Err(OneShotError::Unsafe { .. })
        ));
        // A symlink in its place (even to a private directory): refused.
        std::fs::remove_dir_all(&deliver).unwrap();
        let elsewhere = project.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &deliver).unwrap();
        assert!(ensure_root(&layout).is_err());
        assert!(std::fs::symlink_metadata(&deliver)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
