//! The broker's side of the command classifier: confined `sysward-classify`
//! helper processes that decide requests with the broker's own engine.
//!
//! A helper serves one decision at a time. Idle helpers wait in a small pool
//! shared by every session of this broker; a decision takes one (or starts
//! one when none is idle), so sessions never wait behind each other, and a
//! helper stuck in a pathological parse is held only by the decision that
//! made it stuck. When a decision is not back by its deadline, or the helper
//! dies or answers out of turn, the broker kills it through its pidfd, reaps
//! it, denies the request and puts a fresh helper in the pool.

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sysward_ipc::classify::{
    ClassifyAnswer, ClassifyRequest, CLASSIFY_ANSWER_MAX, CLASSIFY_REQUEST_MAX,
};
use sysward_ipc::{Channel, BUILD_VERSION};
use sysward_policy::{
    Category, Decision, EngineSetup, HostFacts, OwnedRequest, PolicyBlock, Risk, Verdict,
};

type Request = ClassifyRequest<EngineSetup, OwnedRequest>;

/// Why a classifier helper (or the pool) could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    #[error("pidfd_open of the command classifier: {0}")]
    Pidfd(std::io::Error),
    #[error("{} did not start in time", .0.display())]
    Late(PathBuf),
    #[error("{} did not start: {why}", program.display())]
    Broken { program: PathBuf, why: String },
    /// It answered hello with something else than its welcome at this
    /// build and pid.
    #[error(
        "{} answered {answer} to hello: reinstall sysward so all binaries match",
        program.display()
    )]
    Mismatch { program: PathBuf, answer: String },
    #[error("cannot start the command classifier {}", program.display())]
    Pool {
        program: PathBuf,
        #[source]
        source: Box<ClassifierError>,
    },
    #[error(transparent)]
    Channel(#[from] sysward_ipc::ChannelError),
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnSetupError),
}

type Result<T, E = ClassifierError> = std::result::Result<T, E>;
type Answer = ClassifyAnswer<Decision>;

/// The helper's file name beside the broker's other binaries.
pub const HELPER_NAME: &str = "sysward-classify";

/// How long a starting helper has to confine itself and say welcome.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Idle helpers kept for later decisions (more are started when several
/// sessions decide at once, and stopped when they come back to a full pool).
pub const MAX_IDLE: usize = 4;

/// A policy engine as the broker knows it: the policy block and host facts
/// it is built from, and an id unique in this broker process by which a
/// helper keeps it. Engines are never changed: a new policy, or a task's
/// pre-approvals, make a new one with a new id.
#[derive(Debug)]
pub struct EngineHandle {
    id: u64,
    setup: EngineSetup,
}

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(1);

impl EngineHandle {
    pub fn new(block: PolicyBlock, facts: HostFacts) -> Arc<EngineHandle> {
        Arc::new(EngineHandle {
            id: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
            setup: EngineSetup { block, facts },
        })
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    pub fn block(&self) -> &PolicyBlock {
        &self.setup.block
    }

    pub fn facts(&self) -> &HostFacts {
        &self.setup.facts
    }
}

/// What happened to a helper that did not answer normally: audited by the
/// caller beside the denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    pub pid: u32,
    /// `killed after 1500 ms without an answer`, `exited (signal 6)`, …
    pub what: String,
    /// Whether a fresh helper is ready for the next decision.
    pub restarted: bool,
}

/// A decision, and the incident that replaced it with a denial, if any.
#[derive(Debug, Clone)]
pub struct Classified {
    pub decision: Decision,
    pub incident: Option<Incident>,
}

/// The helpers of one broker.
pub struct ClassifierPool {
    program: PathBuf,
    idle: Mutex<Vec<Helper>>,
    /// Why the warm helpers did not start, if they did not.
    start_error: Option<String>,
}

