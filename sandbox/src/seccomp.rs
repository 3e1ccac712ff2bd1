//! seccomp-bpf programs, built from data with seccompiler.
//!
//! The agent and the gateway get allow-lists (default: `EPERM`, so a program
//! sees an ordinary kernel error). The executor gets a deny-list of what no
//! system-administration command needs, compiled by [`crate::denylist`]
//! (it checks the architecture and kills x32 numbers, which carry bit
//! 0x40000000 under the x86_64 audit arch). Allow-lists are x32-safe by
//! construction: no x32 number is listed.

use crate::denylist::DenyList;
use crate::SandboxError;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn err<E: std::fmt::Display>(e: E) -> SandboxError {
    SandboxError::step("seccomp", e.to_string())
}

fn target_arch() -> Result<TargetArch, SandboxError> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(err)
}

/// An argument condition compared on the low 32 bits (int arguments).
fn arg32(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(err)
}

/// An argument condition on the full 64-bit value (flags, unsigned long).
fn arg64(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Qword, op, value).map_err(err)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conds).map_err(err)
}

fn always(rules: &mut Rules, nrs: &[i64]) {
    for &nr in nrs {
        rules.insert(nr, Vec::new());
    }
}

fn compile(
    rules: Rules,
    mismatch: SeccompAction,
    on_match: SeccompAction,
) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(rules, mismatch, on_match, target_arch()?).map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}

/// Installs the programs in order (seccompiler also sets no_new_privs). Our
/// recipes produce a single program: once an allow-list is in force, it may
/// deny the prctl a second installation would need.
pub fn install(programs: &[BpfProgram]) -> Result<(), SandboxError> {
    for p in programs {
        seccompiler::apply_filter(p).map_err(err)?;
    }
    Ok(())
}

const CLONE_NAMESPACES: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWCGROUP) as u64;

/// Syscalls a plain synchronous std program needs to do I/O on descriptors it
/// already holds, allocate, keep time and exit. Every entry says why.
fn base_allow_list(rules: &mut Rules, pid: i32) -> Result<(), SandboxError> {
    always(
        rules,
        &[
            // I/O on inherited or opened descriptors (Landlock decides opens).
            libc::SYS_read,
            libc::SYS_write,
            libc::SYS_readv,
            libc::SYS_writev,
            libc::SYS_pread64,
            libc::SYS_pwrite64,
            libc::SYS_recvmsg,
            libc::SYS_sendmsg,
            libc::SYS_recvfrom,
            libc::SYS_sendto,
            libc::SYS_shutdown,
            libc::SYS_getsockopt,
            libc::SYS_close,
            libc::SYS_close_range,
            libc::SYS_dup,
            libc::SYS_dup3,
            libc::SYS_fcntl,
            libc::SYS_lseek,
            libc::SYS_openat,
            libc::SYS_newfstatat,
            libc::SYS_fstat,
            libc::SYS_statx,
            libc::SYS_faccessat,
            libc::SYS_faccessat2,
            libc::SYS_getdents64,
            libc::SYS_readlinkat,
            libc::SYS_getcwd,
            libc::SYS_ppoll,
            libc::SYS_pselect6,
            // Memory.
            libc::SYS_brk,
            libc::SYS_mmap,
            libc::SYS_munmap,
            libc::SYS_mremap,
            libc::SYS_mprotect,
            libc::SYS_madvise,
            // Locks, time, randomness (HashMap seeds), sleeping.
            libc::SYS_futex,
            libc::SYS_clock_gettime,
            libc::SYS_clock_getres,
            libc::SYS_gettimeofday,
            libc::SYS_nanosleep,
            libc::SYS_clock_nanosleep,
            libc::SYS_getrandom,
            libc::SYS_sched_yield,
            libc::SYS_sched_getaffinity,
            // Signals delivered to us, panics, identity queries.
            libc::SYS_rt_sigaction,
            libc::SYS_rt_sigprocmask,
            libc::SYS_rt_sigreturn,
            libc::SYS_sigaltstack,
            libc::SYS_restart_syscall,
            libc::SYS_getpid,
            libc::SYS_gettid,
            libc::SYS_getppid,
            libc::SYS_getuid,
            libc::SYS_geteuid,
            libc::SYS_getgid,
            libc::SYS_getegid,
            libc::SYS_getresuid,
            libc::SYS_getresgid,
            libc::SYS_uname,
            libc::SYS_prlimit64,
            // Leaving.
            libc::SYS_exit,
            libc::SYS_exit_group,
        ],
    );
    #[cfg(target_arch = "x86_64")]
    always(
        rules,
        &[
            // x86_64-only spellings glibc still uses.
            libc::SYS_poll,
            libc::SYS_select,
            libc::SYS_stat,
            libc::SYS_lstat,
            libc::SYS_access,
            libc::SYS_readlink,
        ],
    );
    // abort() raises SIGABRT on itself: tgkill only towards our own pid.
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![arg32(0, SeccompCmpOp::Eq, pid as u32 as u64)?])?],
    );
    // Becoming (or checking being) non-dumpable is harmless and callers do it
    // after confinement; no other prctl here (the gateway adds thread names).
    rules.insert(libc::SYS_prctl, prctl_dumpable_rules()?);
    // isatty() and non-blocking toggles; no TIOCSTI or device ioctls.
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![arg32(1, SeccompCmpOp::Eq, libc::TCGETS)?])?,
            rule(vec![arg32(1, SeccompCmpOp::Eq, libc::FIONBIO)?])?,
            rule(vec![arg32(1, SeccompCmpOp::Eq, libc::FIOCLEX)?])?,
            rule(vec![arg32(1, SeccompCmpOp::Eq, libc::FIONREAD)?])?,
        ],
    );
    Ok(())
}

