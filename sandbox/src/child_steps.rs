//! The confinement steps a freshly forked child applies before `execve`.
//!
//! The parent (the broker) is multi-threaded: between fork and exec the child
//! may only make system calls — no allocation, no lock, no `std::fs`. Every
//! input is prepared by [`crate::jail::Jail::prepare`]; every step here is a
//! raw system call on that data, and a failure is reported as the step's
//! index and the errno (both plain integers).

use crate::sys::errno;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// The steps, in the order they run; a failure names one by index.
pub const STEPS: [&str; 19] = [
    "process group",
    "controlling terminal",
    "rlimits",
    "cgroup",
    "unused",
    "mount namespace (sysward's own paths)",
    "close fds",
    "capabilities (bounding)",
    "setgroups",
    "setresgid",
    "setresuid",
    "capabilities",
    "non_dumpable",
    "no_new_privs",
    "landlock",
    "seccomp",
    "cwd",
    "signals",
    "parent death signal",
];
/// Index of "cwd" in [`STEPS`]: the caller reports it as "cannot enter …".
pub const STEP_CWD: u8 = 16;
const STEP_MOUNTS: u8 = 5;
const STEP_SIGNALS: u8 = 17;
const STEP_PDEATHSIG: u8 = 18;

/// A failed step: its index in [`STEPS`] and the errno.
pub type Failure = (u8, i32);

/// The action's mount namespace.
pub enum ChildMounts {
    /// The host's (read-only actions: Landlock alone bounds them).
    Host,
    /// setns into a namespace the broker prepared for this protected set.
    Enter(Arc<OwnedFd>),
    /// unshare one and apply the plan here.
    Build(Arc<crate::shield::ShieldPlan>),
}

/// Everything the child needs, owned, prepared by the parent.
pub struct ChildPlan {
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// `cgroup.procs` of the action's cgroup, opened for writing (used when
    /// the child could not be created inside the cgroup).
    pub cgroup_procs: Option<OwnedFd>,
    /// The action's cgroup directory (for clone3's CLONE_INTO_CGROUP).
    pub cgroup_dir: Option<OwnedFd>,
    pub mounts: ChildMounts,
    /// Capabilities kept, as a mask; every other is dropped from every set.
    pub keep_caps: u64,
    /// The kernel's highest capability number.
    pub last_cap: u32,
    /// Keep `keep_caps` across the uid change and execve (non-root uid).
    pub ambient: bool,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
    /// This process: the action dies with it (the parent-death signal), and
    /// it must still be there once the signal is set.
    pub parent: libc::pid_t,
    pub landlock_ruleset: Arc<OwnedFd>,
    pub seccomp: Arc<Vec<libc::sock_filter>>,
    pub cwd: CString,
}

/// `rc < 0` → the errno of step `step`.
fn check(step: u8, rc: libc::c_long) -> Result<libc::c_long, Failure> {
    if rc < 0 {
        Err((step, errno()))
    } else {
        Ok(rc)
    }
}

/// A read-back that does not match: reported as EPERM at `step`.
fn ensure(step: u8, ok: bool) -> Result<(), Failure> {
    if ok {
        Ok(())
    } else {
        Err((step, libc::EPERM))
    }
}

/// Integer-only prctl.
fn prctl(step: u8, option: libc::c_int, a: libc::c_ulong) -> Result<libc::c_long, Failure> {
    // SAFETY: the options used here take integer arguments only.
    let rc = unsafe { libc::prctl(option, a, 0 as libc::c_ulong, 0 as libc::c_ulong, 0) };
    check(step, rc as libc::c_long)
}

/// prctl(PR_CAP_AMBIENT, `op`, `cap`).
fn ambient(op: libc::c_int, cap: u32) -> Result<libc::c_long, Failure> {
    // SAFETY: integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            op as libc::c_ulong,
            cap as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    check(11, rc as libc::c_long)
}

