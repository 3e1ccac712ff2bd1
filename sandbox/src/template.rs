//! Warm starts: a child confined before its command is known.
//!
//! Confining a child (the capability bounding set one capability at a time,
//! Landlock, seccomp, the mount namespace) is about a fifth of an action's
//! round trip. A template is a child created exactly as a cold spawn's
//! (clone3 into its cgroup, sharing this process's memory until execve) that
//! applies every confinement step of a [`ChildPlan`] but the working
//! directory, closes every descriptor but its control socket (its standard
//! streams become /dev/null) and waits. The next command whose plan confines
//! identically ([`ChildPlan::same_confinement`]: the very same cached
//! ruleset, seccomp program and mount namespace, the same credentials and
//! limits) hands it its standard streams, failure report and gate over the
//! socket, with the address of its exec arguments in the shared memory; the
//! template enters the working directory, waits at the gate and execs.
//!
//! The thread that clones a template is suspended (CLONE_VFORK) until the
//! template execs or exits, as for a cold spawn: the template runs on that
//! thread's TLS, which nothing else touches meanwhile. So each template has
//! a thread of its own; it stays alive until the command exits, because the
//! parent-death signal follows the creating thread, not the process.

use crate::child_steps::{enter_cwd, reset_process_state, ChildPlan};
use crate::jail::{
    above_stdio, monotonic_ns, report, ChildStack, ConfinedChild, GateWait, Jail, SpawnError,
    CHILD_STACK, STEP_EXEC, STEP_GATE, STEP_STDIO,
};
use crate::sys::errno;
use crate::SandboxError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What the template reads (it shares this memory until execve).
struct Shared {
    plan: ChildPlan,
    /// The template's end of the control socket and /dev/null: descriptor
    /// numbers in its table (copied at clone).
    theirs: libc::c_int,
    devnull: libc::c_int,
    /// Written by the kernel (CLONE_PIDFD) before the template runs.
    pidfd: AtomicI32,
    /// Set by the template once it holds a command: from then on the
    /// command's owner reaps it, not the cloning thread.
    took_command: AtomicBool,
    /// CLOCK_MONOTONIC (ns): clone called, template running, confined.
    marks: [AtomicU64; 3],
}

/// A command's exec arguments, read by the template from this process's
/// memory (its address travels in the handover message).
struct Go {
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    gated: bool,
    /// CLOCK_MONOTONIC (ns): command received, working directory entered,
    /// gate passed (the next call is execve).
    marks: [AtomicU64; 3],
}

/// The template's first message: confined and waiting, or the step that
/// failed.
const READY: u8 = 0;
const FAILED: u8 = 1;
/// Descriptors a command brings: stdin, stdout, stderr, report, [gate].
const MAX_FDS: usize = 5;
/// How long the owner stays awake for the template's execve (tens of
/// microseconds) before it sleeps: on a VM whose idle vCPUs halt, a wake-up
/// costs more than the execve. Bounded and yielding, so that whatever is
/// runnable on this CPU gets it first.
const AWAKE_WAIT: Duration = Duration::from_micros(250);
/// Idle cloning threads kept for the next templates.
const IDLE_THREADS_MAX: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Starting,
    Ready,
    Failed,
}

/// A confined child waiting for a command.
pub struct Template {
    shared: Arc<Shared>,
    /// Our end of the control socket.
    ours: OwnedFd,
    /// Once ready: its pid and our own pidfd for it.
    pid: libc::pid_t,
    pidfd: Option<OwnedFd>,
    state: State,
}

/// Why a template did not run a command.
#[derive(Debug)]
pub enum WarmError {
    /// Nothing was handed over, or the template died before taking it:
    /// the command has not run; start it cold.
    Unavailable,
    /// The template took the command and reported why it did not run it.
    Failed(SpawnError),
}

impl Template {
    /// Starts a template confined as `jail`'s command would be, inside the
    /// cgroup `cgroup_dir` (None: this process's). Returns at once; the
    /// template gets ready on its own thread.
    pub fn start(jail: &Jail, cgroup_dir: Option<OwnedFd>) -> Result<Template, SandboxError> {
        let fail = |what: &str, e: std::io::Error| {
            SandboxError::step("warm start", format!("{what}: {e}"))
        };
        let (ours, theirs) = seqpacket_pair().map_err(|e| fail("socketpair", e))?;
        let theirs = above_stdio(theirs).map_err(|e| fail("socket", e))?;
        let devnull = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
            .map_err(|e| fail("/dev/null", e))?;
        let devnull = above_stdio(OwnedFd::from(devnull)).map_err(|e| fail("/dev/null", e))?;
        let shared = Arc::new(Shared {
            plan: jail.plan().for_another_child(),
            theirs: theirs.as_raw_fd(),
            devnull: devnull.as_raw_fd(),
            pidfd: AtomicI32::new(-1),
            took_command: AtomicBool::new(false),
            marks: Default::default(),
        });
        let stack = ChildStack::take().map_err(|e| fail("child stack", e))?;
        hand_to_thread(Job {
            shared: Arc::clone(&shared),
            stack,
            cgroup_dir,
            theirs,
            devnull,
        })
        .map_err(|e| fail("thread", e))?;
        Ok(Template {
            shared,
            ours,
            pid: 0,
            pidfd: None,
            state: State::Starting,
        })
    }

