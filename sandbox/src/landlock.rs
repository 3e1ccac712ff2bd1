//! Landlock rulesets, always fully enforced.
//!
//! Every filesystem right of the ABI we target is handled, so anything not
//! granted by a rule is denied; TCP bind/connect are handled unless a profile
//! has the host network; signal and abstract-unix scopes are set unless the
//! profile must signal outside its domain. `CompatLevel::HardRequirement` makes
//! the crate fail rather than drop a right the kernel lacks, and the returned
//! status must read `FullyEnforced` — anything else is an error.

use crate::SandboxError;
use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope, ABI,
};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The ABI whose rights we handle: Linux 6.15 (FS incl. ioctl_dev, TCP ports,
/// scopes). Raising it is a deliberate, tested change.
pub const TARGET_ABI: ABI = ABI::V7;

/// The Landlock ABI this kernel offers to this process, or why there is
/// none: the errno of the version query tells a kernel without Landlock from
/// a seccomp filter around the process (a container manager's) that refuses
/// the call, which the crate reports alike as "incompatible".
pub fn probe_abi() -> Result<i64, String> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // only returns the ABI version; no memory is passed.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if abi > 0 {
        return Ok(abi);
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        // The version query needs no privilege: EPERM comes from a filter.
        Some(libc::EPERM) => "landlock_create_ruleset() is refused with EPERM by a seccomp \
             filter around this process (a container manager's: with systemd-nspawn set \
             SYSTEMD_SECCOMP=0 in its environment; with docker or podman use a seccomp profile \
             that allows the landlock_* calls; or a unit's SystemCallFilter=)"
            .to_string(),
        Some(libc::ENOSYS) => "the kernel has no Landlock (landlock_create_ruleset() is ENOSYS: \
             CONFIG_SECURITY_LANDLOCK=y and Linux 5.13 or later are needed)"
            .to_string(),
        Some(libc::EOPNOTSUPP) => "Landlock is built into the kernel but not enabled \
             (landlock_create_ruleset() is EOPNOTSUPP): boot with lsm=...,landlock"
            .to_string(),
        _ => format!("landlock_create_ruleset(): {e}"),
    })
}

/// Read and execute beneath a path.
pub fn read_access() -> BitFlags<AccessFs> {
    AccessFs::from_read(TARGET_ABI)
}

/// Every write right (create, remove, rename, truncate, ioctl on devices…).
pub fn write_access() -> BitFlags<AccessFs> {
    AccessFs::from_write(TARGET_ABI)
}

/// A rule's target: an `O_PATH` descriptor plus whether it is a directory.
#[derive(Debug)]
pub struct Target {
    pub fd: OwnedFd,
    pub is_dir: bool,
}

/// Opens `path` as an `O_PATH` descriptor. With `nofollow` a symlink as the
/// last component is refused (reported as `Ok(None)`), so a rule never lands
/// on whatever a link points to.
pub fn open_target(path: &Path, nofollow: bool) -> Result<Option<Target>, std::io::Error> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    open_target_at(libc::AT_FDCWD, &c, nofollow)
}