/// prctl(PR_SET_DUMPABLE, 0) and prctl(PR_GET_DUMPABLE) only.
fn prctl_dumpable_rules() -> Result<Vec<SeccompRule>, SandboxError> {
    Ok(vec![
        rule(vec![
            arg32(0, SeccompCmpOp::Eq, libc::PR_SET_DUMPABLE as u64)?,
            arg64(1, SeccompCmpOp::Eq, 0)?,
        ])?,
        rule(vec![arg32(
            0,
            SeccompCmpOp::Eq,
            libc::PR_GET_DUMPABLE as u64,
        )?])?,
    ])
}

/// The agent: no exec, no new processes or threads, no sockets, no ptrace,
/// no mount, no namespaces — I/O on what it holds and nothing else.
pub fn agent_programs(pid: i32) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut rules = Rules::new();
    base_allow_list(&mut rules, pid)?;
    Ok(vec![compile(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
    )?])
}

/// The gateway: the agent's list plus threads (clone with CLONE_THREAD and no
/// namespace flag; clone3 answers ENOSYS so glibc falls back to clone, whose
/// flags we can inspect), epoll/eventfd for tokio, and TCP sockets.
pub fn gateway_programs(pid: i32) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut rules = Rules::new();
    base_allow_list(&mut rules, pid)?;
    always(
        &mut rules,
        &[
            // Thread bookkeeping (glibc pthread_create and thread exit).
            libc::SYS_set_robust_list,
            libc::SYS_rseq,
            libc::SYS_membarrier,
            // tokio's reactor.
            libc::SYS_epoll_create1,
            libc::SYS_epoll_ctl,
            libc::SYS_epoll_pwait,
            libc::SYS_epoll_pwait2,
            libc::SYS_eventfd2,
            libc::SYS_pipe2,
            // TCP client calls on the sockets below (Landlock allows only the
            // API port for connect and no port for bind).
            libc::SYS_connect,
            libc::SYS_setsockopt,
            libc::SYS_getsockname,
            libc::SYS_getpeername,
            libc::SYS_sendmmsg,
            libc::SYS_recvmmsg,
        ],
    );
    #[cfg(target_arch = "x86_64")]
    always(&mut rules, &[libc::SYS_epoll_wait]);
    // Threads only: CLONE_THREAD set, no namespace flag.
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![arg64(
            0,
            SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64 | CLONE_NAMESPACES),
            libc::CLONE_THREAD as u64,
        )?])?],
    );
    // Thread names only (PR_SET_NAME / PR_GET_NAME); no dumpable or
    // capability changes.
    let mut prctl = prctl_dumpable_rules()?;
    prctl.push(rule(vec![arg32(
        0,
        SeccompCmpOp::Eq,
        libc::PR_SET_NAME as u64,
    )?])?);
    prctl.push(rule(vec![arg32(
        0,
        SeccompCmpOp::Eq,
        libc::PR_GET_NAME as u64,
    )?])?);
    rules.insert(libc::SYS_prctl, prctl);
    // Stream sockets in AF_INET/AF_INET6 only (type masked of NONBLOCK/CLOEXEC):
    // no UDP (Landlock does not restrict it on this ABI), no raw, no unix.
    let mut socket_rules = Vec::new();
    for domain in [libc::AF_INET, libc::AF_INET6] {
        socket_rules.push(rule(vec![
            arg32(0, SeccompCmpOp::Eq, domain as u64)?,
            arg32(1, SeccompCmpOp::MaskedEq(0xf), libc::SOCK_STREAM as u64)?,
        ])?);
    }
    rules.insert(libc::SYS_socket, socket_rules);
    let mut allow = compile(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
    )?;
    prepend_clone3_enosys(&mut allow);
    Ok(vec![allow])
}