    /// Whether a command of `jail` would be confined by this template
    /// exactly as by a cold spawn.
    pub fn matches(&self, jail: &Jail) -> bool {
        self.state != State::Failed && self.shared.plan.same_confinement(jail.plan())
    }

    /// Waits up to `wait` for it to be confined and waiting; false if it
    /// failed, died or is not ready by then.
    fn ready(&mut self, wait: Duration) -> bool {
        if self.state == State::Starting {
            self.state = match read_ready(&self.ours, wait) {
                Some(pid) => {
                    // The kernel wrote the pidfd before the template ran,
                    // and it ran before its message reached us.
                    let fd = self.shared.pidfd.load(Ordering::Acquire);
                    // SAFETY: F_DUPFD_CLOEXEC of the pidfd the cloning thread
                    // owns and keeps open while the template lives.
                    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
                    if fd < 0 || dup < 0 {
                        State::Failed
                    } else {
                        self.pid = pid;
                        // SAFETY: fcntl just returned this fd; nothing else owns it.
                        self.pidfd = Some(unsafe { OwnedFd::from_raw_fd(dup) });
                        State::Ready
                    }
                }
                None => State::Failed,
            };
        }
        self.state == State::Ready && self.pidfd.as_ref().is_some_and(|fd| !readable(fd, 0))
    }

    /// How long its confinement took (ahead of any command), once ready.
    pub fn confined_in(&self) -> Duration {
        let [_, started, confined] = self
            .shared
            .marks
            .each_ref()
            .map(|m| m.load(Ordering::Acquire));
        Duration::from_nanos(confined.saturating_sub(started))
    }

    /// Runs `jail`'s command in this template. The descriptors are lent
    /// (the template receives copies): after `Ok` the caller closes its
    /// own; after [`WarmError::Unavailable`] it can start the command cold
    /// with them.
    pub fn run(
        &mut self,
        jail: &Jail,
        stdin: &OwnedFd,
        stdout: &OwnedFd,
        stderr: &OwnedFd,
        gate: Option<&GateWait>,
    ) -> Result<ConfinedChild, WarmError> {
        // Usually ready long before: it was started during the last action.
        if !self.ready(Duration::from_millis(20)) {
            return Err(WarmError::Unavailable);
        }
        let (report_r, report_w) = std::io::pipe().map_err(|_| WarmError::Unavailable)?;
        let (argv, envp) = jail.exec_args();
        let go = Go {
            argv,
            envp,
            cwd: jail.plan().cwd.as_ptr(),
            gated: gate.is_some(),
            marks: Default::default(),
        };
        let mut fds = vec![
            stdin.as_raw_fd(),
            stdout.as_raw_fd(),
            stderr.as_raw_fd(),
            report_w.as_raw_fd(),
        ];
        fds.extend(gate.map(|g| g.read.as_raw_fd()));
        let address = (&go as *const Go as u64).to_ne_bytes();
        let sent_at = monotonic_ns();
        if send_with_fds(&self.ours, &address, &fds).is_err() {
            return Err(WarmError::Unavailable);
        }
        drop(report_w);
        // From here `go` is read by the template until it execs or exits:
        // this function returns only once it has.
        let report_r = OwnedFd::from(report_r);
        wait_awake(&report_r, AWAKE_WAIT);
        let mut buf = [0u8; 5];
        let mut f = std::fs::File::from(report_r);
        let got = read_full(&mut f, &mut buf);
        let resumed_at = monotonic_ns();
        let [received, entered, gated] = go.marks.each_ref().map(|m| m.load(Ordering::Acquire));
        match got {
            Ok(5) => {
                self.reap();
                return Err(WarmError::Failed(jail.failure(buf)));
            }
            // End of file: it exec'd (the report closes on exec) — or it died
            // before reaching execve, and nothing ran.
            Ok(0) if gated != 0 => {}
            _ => {
                self.kill_and_wait();
                if self.shared.took_command.load(Ordering::Acquire) {
                    self.reap();
                }
                return Err(WarmError::Unavailable);
            }
        }
        let between = |from: u64, to: u64| {
            Duration::from_nanos(if from == 0 || to == 0 {
                0
            } else {
                to.saturating_sub(from)
            })
        };
        let pidfd = self.pidfd.take().ok_or(WarmError::Unavailable)?;
        self.state = State::Failed;
        Ok(ConfinedChild::new(
            self.pid,
            pidfd,
            [
                // The handover: the template woke and took the command.
                ("clone", between(sent_at, received)),
                // The one step left: the working directory.
                ("confine", between(received, entered)),
                ("gate", between(entered, gated)),
                ("exec", between(gated, resumed_at)),
            ],
        ))
    }

