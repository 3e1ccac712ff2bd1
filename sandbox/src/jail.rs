//! A confined command started with one exec: the caller (the root broker)
//! prepares everything — the profile's Landlock ruleset and seccomp program
//! (built once per profile and cached by the caller), capability masks,
//! C strings, the cgroup's `cgroup.procs` — then forks; the child applies
//! [`ChildPlan`] with raw system calls and execs the command itself.
//!
//! This replaces a second exec (a confining helper binary that then execs the
//! command): the exec and dynamic loading of that helper cost more than the
//! whole confinement. The steps and their order are the executor's.

use crate::child_steps::{ChildMounts, ChildPlan, STEPS, STEP_CWD};
use crate::deps::{caps, seccompiler};
use crate::sys::errno;
use crate::{creds, seccomp, SandboxError};
use std::ffi::CString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::Arc;
use sysward_ipc::exec::CommandSpec;
use sysward_ipc::profile::ConfinementProfile;

/// The capabilities an action keeps: what the profile names and this process
/// holds (less privilege, never more), never CAP_SYS_PTRACE (Landlock ABI 7
/// does not stop PTRACE_MODE_READ across domains: an admin action could read
/// the non-dumpable broker's /proc/<pid>/environ) and never
/// CAP_LINUX_IMMUTABLE (an append-only audit log stays append-only).
pub fn kept_capabilities(profile: &ConfinementProfile) -> Result<caps::CapsHashSet, SandboxError> {
    let wanted = creds::parse_caps(&profile.capabilities)?;
    let held = caps::read(None, caps::CapSet::Permitted)
        .map_err(|e| SandboxError::step("capabilities", format!("read permitted: {e}")))?;
    let mut keep: caps::CapsHashSet = wanted.intersection(&held).copied().collect();
    keep.remove(&caps::Capability::CAP_SYS_PTRACE);
    keep.remove(&caps::Capability::CAP_LINUX_IMMUTABLE);
    Ok(keep)
}

/// The executor's seccomp deny-list for `profile`; without the Landlock
/// signal scope it keeps kill/tgkill/pidfd_open away from `protect_pid` (the
/// broker), its process group and `-1`.
pub fn seccomp_program(
    profile: &ConfinementProfile,
    protect_pid: libc::pid_t,
) -> Result<seccompiler::BpfProgram, SandboxError> {
    let protect_pid = (!profile.scope_signals && protect_pid > 1).then_some(protect_pid);
    let protect_pgid = protect_pid.and_then(|p| crate::sys::getpgid(p).ok());
    let mut programs = seccomp::executor_programs(seccomp::DenyListOptions {
        allow_mount: profile.allow_mount,
        protect_pid,
        protect_pgid,
        deny_metadata: !profile.can_write(),
        deny_inet: !profile.network,
    })?;
    if programs.len() != 1 {
        return Err(SandboxError::step(
            "seccomp",
            format!("expected one program, got {}", programs.len()),
        ));
    }
    Ok(programs.remove(0))
}

/// A program in the kernel's layout (seccompiler's `sock_filter` is the
/// same `#[repr(C)]` struct).
pub fn kernel_program(
    program: &seccompiler::BpfProgram,
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    // BPF_MAXINSNS
    if program.is_empty() || program.len() > 4096 {
        return Err(SandboxError::step(
            "seccomp",
            format!(
                "a program of {} instructions cannot be loaded",
                program.len()
            ),
        ));
    }
    Ok(program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect())
}

/// What the caller caches per profile and passes in.
pub struct JailParts {
    /// The profile's Landlock ruleset, built with every right of the target
    /// ABI as a hard requirement (`profile_rules::prebuild_ruleset`).
    pub landlock_ruleset: Arc<OwnedFd>,
    /// [`seccomp_program`] → [`kernel_program`].
    pub seccomp: Arc<Vec<libc::sock_filter>>,
    /// The action's mount namespace ([`crate::shield`]), when its profile
    /// needs one: a namespace the caller prepared for this protected set, or
    /// the plan to build one in the child. None: [`Jail::prepare`] computes
    /// the plan itself if the profile needs it.
    pub mounts: Option<PreparedMounts>,
    /// The action's cgroup.
    pub cgroup: Option<JailCgroup>,
    /// sysward's binaries beside the caller's, protected like its own.
    pub extra: crate::profile_rules::Extra,
}