/// The command classifier: the agent's list plus threads (the policy engine
/// parses a deeply nested script on a thread with a stack sized for it):
/// clone with CLONE_THREAD and no namespace flag (clone3 answers ENOSYS so
/// glibc falls back to clone, whose flags we can inspect) and thread names.
/// No socket, no exec, no signal to anyone else, no ptrace.
pub fn classifier_programs(pid: i32) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut rules = Rules::new();
    base_allow_list(&mut rules, pid)?;
    always(
        &mut rules,
        &[
            // Thread bookkeeping (glibc pthread_create and thread exit).
            libc::SYS_set_robust_list,
            libc::SYS_rseq,
        ],
    );
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![arg64(
            0,
            SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64 | CLONE_NAMESPACES),
            libc::CLONE_THREAD as u64,
        )?])?],
    );
    let mut prctl = prctl_dumpable_rules()?;
    prctl.push(rule(vec![arg32(
        0,
        SeccompCmpOp::Eq,
        libc::PR_SET_NAME as u64,
    )?])?);
    rules.insert(libc::SYS_prctl, prctl);
    let mut allow = compile(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
    )?;
    prepend_clone3_enosys(&mut allow);
    Ok(vec![allow])
}

/// What the executor's deny-list needs to know about the action.
#[derive(Debug, Clone, Copy)]
pub struct DenyListOptions {
    /// The action may mount (admin profiles).
    pub allow_mount: bool,
    /// When the Landlock signal scope is off, signals to this pid (the broker)
    /// and to everything (`kill -1`) are denied here instead.
    pub protect_pid: Option<i32>,
    /// Its process group: kill(-pgid) is denied as well.
    pub protect_pgid: Option<i32>,
    /// The profile grants no write: also deny changing metadata (mode, owner,
    /// times, extended attributes), which Landlock does not cover and which a
    /// root uid may do on every root-owned file.
    pub deny_metadata: bool,
    /// The profile has no network: every socket family but AF_UNIX and
    /// AF_NETLINK is refused (no inet, inet6 or packet socket: no TCP, UDP,
    /// ICMP or raw traffic). The action runs in the host's network namespace,
    /// so diagnostics over netlink (`ss`, `ip`, `nft list`) see the host,
    /// and without CAP_NET_ADMIN netlink can change nothing.
    pub deny_inet: bool,
}