    /// Ends an unused template and waits (a bounded while) for it to be
    /// gone; true once it is (its cgroup is then empty).
    pub fn discard(mut self) -> bool {
        if self.state == State::Failed || !self.ready(Duration::from_millis(50)) {
            return false;
        }
        let Some(pidfd) = self.pidfd.take() else {
            return false;
        };
        // Our end closed: its wait for a command ends and it exits.
        drop(self);
        readable(&pidfd, 100)
    }

    /// Kills it through its pidfd and waits for it to exit.
    fn kill_and_wait(&self) {
        if let Some(fd) = &self.pidfd {
            // SAFETY: an fd we own, a signal number, no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
            readable(fd, 1000);
        }
    }

    /// Reaps it (it took a command: its reaping is ours).
    fn reap(&self) {
        let mut status = 0;
        loop {
            // SAFETY: a live local for the status; our unreaped child.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if rc >= 0 || errno() != libc::EINTR {
                return;
            }
        }
    }
}

/// What a cloning thread needs for one template.
struct Job {
    shared: Arc<Shared>,
    stack: ChildStack,
    cgroup_dir: Option<OwnedFd>,
    theirs: OwnedFd,
    devnull: OwnedFd,
}

/// Idle cloning threads, each waiting for its next job.
static IDLE_THREADS: std::sync::Mutex<Vec<std::sync::mpsc::Sender<Job>>> =
    std::sync::Mutex::new(Vec::new());