/// `openat(dirfd, name, O_PATH|O_CLOEXEC[|O_NOFOLLOW])` plus the file type.
pub fn open_target_at(
    dirfd: libc::c_int,
    name: &CString,
    nofollow: bool,
) -> Result<Option<Target>, std::io::Error> {
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let fd = unsafe { libc::openat(dirfd, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `st` points to writable memory of the right size; fd is live.
    let rc = unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so the struct is initialised.
    let mode = unsafe { st.assume_init() }.st_mode & libc::S_IFMT;
    if mode == libc::S_IFLNK {
        return Ok(None);
    }
    Ok(Some(Target {
        fd,
        is_dir: mode == libc::S_IFDIR,
    }))
}

/// What a ruleset allows; everything else is denied.
#[derive(Debug, Default)]
pub struct LandlockRules {
    /// (target, rights) pairs; rights are masked to the file rights for
    /// non-directories.
    pub grants: Vec<(Target, BitFlags<AccessFs>)>,
    /// Handle TCP bind/connect (deny all but `connect_ports` / `bind_ports`).
    pub restrict_tcp: bool,
    pub connect_ports: Vec<u16>,
    pub bind_ports: Vec<u16>,
    /// Deny signals to processes outside the domain.
    pub scope_signals: bool,
    /// Deny connecting to abstract unix sockets created outside the domain.
    pub scope_abstract_unix: bool,
}

impl LandlockRules {
    /// Grants `access` beneath `path`, following symlinks in it (the caller
    /// names a path it trusts). A missing path is an error.
    pub fn grant_path(
        &mut self,
        path: &Path,
        access: BitFlags<AccessFs>,
    ) -> Result<(), SandboxError> {
        match open_target(path, false) {
            Ok(Some(t)) => {
                self.grants.push((t, access));
                Ok(())
            }
            Ok(None) => Err(SandboxError::step(
                "landlock",
                format!("{}: is a symlink", path.display()),
            )),
            Err(e) => Err(SandboxError::step(
                "landlock",
                format!("{}: {e}", path.display()),
            )),
        }
    }

    /// Builds the ruleset without enforcing it. The crate creates it (so a
    /// right this kernel lacks is a hard error, never silently dropped) and
    /// adds the port rules; path rules are added with the raw syscall because
    /// their file type is already known (the crate would fstat each again).
    pub fn build(self) -> Result<BuiltRuleset, SandboxError> {
        // When the kernel seems to lack Landlock, say why (only on failure:
        // the probe costs a system call).
        let err = |e: landlock::RulesetError| match probe_abi() {
            Err(why) => SandboxError::step("landlock", format!("{e}: {why}")),
            Ok(_) => SandboxError::step("landlock", e.to_string()),
        };
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(TARGET_ABI))
            .map_err(err)?;
        if self.restrict_tcp {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(TARGET_ABI))
                .map_err(err)?;
        }
        let mut scopes = BitFlags::<Scope>::EMPTY;
        if self.scope_signals {
            scopes |= Scope::Signal;
        }
        if self.scope_abstract_unix {
            scopes |= Scope::AbstractUnixSocket;
        }
        if !scopes.is_empty() {
            ruleset = ruleset.scope(scopes).map_err(err)?;
        }
        let mut created: RulesetCreated = ruleset.create().map_err(err)?;
        if self.restrict_tcp {
            for port in self.connect_ports {
                created = created
                    .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                    .map_err(err)?;
            }
            for port in self.bind_ports {
                created = created
                    .add_rule(NetPort::new(port, AccessNet::BindTcp))
                    .map_err(err)?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        let fd = fd.ok_or_else(|| {
            SandboxError::step(
                "landlock",
                "Landlock is not supported by this kernel".into(),
            )
        })?;
        let file_rights = AccessFs::from_file(TARGET_ABI);
        for (target, access) in self.grants {
            let access = if target.is_dir {
                access
            } else {
                access & file_rights
            };
            if access.is_empty() {
                continue;
            }
            add_path_rule(&fd, &target.fd, access.bits())?;
        }
        Ok(BuiltRuleset { fd })
    }
}

/// A created Landlock ruleset with all its rules, not yet enforced.
#[derive(Debug)]
pub struct BuiltRuleset {
    fd: OwnedFd,
}

impl BuiltRuleset {
    /// The ruleset's descriptor (to cache it or pass it to another process).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// Adopts a ruleset descriptor built elsewhere (the broker's cache),
    /// after checking that it really is a Landlock ruleset.
    pub fn from_fd(fd: OwnedFd) -> Result<BuiltRuleset, SandboxError> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|e| SandboxError::step("landlock", format!("inherited ruleset fd: {e}")))?;
        if link.as_os_str() != "anon_inode:[landlock-ruleset]" {
            return Err(SandboxError::step(
                "landlock",
                format!("inherited fd is {}, not a Landlock ruleset", link.display()),
            ));
        }
        Ok(BuiltRuleset { fd })
    }
}

/// `struct landlock_path_beneath_attr` (packed in the UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

