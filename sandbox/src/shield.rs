//! sysward's own paths protected by a private mount namespace.
//!
//! Landlock has no deny rule: "everything beneath `/etc` except
//! `/etc/sysward`" could only be built by granting each sibling, and every
//! ancestor of a protected path would lose the right to create, remove and
//! rename entries (`sed -i /etc/hosts`, `useradd` and a new `/etc/x.conf`
//! all fail). So an action that may write runs in a mount namespace of its
//! own where:
//! - each protected path is a read-only bind mount of itself (writes fail
//!   with EROFS, hard links into it with EXDEV, renaming, removing or
//!   replacing it with EBUSY, `chattr` with EROFS);
//! - what no action may read is covered: a directory by an empty read-only
//!   tmpfs, a file by a `nodev` bind of `/dev/null`, which cannot be opened;
//! - every directory between a protected path and `/` that is not a mount
//!   point already is pinned by a bind onto itself, so it cannot be renamed
//!   or removed to move the protected path out of the way;
//! - writable directories beneath a protected one (the scratch directory in
//!   the state directory) are bound back read-write; beneath a hidden one
//!   (the packaged layout hides all of `/var/lib/sysward`, and the action's
//!   `TMPDIR` is `/var/lib/sysward/.agent/tmp`) the directory is taken as a
//!   detached copy of its mount before the tmpfs covers it, then attached at
//!   the same path inside the tmpfs, which is made read-only last: the
//!   action sees only the path down to its scratch directory.
//!
//! Landlock then grants whole subtrees as the decision requires, and denies
//! every change of the mount topology to the confined process (seccomp
//! refuses mount(2) and friends as well), so the covers stay in place.
//!
//! The plan is computed by the parent (it allocates and reads the file
//! system); [`ShieldPlan::apply`] makes only raw system calls on prepared
//! strings, so a vfork'd child may run it.

use crate::sys::errno;
use crate::SandboxError;
use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// What one mount step does to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CoverKind {
    /// A bind of the directory onto itself: it can no longer be renamed or
    /// removed (EBUSY); what lies beneath stays writable.
    Pin,
    /// A recursive bind of the path onto itself, then made read-only.
    ReadOnly,
    /// A writable directory beneath a read-only one, bound back read-write.
    Writable,
    /// An empty read-only tmpfs over a directory.
    HideDir,
    /// `/dev/null` bound over a file, `nodev`: opening it fails (EACCES).
    HideFile,
}

impl CoverKind {
    fn name(self) -> &'static str {
        match self {
            CoverKind::Pin => "pin",
            CoverKind::ReadOnly => "read-only bind",
            CoverKind::Writable => "writable bind",
            CoverKind::HideDir => "hide a directory",
            CoverKind::HideFile => "hide a file",
        }
    }
}

/// A writable directory kept inside a hidden one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Keep {
    /// The directory, as the host names it (and as it is named inside).
    path: CString,
    /// The directories to make in the tmpfs, shallow first, ending with
    /// `path` itself (the mount point the copy is attached to).
    mkdirs: Vec<CString>,
}

/// At most this many writable directories are kept inside one hidden
/// directory: their descriptors are held in a fixed array while the tmpfs
/// is built (no allocation in a vfork'd child).
const MAX_KEEP: usize = 4;

/// One mount step.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Op {
    Cover(CoverKind, CString),
    /// An empty tmpfs over a directory with writable directories beneath it
    /// put back; the tmpfs is read-only once they are in place.
    HideDirKeeping {
        dir: CString,
        keep: Vec<Keep>,
    },
}

/// The mount steps for one protected set, in the order they must run
/// (shallow paths first, so a later bind never hides an earlier one).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShieldPlan {
    ops: Vec<Op>,
    /// Protected or hidden paths that do not exist: a name cannot be covered
    /// before it exists, so these stay unprotected (for diagnostics).
    missing: Vec<PathBuf>,
}

