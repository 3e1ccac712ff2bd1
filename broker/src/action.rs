//! Running one approved action through `sysward-exec`: spawn, hand over the spec,
//! learn whether confinement succeeded, capture output within bounds, enforce
//! the timeout and cancellation by killing every descendant.

use crate::cancel::CancelToken;
use crate::capture::{Capture, Captured};
use crate::cgroup::ActionCgroup;
use crate::spawn;
use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use sysward_ipc::exec::{ExecReport, ExecSpec, FileChange, EXEC_REPORT_MAX, EXEC_SPEC_MAX};
use sysward_ipc::{Channel, ChannelError};

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
}

pub struct Runner {
    pub exec_path: PathBuf,
    pub cgroup_root: Option<PathBuf>,
    pub tmp_dir: PathBuf,
    /// The broker's empty network namespace, passed to executors as fd 4.
    pub netns: Option<OwnedFd>,
    /// Landlock rulesets built once per distinct profile (the walk from `/` is
    /// the expensive part of confinement), passed to executors as fd 5.
    rulesets:
        std::sync::Mutex<std::collections::HashMap<String, (Instant, std::sync::Arc<OwnedFd>)>>,
}

/// A cached ruleset is rebuilt after this long, so paths created since are
/// granted again (a stale ruleset only ever grants less).
const RULESET_TTL: Duration = Duration::from_secs(60);
const RULESET_CACHE_MAX: usize = 64;