impl ClassifierPool {
    /// Starts `warm` helpers from `program` (checked to be root-owned and
    /// not writable by others: a missing or unsafe binary is an error). A
    /// helper that cannot start or confine itself (a kernel without
    /// Landlock, a container's seccomp filter) is not: the pool then starts
    /// empty, says why in [`ClassifierPool::start_error`], and every
    /// decision tries again and is a denial naming the cause until one
    /// starts.
    pub fn start(program: &Path, warm: usize) -> Result<ClassifierPool> {
        crate::spawn::check_binary(program)?;
        let mut idle = Vec::new();
        let mut start_error = None;
        for _ in 0..warm.min(MAX_IDLE) {
            match Helper::start(program, Instant::now() + START_TIMEOUT) {
                Ok(h) => idle.push(h),
                Err(e) => {
                    start_error = Some(crate::error::chain(&e));
                    break;
                }
            }
        }
        Ok(ClassifierPool {
            program: program.to_path_buf(),
            idle: Mutex::new(idle),
            start_error,
        })
    }

    /// Why the helpers started with the pool did not start.
    pub fn start_error(&self) -> Option<&str> {
        self.start_error.as_deref()
    }

    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Pids of the idle helpers (tests and `doctor` look at them).
    pub fn idle_pids(&self) -> Vec<u32> {
        match self.idle.lock() {
            Ok(idle) => idle.iter().map(|h| h.pid).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// An idle helper, or a new one started by `deadline` (the decision's:
    /// a start that hangs costs that decision, not more).
    fn take(&self, deadline: Instant) -> Result<Helper> {
        while let Some(h) = self.idle.lock().ok().and_then(|mut idle| idle.pop()) {
            // One that died while idle (killed from outside) is replaced
            // rather than costing a denial.
            if h.alive() {
                return Ok(h);
            }
        }
        Helper::start(&self.program, deadline)
    }

    fn give_back(&self, helper: Helper) {
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE {
                idle.push(helper);
            }
        }
    }

    /// Decides `request` with `engine` in a helper, within `limit`. Never
    /// fails: a helper that cannot start, does not answer in time, dies or
    /// misbehaves makes a denial (and an [`Incident`] when one was killed).
    pub fn decide(
        &self,
        engine: &EngineHandle,
        request: OwnedRequest,
        display: &str,
        limit: Duration,
    ) -> Classified {
        let deadline = Instant::now() + limit;
        let mut helper = match self.take(deadline) {
            Ok(h) => h,
            Err(e) => {
                return Classified {
                    decision: denial(
                        &format!(
                        "classification did not finish: the command classifier cannot start ({})",
                        crate::error::chain(&e)
                    ),
                        "classifier unavailable",
                        display,
                    ),
                    incident: None,
                }
            }
        };
        match helper.decide(engine, request, deadline) {
            Ok((decision, retiring)) => {
                if retiring {
                    helper.finish();
                } else {
                    self.give_back(helper);
                }
                Classified {
                    decision,
                    incident: None,
                }
            }
            Err(failure) => {
                let pid = helper.pid;
                let status = helper.kill_and_reap();
                let what = match (&failure, status) {
                    (Failure::Late, _) => {
                        format!("killed after {} ms without an answer", limit.as_millis())
                    }
                    (Failure::Broken(why), Some(st)) => format!("{why}; it {}", describe(st)),
                    (Failure::Broken(why), None) => why.clone(),
                };
                let restarted = match Helper::start(&self.program, Instant::now() + START_TIMEOUT) {
                    Ok(fresh) => {
                        self.give_back(fresh);
                        true
                    }
                    Err(_) => false,
                };
                let (reason, source) = match failure {
                    Failure::Late => (
                        format!(
                            "classification did not finish within {} ms; simplify the command",
                            limit.as_millis()
                        ),
                        "classifier time limit",
                    ),
                    Failure::Broken(_) => (
                        "classification did not finish: the command classifier failed on this request; simplify the command".to_string(),
                        "classifier failure",
                    ),
                };
                Classified {
                    decision: denial(&reason, source, display),
                    incident: Some(Incident {
                        pid,
                        what,
                        restarted,
                    }),
                }
            }
        }
    }
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(libc::SIGKILL)) => "was killed (SIGKILL)".to_string(),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => status.to_string(),
    }
}