/// What to protect, as the profile and the caller state it.
#[derive(Debug, Clone, Default)]
pub struct ShieldInput {
    pub read_only: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    /// Directories that stay writable even beneath a read-only path.
    pub writable: Vec<PathBuf>,
    /// Directories covered by an empty tmpfs for reasons other than secrecy
    /// (the system buses).
    pub hide_dirs: Vec<PathBuf>,
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// The mount points of this process's namespace.
fn mount_points() -> Result<BTreeSet<PathBuf>, SandboxError> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| SandboxError::step("mount namespace", format!("mountinfo: {e}")))?;
    Ok(info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mountinfo(p)))
        .collect())
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            if let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|oct| u8::from_str_radix(oct, 8).ok())
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cstring(p: &Path) -> Result<CString, SandboxError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        SandboxError::step(
            "mount namespace",
            format!("{} contains a NUL byte", p.display()),
        )
    })
}

impl ShieldPlan {
    /// Resolves every path (symlinks included: a mount lands on the real
    /// path), drops what an earlier step already covers, adds the pins, and
    /// orders the steps.
    pub fn new(input: &ShieldInput) -> Result<ShieldPlan, SandboxError> {
        let mut missing = Vec::new();
        // A missing writable directory or bus directory leaves nothing
        // unprotected: only protected and hidden paths are reported.
        let mut resolve = |list: &[PathBuf],
                           kind: CoverKind,
                           report_missing: bool|
         -> Vec<(PathBuf, CoverKind, bool)> {
            let mut out = Vec::new();
            for p in list {
                match std::fs::canonicalize(p) {
                    Ok(real) => {
                        let is_dir = real.is_dir();
                        out.push((real, kind, is_dir));
                    }
                    Err(_) => {
                        if report_missing && !missing.contains(p) {
                            missing.push(p.clone());
                        }
                    }
                }
            }
            out
        };
        let mut wanted = resolve(&input.hidden, CoverKind::HideDir, true);
        wanted.extend(resolve(&input.read_only, CoverKind::ReadOnly, true));
        let buses: Vec<PathBuf> = resolve(&input.hide_dirs, CoverKind::HideDir, false)
            .into_iter()
            .map(|b| b.0)
            .collect();
        let writable = resolve(&input.writable, CoverKind::Writable, false);
        // A hidden file is covered with /dev/null, a directory with a tmpfs.
        for w in wanted.iter_mut() {
            if w.1 == CoverKind::HideDir && !w.2 {
                w.1 = CoverKind::HideFile;
            }
        }
        let hidden_dirs: Vec<PathBuf> = wanted
            .iter()
            .filter(|w| w.1 == CoverKind::HideDir)
            .map(|w| w.0.clone())
            .collect();
        let read_only_dirs: Vec<PathBuf> = wanted
            .iter()
            .filter(|w| w.1 == CoverKind::ReadOnly && w.2)
            .map(|w| w.0.clone())
            .collect();
        let mut steps: BTreeSet<(usize, CoverKind, PathBuf)> = BTreeSet::new();
        for (path, kind, _) in &wanted {
            // Inside a hidden directory there is nothing left to cover; inside
            // a read-only one only what must stay hidden.
            let strictly_inside =
                |dirs: &[PathBuf]| dirs.iter().any(|d| path != d && path.starts_with(d));
            if strictly_inside(&hidden_dirs) || strictly_inside(&buses) {
                continue;
            }
            if *kind == CoverKind::ReadOnly && strictly_inside(&read_only_dirs) {
                continue;
            }
            // A directory both read-only and hidden is only hidden (its
            // tmpfs is read-only too).
            if *kind == CoverKind::ReadOnly && hidden_dirs.contains(path) {
                continue;
            }
            steps.insert((depth(path), *kind, path.clone()));
        }
        // A writable directory beneath a hidden one is kept by the outermost
        // hidden directory above it (the one that gets the tmpfs).
        let mut keeps: std::collections::BTreeMap<PathBuf, Vec<PathBuf>> = Default::default();
        for (path, _, is_dir) in &writable {
            if !*is_dir {
                continue;
            }
            let outer_hidden = hidden_dirs
                .iter()
                .filter(|d| path != *d && path.starts_with(d))
                .min_by_key(|d| depth(d));
            if let Some(h) = outer_hidden {
                // A hidden directory beneath the bus directories is not
                // covered at all (nothing is beneath an empty bus tmpfs).
                if !buses.iter().any(|b| h != b && h.starts_with(b)) {
                    keeps.entry(h.clone()).or_default().push(path.clone());
                }
                continue;
            }
            if hidden_dirs.contains(path) {
                // Both hidden and writable: hidden wins (fail closed).
                continue;
            }
            let under_read_only = read_only_dirs
                .iter()
                .any(|d| path != d && path.starts_with(d));
            if under_read_only {
                steps.insert((depth(path), CoverKind::Writable, path.clone()));
            }
        }
        // The bus directories hold nothing of sysward's: covered, not pinned.
        for bus in &buses {
            if !hidden_dirs.iter().any(|h| bus.starts_with(h)) {
                steps.insert((depth(bus), CoverKind::HideDir, bus.clone()));
            }
        }
        // Pins: every ancestor of a covered path up to `/` that is not a mount
        // point already (a mount point cannot be renamed or removed either)
        // and is not itself covered.
        let mounts = mount_points()?;
        let covered: BTreeSet<PathBuf> = steps.iter().map(|s| s.2.clone()).collect();
        let mut pins = BTreeSet::new();
        for (_, kind, path) in &steps {
            if matches!(kind, CoverKind::Writable) || buses.contains(path) {
                continue;
            }
            let mut cur = path.parent();
            while let Some(dir) = cur {
                if dir == Path::new("/") {
                    break;
                }
                if !mounts.contains(dir)
                    && !covered.contains(dir)
                    && !hidden_dirs.iter().any(|h| dir.starts_with(h))
                {
                    pins.insert(dir.to_path_buf());
                }
                cur = dir.parent();
            }
        }
        // A pin beneath a read-only directory is not needed: the read-only
        // mount already refuses the rename.
        for dir in pins {
            if !read_only_dirs.iter().any(|d| dir.starts_with(d)) {
                steps.insert((depth(&dir), CoverKind::Pin, dir));
            }
        }
        let mut ops = Vec::with_capacity(steps.len());
        for (_, kind, path) in steps {
            let c = cstring(&path)?;
            let op = match keeps.get(&path) {
                Some(kept) if kind == CoverKind::HideDir => keeping(&path, c, kept)?,
                _ => Op::Cover(kind, c),
            };
            ops.push(op);
        }
        Ok(ShieldPlan { ops, missing })
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The protected paths that do not exist (and so are not covered).
    pub fn missing(&self) -> &[PathBuf] {
        &self.missing
    }

    /// The steps, for tests and diagnostics: a directory kept inside a
    /// hidden one is listed as a writable step right after it.
    pub fn steps(&self) -> impl Iterator<Item = (CoverKind, &Path)> {
        fn path(c: &CString) -> &Path {
            Path::new(std::ffi::OsStr::from_bytes(c.as_bytes()))
        }
        self.ops.iter().flat_map(move |op| match op {
            Op::Cover(k, c) => vec![(*k, path(c))],
            Op::HideDirKeeping { dir, keep } => std::iter::once((CoverKind::HideDir, path(dir)))
                .chain(keep.iter().map(|k| (CoverKind::Writable, path(&k.path))))
                .collect(),
        })
    }

    /// unshare(CLONE_NEWNS), `/` made private recursively (nothing done here
    /// reaches the host, and later host mounts do not reach here), then every
    /// step. Raw system calls on prepared strings only: a vfork'd child may
    /// call it. An error names the step and the errno.
    pub fn enter_new_namespace(&self) -> Result<(), (&'static str, i32)> {
        // SAFETY: integer argument only.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } < 0 {
            return Err(("unshare", errno()));
        }
        // SAFETY: static NUL-terminated strings, null where mount(2) allows it.
        let rc = unsafe {
            libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            return Err(("make / private", errno()));
        }
        self.apply()
    }

