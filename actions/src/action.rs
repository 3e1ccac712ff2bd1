//! Running one approved action through `sysward-exec`: spawn, hand over the spec,
//! learn whether confinement succeeded, capture output within bounds, enforce
//! the timeout and cancellation by killing every descendant.

use crate::cancel::CancelToken;
use crate::capture::{Capture, Captured};
use crate::cgroup::ActionCgroup;
use crate::spawn;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashMap;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sysward_ipc::exec::{
    CommandSpec, ExecReport, ExecSpec, FileChange, EXEC_REPORT_MAX, EXEC_SPEC_MAX,
};
use sysward_ipc::profile::ConfinementProfile;
use sysward_ipc::{Channel, ChannelError};
use sysward_sandbox::jail::{self, ConfinedChild, Jail, JailParts, SpawnError};

/// Why an action could not be watched to its end once started. Its start
/// record is on disk; the caller reports it as not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The child's process descriptor could not be opened.
    #[error("pidfd_open")]
    Pidfd,
    /// Waiting on the child's pipes and descriptor failed.
    #[error("poll")]
    Poll(#[source] nix::errno::Errno),
    /// The pipes for the child's output could not be made.
    #[error(transparent)]
    Pipe(#[from] nix::errno::Errno),
    /// The executor's channel could not be made.
    #[error(transparent)]
    Channel(#[from] sysward_ipc::ChannelError),
    /// The child could not be started.
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnSetupError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// How much of a command's output one read takes.
const READ_BUF_LEN: usize = 64 << 10;

thread_local! {
    /// The read buffer of this thread's actions (one action at a time per
    /// thread), wiped of what it read after each.
    static READ_BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// After the command exits, descendants still holding its pipes get this long
/// before they are killed.
const LINGER: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    Cancelled,
    /// Confinement or exec failed: nothing ran.
    NotRun,
    /// A file operation finished (ok or not, see `file_result`).
    FileOp,
}

pub struct Outcome {
    pub ending: Ending,
    pub stdout: Captured,
    pub stderr: Captured,
    pub duration: Duration,
    /// Why nothing ran, when `ending == NotRun`.
    pub error: Option<String>,
    /// Secrets masked in stdout and stderr (before capture and saving).
    pub redactions: crate::redact::RedactionCounts,
    /// `Ok((output, change))` / `Err(error)` of a file operation.
    pub file_result: Option<std::result::Result<(String, Option<FileChange>), String>>,
    /// Where the time went: for a command `rules` (its cached Landlock,
    /// seccomp and mount namespace looked up), `prepare` (the spawn's
    /// arguments built), `clone`, `confine` (the confinement steps in the
    /// child), `gate` (the child waiting for its start record) and `exec`
    /// (execve); then `spawn` (whatever else starting it took: pipes, a file
    /// operation's executor), `run` (until it exited), `drain` (its output
    /// read to the end).
    pub stages: Vec<Stage>,
}

/// One stage of an action and how long it took.
pub type Stage = (&'static str, Duration);

/// How one attempt of an action runs.
pub struct RunHow<'a> {
    pub timeout: Duration,
    pub cancel: &'a CancelToken,
    /// Where saved outputs go: `<tmp>/<save_prefix>.stdout|stderr`.
    pub save_prefix: &'a str,
    /// Secrets masked in the output streams.
    pub redactor: &'a std::sync::Arc<crate::redact::Redactor>,
    /// For a command: execve waits for this gate (the start record).
    pub gate: Option<jail::GateWait>,
    /// The session's wake-up latency request: released here once the
    /// command has run for [`crate::wake_latency::HOLD_AT_MOST`].
    pub wake_latency: &'a crate::wake_latency::WakeLatency,
}

pub struct Runner {
    pub exec_path: PathBuf,
    /// The sysward binaries beside `exec_path`, never writable by an action
    /// (besides those beside this process, which the rules always protect).
    protected: sysward_sandbox::profile_rules::Extra,
    pub cgroup_root: Option<PathBuf>,
    pub tmp_dir: PathBuf,
    /// Mount namespaces prepared per protected set, entered by the commands
    /// that can write (sysward's own paths read-only) or must not reach the
    /// system buses.
    pub mounts: crate::mountns::MountNamespaces,
    /// Landlock rulesets built once per distinct profile (the walk from `/` is
    /// the expensive part of confinement).
    /// Few distinct profiles occur in a session, so a short list compared
    /// field by field ([`ConfinementProfile::same_rules_as`]) is the index.
    rulesets: Mutex<Vec<CachedRuleset>>,
    /// Write-capable actions run so far (a cached ruleset checked since the
    /// last one needs no new check).
    write_actions: std::sync::atomic::AtomicU64,
    /// Emptied action cgroups, reused: creating and removing one per action
    /// costs more than the rest of the spawn.
    spare_cgroups: Mutex<Vec<ActionCgroup>>,
    /// Seccomp programs, one per [`SeccompKey`].
    seccomp: Mutex<HashMap<SeccompKey, Arc<Vec<libc::sock_filter>>>>,
}

struct CachedRuleset {
    /// The profile it was built for (its limits do not matter).
    profile: ConfinementProfile,
    made: Instant,
    fd: Arc<OwnedFd>,
    /// The directories its read walk went through, and their change times
    /// then.
    walked: Vec<PathBuf>,
    stamp: Vec<Option<(i64, i64)>>,
    /// `Runner::write_actions` when the stamp was last found unchanged.
    checked_at: u64,
    /// The host's mount table generation it was built in (a rule on a
    /// directory mounted over since no longer applies beneath it).
    mounts_generation: u64,
}

/// The change time of each directory (None: missing).
fn walk_stamp(dirs: &[PathBuf]) -> Vec<Option<(i64, i64)>> {
    use std::os::unix::fs::MetadataExt;
    dirs.iter()
        .map(|d| {
            std::fs::metadata(d)
                .ok()
                .map(|m| (m.ctime(), m.ctime_nsec()))
        })
        .collect()
}

/// A cached ruleset is rebuilt after this long, so paths created since are
/// granted again (a stale ruleset only ever grants less).
const RULESET_TTL: Duration = Duration::from_secs(60);
const RULESET_CACHE_MAX: usize = 64;
const SPARE_CGROUPS_MAX: usize = 4;

/// What a profile's seccomp program depends on: allow_mount, can_write,
/// scope_signals, network.
type SeccompKey = (bool, bool, bool, bool);

/// pidfd of a child: readable when it exits.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no
    // memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the kernel just returned this fd to us and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

impl Runner {
    pub fn new(exec_path: PathBuf, cgroup_root: Option<PathBuf>, tmp_dir: PathBuf) -> Runner {
        let protected = sysward_sandbox::profile_rules::Extra {
            write_protected: exec_path
                .parent()
                .map(sysward_sandbox::profile_rules::binaries_in)
                .unwrap_or_default(),
            ..Default::default()
        };
        Runner {
            protected,
            exec_path,
            cgroup_root,
            tmp_dir,
            mounts: Default::default(),
            rulesets: Default::default(),
            write_actions: Default::default(),
            spare_cgroups: Default::default(),
            seccomp: Default::default(),
        }
    }

    /// Drops the cached rulesets. A ruleset holds a reference to each file
    /// its walk named one by one, so a file deleted since (a log an operator
    /// removed to free space) stays allocated while a cached ruleset names
    /// it: the cache lives no longer than a session.
    pub fn forget_rulesets(&self) {
        if let Ok(mut cache) = self.rulesets.lock() {
            cache.clear();
        }
    }

    /// The Landlock ruleset of `profile`, from the cache or built now.
    fn ruleset(&self, profile: &ConfinementProfile) -> Result<Arc<OwnedFd>, String> {
        let mut cache = self
            .rulesets
            .lock()
            .map_err(|_| "the ruleset cache is poisoned".to_string())?;
        let writes_since = self.write_actions.load(std::sync::atomic::Ordering::SeqCst);
        let mounts_generation = self.mounts.host_generation();
        let cached = cache.iter().position(|e| e.profile.same_rules_as(profile));
        if let Some(entry) = cached.and_then(|i| cache.get_mut(i)) {
            if entry.made.elapsed() < RULESET_TTL && entry.mounts_generation == mounts_generation {
                // A write action may have created or replaced entries in a
                // directory the read walk names one by one (`sed -i
                // /etc/hosts` makes a new inode): then it is walked again.
                if entry.checked_at == writes_since || walk_stamp(&entry.walked) == entry.stamp {
                    entry.checked_at = writes_since;
                    return Ok(Arc::clone(&entry.fd));
                }
            }
        }
        if let Some(i) = cached {
            cache.swap_remove(i);
        }
        let walked = sysward_sandbox::profile_rules::read_walk_dirs(profile);
        let stamp = walk_stamp(&walked);
        let exact_before = sysward_sandbox::profile_rules::write_grants_exist(profile);
        let fd = Arc::new(
            sysward_sandbox::profile_rules::prebuild_ruleset(profile, &self.protected)
                .map_err(|e| format!("confinement failed at landlock: {e}; nothing ran"))?,
        );
        // Built with a write grant placed on an ancestor (a directory that
        // did not exist before or during the build): not kept.
        if !(exact_before && sysward_sandbox::profile_rules::write_grants_exist(profile)) {
            return Ok(fd);
        }
        if cache.len() >= RULESET_CACHE_MAX {
            cache.clear();
        }
        cache.push(CachedRuleset {
            profile: profile.clone(),
            made: Instant::now(),
            fd: Arc::clone(&fd),
            walked,
            stamp,
            checked_at: writes_since,
            mounts_generation,
        });
        Ok(fd)
    }

    /// The seccomp program of `profile` (it depends on three flags and on
    /// this process, which it protects), from the cache or compiled now.
    fn seccomp(&self, profile: &ConfinementProfile) -> Result<Arc<Vec<libc::sock_filter>>, String> {
        let key = (
            profile.allow_mount,
            profile.can_write(),
            profile.scope_signals,
            profile.network,
        );
        let mut cache = self
            .seccomp
            .lock()
            .map_err(|_| "the seccomp cache is poisoned".to_string())?;
        if let Some(p) = cache.get(&key) {
            return Ok(Arc::clone(p));
        }
        let fail = |e: sysward_sandbox::SandboxError| {
            format!("confinement failed at seccomp: {e}; nothing ran")
        };
        let program =
            jail::seccomp_program(profile, sysward_sandbox::sys::getpid()).map_err(fail)?;
        let program = Arc::new(jail::kernel_program(&program).map_err(fail)?);
        cache.insert(key, Arc::clone(&program));
        Ok(program)
    }

    /// Starts a command confined by `profile`: one fork, the confinement
    /// steps in the child, one exec (no helper binary in between).
    fn start_command(
        &self,
        profile: &ConfinementProfile,
        command: &CommandSpec,
        cgroup: Option<&ActionCgroup>,
        stdout: OwnedFd,
        stderr: OwnedFd,
        gate: Option<jail::GateWait>,
    ) -> std::result::Result<(ConfinedChild, [Stage; 2]), String> {
        let started = Instant::now();
        let parts = JailParts {
            landlock_ruleset: self.ruleset(profile)?,
            seccomp: self.seccomp(profile)?,
            mounts: self.mounts.for_profile(profile, &self.protected)?,
            extra: self.protected.clone(),
            cgroup: match cgroup {
                Some(c) => Some(c.jail_handles().map_err(|e| {
                    format!(
                        "confinement failed at cgroup: {}: {e}; nothing ran",
                        c.dir().display()
                    )
                })?),
                None => None,
            },
        };
        let looked_up = Instant::now();
        let jail = Jail::prepare(profile, command, parts)
            .map_err(|e| format!("confinement failed at {e}; nothing ran"))?;
        let stages = [
            ("rules", looked_up.duration_since(started)),
            ("prepare", looked_up.elapsed()),
        ];
        let stdin = match &command.stdin {
            Some(text) => Some(
                feed_stdin(text.as_bytes().to_vec())
                    .map_err(|e| format!("cannot prepare the command's stdin: {e}; nothing ran"))?,
            ),
            None => None,
        };
        jail.spawn_with_stdin(stdin, stdout, stderr, gate)
            .map(|child| (child, stages))
            .map_err(|e| match e {
                SpawnError::GateClosed => e.to_string(),
                SpawnError::Prepare(e) => format!("confinement failed at {e}; nothing ran"),
                SpawnError::Confinement { .. } => format!("{e}; nothing ran"),
                SpawnError::Cwd { .. } | SpawnError::Exec { .. } => {
                    format!("cannot execute: {e}")
                }
            })
    }

    /// An empty cgroup for one action: a spare one, or `id` created now.
    pub fn cgroup_for(&self, id: &str) -> Option<ActionCgroup> {
        let root = self.cgroup_root.as_deref()?;
        if let Some(spare) = self.spare_cgroups.lock().ok().and_then(|mut s| s.pop()) {
            return Some(spare);
        }
        match ActionCgroup::create(root, id) {
            // This broker's directory went away (removed by hand): again.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(root).ok()?;
                ActionCgroup::create(root, id).ok()
            }
            created => created.ok(),
        }
    }

    /// Gives an action's cgroup back once the action is over: kept for the
    /// next one if it is empty now, removed (after a wait) otherwise.
    pub fn release_cgroup(&self, cgroup: ActionCgroup) {
        if cgroup.reusable() {
            if let Ok(mut spare) = self.spare_cgroups.lock() {
                if spare.len() < SPARE_CGROUPS_MAX {
                    spare.push(cgroup);
                }
            }
        }
    }

    /// Runs `spec` in `cgroup` (if any), so that its processes die with the
    /// action.
    pub fn run(
        &self,
        spec: &ExecSpec,
        cgroup: Option<&ActionCgroup>,
        how: RunHow<'_>,
    ) -> Result<Outcome, RunError> {
        let can_write = match spec {
            ExecSpec::Command { profile, .. } | ExecSpec::File { profile, .. } => {
                profile.can_write()
            }
        };
        // The broker replaces none of its protected files while this runs
        // (see `project::PROTECTED_REPLACE`).
        let replacing_waits = can_write.then(|| {
            crate::project::PROTECTED_REPLACE
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        let outcome = self.run_confined(spec, cgroup, how);
        drop(replacing_waits);
        if can_write {
            // Files it created or replaced are inodes the cached read walks
            // may not name: the next lookup checks (see `ruleset`).
            self.write_actions
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        outcome
    }

    fn run_confined(
        &self,
        spec: &ExecSpec,
        cgroup: Option<&ActionCgroup>,
        how: RunHow<'_>,
    ) -> Result<Outcome, RunError> {
        let RunHow {
            timeout,
            cancel,
            save_prefix,
            redactor,
            gate,
            wake_latency,
        } = how;
        let start = Instant::now();
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        // Copies of the write ends, closed once the child has exited: the
        // child's exit closes its ends well before its pidfd is ready, and
        // without these the end-of-file woke this thread early, only to sleep
        // and be woken again by the exit (two wake-ups of an idle CPU).
        let mut held_writers = Some([out_w.try_clone()?, err_w.try_clone()?]);
        let mut out = Capture::new(self.tmp_dir.join(format!("{save_prefix}.stdout")));
        let mut err = Capture::new(self.tmp_dir.join(format!("{save_prefix}.stderr")));
        let mut stages = Vec::new();
        let (mut child, mut chan) = match spec {
            ExecSpec::Command {
                profile, command, ..
            } => match self.start_command(profile, command, cgroup, out_w, err_w, gate) {
                Ok((child, looked_up)) => {
                    stages.extend(looked_up);
                    stages.extend(child.stages().iter().copied());
                    (Proc::Jailed(child), None)
                }
                Err(message) => return Ok(not_run(message, start, out, err)),
            },
            ExecSpec::File { .. } => {
                let (ours, theirs) = Channel::pair()?;
                ours.force_send_buffer(EXEC_SPEC_MAX)?;
                theirs.force_send_buffer(EXEC_REPORT_MAX)?;
                let child = spawn::spawn_with_channel(
                    &self.exec_path,
                    &[],
                    theirs.into_fd(),
                    Stdio::from(out_w),
                    Stdio::from(err_w),
                )?;
                let mut child = Proc::Executor(child);
                // Into the action's cgroup before it has its spec: a
                // validate command it starts is killed with the action.
                let joined = match cgroup {
                    Some(cg) => {
                        std::fs::write(cg.dir().join("cgroup.procs"), child.id().to_string())
                            .map_err(|e| {
                                format!("cannot move the executor into {}: {e}", cg.dir().display())
                            })
                    }
                    None => Ok(()),
                };
                if let Err(e) = joined.map_err(|e| e.to_string()).and_then(|()| {
                    ours.send(spec)
                        .map_err(|e| format!("cannot hand the spec to the executor: {e}"))
                }) {
                    kill_all(&child, None, false, cgroup);
                    let _ = child.wait();
                    return Ok(not_run(e, start, out, err));
                }
                (child, Some(ours))
            }
        };
        let spawned = Instant::now();
        let pidfd = match &mut child {
            Proc::Executor(c) => pidfd_open(c.id()),
            Proc::Jailed(c) => c.pidfd().try_clone().ok(),
        };
        // Secrets are masked before anything is kept or saved: a head/tail cut
        // through a value would leave a fragment no later pass recognises.
        let mut out_red = redactor.stream();
        let mut err_red = redactor.stream();
        let pidfd = pidfd.ok_or(RunError::Pidfd)?;
        let deadline = start + timeout;
        let mut out_r = Some(std::fs::File::from(out_r));
        let mut err_r = Some(std::fs::File::from(err_r));
        let mut chan_open = chan.is_some();
        let mut report: Option<ExecReport> = None;
        let mut exited: Option<std::process::ExitStatus> = None;
        let mut exited_at: Option<Instant> = None;
        let mut forced: Option<Ending> = None;
        // Reused from this thread's last action: a fresh zeroed 64 KiB per
        // action is an allocation, a memset and a free on the common path.
        let mut buf = READ_BUF.take();
        if buf.len() < READ_BUF_LEN {
            buf = vec![0u8; READ_BUF_LEN];
        }
        let mut buf_used = 0usize;
        loop {
            if exited.is_some() && out_r.is_none() && err_r.is_none() && !chan_open {
                break;
            }
            let now = Instant::now();
            if forced.is_none() {
                if cancel.is_cancelled() {
                    forced = Some(Ending::Cancelled);
                } else if now >= deadline {
                    forced = Some(Ending::TimedOut);
                }
                if forced.is_some() {
                    kill_all(&child, Some(&pidfd), exited.is_some(), cgroup);
                }
            }
            if let Some(at) = exited_at {
                if now.duration_since(at) > LINGER {
                    // Descendants still hold the pipes: the action is over, they die.
                    kill_all(&child, Some(&pidfd), true, cgroup);
                    out_r = None;
                    err_r = None;
                    chan_open = false;
                    continue;
                }
            }
            let mut fds: Vec<PollFd> = Vec::with_capacity(5);
            let mut which: Vec<u8> = Vec::with_capacity(5);
            if let Some(f) = &out_r {
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                which.push(0);
            }
            if let Some(f) = &err_r {
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                which.push(1);
            }
            if let (true, Some(c)) = (chan_open, &chan) {
                fds.push(PollFd::new(c.fd(), PollFlags::POLLIN));
                which.push(2);
            }
            if exited.is_none() {
                fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
                which.push(3);
            }
            if forced.is_none() {
                fds.push(PollFd::new(cancel.fd(), PollFlags::POLLIN));
                which.push(4);
            }
            let wait_ms = if exited_at.is_some() {
                20
            } else if forced.is_some() {
                50
            } else {
                deadline
                    .saturating_duration_since(now)
                    .as_millis()
                    .clamp(1, 1000) as i32
            };
            // A command still running when the hold's bound passes gives
            // the CPUs back their idle states.
            let hold_left =
                (spawned + crate::wake_latency::HOLD_AT_MOST).saturating_duration_since(now);
            let wait_ms = if !wake_latency.is_held() || exited.is_some() {
                wait_ms
            } else if hold_left.is_zero() {
                wake_latency.release();
                wait_ms
            } else {
                // Rounded up: woken at most a millisecond after the bound.
                let left_ms = i32::try_from(hold_left.as_millis()).unwrap_or(i32::MAX);
                wait_ms.min(left_ms.saturating_add(1))
            };
            match poll(
                &mut fds,
                PollTimeout::try_from(wait_ms).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(RunError::Poll(e)),
            }
            let ready: Vec<u8> = fds
                .iter()
                .zip(&which)
                .filter(|(fd, _)| fd.revents().is_some_and(|r| !r.is_empty()))
                .map(|(_, w)| *w)
                .collect();
            drop(fds);
            for w in ready {
                match w {
                    0 | 1 => {
                        let (slot, cap) = if w == 0 {
                            (&mut out_r, &mut out)
                        } else {
                            (&mut err_r, &mut err)
                        };
                        if let Some(f) = slot {
                            match f.read(&mut buf) {
                                Ok(0) => *slot = None,
                                Ok(n) => {
                                    buf_used = buf_used.max(n);
                                    cap.push(&buf[..n]);
                                }
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                Err(_) => *slot = None,
                            }
                        }
                    }
                    2 => match chan
                        .as_mut()
                        .map(|c| c.recv::<ExecReport>())
                        .unwrap_or(Err(ChannelError::Closed))
                    {
                        Ok(r) => report = Some(r),
                        Err(ChannelError::Closed) => chan_open = false,
                        Err(e) => {
                            report = Some(ExecReport::Refused {
                                error: format!("the executor sent an unreadable report: {e}"),
                            });
                            chan_open = false;
                        }
                    },
                    3 => {
                        if let Ok(Some(status)) = child.try_wait() {
                            exited = Some(status);
                            exited_at = Some(Instant::now());
                            // What the child wrote is in the pipes: end them.
                            drop(held_writers.take());
                        }
                    }
                    _ => {}
                }
            }
        }
        // The output read is wiped before the buffer waits for the next
        // action: it may hold a secret the command printed.
        buf[..buf_used].fill(0);
        READ_BUF.set(buf);
        // Nothing of the action survives it.
        kill_all(&child, Some(&pidfd), exited.is_some(), cgroup);
        let status = match exited {
            Some(s) => s,
            None => child.wait()?,
        };
        let ended = Instant::now();
        let duration = ended.duration_since(start);
        let exited_at = exited_at.unwrap_or(ended);
        let before_fork: Duration = stages.iter().map(|(_, d)| *d).sum();
        stages.extend([
            (
                "spawn",
                spawned.duration_since(start).saturating_sub(before_fork),
            ),
            ("run", exited_at.saturating_duration_since(spawned)),
            ("drain", ended.saturating_duration_since(exited_at)),
        ]);
        out.push(&out_red.finish());
        err.push(&err_red.finish());
        let mut redactions = out_red.counts();
        redactions.add(&err_red.counts());
        let stdout = out.finish();
        let stderr = err.finish();
        let (ending, error, file_result) = match report {
            Some(ExecReport::ConfinementFailed { step, error }) => (
                Ending::NotRun,
                Some(format!(
                    "confinement failed at {step}: {error}; nothing ran"
                )),
                None,
            ),
            Some(ExecReport::ExecFailed { error }) => (
                Ending::NotRun,
                Some(format!("cannot execute: {error}")),
                None,
            ),
            Some(ExecReport::Refused { error }) => (
                Ending::NotRun,
                Some(format!("the executor refused the action: {error}")),
                None,
            ),
            Some(ExecReport::FileDone { output, change }) => {
                (Ending::FileOp, None, Some(Ok((output, change))))
            }
            Some(ExecReport::FileFailed { error }) => (Ending::FileOp, None, Some(Err(error))),
            None => {
                let ending = match forced {
                    Some(f) => f,
                    None => match (status.code(), status.signal()) {
                        (Some(c), _) => Ending::Exited(c),
                        (None, Some(s)) => Ending::Signaled(s),
                        (None, None) => Ending::Exited(-1),
                    },
                };
                (ending, None, None)
            }
        };
        Ok(Outcome {
            ending,
            stdout,
            stderr,
            duration,
            error,
            redactions,
            file_result,
            stages,
        })
    }
}

fn not_run(error: String, start: Instant, out: Capture, err: Capture) -> Outcome {
    Outcome {
        ending: Ending::NotRun,
        stdout: out.finish(),
        stderr: err.finish(),
        duration: start.elapsed(),
        error: Some(error),
        redactions: Default::default(),
        file_result: None,
        stages: vec![("spawn", start.elapsed())],
    }
}

/// Kills the action's process group (the executor called setsid, so its pgid is
/// its pid) and its cgroup, which also catches processes that left the group.
///
/// The group is signalled by number only while the leader is unreaped (its pid
/// cannot have been reused then); the leader itself through its pidfd.
fn kill_all(child: &Proc, pidfd: Option<&OwnedFd>, reaped: bool, cgroup: Option<&ActionCgroup>) {
    if let Some(cg) = cgroup {
        cg.kill_if_populated();
    }
    if !reaped {
        let _ = kill(Pid::from_raw(-(child.id() as i32)), Signal::SIGKILL);
    }
    if let Some(fd) = pidfd {
        // SAFETY: pidfd_send_signal takes an fd we own, a signal number and null
        // siginfo; no memory is shared.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
    }
}

/// The action's first process: `sysward-exec` (file operations) or the
/// confined command itself.
enum Proc {
    Executor(Child),
    Jailed(ConfinedChild),
}

impl Proc {
    fn id(&self) -> u32 {
        match self {
            Proc::Executor(c) => c.id(),
            Proc::Jailed(c) => c.id(),
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Proc::Executor(c) => c.try_wait(),
            Proc::Jailed(c) => c.try_wait(),
        }
    }

    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Proc::Executor(c) => c.wait(),
            Proc::Jailed(c) => c.wait(),
        }
    }
}

/// Where saved outputs go; created on demand (0700).
pub fn ensure_tmp(dir: &Path) -> Result<(), crate::project::ProjectError> {
    crate::project::ensure_private_dir(dir)
}

/// A pipe whose read end becomes a command's stdin; a thread writes `data`
/// into the other end and closes it, so a command that reads slowly (or not
/// at all) never blocks the broker. The bytes are wiped once written: they
/// may hold a secret.
fn feed_stdin(mut data: Vec<u8>) -> std::io::Result<OwnedFd> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    std::thread::Builder::new()
        .name("stdin".to_string())
        .spawn(move || {
            use std::io::Write;
            let mut w = std::fs::File::from(w);
            // A command that exits without reading all of it closes the pipe
            // (EPIPE; SIGPIPE is ignored in the broker): nothing to do.
            let _ = w.write_all(&data);
            drop(w);
            crate::redact::wipe(&mut data);
        })?;
    Ok(r)
}
