//! `sysward-broker --standalone DIR`: one session for the one console that
//! started this broker (`sysward run|cli --root DIR`), over the socketpair it
//! left on fd 3. No socket is bound, nothing else can connect, and the
//! broker exits when the session ends. The console is checked as the daemon
//! checks a control-socket peer, in the form a socketpair allows: the pair
//! was made by this process's parent, which runs as root outside every
//! sysward action.

use crate::operator_channel;
use nix::sys::socket::{getsockopt, sockopt};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use sysward_ipc::operator::{OperatorAnswer, OPERATOR_ANSWER_MAX};
use sysward_ipc::Channel;

/// Why the console's channel was refused, or its session could not be served.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("no operator channel on fd {CONSOLE_FD}: `sysward-broker --standalone` is started by the `sysward` console (`sysward run|cli --root DIR`), not by hand")]
    NoChannel,
    #[error("cannot take the operator channel from fd 3")]
    Take(#[source] std::io::Error),
    #[error("fd {CONSOLE_FD} is not the console's SEQPACKET socketpair")]
    NotSeqPacket,
    #[error("cannot read the operator channel's peer credentials")]
    PeerCredentials(#[source] nix::errno::Errno),
    #[error("the operator channel was made by pid {maker}, not by the console that started this broker (pid {parent}): refused")]
    NotTheParent { maker: i32, parent: i32 },
    #[error("the console that started this broker runs as uid {0}, not root: refused")]
    NotRoot(u32),
    #[error("the console that started this broker runs inside a sysward action's cgroup: refused")]
    InsideAnAction,
    #[error("the console went away before asking for a session")]
    ConsoleGone(#[source] sysward_ipc::ChannelError),
    #[error("the console asked a standalone broker for something other than a session")]
    NotASession,
    #[error(transparent)]
    Channel(#[from] sysward_ipc::ChannelError),
    #[error(transparent)]
    Operator(#[from] operator_channel::OperatorChannelError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T, E = StandaloneError> = std::result::Result<T, E>;

/// Where the console leaves its end of the operator channel.
pub const CONSOLE_FD: RawFd = 3;

/// The console's end of the pair, checked: where it came from and who made it.
pub struct ConsoleChannel {
    fd: OwnedFd,
    console_pid: u32,
}

/// Takes the console's channel from [`CONSOLE_FD`] (close-on-exec from here
/// on: no agent, gateway or action inherits it) and checks who is on the
/// other end. Must run before this process opens any descriptor of its own,
/// which could otherwise land on a free fd 3.
pub fn take_console_channel() -> Result<ConsoleChannel> {
    // SAFETY: F_GETFD only inspects the descriptor number.
    if unsafe { libc::fcntl(CONSOLE_FD, libc::F_GETFD) } < 0 {
        return Err(StandaloneError::NoChannel);
    }
    // SAFETY: fd 3 is open (checked above) and nothing else in this process
    // owns it: the console placed it there for this broker alone.
    let placed = unsafe { OwnedFd::from_raw_fd(CONSOLE_FD) };
    // Moved above the low descriptors with close-on-exec set, so that no
    // child ever inherits it.
    let fd = placed.try_clone().map_err(StandaloneError::Take)?;
    drop(placed);
    if getsockopt(&fd, sockopt::SockType).ok() != Some(nix::sys::socket::SockType::SeqPacket) {
        return Err(StandaloneError::NotSeqPacket);
    }
    let cred =
        getsockopt(&fd, sockopt::PeerCredentials).map_err(StandaloneError::PeerCredentials)?;
    // On a socketpair the kernel names the process that created the pair:
    // it must be the parent that started this broker, as root.
    let parent = nix::unistd::getppid().as_raw();
    if cred.pid() != parent {
        return Err(StandaloneError::NotTheParent {
            maker: cred.pid(),
            parent,
        });
    }
    if cred.uid() != 0 {
        return Err(StandaloneError::NotRoot(cred.uid()));
    }
    if let Some(root) = crate::cgroup::actions_root() {
        if crate::control::in_actions_cgroup(cred.pid(), &root) {
            return Err(StandaloneError::InsideAnAction);
        }
    }
    Ok(ConsoleChannel {
        fd,
        console_pid: parent as u32,
    })
}

/// Serves the console's one session with the project in `root`; returns the
/// exit status the console should end with.
pub fn run(root: &Path, channel: ConsoleChannel) -> Result<i32> {
    let ConsoleChannel { fd, console_pid } = channel;
    let tx = Channel::new(fd.try_clone()?);
    tx.force_send_buffer(OPERATOR_ANSWER_MAX)?;
    let mut rx = Channel::new(fd);
    operator_channel::greet(&tx, &mut rx)?;
    // A request no console may open with is refused as one that is not a
    // session: before its body is decoded.
    let first = match crate::operator_dispatch::recv(
        &mut rx,
        crate::operator_dispatch::OperatorState::Opening,
    ) {
        Ok(request) => Some(request),
        Err(sysward_ipc::ChannelError::Illegal { .. }) => None,
        Err(e) => return Err(StandaloneError::ConsoleGone(e)),
    };
    let Some((mode, opts)) = first.as_ref().and_then(operator_channel::session_wanted) else {
        tx.send(&OperatorAnswer::Error {
            message: "a standalone broker serves one session: expected run or cli".to_string(),
        })?;
        return Err(StandaloneError::NotASession);
    };
    let ctx = match crate::project::Layout::standalone(root)
        .map_err(crate::context::ContextError::from)
        .and_then(crate::context::broker_context)
    {
        Ok(ctx) => ctx,
        Err(e) => {
            // The console shows it as the reason, exactly as it reads.
            tx.send(&OperatorAnswer::Error {
                message: crate::error::chain(&e),
            })?;
            return Ok(1);
        }
    };
    let who = crate::operator::identity(0, Some(console_pid));
    let summary = operator_channel::serve_session(&ctx, tx, rx, mode, &opts, who)?;
    if crate::signals::stopping() {
        return Ok(crate::signals::EXIT_TERMINATED);
    }
    Ok(summary.exit_code)
}
