//! clone3(2) running a function on a new stack, for `CLONE_INTO_CGROUP`: the
//! child is created inside the action's cgroup instead of writing its pid
//! into `cgroup.procs`. Such a migration takes the cgroup threadgroup lock for
//! writing, whose RCU grace period gave multi-millisecond tails (a p99 of
//! 12 ms in one run of the actions bench, 1.5 ms without the cgroup).
//!
//! glibc has no clone3 wrapper that runs a function on a new stack, so this is
//! the raw system call in a few instructions of assembly (x86_64). Elsewhere
//! it reports ENOSYS and the caller uses clone(2) and the migration.

/// `struct clone_args` (CLONE_ARGS_SIZE_VER2).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// clone3(CLONE_VM | CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP): the
/// child runs `f(arg)` on `[stack, stack + stack_size)` inside the cgroup of
/// `cgroup_dir` and must never return from it (it execs or `_exit`s; if it did
/// return, the child exits with its value). Returns the child's pid (this
/// thread resumes once the child has exec'd or exited) or the errno.
///
/// # Safety
/// As `libc::clone` with `CLONE_VM | CLONE_VFORK`: `f` runs in this process's
/// memory while this thread is suspended, so it may only make system calls on
/// data that stays valid until then; the stack must be a writable mapping
/// with its top 16-byte aligned; every signal should be blocked across the
/// call so that no handler of the parent runs on the child's stack.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn vfork_into_cgroup(
    f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
    stack: *mut libc::c_void,
    stack_size: usize,
    cgroup_dir: libc::c_int,
    pidfd: &mut libc::c_int,
) -> Result<libc::pid_t, i32> {
    let mut args = CloneArgs {
        flags: (libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD) as u64 | CLONE_INTO_CGROUP,
        pidfd: pidfd as *mut libc::c_int as u64,
        exit_signal: libc::SIGCHLD as u64,
        stack: stack as u64,
        stack_size: stack_size as u64,
        cgroup: cgroup_dir as u64,
        ..Default::default()
    };
    let ret: isize;
    // SAFETY: the system call reads `args` (live for the call). The parent
    // resumes at label 2 with every register but rax, rcx and r11 intact
    // (declared). The child resumes with rax = 0 on the new stack (the
    // kernel sets rsp to its top, so `call` leaves the ABI's alignment), calls
    // f(arg) and exits with its result; it never comes back here.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r12",
            "call r13",
            "mov edi, eax",
            "mov eax, 60", // SYS_exit
            "syscall",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 as isize => ret,
            in("rdi") &mut args as *mut CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") arg,
            in("r13") f,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        Err(-ret as i32)
    } else {
        Ok(ret as libc::pid_t)
    }
}

/// Not implemented here: the caller falls back to clone(2).
///
/// # Safety
/// Never calls anything.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn vfork_into_cgroup(
    _f: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    _arg: *mut libc::c_void,
    _stack: *mut libc::c_void,
    _stack_size: usize,
    _cgroup_dir: libc::c_int,
    _pidfd: &mut libc::c_int,
) -> Result<libc::pid_t, i32> {
    Err(libc::ENOSYS)
}
