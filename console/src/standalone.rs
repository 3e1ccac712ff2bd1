//! `sysward run|cli --root DIR`: the console starts its own root broker,
//! `sysward-broker --standalone DIR`, with one end of a socketpair on its
//! fd 3, and talks to it exactly as to the daemon — the same operator
//! protocol, the same session loop ([`crate::client::session`]). The broker
//! serves this one console and exits with the session.

use crate::client::{self, Broker, View};
use crate::terminal::HistoryFile;
use anyhow::{Context, Result};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use sysward_ipc::agent::SessionMode;
use sysward_ipc::operator::{OPERATOR_ANSWER_MAX, OPERATOR_REQUEST_MAX};
use sysward_ipc::Channel;

/// The root broker's binary, beside this one (or in the package's libexec).
pub const BROKER_BINARY: &str = "sysward-broker";

/// Where the broker expects its end of the operator channel.
const BROKER_CHANNEL_FD: i32 = 3;

/// What of the console's environment the broker may see: where systemd put
/// the unit's credentials (secrets), nothing else (the broker's environment
/// is readable by root actions through /proc).
const PASSED_ENV: [&str; 1] = ["CREDENTIALS_DIRECTORY"];

pub fn run(
    root: &Path,
    mode: SessionMode,
    dry_run: bool,
    json: bool,
    verbose: bool,
) -> Result<i32> {
    crate::require_root("sysward run/cli --root")?;
    // Before any thread starts, so that every thread blocks the signals.
    let signals = crate::signals::install()?;
    let exe = sysward_broker::spawn::sibling(BROKER_BINARY)?;
    let (ours, theirs) = Channel::pair()?;
    ours.force_send_buffer(OPERATOR_REQUEST_MAX)?;
    theirs.force_send_buffer(OPERATOR_ANSWER_MAX)?;
    let mut broker = spawn_broker(&exe, root, theirs.into_fd())?;
    crate::signals::forward_sigterm_to(broker.id());
    // The history of a CLI session stays in the project, as it always has:
    // this console runs as root and the project is root's.
    let history = match mode {
        SessionMode::Cli => Some(HistoryFile::for_project(root)),
        SessionMode::Tasks { .. } => None,
    };
    let view = View {
        json,
        verbose,
        history,
    };
    let writer = Channel::new(ours.fd().try_clone_to_owned()?);
    let result = client::greet(writer, ours, Broker::Standalone).and_then(|(writer, reader)| {
        client::session(
            &signals,
            writer,
            reader,
            mode,
            dry_run,
            view,
            Broker::Standalone,
        )
    });
    if result.is_err() {
        // The console gave up mid-session (the broker's own errors end it
        // already): stop the broker cleanly rather than leave it waiting.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(broker.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    // The session's end and the audit anchor are on disk once it exits.
    let status = broker
        .wait()
        .context("cannot wait for the standalone broker")?;
    let code = result?;
    if crate::signals::terminated() {
        return Ok(crate::signals::EXIT_TERMINATED);
    }
    if code == 0 && !status.success() {
        anyhow::bail!("the standalone broker ended with {status} after the session");
    }
    Ok(code)
}

/// Starts `exe --standalone root` with `channel` on fd 3, stdin from
/// /dev/null, its stdout joined to this console's stderr (the console's
/// stdout carries only what the console renders, e.g. `--json` lines), in a
/// process group of its own (the terminal's Ctrl+C reaches the console,
/// which tells the broker over the channel), and an almost empty environment.
fn spawn_broker(exe: &Path, root: &Path, channel: OwnedFd) -> Result<Child> {
    let channel_fd = channel.as_raw_fd();
    let stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
    let mut cmd = Command::new(exe);
    cmd.arg("--standalone")
        .arg(root)
        .env_clear()
        .envs(std::env::vars_os().filter(|(k, _)| PASSED_ENV.iter().any(|p| k == p)))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stderr))
        .stderr(Stdio::inherit());
    // SAFETY: the closure runs between fork and exec in the child and calls
    // only async-signal-safe functions (raw rt_sigaction and rt_sigprocmask,
    // fcntl, dup2) on descriptors it owns, with no allocation. The channel is
    // first copied above 10 (close-on-exec), so that it is right even when it
    // already sits on fd 3; dup2 onto 3 clears close-on-exec on the copy the
    // broker keeps.
    unsafe {
        cmd.pre_exec(move || {
            // The console blocks SIGINT and SIGTERM for its signal thread;
            // the broker must not start with that mask (it sets its own).
            sysward_sandbox::sys::reset_signals()?;
            let copy = libc::fcntl(channel_fd, libc::F_DUPFD_CLOEXEC, 10);
            if copy < 0 || libc::dup2(copy, BROKER_CHANNEL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    drop(channel);
    Ok(child)
}
