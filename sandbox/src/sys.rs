//! Thin wrappers over the few raw system calls the confinement steps need.
//! Each wrapper keeps its `unsafe` to one line and turns `-1` into the errno.

use std::io;

fn check(rc: libc::c_long) -> io::Result<libc::c_long> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The errno of the last failed call (EIO if there is none). Reads a
/// thread-local integer only: safe in a vfork'd child.
pub fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// prctl with integer arguments only (no pointers).
pub fn prctl(option: libc::c_int, a: libc::c_ulong, b: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: every prctl option called through this wrapper takes integer
    // arguments only; no memory is passed to the kernel.
    let rc = unsafe { libc::prctl(option, a, b, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    check(rc as libc::c_long).map(|r| r as libc::c_int)
}

pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes only an integer flag set.
    check(unsafe { libc::unshare(flags) } as libc::c_long).map(|_| ())
}

pub fn setns(fd: libc::c_int, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: setns takes an fd and an integer; a bad fd is an error, not UB.
    check(unsafe { libc::setns(fd, nstype) } as libc::c_long).map(|_| ())
}

pub fn setgroups(groups: &[libc::gid_t]) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live slice of gid_t.
    check(unsafe { libc::setgroups(groups.len(), groups.as_ptr()) } as libc::c_long).map(|_| ())
}

pub fn setresgid(gid: libc::gid_t) -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::setresgid(gid, gid, gid) } as libc::c_long).map(|_| ())
}

pub fn setresuid(uid: libc::uid_t) -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::setresuid(uid, uid, uid) } as libc::c_long).map(|_| ())
}

pub fn getresuid() -> io::Result<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: the three pointers are to live local u32s.
    check(unsafe { libc::getresuid(&mut r, &mut e, &mut s) } as libc::c_long)?;
    Ok((r, e, s))
}

pub fn getresgid() -> io::Result<(u32, u32, u32)> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: the three pointers are to live local u32s.
    check(unsafe { libc::getresgid(&mut r, &mut e, &mut s) } as libc::c_long)?;
    Ok((r, e, s))
}

pub fn getgroups_count() -> io::Result<usize> {
    // SAFETY: size 0 with a null pointer only asks for the count.
    check(unsafe { libc::getgroups(0, std::ptr::null_mut()) } as libc::c_long).map(|n| n as usize)
}

/// close_range(first, last, flags).
pub fn close_range(first: u32, last: u32, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: integer arguments only; closing fds we own is the intent.
    check(unsafe { libc::syscall(libc::SYS_close_range, first, last, flags) }).map(|_| ())
}

pub fn dup2(old: libc::c_int, new: libc::c_int) -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::dup2(old, new) } as libc::c_long).map(|_| ())
}

pub fn setrlimit(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: value as libc::rlim_t,
        rlim_max: value as libc::rlim_t,
    };
    // SAFETY: the pointer is to a live local rlimit.
    check(unsafe { libc::setrlimit(resource, &lim) } as libc::c_long).map(|_| ())
}

pub fn getpid() -> libc::pid_t {
    // SAFETY: getpid cannot fail and takes no arguments.
    unsafe { libc::getpid() }
}

pub fn setsid() -> io::Result<()> {
    // SAFETY: no arguments.
    check(unsafe { libc::setsid() } as libc::c_long).map(|_| ())
}

/// setpgid(0, 0): a new process group led by the caller.
pub fn new_process_group() -> io::Result<()> {
    // SAFETY: integer arguments only.
    check(unsafe { libc::setpgid(0, 0) } as libc::c_long).map(|_| ())
}

pub fn getpgid(pid: libc::pid_t) -> io::Result<libc::pid_t> {
    // SAFETY: integer argument only.
    check(unsafe { libc::getpgid(pid) } as libc::c_long).map(|p| p as libc::pid_t)
}

/// Gives up the controlling terminal, if any, without starting a session:
/// TIOCNOTTY on /dev/tty. Afterwards opening /dev/tty fails (ENXIO), so an
/// action cannot read or write the operator's terminal through it.
pub fn detach_controlling_tty() -> io::Result<()> {
    let path = c"/dev/tty";
    // SAFETY: static NUL-terminated path; the fd is closed below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            // No controlling terminal: nothing to give up.
            Some(libc::ENXIO) | Some(libc::ENOENT) => Ok(()),
            _ => Err(e),
        };
    }
    // SAFETY: TIOCNOTTY takes no argument; fd is a live tty descriptor.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCNOTTY) };
    let err = io::Error::last_os_error();
    // SAFETY: closing the fd opened above.
    unsafe { libc::close(fd) };
    if rc < 0 {
        return Err(err);
    }
    // SAFETY: as above; this open must now fail.
    let again = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    };
    if again >= 0 {
        // SAFETY: closing the fd just opened.
        unsafe { libc::close(again) };
        return Err(io::Error::other("still attached to a controlling terminal"));
    }
    Ok(())
}

/// The kernel's `struct sigaction` for rt_sigaction(2) (x86_64 / aarch64).
#[repr(C)]
struct KernelSigaction {
    handler: usize,
    flags: u64,
    restorer: usize,
    mask: u64,
}

/// Every signal back to its default disposition and an empty signal mask:
/// ignored signals and the mask survive execve, and a command must not start
/// with SIGPIPE (or anything else) ignored because its parent chain did.
/// Raw rt_sigaction, so glibc's internal signals are reset as well.
pub fn reset_signals() -> io::Result<()> {
    let dfl = KernelSigaction {
        handler: 0, // SIG_DFL
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: `dfl` is a live kernel sigaction; no old action is read back.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                &dfl as *const KernelSigaction,
                std::ptr::null_mut::<KernelSigaction>(),
                8usize,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let empty: u64 = 0;
    // SAFETY: a live 8-byte mask; the old mask is not read back.
    check(unsafe {
        libc::syscall(
            libc::SYS_rt_sigprocmask,
            libc::SIG_SETMASK,
            &empty as *const u64,
            std::ptr::null_mut::<u64>(),
            8usize,
        )
    })
    .map(|_| ())
}

/// Keeps a helper thread or process on the CPU of the thread that hands it
/// work: woken there, it runs as soon as that thread sleeps or yields,
/// where woken on another CPU it could cost that CPU's return from an idle
/// halt. Remembers the last CPU, so that it asks the kernel again only when
/// the caller has moved.
#[derive(Debug)]
pub struct CpuFollower(std::sync::atomic::AtomicUsize);

impl Default for CpuFollower {
    fn default() -> Self {
        CpuFollower(std::sync::atomic::AtomicUsize::new(usize::MAX))
    }
}

impl CpuFollower {
    /// Restricts `id` (a thread or process of ours; never 0, which would name
    /// the caller) to the CPU the calling thread runs on. Only a hint: a
    /// refusal (a cpuset without that CPU) changes nothing but the speed,
    /// and is not asked again until the caller moves.
    pub fn follow(&self, id: libc::pid_t) {
        if id <= 0 {
            return;
        }
        let Ok(cpu) = nix::sched::sched_getcpu() else {
            return;
        };
        if self.0.swap(cpu, std::sync::atomic::Ordering::Relaxed) == cpu {
            return;
        }
        let mut set = nix::sched::CpuSet::new();
        if set.set(cpu).is_ok() {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(id), &set);
        }
    }
}
