//! The console's side of the operator protocol: a session (its events,
//! prompts and summary) over a channel to the broker — the daemon's control
//! socket, or the socketpair of a standalone broker — and the one-shot
//! requests (`approvals`, `approve`, `deny`) to the daemon.

use crate::terminal::{Console, HistoryFile, Prompted};
use anyhow::{bail, Context, Result};
use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
use std::path::Path;
use sysward_broker::sanitize;
use sysward_ipc::agent::SessionMode;
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest, RunOptions};
use sysward_ipc::{Channel, BUILD_VERSION};

/// Who serves this console's session: the lost connection reads differently.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Broker {
    /// The daemon on its control socket.
    Daemon,
    /// A `sysward-broker --standalone` this console started (`--root DIR`).
    Standalone,
}

/// `sysward run|cli` without `--root`: a session through the daemon.
pub fn run(
    socket_path: &Path,
    mode: SessionMode,
    dry_run: bool,
    json: bool,
    verbose: bool,
) -> Result<i32> {
    let signals = crate::signals::install()?;
    let (writer, reader) = connect_and_greet(socket_path)?;
    // The history lives under the operator's own home (~/.sysward_history):
    // this client is not root and cannot write the daemon's state directory.
    let history = match mode {
        SessionMode::Cli => HistoryFile::for_client(),
        SessionMode::Tasks { .. } => None,
    };
    let view = View {
        json,
        verbose,
        history,
    };
    session(
        &signals,
        writer,
        reader,
        mode,
        dry_run,
        view,
        Broker::Daemon,
    )
}

/// How the console shows a session.
pub struct View {
    pub json: bool,
    pub verbose: bool,
    /// The `agent> ` history (a CLI session only).
    pub history: Option<HistoryFile>,
}

/// One session over an operator channel that has been greeted: asks for it,
/// then shows its events and answers its prompts until its summary arrives.
/// Returns the exit status the summary gives.
pub fn session(
    signals: &crate::signals::Signals,
    writer: Channel,
    mut reader: Channel,
    mode: SessionMode,
    dry_run: bool,
    view: View,
    broker: Broker,
) -> Result<i32> {
    let opts = RunOptions {
        rerun: matches!(mode, SessionMode::Tasks { rerun: true }),
        dry_run,
        interactive: std::io::IsTerminal::is_terminal(&std::io::stdin()),
    };
    writer.send(&match mode {
        SessionMode::Cli => OperatorRequest::Cli(opts),
        SessionMode::Tasks { .. } => OperatorRequest::Run(opts),
    })?;
    // Ctrl+C → Cancel on the channel.
    let cancel_writer = Channel::new(writer.fd().try_clone_to_owned()?);
    let cancel = signals.cancel.clone();
    std::thread::Builder::new()
        .name("cancel-relay".to_string())
        .spawn(move || loop {
            let mut fds = [nix::poll::PollFd::new(
                cancel.fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE).is_ok()
                && cancel.is_cancelled()
            {
                let _ = cancel_writer.send(&OperatorRequest::Cancel);
                cancel.reset();
            }
        })?;
    let lost = |e: sysward_ipc::ChannelError| lost(broker, e);
    let console = Console::new(view.json, view.history);
    console.screen.set_verbose(view.verbose);
    let screen = &console.screen;
    loop {
        let answer = match reader.recv::<OperatorAnswer>() {
            Ok(a) => a,
            Err(e) => {
                screen.idle();
                return Err(lost(e));
            }
        };
        match answer {
            OperatorAnswer::SessionStarted { session_id, banner } => {
                screen.banner(&session_id, &banner);
            }
            OperatorAnswer::Event(ev) => screen.event(&ev),
            OperatorAnswer::Decided { call_id, risk } => screen.decided(&call_id, &risk),
            OperatorAnswer::InputWanted => {
                signals
                    .at_prompt
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let read = console.prompt();
                signals
                    .at_prompt
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                match read {
                    Prompted::Line(line) => {
                        writer.send(&OperatorRequest::Input(line)).map_err(lost)?
                    }
                    Prompted::Exit => writer.send(&OperatorRequest::Detach).map_err(lost)?,
                }
            }
            OperatorAnswer::ApprovalNeeded(p) => {
                let (decision, note) = console.approve(&p);
                writer
                    .send(&OperatorRequest::Approval {
                        id: p.id.clone(),
                        decision,
                        note,
                    })
                    .map_err(lost)?;
            }
            OperatorAnswer::SecretNeeded { name, prompt } => {
                screen.idle();
                eprint!("{}", sanitize::for_terminal(&prompt, 4000));
                // Never echoed, never in the history; an empty line declines.
                let value = match crate::secret_prompt::read_secret_no_echo("value: ") {
                    Ok(v) => Some(v),
                    Err(e) => {
                        eprintln!(
                            "sysward: no value for {}: {e}",
                            sanitize::one_line(&name, 64)
                        );
                        None
                    }
                };
                writer
                    .send(&OperatorRequest::Secret { value })
                    .map_err(lost)?;
            }
            OperatorAnswer::Finished(summary) => {
                screen.finished(&summary);
                return Ok(summary.exit_code);
            }
            OperatorAnswer::Error { message } => {
                screen.idle();
                bail!("{}", sanitize::for_terminal(&message, 4000));
            }
            OperatorAnswer::Welcome { .. } => bail!("the broker sent a second welcome"),
            OperatorAnswer::Done { .. } => bail!("the broker answered out of turn"),
        }
    }
}

/// The session's connection failed mid-session. The daemon that simply went
/// away (`systemctl restart` or `stop`, a shutdown, a crash) gets one plain
/// line, not the channel's "peer closed": the session is over and is not
/// resumed, so the operator reruns it.
fn lost(broker: Broker, e: sysward_ipc::ChannelError) -> anyhow::Error {
    if broker == Broker::Standalone {
        return if e.is_disconnect() {
            anyhow::anyhow!(
                "the broker of this session (sysward-broker) ended before the session did; its reason is above, then run the command again"
            )
        } else {
            anyhow::anyhow!("the broker's channel failed ({e}); run the command again")
        };
    }
    if e.is_disconnect() {
        anyhow::anyhow!(
            "the sysward daemon stopped (a restart, a shutdown or a crash) and this session ended with it: \
             check `systemctl status sysward`, then run the command again"
        )
    } else {
        anyhow::anyhow!(
            "the daemon's connection failed ({e}); see `journalctl -u sysward`, then run the command again"
        )
    }
}

/// What went wrong connecting to the daemon, and what to do.
fn connect_problem(path: &Path, errno: nix::errno::Errno) -> String {
    use nix::errno::Errno;
    let p = path.display();
    match errno {
        Errno::ENOENT => format!(
            "no sysward daemon is listening at {p}: start it (sudo systemctl start sysward), or run without it: sudo sysward run|cli --root DIR"
        ),
        Errno::ECONNREFUSED => format!(
            "{p} exists but no daemon accepts on it (it stopped or crashed): sudo systemctl restart sysward; see journalctl -u sysward"
        ),
        Errno::EACCES | Errno::EPERM => format!(
            "permission denied on {p}: only root and members of the `sysward` group may use the daemon. Ask an administrator to run `usermod -aG sysward {user}`, then log in again",
            user = nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| "YOUR_USER".to_string())
        ),
        other => format!(
            "cannot connect to the sysward daemon at {p}: {other}. Is `sysward broker` running (systemctl status sysward)?"
        ),
    }
}