    /// Every step, in order, in the current (private) mount namespace.
    pub fn apply(&self) -> Result<(), (&'static str, i32)> {
        for op in &self.ops {
            match op {
                Op::Cover(kind, path) => apply_one(*kind, path).map_err(|e| (kind.name(), e))?,
                Op::HideDirKeeping { dir, keep } => hide_keeping(dir, keep)?,
            }
        }
        Ok(())
    }
}

/// The step that hides `dir` and keeps the writable directories `kept`
/// (each strictly beneath it) inside.
fn keeping(dir: &Path, c: CString, kept: &[PathBuf]) -> Result<Op, SandboxError> {
    if kept.len() > MAX_KEEP {
        return Err(SandboxError::step(
            "mount namespace",
            format!(
                "more than {MAX_KEEP} writable directories beneath the hidden {}",
                dir.display()
            ),
        ));
    }
    let mut keep = Vec::with_capacity(kept.len());
    for k in kept {
        let Ok(rel) = k.strip_prefix(dir) else {
            continue;
        };
        let mut cur = dir.to_path_buf();
        let mut mkdirs = Vec::new();
        for comp in rel.components() {
            cur.push(comp);
            mkdirs.push(cstring(&cur)?);
        }
        keep.push(Keep {
            path: cstring(k)?,
            mkdirs,
        });
    }
    Ok(Op::HideDirKeeping { dir: c, keep })
}