fn add_path_rule(ruleset: &OwnedFd, target: &OwnedFd, access: u64) -> Result<(), SandboxError> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: target.as_raw_fd(),
    };
    // SAFETY: `attr` is a live, correctly laid out landlock_path_beneath_attr;
    // the kernel only reads it. Both fds are live for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0,
        )
    };
    if rc < 0 {
        return Err(SandboxError::step(
            "landlock",
            format!("add rule: {}", std::io::Error::last_os_error()),
        ));
    }
    Ok(())
}

/// Enforces a built ruleset on the calling thread (and its future children):
/// sets no_new_privs, then landlock_restrict_self. The ruleset was created
/// with every right of [`TARGET_ABI`] as a hard requirement, so success here
/// means fully enforced.
pub fn enforce(built: BuiltRuleset) -> Result<(), SandboxError> {
    crate::process::set_no_new_privs()?;
    // SAFETY: integer arguments only; the fd is live for the call.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, built.fd.as_raw_fd(), 0) };
    if rc < 0 {
        return Err(SandboxError::step(
            "landlock",
            format!("restrict_self: {}", std::io::Error::last_os_error()),
        ));
    }
    Ok(())
}

/// Expands "everything under `/` except `excluded`" into rules; see
/// [`grant_beneath_except`].
pub fn grant_all_except(
    rules: &mut LandlockRules,
    excluded: &[PathBuf],
    access: BitFlags<AccessFs>,
) -> Result<(), SandboxError> {
    grant_beneath_except(rules, Path::new("/"), excluded, access)
}

/// Grants `access` beneath `base` except beneath any of `excluded`: when no
/// excluded path lies under `base`, one rule on `base`; otherwise one rule on
/// every sibling along the way to each excluded path, and nothing inside one.
/// The excluded paths' ancestors get only ReadDir (when `access` has it), so
/// `ls /etc` works; as a Landlock rule covers a whole hierarchy, that lets the
/// names inside an excluded directory be listed, never its files opened. Symlinks met on the walk are never
/// granted: they resolve to a target judged on its own path. `base` itself is
/// canonicalised; a missing `base` grants nothing; a `base` inside an excluded
/// path grants nothing. Excluded paths count both as given and canonicalised.
pub fn grant_beneath_except(
    rules: &mut LandlockRules,
    base: &Path,
    excluded: &[PathBuf],
    access: BitFlags<AccessFs>,
) -> Result<(), SandboxError> {
    let base = match std::fs::canonicalize(base) {
        Ok(b) => b,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(()),
        Err(e) => {
            return Err(SandboxError::step(
                "landlock",
                format!("{}: {e}", base.display()),
            ))
        }
    };
    let base_c = components(&base);
    let mut ex: Vec<Vec<Vec<u8>>> = Vec::new();
    for p in excluded {
        if !p.is_absolute() {
            return Err(SandboxError::step(
                "landlock",
                format!("excluded path {} is not absolute", p.display()),
            ));
        }
        ex.push(components(p));
        if let Ok(real) = std::fs::canonicalize(p) {
            ex.push(components(&real));
        }
    }
    if ex.iter().any(|e| base_c.starts_with(e)) {
        return Ok(()); // base is inside (or is) an excluded path
    }
    let below: Vec<Vec<Vec<u8>>> = ex.into_iter().filter(|e| e.starts_with(&base_c)).collect();
    let target = open_target(&base, true)
        .map_err(|e| SandboxError::step("landlock", format!("{}: {e}", base.display())))?
        .ok_or_else(|| {
            SandboxError::step("landlock", format!("{} is a symlink", base.display()))
        })?;
    if below.is_empty() {
        rules.grants.push((target, access));
        return Ok(());
    }
    if !target.is_dir {
        return Ok(());
    }
    walk(rules, target.fd, &below, base_c.len(), access)
}

fn components(p: &Path) -> Vec<Vec<u8>> {
    p.components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.as_bytes().to_vec()),
            _ => None,
        })
        .collect()
}