/// A mount namespace for an action, ready or to be built.
#[derive(Debug, Clone)]
pub enum PreparedMounts {
    /// Enter this namespace (setns).
    Namespace(Arc<OwnedFd>),
    /// Build one in the child from this plan.
    Plan(Arc<crate::shield::ShieldPlan>),
}

/// The action's cgroup v2, as descriptors: its directory (clone3 creates the
/// child inside it) and `cgroup.procs` (where clone3 is refused, the child
/// writes itself there).
#[derive(Debug)]
pub struct JailCgroup {
    pub dir: OwnedFd,
    pub procs: OwnedFd,
}

impl JailCgroup {
    pub fn open(dir: &std::path::Path) -> Result<JailCgroup, SandboxError> {
        let fail = |p: &std::path::Path, e: std::io::Error| {
            SandboxError::step("cgroup", format!("{}: {e}", p.display()))
        };
        let path = dir.join("cgroup.procs");
        let procs = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| fail(&path, e))?;
        let dir_fd = std::fs::File::open(dir).map_err(|e| fail(dir, e))?;
        Ok(JailCgroup {
            dir: dir_fd.into(),
            procs: procs.into(),
        })
    }
}

/// Why a confined command did not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// Something the parent prepares failed: nothing was started.
    #[error("{0}")]
    Prepare(#[from] SandboxError),
    /// A confinement step failed in the child: the command never ran.
    #[error("confinement failed at {step}: {error}")]
    Confinement {
        step: &'static str,
        error: std::io::Error,
    },
    /// The working directory cannot be entered as the action's user.
    #[error("cannot enter {cwd}: {error}")]
    Cwd { cwd: String, error: std::io::Error },
    /// The gate was never opened: fully confined, nothing ran.
    #[error("the action was held back (its audit record was not written); nothing ran")]
    GateClosed,
    /// Confined, but execve failed.
    #[error("{program}: {error}")]
    Exec {
        program: String,
        error: std::io::Error,
    },
}

/// A command ready to start confined.
pub struct Jail {
    plan: ChildPlan,
    /// Kept alive for the pointer arrays below.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    program: String,
    cwd: String,
}

// SAFETY: the raw pointers point into `_strings`, which the Jail owns and
// never changes; nothing else aliases them.
unsafe impl Send for Jail {}