/// `struct mount_attr` of mount_setattr(2).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const AT_RECURSIVE: libc::c_uint = 0x8000;
/// mount_setattr is 442 on every architecture.
const SYS_MOUNT_SETATTR: libc::c_long = 442;

fn bind(source: &CString, target: &CString, flags: libc::c_ulong) -> Result<(), i32> {
    // SAFETY: NUL-terminated strings that outlive the call; null fstype and data.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | flags,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// Sets `attrs` on the mount at `path` and every mount beneath it, leaving
/// its other flags as they were.
fn set_attrs(path: &CString, attrs: u64) -> Result<(), i32> {
    mount_setattr(path, attrs, 0, AT_RECURSIVE)
}

/// Sets `attrs` on the mount at `path` only (the mounts beneath keep theirs).
fn set_attrs_one(path: &CString, attrs: u64) -> Result<(), i32> {
    mount_setattr(path, attrs, 0, 0)
}

/// Makes the mount at `path` writable again: a bind copies the read-only
/// flag of the mount it was taken from (a directory beneath a read-only
/// cover), and a writable directory must stay writable.
fn clear_read_only(path: &CString) -> Result<(), i32> {
    mount_setattr(path, 0, MOUNT_ATTR_RDONLY, 0)
}

fn mount_setattr(path: &CString, set: u64, clear: u64, flags: libc::c_uint) -> Result<(), i32> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: `attr` is a live, correctly laid out struct mount_attr the
    // kernel only reads; `path` is NUL-terminated.
    let rc = unsafe {
        libc::syscall(
            SYS_MOUNT_SETATTR,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const OPEN_TREE_CLOEXEC: libc::c_uint = libc::O_CLOEXEC as libc::c_uint;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
/// open_tree and move_mount are 428 and 429 on every architecture.
const SYS_OPEN_TREE: libc::c_long = 428;
const SYS_MOVE_MOUNT: libc::c_long = 429;

fn close_all(fds: &[libc::c_int]) {
    for fd in fds {
        // SAFETY: descriptors this step opened and nothing else uses.
        unsafe { libc::close(*fd) };
    }
}

/// A detached copy of the mount tree at `path` (what a recursive bind would
/// attach), as a descriptor.
fn clone_tree(path: &CString) -> Result<libc::c_int, i32> {
    // SAFETY: `path` is NUL-terminated; integer flags.
    let fd = unsafe {
        libc::syscall(
            SYS_OPEN_TREE,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        Err(errno())
    } else {
        Ok(fd as libc::c_int)
    }
}

/// Attaches the detached tree `fd` at `target`.
fn attach(fd: libc::c_int, target: &CString) -> Result<(), i32> {
    // SAFETY: an empty NUL-terminated string with MOVE_MOUNT_F_EMPTY_PATH
    // names `fd` itself; `target` is NUL-terminated.
    let rc = unsafe {
        libc::syscall(
            SYS_MOVE_MOUNT,
            fd,
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// An empty tmpfs over `dir` with each kept directory attached back at its
/// own path, then the tmpfs alone (not the kept mounts) made read-only.
fn hide_keeping(dir: &CString, keep: &[Keep]) -> Result<(), (&'static str, i32)> {
    let mut fds = [-1 as libc::c_int; MAX_KEEP];
    let n = keep.len().min(MAX_KEEP);
    for i in 0..n {
        match clone_tree(&keep[i].path) {
            Ok(fd) => fds[i] = fd,
            Err(e) => {
                close_all(&fds[..i]);
                return Err(("keep a writable directory", e));
            }
        }
    }
    let result = (|| {
        // SAFETY: static or caller-owned NUL-terminated strings.
        let rc = unsafe {
            libc::mount(
                c"tmpfs".as_ptr(),
                dir.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=0755".as_ptr().cast(),
            )
        };
        if rc < 0 {
            return Err(("hide a directory", errno()));
        }
        for (i, k) in keep.iter().take(n).enumerate() {
            for d in &k.mkdirs {
                // SAFETY: a NUL-terminated path; an integer mode.
                if unsafe { libc::mkdir(d.as_ptr(), 0o755) } < 0 && errno() != libc::EEXIST {
                    return Err(("keep a writable directory (mkdir)", errno()));
                }
            }
            attach(fds[i], &k.path).map_err(|e| ("keep a writable directory (attach)", e))?;
            clear_read_only(&k.path).map_err(|e| ("keep a writable directory (writable)", e))?;
        }
        set_attrs_one(
            dir,
            MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        )
        .map_err(|e| ("hide a directory (read-only)", e))
    })();
    close_all(&fds[..n]);
    result
}

fn apply_one(kind: CoverKind, path: &CString) -> Result<(), i32> {
    match kind {
        CoverKind::Pin => bind(path, path, libc::MS_REC),
        CoverKind::Writable => {
            bind(path, path, libc::MS_REC)?;
            clear_read_only(path)
        }
        CoverKind::ReadOnly => {
            bind(path, path, libc::MS_REC)?;
            set_attrs(
                path,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            )
        }
        CoverKind::HideFile => {
            bind(&c"/dev/null".into(), path, 0)?;
            set_attrs(
                path,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            )
        }
        CoverKind::HideDir => {
            // SAFETY: static or caller-owned NUL-terminated strings.
            let rc = unsafe {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=4k,mode=0555".as_ptr().cast(),
                )
            };
            if rc < 0 {
                Err(errno())
            } else {
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo(r"/x\134y"), r"/x\y");
    }

    #[test]
    fn steps_run_shallow_first_and_pin_ancestors() {
        let base = sysward_testdir::RemoveOnDrop::fresh_dir("shield-plan");
        let project = base.join("proj");
        std::fs::create_dir_all(project.join("secrets")).unwrap();
        std::fs::create_dir_all(project.join(".agent/tmp")).unwrap();
        std::fs::write(project.join("init.conf"), "x").unwrap();
        std::fs::write(project.join("audit.log"), "x").unwrap();
        let plan = ShieldPlan::new(&ShieldInput {
            read_only: vec![
                project.join("audit.log"),
                project.join(".agent"),
                project.join("absent"),
            ],
            hidden: vec![project.join("secrets"), project.join("init.conf")],
            writable: vec![project.join(".agent/tmp")],
            hide_dirs: Vec::new(),
        })
        .unwrap();
        let steps: Vec<(CoverKind, PathBuf)> =
            plan.steps().map(|(k, p)| (k, p.to_path_buf())).collect();
        let real = std::fs::canonicalize(&project).unwrap();
        let find = |p: &Path| steps.iter().position(|s| s.1 == p);
        let pin = find(&real).expect("the project directory is pinned");
        assert_eq!(steps[pin].0, CoverKind::Pin);
        let secrets = find(&real.join("secrets")).unwrap();
        assert_eq!(steps[secrets].0, CoverKind::HideDir);
        assert_eq!(
            steps[find(&real.join("init.conf")).unwrap()].0,
            CoverKind::HideFile
        );
        let agent = find(&real.join(".agent")).unwrap();
        assert_eq!(steps[agent].0, CoverKind::ReadOnly);
        let tmp = find(&real.join(".agent/tmp")).unwrap();
        assert_eq!(steps[tmp].0, CoverKind::Writable);
        assert!(pin < secrets && pin < agent && agent < tmp);
        assert_eq!(plan.missing(), &[project.join("absent")]);
    }
    #[test]
    fn a_writable_directory_beneath_a_hidden_one_is_kept_in_the_plan() {
        let base = sysward_testdir::RemoveOnDrop::fresh_dir("shield-keep");
        let state = base.join("state");
        std::fs::create_dir_all(state.join(".agent/tmp")).unwrap();
        let plan = ShieldPlan::new(&ShieldInput {
            read_only: vec![state.join(".agent")],
            hidden: vec![state.clone()],
            writable: vec![state.join(".agent/tmp")],
            hide_dirs: Vec::new(),
        })
        .unwrap();
        let real = std::fs::canonicalize(&state).unwrap();
        let steps: Vec<(CoverKind, PathBuf)> =
            plan.steps().map(|(k, p)| (k, p.to_path_buf())).collect();
        let hide = steps.iter().position(|s| s.1 == real).unwrap();
        assert_eq!(steps[hide].0, CoverKind::HideDir);
        assert_eq!(
            steps[hide + 1],
            (CoverKind::Writable, real.join(".agent/tmp"))
        );
        // Nothing else beneath the hidden directory is covered.
        assert_eq!(
            steps.iter().filter(|s| s.1.starts_with(&real)).count(),
            2,
            "{steps:?}"
        );
    }

    /// Applies a plan in a mount namespace of a thread's own (as the broker's
    /// prepared namespaces are made) and checks what the thread sees.
    #[test]
    fn a_hidden_directory_keeps_its_writable_directory_usable() {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root (mount namespaces)");
            return;
        }
        let base = sysward_testdir::RemoveOnDrop::fresh_dir("shield-keep-ns");
        let state = base.join("state");
        std::fs::create_dir_all(state.join(".agent/tmp")).unwrap();
        std::fs::create_dir_all(state.join(".agent/approvals")).unwrap();
        std::fs::write(state.join("audit.log"), "secret").unwrap();
        std::fs::write(state.join(".agent/approvals/a.json"), "secret").unwrap();
        // As in the packaged layout: the state directory is both read-only
        // and hidden, and so is a directory beneath it.
        let plan = ShieldPlan::new(&ShieldInput {
            read_only: vec![state.clone(), state.join(".agent")],
            hidden: vec![state.clone()],
            writable: vec![state.join(".agent/tmp")],
            hide_dirs: Vec::new(),
        })
        .unwrap();
        let st = state.clone();
        let seen = std::thread::spawn(move || -> Result<(), String> {
            plan.enter_new_namespace()
                .map_err(|(w, e)| format!("{w}: errno {e}"))?;
            let mut wrong = Vec::new();
            if std::fs::read(st.join("audit.log")).is_ok() {
                wrong.push("the audit log is readable".to_string());
            }
            if std::fs::read(st.join(".agent/approvals/a.json")).is_ok() {
                wrong.push("an approval is readable".to_string());
            }
            let names: Vec<String> = std::fs::read_dir(&st)
                .map_err(|e| e.to_string())?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect();
            if names != [".agent"] {
                wrong.push(format!("the hidden directory lists {names:?}"));
            }
            match std::fs::write(st.join("new"), "x") {
                Err(e) if e.raw_os_error() == Some(libc::EROFS) => {}
                other => wrong.push(format!("a new file in the hidden directory: {other:?}")),
            }
            if let Err(e) = std::fs::write(st.join(".agent/tmp/scratch"), "kept") {
                wrong.push(format!("the scratch directory is not writable: {e}"));
            }
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join("; "))
            }
        })
        .join()
        .unwrap();
        // The scratch write reached the host's directory.
        let on_host = std::fs::read_to_string(state.join(".agent/tmp/scratch"));
        seen.unwrap();
        assert_eq!(on_host.unwrap(), "kept");
    }
}