/// The denial a request gets when no helper decided it.
fn denial(reason: &str, source: &str, display: &str) -> Decision {
    Decision {
        verdict: Verdict::Deny {
            reason: reason.to_string(),
        },
        category: Category::Unknown,
        risk: Risk::High,
        reason: reason.to_string(),
        normalized: crate::sanitize::one_line(display, 2000),
        source: source.to_string(),
        profile: None,
        parts: Vec::new(),
    }
}

/// Why a helper did not decide.
enum Failure {
    /// The deadline passed.
    Late,
    /// It died, closed its channel, or answered what it should not have.
    Broken(String),
}

/// One running helper.
struct Helper {
    child: Child,
    pidfd: OwnedFd,
    chan: Channel,
    pid: u32,
    /// Engines sent to it (it may have dropped the oldest; it then says so).
    loaded: HashSet<u64>,
    reaped: bool,
    /// Keeps it on the CPU of the thread that asks it: the request wakes it
    /// there and the asker's yields hand it the CPU (left free, it was woken
    /// on the other, idle, CPU: half of a decision's round trip on a small
    /// virtual machine). A CPU-bound helper still meets its deadline and its
    /// CPU limit.
    cpu: sysward_sandbox::sys::CpuFollower,
}

/// Keeps the broker's record of a helper's engines bounded; the helper
/// holds fewer and says when one is gone.
const MAX_LOADED_IDS: usize = 256;

/// How long the broker keeps its CPU awake for an answer before it sleeps in
/// `poll`: most decisions come back well within it. A CPU that went idle is
/// woken by an interrupt, which on a small virtual machine costs about half
/// of the whole round trip (the classifier bench: p50 95 µs sleeping, 45 µs
/// with this wait). Bounded and yielding, so the helper, which runs on this
/// CPU (see `Helper::cpu`: p50 45 → 18 µs), gets it first.
const AWAKE_WAIT: Duration = Duration::from_micros(250);