/// A started confined command: this process's child.
#[derive(Debug)]
pub struct ConfinedChild {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    stages: [(&'static str, std::time::Duration); 4],
}

impl ConfinedChild {
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// How long its start took: `clone` (until the child ran), `confine`
    /// (its confinement steps), `gate` (waiting for the gate), `exec`
    /// (execve, until the parent resumed).
    pub fn stages(&self) -> &[(&'static str, std::time::Duration); 4] {
        &self.stages
    }

    /// Readable when the child exits.
    pub fn pidfd(&self) -> &OwnedFd {
        &self.pidfd
    }

    fn wait_flags(&self, flags: libc::c_int) -> std::io::Result<Option<ExitStatus>> {
        let mut status = 0;
        loop {
            // SAFETY: `status` is a live local; the pid is our unreaped child.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, flags) };
            if rc == self.pid {
                return Ok(Some(ExitStatus::from_raw(status)));
            }
            if rc == 0 {
                return Ok(None);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// The exit status if it has exited (reaping it), without blocking.
    pub fn try_wait(&self) -> std::io::Result<Option<ExitStatus>> {
        self.wait_flags(libc::WNOHANG)
    }

    /// Waits for it to exit and reaps it.
    pub fn wait(&self) -> std::io::Result<ExitStatus> {
        self.wait_flags(0)?
            .ok_or_else(|| std::io::Error::other("waitpid returned no status"))
    }
}

/// What the child function reads: the plan, the exec arguments and the
/// descriptors for its standard streams, its failure report and its gate.
struct ChildContext<'a> {
    plan: &'a ChildPlan,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    stdio: [libc::c_int; 3],
    report: libc::c_int,
    /// (read end, write end) of the gate, if any.
    gate: Option<(libc::c_int, libc::c_int)>,
    /// Created inside the action's cgroup (clone3): no migration needed.
    in_cgroup: bool,
    /// CLOCK_MONOTONIC (ns) when the child started, had applied its
    /// confinement, and found its gate open: written by the child, which
    /// shares this memory (CLONE_VM), read once it has exec'd.
    marks: [std::sync::atomic::AtomicU64; 3],
}

/// CLOCK_MONOTONIC in nanoseconds (a vDSO call: safe in the vfork'd child).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live local the kernel writes.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Lets a confined child reach its execve only once something else is done
/// — the broker's audit record on disk — while the confinement steps run in
/// parallel with it. The child, fully confined, waits for one byte: `1`
/// opens the gate; anything else, or the [`GateOpener`] dropped unopened,
/// and the child exits without running anything.
pub fn gate() -> std::io::Result<(GateOpener, GateWait)> {
    // std's pipe is close-on-exec.
    let (r, w) = std::io::pipe()?;
    let (r, w) = (OwnedFd::from(r), OwnedFd::from(w));
    let write_fd = w.as_raw_fd();
    Ok((GateOpener { write: w }, GateWait { read: r, write_fd }))
}

/// The side that opens the gate (another thread).
#[derive(Debug)]
pub struct GateOpener {
    write: OwnedFd,
}

impl GateOpener {
    /// Lets the child run its command.
    pub fn open(self) -> std::io::Result<()> {
        let mut f = std::fs::File::from(self.write);
        std::io::Write::write_all(&mut f, b"1")
    }
}

/// The child's side, given to [`Jail::spawn`].
#[derive(Debug)]
pub struct GateWait {
    read: OwnedFd,
    /// The opener's descriptor, closed in the child so that a dropped opener
    /// means end of file there.
    write_fd: libc::c_int,
}

/// Index past [`STEPS`] that marks an execve failure in the report.
const STEP_EXEC: u8 = 200;
/// Index for a failure to set up the standard streams.
const STEP_STDIO: u8 = 201;
/// Index for a gate that did not open.
const STEP_GATE: u8 = 202;
const CHILD_STACK: usize = 256 << 10;
const PAGE: usize = 4096;

impl Jail {
    /// Prepares `spec` under `profile`, as root, in the parent.
    pub fn prepare(
        profile: &ConfinementProfile,
        spec: &CommandSpec,
        parts: JailParts,
    ) -> Result<Jail, SandboxError> {
        let refuse = |m: &str| SandboxError::step("command", m.to_string());
        let program = spec.argv.first().ok_or_else(|| refuse("empty argv"))?;
        if !program.starts_with('/') {
            return Err(refuse("argv[0] must be an absolute path"));
        }
        let mut strings = Vec::with_capacity(spec.argv.len() + spec.env.len());
        for a in &spec.argv {
            strings.push(
                CString::new(a.as_str()).map_err(|_| refuse("an argument contains a NUL byte"))?,
            );
        }
        for (k, v) in &spec.env {
            if k.is_empty() || k.contains('=') {
                return Err(refuse("an environment name is empty or contains '='"));
            }
            strings.push(
                CString::new(format!("{k}={v}"))
                    .map_err(|_| refuse("an environment entry contains a NUL byte"))?,
            );
        }
        let pointers = |range: std::ops::Range<usize>| -> Vec<*const libc::c_char> {
            strings[range]
                .iter()
                .map(|c| c.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let argv = pointers(0..spec.argv.len());
        let envp = pointers(spec.argv.len()..strings.len());
        let cwd = CString::new(spec.cwd.as_str()).map_err(|_| refuse("cwd contains a NUL byte"))?;
        let keep = kept_capabilities(profile)?;
        let keep_caps = keep.iter().fold(0u64, |m, c| m | (1u64 << c.index()));
        let l = &profile.limits;
        let rlimits = [
            (libc::RLIMIT_NPROC, l.max_processes),
            (libc::RLIMIT_NOFILE, l.max_open_files),
            (libc::RLIMIT_FSIZE, l.max_file_size),
            (libc::RLIMIT_AS, l.max_address_space),
            (libc::RLIMIT_CPU, l.max_cpu_seconds),
            (libc::RLIMIT_CORE, l.max_core),
        ]
        .into_iter()
        .filter_map(|(r, v)| v.map(|v| (r, v)))
        .collect();
        let (cgroup_procs, cgroup_dir) = match parts.cgroup {
            Some(c) => (Some(c.procs), Some(c.dir)),
            None => (None, None),
        };
        let mounts = match parts.mounts {
            Some(PreparedMounts::Namespace(ns)) => ChildMounts::Enter(ns),
            Some(PreparedMounts::Plan(plan)) => ChildMounts::Build(plan),
            None => match crate::profile_rules::shield_plan(profile, &parts.extra)? {
                Some(plan) => ChildMounts::Build(Arc::new(plan)),
                None => ChildMounts::Host,
            },
        };
        let plan = ChildPlan {
            rlimits,
            cgroup_procs,
            cgroup_dir,
            mounts,
            keep_caps,
            last_cap: creds::cap_last_cap()?,
            ambient: profile.uid != 0 && keep_caps != 0,
            uid: profile.uid,
            gid: profile.gid,
            groups: profile.groups.clone(),
            parent: crate::sys::getpid(),
            landlock_ruleset: parts.landlock_ruleset,
            seccomp: parts.seccomp,
            cwd,
        };
        Ok(Jail {
            plan,
            _strings: strings,
            argv,
            envp,
            program: program.clone(),
            cwd: spec.cwd.clone(),
        })
    }

    /// Starts the command: clone(CLONE_VM | CLONE_VFORK) — no copy of this
    /// process's page tables, which costs more than the whole confinement —
    /// the steps in the child, then execve. Stdin is /dev/null.
    pub fn spawn(
        self,
        stdout: OwnedFd,
        stderr: OwnedFd,
        gate: Option<GateWait>,
    ) -> Result<ConfinedChild, SpawnError> {
        self.spawn_with_stdin(None, stdout, stderr, gate)
    }

    /// [`Jail::spawn`] with `stdin` (e.g. a pipe's read end) as the
    /// command's standard input; `None`: /dev/null.
    pub fn spawn_with_stdin(
        self,
        stdin: Option<OwnedFd>,
        stdout: OwnedFd,
        stderr: OwnedFd,
        gate: Option<GateWait>,
    ) -> Result<ConfinedChild, SpawnError> {
        let prep = |what: &str, e: std::io::Error| {
            SpawnError::Prepare(SandboxError::step("command", format!("{what}: {e}")))
        };
        let (report_r, report_w) = report_pipe().map_err(|e| prep("report pipe", e))?;
        let stdin = match stdin {
            Some(fd) => fd,
            None => dev_null().map_err(|e| prep("/dev/null", e))?,
        };
        // The child dup2s these onto 0–2: none may already sit there.
        let stdio = [stdin, stdout, stderr]
            .into_iter()
            .map(above_stdio)
            .collect::<std::io::Result<Vec<OwnedFd>>>()
            .map_err(|e| prep("standard streams", e))?;
        let mut ctx = ChildContext {
            plan: &self.plan,
            argv: &self.argv,
            envp: &self.envp,
            stdio: [
                stdio[0].as_raw_fd(),
                stdio[1].as_raw_fd(),
                stdio[2].as_raw_fd(),
            ],
            report: report_w.as_raw_fd(),
            gate: gate.as_ref().map(|g| (g.read.as_raw_fd(), g.write_fd)),
            in_cgroup: false,
            marks: Default::default(),
        };
        let stack = ChildStack::take().map_err(|e| prep("child stack", e))?;
        let mut pidfd: libc::c_int = -1;
        // No handler of ours may run in the child (it shares our memory):
        // every signal stays blocked until the child has reset them all.
        let mut old_mask = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigfillset initialises `all`; pthread_sigmask reads `all`
        // and writes `old_mask`, both live locals.
        unsafe {
            libc::sigfillset(all.as_mut_ptr());
            libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), old_mask.as_mut_ptr());
        }
        let cloned_at = monotonic_ns();
        // First clone3 into the action's cgroup; where that is refused
        // (old kernel, no cgroup), clone and let the child migrate itself.
        let mut created: Result<libc::pid_t, i32> = Err(libc::ENOSYS);
        if let Some(cgroup) = &self.plan.cgroup_dir {
            ctx.in_cgroup = true;
            // SAFETY: as for clone below; `stack.usable()` and `CHILD_STACK`
            // describe the mapping above its guard page, whose top is
            // 16-byte aligned; every signal is blocked.
            created = unsafe {
                crate::clone3::vfork_into_cgroup(
                    child_main,
                    (&ctx as *const ChildContext).cast_mut().cast(),
                    stack.usable(),
                    CHILD_STACK,
                    cgroup.as_raw_fd(),
                    &mut pidfd,
                )
            };
        }
        let pid: std::io::Result<libc::pid_t> = match created {
            Ok(pid) => Ok(pid),
            // Refused for a reason that clone(2) would meet as well.
            Err(e) if ctx.in_cgroup && !matches!(e, libc::ENOSYS | libc::EINVAL | libc::E2BIG) => {
                Err(std::io::Error::from_raw_os_error(e))
            }
            Err(_) => {
                ctx.in_cgroup = false;
                // SAFETY: `child_main` runs on `stack` (a private mapping with
                // a guard page) with a pointer to `ctx`, which outlives the
                // call: CLONE_VFORK suspends this thread until the child has
                // exec'd or exited, so the stack and everything `ctx` borrows
                // stay valid and untouched. The child only makes system calls
                // (see child_steps). CLONE_PIDFD writes the pidfd into the
                // live local `pidfd`.
                let pid = unsafe {
                    libc::clone(
                        child_main,
                        stack.top(),
                        libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD,
                        (&ctx as *const ChildContext).cast_mut().cast(),
                        &mut pidfd as *mut libc::c_int,
                    )
                };
                if pid < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(pid)
                }
            }
        };
        // SAFETY: restores the mask saved above.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, old_mask.as_ptr(), std::ptr::null_mut())
        };
        let resumed_at = monotonic_ns();
        // The child has exec'd or exited (CLONE_VFORK): nothing runs on the
        // stack any more.
        stack.give_back();
        drop(report_w);
        drop(stdio);
        drop(gate);
        let pid = pid.map_err(|e| prep("clone", e))?;
        // SAFETY: CLONE_PIDFD returned a new fd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        // The child is past execve (or exited): it writes no mark any more.
        let [started, confined, gated] = ctx
            .marks
            .each_ref()
            .map(|m| m.load(std::sync::atomic::Ordering::Acquire));
        let between = |from: u64, to: u64| {
            std::time::Duration::from_nanos(if from == 0 || to == 0 {
                0
            } else {
                to.saturating_sub(from)
            })
        };
        let child = ConfinedChild {
            pid,
            pidfd,
            stages: [
                ("clone", between(cloned_at, started)),
                ("confine", between(started, confined)),
                ("gate", between(confined, gated)),
                ("exec", between(gated, resumed_at)),
            ],
        };
        let mut buf = [0u8; 5];
        let mut f = std::fs::File::from(report_r);
        match f.read(&mut buf) {
            Ok(5) => {
                // It exited (126/127): reap it before reporting.
                let _ = child.wait();
                let step = buf[0];
                let error = std::io::Error::from_raw_os_error(i32::from_le_bytes([
                    buf[1], buf[2], buf[3], buf[4],
                ]));
                Err(match step {
                    STEP_CWD => SpawnError::Cwd {
                        cwd: self.cwd,
                        error,
                    },
                    STEP_EXEC => SpawnError::Exec {
                        program: self.program,
                        error,
                    },
                    STEP_STDIO => SpawnError::Confinement {
                        step: "standard streams",
                        error,
                    },
                    STEP_GATE => SpawnError::GateClosed,
                    n => SpawnError::Confinement {
                        step: STEPS.get(usize::from(n)).copied().unwrap_or("unknown step"),
                        error,
                    },
                })
            }
            // Nothing written: the child exec'd (the pipe closed on exec).
            _ => Ok(child),
        }
    }
}

/// The child: standard streams, every confinement step, execve. Reports the
/// failed step on the pipe and exits 126 (confinement) or 127 (exec).
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildContext` the parent passed to clone; the
    // parent is suspended (CLONE_VFORK) so it is live and unchanged.
    let ctx = unsafe { &*(arg as *const ChildContext) };
    let mark = |i: usize| ctx.marks[i].store(monotonic_ns(), std::sync::atomic::Ordering::Release);
    mark(0);
    let fail = |step: u8, errno: i32, code: libc::c_int| -> libc::c_int {
        report(ctx.report, step, errno);
        // SAFETY: _exit ends this child at once (no atexit handlers, no
        // flushing of the parent's shared buffers).
        unsafe { libc::_exit(code) }
    };
    for (target, fd) in ctx.stdio.iter().enumerate() {
        // SAFETY: dup2 on descriptors this child inherited.
        if unsafe { libc::dup2(*fd, target as libc::c_int) } < 0 {
            return fail(STEP_STDIO, errno(), 126);
        }
    }
    if let Err((step, e)) = ctx.plan.apply(ctx.in_cgroup) {
        return fail(step, e, 126);
    }
    mark(1);
    if let Some((read, write)) = ctx.gate {
        // SAFETY: closing this child's copy of the opener's fd, then a
        // one-byte read into a live local from the gate's read end.
        let (n, byte) = unsafe {
            libc::close(write);
            let mut byte = 0u8;
            let mut n;
            loop {
                n = libc::read(read, (&mut byte as *mut u8).cast(), 1);
                if n >= 0 || errno() != libc::EINTR {
                    break;
                }
            }
            (n, byte)
        };
        if n != 1 || byte != b'1' {
            return fail(STEP_GATE, libc::ECANCELED, 126);
        }
    }
    mark(2);
    // SAFETY: NULL-terminated arrays of pointers into live CStrings owned by
    // the suspended parent's Jail; execve only returns on failure.
    unsafe { libc::execve(ctx.argv[0], ctx.argv.as_ptr(), ctx.envp.as_ptr()) };
    fail(STEP_EXEC, errno(), 127)
}

/// Moves a descriptor above 2 (close-on-exec) if it sits on a standard slot.
fn above_stdio(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own returns a new one.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fcntl just returned this fd; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// A descriptor of /dev/null for a command's stdin: a duplicate of one
/// opened once, since a dup costs less than an open's path walk.
fn dev_null() -> std::io::Result<OwnedFd> {
    static DEV_NULL: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
    let held = match DEV_NULL.get() {
        Some(fd) => fd,
        None => {
            let opened = OwnedFd::from(std::fs::File::open("/dev/null")?);
            // Two first spawns at once: one copy is kept, the other closed.
            DEV_NULL.get_or_init(|| opened)
        }
    };
    held.try_clone()
}

/// The child's stack: a private mapping with a guard page below it.
struct ChildStack {
    base: *mut libc::c_void,
    len: usize,
}

/// Stacks of children that have exec'd or exited, for the next spawns: a
/// fresh mapping per action cost an mmap, an mprotect, page faults on first
/// touch and an munmap (a TLB shootdown across this process's threads).
/// One per concurrent spawn at most; a few are kept.
static SPARE_STACKS: std::sync::Mutex<Vec<ChildStack>> = std::sync::Mutex::new(Vec::new());
const SPARE_STACKS_MAX: usize = 4;

// SAFETY: a ChildStack is a private anonymous mapping that only its owner
// uses (a child runs on it only while the owning thread is suspended in
// clone); moving the owner between threads is sound.
unsafe impl Send for ChildStack {}

impl ChildStack {
    /// A spare stack, or a new one.
    fn take() -> std::io::Result<ChildStack> {
        let spare = SPARE_STACKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        match spare {
            Some(stack) => Ok(stack),
            None => ChildStack::new(),
        }
    }

    /// Keeps it for the next spawn (or unmaps it when enough are kept).
    /// Only once the child that ran on it has exec'd or exited: what it
    /// left there is this process's memory, never the command's (execve
    /// gave the command a memory of its own).
    fn give_back(self) {
        let mut spare = SPARE_STACKS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spare.len() < SPARE_STACKS_MAX {
            spare.push(self);
        }
    }

    fn new() -> std::io::Result<ChildStack> {
        let len = CHILD_STACK + PAGE;
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = ChildStack { base, len };
        // SAFETY: the lowest page of the mapping just made.
        if unsafe { libc::mprotect(base, PAGE, libc::PROT_NONE) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The lowest usable address (above the guard page); `CHILD_STACK`
    /// bytes from there are the stack.
    fn usable(&self) -> *mut libc::c_void {
        (self.base as usize + PAGE) as *mut libc::c_void
    }

    /// The initial stack pointer (stacks grow down), 16-byte aligned.
    fn top(&self) -> *mut libc::c_void {
        (self.base as usize + self.len) as *mut libc::c_void
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in new(); no child runs on it
        // any more (CLONE_VFORK returned).
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// A close-on-exec pipe; the read end is non-blocking.
fn report_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = std::io::pipe()?;
    let (r, w) = (OwnedFd::from(r), OwnedFd::from(w));
    // SAFETY: F_SETFL on an fd we own.
    if unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((r, w))
}

/// In the child: the failed step and errno, five bytes, one write.
fn report(fd: libc::c_int, step: u8, errno: i32) {
    let e = errno.to_le_bytes();
    let buf: [u8; 5] = [step, e[0], e[1], e[2], e[3]];
    // SAFETY: a five-byte local buffer written to an inherited pipe fd.
    unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
}