impl ChildPlan {
    /// Applies every step in order. Call only in the forked child;
    /// `in_cgroup`: it was created inside the action's cgroup already.
    pub fn apply(&self, in_cgroup: bool) -> Result<(), Failure> {
        // SAFETY: integer arguments only.
        check(0, unsafe { libc::setpgid(0, 0) } as libc::c_long)?;
        detach_tty()?;
        for &(resource, value) in &self.rlimits {
            let lim = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            // SAFETY: `lim` is a live local rlimit the kernel only reads.
            check(2, unsafe { libc::setrlimit(resource, &lim) }
                as libc::c_long)?;
        }
        if let (false, Some(fd)) = (in_cgroup, &self.cgroup_procs) {
            // "0": the writing process.
            // SAFETY: a one-byte static buffer written to the cgroup.procs fd this plan owns.
            let rc = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            check(3, rc as libc::c_long)?;
        }
        // Every action stays in the host's network namespace: seccomp and
        // Landlock keep one without network from sending.
        match &self.mounts {
            ChildMounts::Host => {}
            ChildMounts::Enter(ns) => {
                check(
                    STEP_MOUNTS,
                    // SAFETY: setns on the namespace fd this plan owns.
                    unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNS) } as libc::c_long,
                )?;
            }
            ChildMounts::Build(plan) => {
                plan.enter_new_namespace()
                    .map_err(|(_, e)| (STEP_MOUNTS, e))?;
            }
        }
        // Whatever the parent left open dies at execve (Rust opens with
        // O_CLOEXEC already; this covers anything that did not). The ruleset
        // and namespace fds stay usable until then.
        // SAFETY: integer arguments only (close_range marks fds close-on-exec).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            )
        };
        check(6, rc)?;
        self.credentials()?;
        // After the credential change, which clears it: a broker that dies
        // (kill -9, crash) takes its running action with it instead of
        // leaving it unwatched, untimed and unaudited.
        prctl(
            STEP_PDEATHSIG,
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
        )?;
        // SAFETY: getppid has no preconditions.
        ensure(STEP_PDEATHSIG, unsafe { libc::getppid() } == self.parent)?;
        prctl(13, libc::PR_SET_NO_NEW_PRIVS, 1)?;
        ensure(13, prctl(13, libc::PR_GET_NO_NEW_PRIVS, 0)? == 1)?;
        // SAFETY: the ruleset fd this plan owns; no memory is passed.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.landlock_ruleset.as_raw_fd(),
                0,
            )
        };
        check(14, rc)?;
        let prog = libc::sock_fprog {
            len: self.seccomp.len() as libc::c_ushort,
            filter: self.seccomp.as_ptr().cast_mut(),
        };
        // SAFETY: `prog` points at this plan's filter, which outlives the call; the kernel copies it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0,
                &prog as *const libc::sock_fprog,
            )
        };
        check(15, rc)?;
        // As the action's uid: the cwd is checked with its permissions.
        // SAFETY: `cwd` is a NUL-terminated string this plan owns.
        check(16, unsafe { libc::chdir(self.cwd.as_ptr()) }
            as libc::c_long)?;
        // SAFETY: umask takes an integer and cannot fail.
        unsafe { libc::umask(0o022) };
        crate::sys::reset_signals()
            .map_err(|e| (STEP_SIGNALS, e.raw_os_error().unwrap_or(libc::EIO)))
    }

    /// Bounding set, groups, gid, uid, then the other capability sets, each
    /// read back.
    fn credentials(&self) -> Result<(), Failure> {
        let kept = |n: u32| n < 64 && self.keep_caps & (1u64 << n) != 0;
        for n in 0..=self.last_cap {
            if !kept(n) {
                prctl(7, libc::PR_CAPBSET_DROP, n as libc::c_ulong)?;
            }
        }
        if self.ambient {
            prctl(7, libc::PR_SET_KEEPCAPS, 1)?;
        }
        // SAFETY: pointer and length describe this plan's live group list.
        check(8, unsafe {
            libc::syscall(libc::SYS_setgroups, self.groups.len(), self.groups.as_ptr())
        })?;
        // SAFETY: integer arguments only.
        check(9, unsafe {
            libc::syscall(libc::SYS_setresgid, self.gid, self.gid, self.gid)
        })?;
        // SAFETY: integer arguments only.
        check(10, unsafe {
            libc::syscall(libc::SYS_setresuid, self.uid, self.uid, self.uid)
        })?;
        let (mut r, mut e, mut s) = (0u32, 0u32, 0u32);
        // SAFETY: three pointers to live local u32s.
        check(10, unsafe {
            libc::syscall(libc::SYS_getresuid, &mut r, &mut e, &mut s)
        })?;
        ensure(10, (r, e, s) == (self.uid, self.uid, self.uid))?;
        // SAFETY: three pointers to live local u32s.
        check(9, unsafe {
            libc::syscall(libc::SYS_getresgid, &mut r, &mut e, &mut s)
        })?;
        ensure(9, (r, e, s) == (self.gid, self.gid, self.gid))?;
        // SAFETY: size 0 with a null pointer only asks for the count.
        let n = check(8, unsafe {
            libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<libc::gid_t>())
        })?;
        ensure(8, n as usize == self.groups.len())?;

        let io = |step: u8| move |e: std::io::Error| (step, e.raw_os_error().unwrap_or(libc::EIO));
        crate::creds::capset_all(self.keep_caps).map_err(io(11))?;
        prctl(
            11,
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        )?;
        if self.ambient {
            for n in (0..=self.last_cap).filter(|&n| kept(n)) {
                ambient(libc::PR_CAP_AMBIENT_RAISE, n)?;
            }
        }
        // Read back from the kernel. Bounding and ambient: every
        // PR_CAPBSET_DROP and the CLEAR_ALL above returned success, which the
        // kernel only does once the capability is gone (a read-back per
        // capability doubled this step); raised ambient ones are checked.
        let (eff, prm, inh) = crate::creds::capget_all().map_err(io(11))?;
        ensure(
            11,
            (eff, prm, inh) == (self.keep_caps, self.keep_caps, self.keep_caps),
        )?;
        if self.ambient {
            for n in (0..=self.last_cap).filter(|&n| kept(n)) {
                ensure(11, ambient(libc::PR_CAP_AMBIENT_IS_SET, n)? == 1)?;
            }
        }
        if self.uid != 0 {
            // The uid change reset it to fs.suid_dumpable.
            prctl(12, libc::PR_SET_DUMPABLE, 0)?;
            ensure(12, prctl(12, libc::PR_GET_DUMPABLE, 0)? == 0)?;
        }
        Ok(())
    }
}

/// TIOCNOTTY on /dev/tty (no controlling terminal: nothing to do), then
/// checks that /dev/tty can no longer be opened.
fn detach_tty() -> Result<(), Failure> {
    let flags = libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK;
    // SAFETY: a static NUL-terminated path; the fd is closed below.
    let fd = unsafe { libc::open(c"/dev/tty".as_ptr(), flags) };
    if fd < 0 {
        let e = errno();
        return if e == libc::ENXIO || e == libc::ENOENT {
            Ok(())
        } else {
            Err((1, e))
        };
    }
    // SAFETY: TIOCNOTTY takes no argument; fd is live.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCNOTTY) };
    let e = errno();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    if rc < 0 {
        return Err((1, e));
    }
    // SAFETY: as above; this open must now fail.
    let again = unsafe { libc::open(c"/dev/tty".as_ptr(), flags) };
    if again >= 0 {
        // SAFETY: closing the fd just opened.
        unsafe { libc::close(again) };
        return Err((1, libc::EPERM));
    }
    Ok(())
}