/// Where an executor finds the empty network namespace.
pub const NETNS_PATH: &str = "/proc/self/fd/4";

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
    pub fn new(
        exec_path: PathBuf,
        cgroup_root: Option<PathBuf>,
        tmp_dir: PathBuf,
        netns: Option<OwnedFd>,
    ) -> Runner {
        Runner {
            exec_path,
            cgroup_root,
            tmp_dir,
            netns,
            rulesets: Default::default(),
        }
    }

    /// The prebuilt Landlock ruleset of `profile`, from the cache or built now.
    /// None when it cannot be built here (the executor then builds it itself
    /// and reports any failure).
    fn ruleset(
        &self,
        profile: &sysward_ipc::profile::ConfinementProfile,
    ) -> Option<std::sync::Arc<OwnedFd>> {
        let mut key_profile = profile.clone();
        key_profile.timeout_secs = 0;
        key_profile.limits = Default::default();
        let key = format!("{key_profile:?}");
        let mut cache = self.rulesets.lock().ok()?;
        if let Some((at, fd)) = cache.get(&key) {
            if at.elapsed() < RULESET_TTL {
                return Some(std::sync::Arc::clone(fd));
            }
        }
        let fd =
            std::sync::Arc::new(sysward_sandbox::profile_rules::prebuild_ruleset(profile).ok()?);
        if cache.len() >= RULESET_CACHE_MAX {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), std::sync::Arc::clone(&fd)));
        Some(fd)
    }

    /// The path to put in a spec for "no network", if the broker holds a
    /// namespace (otherwise the executor creates a fresh one).
    pub fn netns_path(&self) -> Option<String> {
        self.netns.as_ref().map(|_| NETNS_PATH.to_string())
    }

    pub fn cgroup_for(&self, id: &str) -> Option<ActionCgroup> {
        self.cgroup_root
            .as_deref()
            .and_then(|root| ActionCgroup::create(root, id).ok())
    }

    /// Runs `spec`. `cgroup` must be the one named in the spec (if any) so that
    /// its processes die with the action.
    pub fn run(
        &self,
        spec: &ExecSpec,
        cgroup: Option<&ActionCgroup>,
        timeout: Duration,
        cancel: &CancelToken,
        save_prefix: &str,
        redactor: &std::sync::Arc<crate::redact::Redactor>,
    ) -> Result<Outcome> {
        let start = Instant::now();
        let (ours, theirs) = Channel::pair()?;
        ours.force_send_buffer(EXEC_SPEC_MAX)?;
        theirs.force_send_buffer(EXEC_REPORT_MAX)?;
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let mut prebuilt_spec;
        let mut spec = spec;
        let ruleset = match spec {
            ExecSpec::Command { profile, .. } => self.ruleset(profile),
            ExecSpec::File { .. } => None,
        };
        if let (Some(_), ExecSpec::Command { .. }) = (&ruleset, spec) {
            prebuilt_spec = spec.clone();
            if let ExecSpec::Command { command, .. } = &mut prebuilt_spec {
                command.prebuilt_landlock = true;
            }
            spec = &prebuilt_spec;
        }
        let mut extras = Vec::with_capacity(2);
        if let Some(ns) = &self.netns {
            extras.push((ns.as_fd(), spawn::EXTRA_FD));
        }
        if let Some(r) = &ruleset {
            extras.push((r.as_fd(), sysward_ipc::exec::EXEC_LANDLOCK_FD));
        }
        let mut child = spawn::spawn_mapped(
            &self.exec_path,
            &[],
            theirs.into_fd(),
            &extras,
            Stdio::from(out_w),
            Stdio::from(err_w),
        )?;
        let mut chan = ours;
        let mut out = Capture::new(self.tmp_dir.join(format!("{save_prefix}.stdout")));
        let mut err = Capture::new(self.tmp_dir.join(format!("{save_prefix}.stderr")));
        let pidfd = pidfd_open(child.id());
        if let Err(e) = chan.send(spec) {
            kill_all(&child, pidfd.as_ref(), false, cgroup);
            let _ = child.wait();
            return Ok(not_run(
                format!("cannot hand the spec to the executor: {e}"),
                start,
                out,
                err,
            ));
        }
        // Secrets are masked before anything is kept or saved: a head/tail cut
        // through a value would leave a fragment no later pass recognises.
        let mut out_red = redactor.stream();
        let mut err_red = redactor.stream();
        let pidfd = pidfd.context("pidfd_open")?;
        let deadline = start + timeout;
        let mut out_r = Some(std::fs::File::from(out_r));
        let mut err_r = Some(std::fs::File::from(err_r));
        let mut chan_open = true;
        let mut report: Option<ExecReport> = None;
        let mut exited: Option<std::process::ExitStatus> = None;
        let mut exited_at: Option<Instant> = None;
        let mut forced: Option<Ending> = None;
        let mut buf = vec![0u8; 64 << 10];
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
            if chan_open {
                fds.push(PollFd::new(chan.fd(), PollFlags::POLLIN));
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
            match poll(
                &mut fds,
                PollTimeout::try_from(wait_ms).unwrap_or(PollTimeout::MAX),
            ) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e).context("poll"),
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
                                Ok(n) => cap.push(&buf[..n]),
                                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                                Err(_) => *slot = None,
                            }
                        }
                    }
                    2 => match chan.recv::<ExecReport>() {
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
                        }
                    }
                    _ => {}
                }
            }
        }
        // Nothing of the action survives it.
        kill_all(&child, Some(&pidfd), exited.is_some(), cgroup);
        let status = match exited {
            Some(s) => s,
            None => child.wait()?,
        };
        let duration = start.elapsed();
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
    }
}

/// Kills the action's process group (the executor called setsid, so its pgid is
/// its pid) and its cgroup, which also catches processes that left the group.
///
/// The group is signalled by number only while the leader is unreaped (its pid
/// cannot have been reused then); the leader itself through its pidfd.
fn kill_all(child: &Child, pidfd: Option<&OwnedFd>, reaped: bool, cgroup: Option<&ActionCgroup>) {
    if let Some(cg) = cgroup {
        cg.kill();
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

/// Where saved outputs go; created on demand (0700).
pub fn ensure_tmp(dir: &Path) -> Result<()> {
    crate::project::ensure_private_dir(dir)
}