/// One request that is not a session (`Decide`, `ListApprovals`) through the
/// daemon, for operators in the `sysward` group: the daemon checks the peer and
/// records the decision. Returns whether it succeeded and the text to show.
pub fn request_once(socket_path: &Path, request: OperatorRequest) -> Result<(bool, String)> {
    let (chan, mut reply) = connect_and_greet(socket_path)?;
    chan.send(&request)?;
    match reply.recv::<OperatorAnswer>()? {
        OperatorAnswer::Done { ok, text } => Ok((ok, text)),
        OperatorAnswer::Error { message } => Ok((false, message)),
        _ => bail!("the daemon answered out of turn"),
    }
}

/// Connects to the daemon and exchanges hello/welcome; returns a writer and a
/// reader on the same connection. Every failure says what to do.
fn connect_and_greet(socket_path: &Path) -> Result<(Channel, Channel)> {
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    if let Err(errno) = connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &UnixAddr::new(socket_path)?,
    ) {
        bail!("{}", connect_problem(socket_path, errno));
    }
    let writer = Channel::new(fd.try_clone()?);
    let reader = Channel::new(fd);
    greet(writer, reader, Broker::Daemon)
}

/// Says hello on a fresh operator channel and reads the broker's welcome.
pub fn greet(writer: Channel, mut reader: Channel, broker: Broker) -> Result<(Channel, Channel)> {
    writer.send(&OperatorRequest::Hello {
        build: BUILD_VERSION.to_string(),
    })?;
    let welcome = reader.recv::<OperatorAnswer>().with_context(|| match broker {
        Broker::Daemon => "the daemon closed the connection before welcoming this client; its log says why (journalctl -u sysward)",
        Broker::Standalone => "the broker (sysward-broker) ended before welcoming this console; its reason is above",
    })?;
    match welcome {
        OperatorAnswer::Welcome { .. } => Ok((writer, reader)),
        OperatorAnswer::Error { message } => bail!(
            "the daemon refused this connection: {}",
            sanitize::one_line(&message, 500)
        ),
        _ => bail!(
            "the daemon answered out of turn: it may be a different sysward version than this client ({BUILD_VERSION}); reinstall so both match, then restart it (systemctl restart sysward)"
        ),
    }
}