impl Helper {
    fn start(program: &Path, deadline: Instant) -> Result<Helper> {
        let (ours, theirs) = Channel::pair()?;
        ours.force_send_buffer(CLASSIFY_REQUEST_MAX)?;
        theirs.force_send_buffer(CLASSIFY_ANSWER_MAX)?;
        let child = crate::spawn::spawn_with_channel(
            program,
            &[],
            theirs.into_fd(),
            Stdio::null(),
            Stdio::null(),
        )?;
        let pid = child.id();
        // Unreaped, the pid cannot be reused: this pidfd is the child's.
        let pidfd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) => {
                let mut child = child;
                let _ = child.kill();
                let _ = child.wait();
                return Err(ClassifierError::Pidfd(e));
            }
        };
        let mut helper = Helper {
            child,
            pidfd,
            chan: ours,
            pid,
            loaded: HashSet::new(),
            reaped: false,
            cpu: sysward_sandbox::sys::CpuFollower::default(),
        };
        let hello = helper.exchange(
            &Request::Hello {
                build: BUILD_VERSION.to_string(),
            },
            deadline,
        );
        let welcome = match hello {
            Ok(a) => a,
            Err(failure) => {
                helper.kill_and_reap();
                match failure {
                    Failure::Late => return Err(ClassifierError::Late(program.to_path_buf())),
                    Failure::Broken(why) => {
                        return Err(ClassifierError::Broken {
                            program: program.to_path_buf(),
                            why,
                        })
                    }
                }
            }
        };
        match welcome {
            Answer::Welcome { build, pid } if build == BUILD_VERSION && pid == helper.pid => {
                Ok(helper)
            }
            other => {
                helper.kill_and_reap();
                Err(ClassifierError::Mismatch {
                    program: program.to_path_buf(),
                    answer: short(&other).to_string(),
                })
            }
        }
    }

    /// Sends one request and waits for its answer until `deadline`, or until
    /// the helper dies. An `Error` answer is a failure.
    fn exchange(&mut self, request: &Request, deadline: Instant) -> Result<Answer, Failure> {
        self.cpu
            .follow(libc::pid_t::try_from(self.pid).unwrap_or(0));
        self.chan.send(request).map_err(|e| {
            Failure::Broken(format!("the command classifier took no request ({e})"))
        })?;
        let awake_until = Instant::now() + AWAKE_WAIT;
        loop {
            let now = Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return Err(Failure::Late);
            }
            let awake = now < awake_until;
            // Rounded up: a deadline a fraction of a millisecond away must not
            // turn into a busy loop of zero-timeout polls.
            let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
            let timeout = if awake {
                PollTimeout::ZERO
            } else {
                PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX)
            };
            let mut fds = [
                PollFd::new(self.chan.fd(), PollFlags::POLLIN),
                PollFd::new(self.pidfd.as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, timeout) {
                Ok(0) => {
                    if awake {
                        std::thread::yield_now();
                    }
                    continue;
                }
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(Failure::Broken(format!("poll: {e}"))),
            }
            let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
            if !readable {
                // The pidfd alone: the helper exited without a word.
                return Err(Failure::Broken(
                    "the command classifier exited without answering".to_string(),
                ));
            }
            return match self.chan.recv::<Answer>() {
                Ok(Answer::Error { message }) => Err(Failure::Broken(format!(
                    "the command classifier refused: {}",
                    crate::sanitize::one_line(&message, 500)
                ))),
                Ok(answer) => Ok(answer),
                Err(e) if e.is_disconnect() => Err(Failure::Broken(
                    "the command classifier exited without answering".to_string(),
                )),
                Err(e) => Err(Failure::Broken(format!(
                    "the command classifier sent an invalid answer: {e}"
                ))),
            };
        }
    }

    fn load(&mut self, engine: &EngineHandle, deadline: Instant) -> Result<(), Failure> {
        let request = Request::LoadEngine {
            id: engine.id,
            setup: engine.setup.clone(),
        };
        match self.exchange(&request, deadline)? {
            Answer::Loaded { id } if id == engine.id => {
                if self.loaded.len() >= MAX_LOADED_IDS {
                    self.loaded.clear();
                }
                self.loaded.insert(id);
                Ok(())
            }
            other => Err(Failure::Broken(format!(
                "the command classifier answered {} to an engine",
                short(&other)
            ))),
        }
    }

    /// One decision; the engine is sent first when this helper lacks it.
    fn decide(
        &mut self,
        engine: &EngineHandle,
        request: OwnedRequest,
        deadline: Instant,
    ) -> Result<(Decision, bool), Failure> {
        if !self.loaded.contains(&engine.id) {
            self.load(engine, deadline)?;
        }
        let request = Request::Decide {
            engine: engine.id,
            request,
        };
        let mut reloaded = false;
        loop {
            match self.exchange(&request, deadline)? {
                Answer::Decided { decision, retiring } => {
                    within_policy(&decision, &engine.setup).map_err(|why| {
                        Failure::Broken(format!(
                            "the command classifier answered a decision its policy does not allow ({why})"
                        ))
                    })?;
                    return Ok((decision, retiring));
                }
                Answer::UnknownEngine { id } if id == engine.id && !reloaded => {
                    self.loaded.remove(&id);
                    self.load(engine, deadline)?;
                    reloaded = true;
                }
                other => {
                    return Err(Failure::Broken(format!(
                        "the command classifier answered {} to a request",
                        short(&other)
                    )))
                }
            }
        }
    }

    /// Whether the process still runs (its pidfd is readable once it exits).
    fn alive(&self) -> bool {
        let mut fds = [PollFd::new(self.pidfd.as_fd(), PollFlags::POLLIN)];
        matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
    }

    /// SIGKILL through the pidfd (the pid cannot have been reused: the child
    /// is not reaped yet), then reap. Returns how it ended.
    fn kill_and_reap(mut self) -> Option<ExitStatus> {
        self.kill_and_reap_in_place()
    }

    fn kill_and_reap_in_place(&mut self) -> Option<ExitStatus> {
        if self.reaped {
            return None;
        }
        // SAFETY: pidfd_send_signal takes an fd we own, a signal number and a
        // null siginfo; no memory is shared.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
        self.reaped = true;
        self.child.wait().ok()
    }

    /// A helper that retired is done (it exits by itself once it has
    /// answered; the kill makes sure).
    fn finish(self) {
        let _ = self.kill_and_reap();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        // Dropping the pool (the broker stops) must not leave helpers behind.
        let _ = self.kill_and_reap_in_place();
    }
}