fn walk(
    rules: &mut LandlockRules,
    dir: OwnedFd,
    ex: &[Vec<Vec<u8>>],
    depth: usize,
    access: BitFlags<AccessFs>,
) -> Result<(), SandboxError> {
    let names = read_dir_names(&dir)
        .map_err(|e| SandboxError::step("landlock", format!("listing for the allow-list: {e}")))?;
    // A directory on the way to an excluded path stays listable (`ls /`,
    // `ls /etc`, `find /etc`): ReadDir only. The rule covers its whole
    // hierarchy, so the *names* inside an excluded directory can be listed;
    // its files can never be opened.
    if access.contains(AccessFs::ReadDir) {
        let fd = dir
            .try_clone()
            .map_err(|e| SandboxError::step("landlock", format!("dup: {e}")))?;
        rules
            .grants
            .push((Target { fd, is_dir: true }, AccessFs::ReadDir.into()));
    }
    for (name, dtype) in names {
        let here: Vec<&Vec<Vec<u8>>> = ex.iter().filter(|c| c[depth] == name).collect();
        if here.iter().any(|c| c.len() == depth + 1) {
            continue; // excluded itself
        }
        let c = match CString::new(name.clone()) {
            Ok(c) => c,
            Err(_) => continue,
        };
        if dtype == DT_LNK {
            continue; // symlink: never granted
        }
        let opened = if dtype == DT_UNKNOWN {
            open_target_at(dir.as_raw_fd(), &c, true)
        } else {
            open_path_nofollow(dir.as_raw_fd(), &c).map(|fd| {
                Some(Target {
                    fd,
                    is_dir: dtype == DT_DIR,
                })
            })
        };
        let target = match opened {
            Ok(Some(t)) => t,
            Ok(None) => continue, // symlink
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue, // raced away
            // Swapped for a symlink since listing: O_NOFOLLOW|O_PATH opens the
            // link itself, which grants nothing beyond the link; skip it.
            Err(e) => {
                return Err(SandboxError::step(
                    "landlock",
                    format!("{}: {e}", String::from_utf8_lossy(&name)),
                ))
            }
        };
        // A stale d_type (entry replaced since the listing) fails closed: dir
        // rights on a non-directory are rejected by the kernel, and walking
        // into a non-directory fails on O_DIRECTORY.
        if here.is_empty() {
            rules.grants.push((target, access));
        } else if target.is_dir {
            let sub: Vec<Vec<Vec<u8>>> = here.into_iter().cloned().collect();
            walk(rules, target.fd, &sub, depth + 1, access)?;
        }
        // A non-directory on the way to an excluded path: not granted.
    }
    Ok(())
}

const DT_UNKNOWN: u8 = 0;
const DT_DIR: u8 = 4;
const DT_LNK: u8 = 10;

/// openat(dirfd, name, O_PATH|O_NOFOLLOW|O_CLOEXEC).
fn open_path_nofollow(dirfd: libc::c_int, name: &CString) -> Result<OwnedFd, std::io::Error> {
    // SAFETY: `name` is NUL-terminated and outlives the call.
    let fd = unsafe {
        libc::openat(
            dirfd,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Entry names and d_types of a directory given as an `O_PATH` fd.
fn read_dir_names(dir: &OwnedFd) -> Result<Vec<(Vec<u8>, u8)>, std::io::Error> {
    let dot = c".";
    // SAFETY: reopening "." relative to a live directory fd with a static path.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            dot.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by openat and is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut names = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: buf is a live, writable buffer of buf.len() bytes.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                fd.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n == 0 {
            break;
        }
        let n = n as usize;
        let mut off = 0usize;
        // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name\0
        while off + 19 <= n {
            let reclen = u16::from_ne_bytes([buf[off + 16], buf[off + 17]]) as usize;
            if reclen == 0 || off + reclen > n {
                break;
            }
            let dtype = buf[off + 18];
            let name_bytes = &buf[off + 19..off + reclen];
            let len = name_bytes
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(name_bytes.len());
            let name = &name_bytes[..len];
            if name != b"." && name != b".." {
                names.push((name.to_vec(), dtype));
            }
            off += reclen;
        }
    }
    Ok(names)
}
