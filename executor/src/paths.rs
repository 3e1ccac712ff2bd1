//! Path resolution that a symlink swapped in after the broker's decision cannot
//! redirect: every directory on the way is opened with `openat2` and
//! `RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, and the last component is
//! then used relative to that directory fd with `O_NOFOLLOW` /
//! `AT_SYMLINK_NOFOLLOW`. A path through a symlink is refused with the real
//! path named, so the model can retry with it (the broker judged real paths).

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// openat2 is 437 on every architecture (unified syscall table).
const SYS_OPENAT2: libc::c_long = 437;

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `struct open_how` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// openat2(dirfd, path, flags, RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS).
pub fn openat2_nofollow(
    dirfd: RawFd,
    path: &Path,
    flags: libc::c_int,
    mode: u32,
) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str().as_bytes())?;
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: if flags & libc::O_CREAT != 0 {
            mode as u64
        } else {
            0
        },
        resolve: libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: `c` is NUL-terminated and `how` is a live open_how whose size we
    // pass; the kernel only reads both.
    let fd = unsafe {
        libc::syscall(
            SYS_OPENAT2,
            dirfd,
            c.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// openat(dirfd, name, flags|O_NOFOLLOW|O_CLOEXEC, mode) for one component.
pub fn open_at(dirfd: RawFd, name: &OsStr, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let c = cstr(name.as_bytes())?;
    // SAFETY: `c` is NUL-terminated and outlives the call.
    let fd = unsafe {
        libc::openat(
            dirfd,
            c.as_ptr(),
            flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW); an empty name stats `dirfd`.
pub fn lstat_at(dirfd: RawFd, name: &OsStr) -> io::Result<libc::stat> {
    let c = cstr(name.as_bytes())?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    let flags = if name.is_empty() {
        libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH
    } else {
        libc::AT_SYMLINK_NOFOLLOW
    };
    // SAFETY: `c` is NUL-terminated; `st` is writable memory of the right size.
    let rc = unsafe { libc::fstatat(dirfd, c.as_ptr(), st.as_mut_ptr(), flags) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fstatat succeeded and filled the struct.
    Ok(unsafe { st.assume_init() })
}

pub fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    lstat_at(fd, OsStr::new(""))
}

pub fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

pub fn is_reg(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

pub fn is_symlink(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFLNK
}

/// Checks that a path from the model is absolute and plain: no `..`, no `.`.
pub fn check_path(p: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(p);
    if !path.is_absolute() {
        return Err(format!("{p:?} is not an absolute path"));
    }
    if p.as_bytes().contains(&0) {
        return Err("path contains a NUL byte".into());
    }
    for c in path.components() {
        match c {
            Component::RootDir | Component::Normal(_) => {}
            _ => {
                return Err(format!(
                    "{p:?}: `.` and `..` components are not accepted; give the plain absolute path"
                ))
            }
        }
    }
    Ok(path)
}

/// A path's parent directory, opened without following any symlink, and the
/// last component's name.
pub struct Parent {
    pub fd: OwnedFd,
    pub dir: PathBuf,
    pub name: std::ffi::OsString,
    pub path: PathBuf,
}

impl Parent {
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// A sibling path in the same directory, for messages.
    pub fn sibling(&self, name: &OsStr) -> PathBuf {
        self.dir.join(name)
    }
}

/// The human explanation of an error on `path` (ELOOP → symlink refusal).
pub fn explain(path: &Path, e: &io::Error) -> String {
    if e.raw_os_error() == Some(libc::ELOOP) {
        let real = std::fs::canonicalize(path)
            .map(|r| format!(" (its real path is {})", r.display()))
            .unwrap_or_default();
        return format!(
            "{}: the path goes through a symbolic link, which sysward does not follow when it changes files{real}; use the real path",
            path.display()
        );
    }
    format!("{}: {e}", path.display())
}

pub fn parent(p: &str) -> Result<Parent, String> {
    let path = check_path(p)?;
    let name = path
        .file_name()
        .ok_or_else(|| format!("{p:?} names no file"))?
        .to_os_string();
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let fd = openat2_nofollow(libc::AT_FDCWD, &dir, libc::O_PATH | libc::O_DIRECTORY, 0)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => format!(
                "{}: the directory does not exist; create it first (mkdir, which makes missing parents too)",
                dir.display()
            ),
            _ => explain(&dir, &e),
        })?;
    Ok(Parent {
        fd,
        dir,
        name,
        path,
    })
}