/// How a helper's decision goes beyond its policy: said inside the denial
/// ("the command classifier answered a decision its policy does not allow
/// (…)") that the audit and the model read.
#[derive(Debug, thiserror::Error)]
enum BeyondPolicy {
    #[error("a decision that runs carries no confinement profile")]
    NoProfile,
    #[error("the profile runs as {uid}:{gid}, not the action's {action_uid}:{action_gid}")]
    Identity {
        uid: u32,
        gid: u32,
        action_uid: u32,
        action_gid: u32,
    },
    #[error("network access with ALLOW_NETWORK=false")]
    Network,
    #[error("a system-wide write with ALLOW_OUTSIDE_PROJECT_WRITE=false")]
    WriteEverywhere,
    /// The write path as shown (one line, at most 200 characters).
    #[error("a write to {0} outside the project with ALLOW_OUTSIDE_PROJECT_WRITE=false")]
    WriteOutside(String),
}

/// What the broker checks of every decision a helper returns, whatever the
/// helper computed: the bounds that follow from the policy's flags alone
/// (the engine's own profile builder enforces the same ones, so a correct
/// helper never trips them). A helper that answers beyond them is treated as
/// broken: killed, and the request denied.
fn within_policy(decision: &Decision, setup: &EngineSetup) -> Result<(), BeyondPolicy> {
    if decision.verdict.is_deny() {
        return Ok(());
    }
    let Some(profile) = &decision.profile else {
        return Err(BeyondPolicy::NoProfile);
    };
    let (block, facts) = (&setup.block, &setup.facts);
    if (profile.uid, profile.gid) != (facts.action_uid, facts.action_gid)
        || !profile.groups.is_empty()
    {
        return Err(BeyondPolicy::Identity {
            uid: profile.uid,
            gid: profile.gid,
            action_uid: facts.action_uid,
            action_gid: facts.action_gid,
        });
    }
    if profile.network && !block.allow_network {
        return Err(BeyondPolicy::Network);
    }
    if !block.allow_outside_project_write {
        if profile.write_everywhere {
            return Err(BeyondPolicy::WriteEverywhere);
        }
        let inside =
            |p: &Path| p.starts_with(&facts.project_root) || p.starts_with(&facts.scratch_dir);
        if let Some(w) = profile.write_paths.iter().find(|w| !inside(Path::new(w))) {
            return Err(BeyondPolicy::WriteOutside(crate::sanitize::one_line(
                w, 200,
            )));
        }
    }
    Ok(())
}

/// The answer's kind, for errors (never its content, which may be large).
fn short(answer: &Answer) -> &'static str {
    match answer {
        Answer::Welcome { .. } => "Welcome",
        Answer::Loaded { .. } => "Loaded",
        Answer::Decided { .. } => "Decided",
        Answer::UnknownEngine { .. } => "UnknownEngine",
        Answer::Error { .. } => "Error",
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| std::io::Error::from_raw_os_error(libc::ESRCH))?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no
    // memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = i32::try_from(fd).map_err(|_| std::io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The pool of this broker's binaries directory.
pub fn start_pool(bin_dir: &Path, warm: usize) -> Result<ClassifierPool> {
    let program = crate::spawn::checked(bin_dir, HELPER_NAME)?;
    ClassifierPool::start(&program, warm).map_err(|source| ClassifierError::Pool {
        program: program.clone(),
        source: Box::new(source),
    })
}