/// The executor's deny-list: what no system-administration command needs.
pub fn executor_deny_list(opts: DenyListOptions) -> DenyList {
    use crate::denylist::When;
    let mut list = DenyList::new();
    let mut always = |nrs: &[i64]| {
        for &nr in nrs {
            list.insert(nr, When::Always);
        }
    };
    always(&[
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        // Leaving the action's namespaces (back to the host network).
        libc::SYS_setns,
        // File handles bypass path-based checks (the "shocker" escape).
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
    ]);
    if !opts.allow_mount {
        always(&[
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_move_mount,
            libc::SYS_open_tree,
            libc::SYS_fsopen,
            libc::SYS_fsmount,
            libc::SYS_fsconfig,
            libc::SYS_fspick,
            libc::SYS_mount_setattr,
        ]);
    }
    if opts.deny_metadata {
        always(&[
            libc::SYS_fchmod,
            libc::SYS_fchmodat,
            // fchmodat2 (Linux 6.6; 452 on every architecture, not in libc for aarch64).
            452,
            libc::SYS_fchown,
            libc::SYS_fchownat,
            libc::SYS_utimensat,
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            // setxattrat / removexattrat (Linux 6.13; same number on
            // every architecture, not yet in libc).
            463,
            466,
        ]);
        #[cfg(target_arch = "x86_64")]
        always(&[
            libc::SYS_chmod,
            libc::SYS_chown,
            libc::SYS_lchown,
            libc::SYS_utime,
            libc::SYS_utimes,
            libc::SYS_futimesat,
        ]);
    }
    if opts.deny_inet {
        list.insert(
            libc::SYS_socket,
            When::Arg32NotIn {
                arg: 0,
                values: vec![libc::AF_UNIX as u32, libc::AF_NETLINK as u32],
            },
        );
    }
    // No new user namespaces (they hand an unprivileged process every
    // capability over a fresh namespace and widen the kernel's attack surface).
    let newuser = When::MaskedLow {
        arg: 0,
        mask: libc::CLONE_NEWUSER as u32,
    };
    list.insert(libc::SYS_unshare, newuser.clone());
    list.insert(libc::SYS_clone, newuser);
    if let Some(pid) = opts.protect_pid {
        let pid32 = pid as u32;
        let mut kill = vec![pid32, (-pid) as u32, u32::MAX];
        if let Some(pgid) = opts.protect_pgid.filter(|&g| g > 1 && g != pid) {
            kill.push((-pgid) as u32);
        }
        list.insert(
            libc::SYS_kill,
            When::Arg32In {
                arg: 0,
                values: kill,
            },
        );
        for nr in [libc::SYS_tkill, libc::SYS_tgkill, libc::SYS_pidfd_open] {
            list.insert(
                nr,
                When::Arg32In {
                    arg: 0,
                    values: vec![pid32],
                },
            );
        }
        // A /proc/<pid> directory fd is a pidfd too: no pidfd signals at all.
        for nr in [
            libc::SYS_pidfd_send_signal,
            libc::SYS_rt_sigqueueinfo,
            libc::SYS_rt_tgsigqueueinfo,
        ] {
            list.insert(nr, When::Always);
        }
    }
    list
}

/// The executor's deny-list as one program (see [`crate::denylist`]).
pub fn executor_programs(opts: DenyListOptions) -> Result<Vec<BpfProgram>, SandboxError> {
    Ok(vec![crate::denylist::compile(&executor_deny_list(opts))?])
}

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K

/// `clone3` answers ENOSYS: its flags live in a struct seccomp cannot read,
/// and glibc falls back to `clone`, whose flags the rules can check. One
/// program with two actions (seccompiler has one match action per filter, and
/// a second filter could not be installed once the first denies prctl).
/// clone3 is number 435 on every architecture, so this needs no arch check.
pub(crate) fn prepend_clone3_enosys(prog: &mut BpfProgram) {
    let guard = [
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        }, // seccomp_data.nr
        sock_filter {
            code: BPF_JEQ_K,
            jt: 0,
            jf: 1,
            k: libc::SYS_clone3 as u32,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
    ];
    prog.splice(0..0, guard);
}