/// Gives `job` to an idle cloning thread, or to a new one: starting a
/// thread per template cost the next action tens of microseconds.
fn hand_to_thread(job: Job) -> std::io::Result<()> {
    let mut job = job;
    loop {
        let idle = IDLE_THREADS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop();
        let Some(tx) = idle else { break };
        match tx.send(job) {
            Ok(()) => return Ok(()),
            // That thread is gone: the next one.
            Err(std::sync::mpsc::SendError(back)) => job = back,
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let own = tx.clone();
    std::thread::Builder::new()
        .name("sysward-warm".to_string())
        .stack_size(64 << 10)
        .spawn(move || {
            // No handler of ours may run on a template's stack, and signals
            // for the process are better taken by other threads.
            let mut all = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            // SAFETY: sigfillset initialises `all`, which pthread_sigmask reads.
            unsafe {
                libc::sigfillset(all.as_mut_ptr());
                libc::pthread_sigmask(libc::SIG_SETMASK, all.as_ptr(), std::ptr::null_mut());
            }
            while let Ok(job) = rx.recv() {
                clone_and_wait(job);
                let mut idle = IDLE_THREADS
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if idle.len() >= IDLE_THREADS_MAX {
                    return;
                }
                idle.push(own.clone());
            }
        })?;
    tx.send(job)
        .map_err(|_| std::io::Error::other("the cloning thread is gone"))
}

/// On a cloning thread: clones the template, is suspended until it execs or
/// exits, then waits while its command runs (its parent-death signal
/// follows this thread) or reaps it if it never took a command.
fn clone_and_wait(job: Job) {
    let Job {
        shared,
        stack,
        cgroup_dir,
        theirs,
        devnull,
    } = job;
    shared.marks[0].store(monotonic_ns(), Ordering::Release);
    // SAFETY: `template_main` runs on `stack` (a private mapping with a
    // guard page; `usable()` and CHILD_STACK describe it) with a pointer to
    // `shared`, which this thread keeps alive past the call; CLONE_VFORK
    // suspends this thread until the template has exec'd or exited, so its
    // TLS and the stack stay the template's alone. The template makes only
    // system calls. The kernel writes the pidfd into `shared.pidfd`, an
    // atomic read by others only after the template has run. Every signal
    // is blocked.
    let created = unsafe {
        crate::clone3::vfork_into_cgroup(
            template_main,
            Arc::as_ptr(&shared).cast_mut().cast(),
            stack.usable(),
            CHILD_STACK,
            cgroup_dir.as_ref().map(|fd| fd.as_raw_fd()),
            shared.pidfd.as_ptr(),
        )
    };
    stack.give_back();
    // Without a template this closes the socket: the owner sees it fail.
    drop((theirs, devnull, cgroup_dir));
    let Ok(pid) = created else {
        return;
    };
    // SAFETY: the pidfd CLONE_PIDFD made for this thread; the Template
    // only duplicated it.
    let pidfd = unsafe { OwnedFd::from_raw_fd(shared.pidfd.load(Ordering::Acquire)) };
    if shared.took_command.load(Ordering::Acquire) {
        // The command runs; its owner reaps it.
        readable(&pidfd, -1);
    } else {
        let mut status = 0;
        // SAFETY: a live local for the status; the template is our child.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 && errno() == libc::EINTR {}
    }
}

/// The template: confinement, then one command.
extern "C" fn template_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared` the cloning thread keeps alive (and is
    // suspended in clone meanwhile).
    let shared = unsafe { &*(arg as *const Shared) };
    shared.marks[1].store(monotonic_ns(), Ordering::Release);
    let sock = shared.theirs;
    let failed = |step: u8, e: i32| -> libc::c_int {
        let b = e.to_le_bytes();
        send_bytes(sock, &[FAILED, step, 0, 0, b[0], b[1], b[2], b[3]]);
        // SAFETY: _exit ends this child at once (no atexit handlers, no
        // flushing of the parent's shared buffers).
        unsafe { libc::_exit(126) }
    };
    for target in 0..3 {
        // SAFETY: dup2 on descriptors this child inherited.
        if unsafe { libc::dup2(shared.devnull, target) } < 0 {
            return failed(STEP_STDIO, errno());
        }
    }
    if let Err((step, e)) = shared.plan.confine(true) {
        return failed(step, e);
    }
    if let Err((step, e)) = reset_process_state() {
        return failed(step, e);
    }
    // Nothing of the broker's stays open while it waits (a peer would wait
    // for an end of file it holds back): only its socket.
    // SAFETY: integer arguments only.
    unsafe {
        if sock > 3 {
            libc::syscall(libc::SYS_close_range, 3u32, (sock - 1) as u32, 0u32);
        }
        libc::syscall(libc::SYS_close_range, (sock + 1) as u32, u32::MAX, 0u32);
    }
    shared.marks[2].store(monotonic_ns(), Ordering::Release);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() }.to_le_bytes();
    send_bytes(sock, &[READY, 0, 0, 0, pid[0], pid[1], pid[2], pid[3]]);

    let mut address = [0u8; 8];
    let mut fds = [-1 as libc::c_int; MAX_FDS];
    let (n, nfds) = receive_with_fds(sock, &mut address, &mut fds);
    if n != address.len() as isize || nfds < 4 {
        // Our owner closed its end (discarded), or a malformed handover:
        // nothing to run.
        // SAFETY: as above.
        unsafe { libc::_exit(0) }
    }
    shared.took_command.store(true, Ordering::Release);
    // SAFETY: the address of the owner's `Go`, alive until this child
    // execs or exits (the owner waits for that on the report pipe).
    let go = unsafe { &*(u64::from_ne_bytes(address) as *const Go) };
    go.marks[0].store(monotonic_ns(), Ordering::Release);
    let report_fd = fds[3];
    let fail = |step: u8, e: i32, code: libc::c_int| -> libc::c_int {
        report(report_fd, step, e);
        // SAFETY: as above.
        unsafe { libc::_exit(code) }
    };
    if nfds != 4 + usize::from(go.gated) {
        return fail(STEP_STDIO, libc::EBADMSG, 126);
    }
    for (target, fd) in fds[..3].iter().enumerate() {
        // SAFETY: dup2 on descriptors this child received.
        if unsafe { libc::dup2(*fd, target as libc::c_int) } < 0 {
            return fail(STEP_STDIO, errno(), 126);
        }
    }
    // SAFETY: `go.cwd` is a NUL-terminated string the owner's Jail keeps.
    if let Err((step, e)) = enter_cwd(unsafe { std::ffi::CStr::from_ptr(go.cwd) }) {
        return fail(step, e, 126);
    }
    go.marks[1].store(monotonic_ns(), Ordering::Release);
    if go.gated {
        let mut byte = 0u8;
        let n = loop {
            // SAFETY: a one-byte read into a live local from the gate.
            let n = unsafe { libc::read(fds[4], (&mut byte as *mut u8).cast(), 1) };
            if n >= 0 || errno() != libc::EINTR {
                break n;
            }
        };
        if n != 1 || byte != b'1' {
            return fail(STEP_GATE, libc::ECANCELED, 126);
        }
    }
    go.marks[2].store(monotonic_ns(), Ordering::Release);
    // SAFETY: NULL-terminated arrays of pointers into live CStrings owned by
    // the owner's Jail; execve only returns on failure.
    unsafe { libc::execve(*go.argv, go.argv, go.envp) };
    fail(STEP_EXEC, errno(), 127)
}

/// A SOCK_SEQPACKET pair, close-on-exec.
fn seqpacket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1; 2];
    // SAFETY: `fds` is a live two-element array the kernel fills.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: socketpair just returned these fds; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// In the template: one message, without SIGPIPE if the owner is gone.
fn send_bytes(sock: libc::c_int, bytes: &[u8]) {
    // SAFETY: a live buffer of `bytes.len()` bytes.
    unsafe { libc::send(sock, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
}

/// Room for [`MAX_FDS`] descriptors in one control message, aligned for
/// `cmsghdr`.
type ControlBuf = [u64; 8];

/// One message of `payload` carrying copies of `fds`.
fn send_with_fds(sock: &OwnedFd, payload: &[u8], fds: &[libc::c_int]) -> std::io::Result<()> {
    let mut control: ControlBuf = [0; 8];
    let fds_len = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(fds_len as u32) } as usize;
    if fds.len() > MAX_FDS || space > std::mem::size_of::<ControlBuf>() {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut iov = libc::iovec {
        iov_base: payload.as_ptr().cast_mut().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = space as _;
    // SAFETY: `msg` describes `control`, large enough for one header with
    // `fds_len` bytes of data (checked above); CMSG_FIRSTHDR is non-null
    // for a control buffer that size; the copy stays inside it.
    let rc = unsafe {
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(fds_len as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr().cast::<u8>(), libc::CMSG_DATA(header), fds_len);
        libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL)
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else if rc as usize != payload.len() {
        Err(std::io::Error::from_raw_os_error(libc::EMSGSIZE))
    } else {
        Ok(())
    }
}

/// In the template: one message into `payload`, its descriptors (received
/// close-on-exec) into `fds`. Returns the payload's length (0: the owner
/// closed its end; < 0: an error) and the number of descriptors.
fn receive_with_fds(
    sock: libc::c_int,
    payload: &mut [u8],
    fds: &mut [libc::c_int; MAX_FDS],
) -> (isize, usize) {
    let mut control: ControlBuf = [0; 8];
    let mut iov = libc::iovec {
        iov_base: payload.as_mut_ptr().cast(),
        iov_len: payload.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of::<ControlBuf>() as _;
    let n = loop {
        // SAFETY: `msg` describes live local buffers.
        let n = unsafe { libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 || errno() != libc::EINTR {
            break n;
        }
    };
    let mut count = 0;
    if n <= 0 {
        return (n, 0);
    }
    // SAFETY: walking the control messages the kernel wrote into `control`
    // with the CMSG macros, which stay within `msg_controllen`; each
    // descriptor is read unaligned from its header's data.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<libc::c_int>();
                let bytes =
                    ((*header).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    if count < MAX_FDS {
                        fds[count] = fd;
                        count += 1;
                    }
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        // Some descriptors were dropped: not the command's whole set.
        return (n, 0);
    }
    (n as isize, count)
}

/// The template's first message: its pid once confined, or None (it
/// failed, or is not ready within `wait`).
fn read_ready(sock: &OwnedFd, wait: Duration) -> Option<libc::pid_t> {
    let ms = wait.as_millis().min(i32::MAX as u128) as i32;
    if !readable(sock, ms) {
        return None;
    }
    let mut buf = [0u8; 8];
    // SAFETY: a live local buffer of its length.
    let n = unsafe {
        libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    (n == 8 && buf[0] == READY).then(|| i32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]))
}

/// Whether `fd` is readable within `ms` milliseconds (-1: no limit).
fn readable(fd: &OwnedFd, ms: libc::c_int) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one live pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        if rc >= 0 {
            return rc > 0;
        }
        if errno() != libc::EINTR {
            return false;
        }
    }
}

/// Waits for `fd` to be readable without sleeping, for up to `spin`
/// (yielding between polls); returns either way.
fn wait_awake(fd: &OwnedFd, spin: Duration) {
    let until = std::time::Instant::now() + spin;
    while std::time::Instant::now() < until {
        if readable(fd, 0) {
            return;
        }
        std::thread::yield_now();
    }
}

/// Reads until `buf` is full or end of file (retrying interrupted reads).
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}
