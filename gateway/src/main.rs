//! `sysward-gateway --uid U --gid G --port P`, started by the root broker once
//! per session with the broker channel (SOCK_SEQPACKET) on fd 3 and an empty
//! environment.
//!
//! Order matters: argv, a check of fd 3, then confinement (uid/gid drop,
//! Landlock, seccomp, non-dumpable) — all while the process is still
//! single-threaded — and only then the async runtime and the protocol. If any
//! confinement step fails the gateway exits without reading a single message:
//! it never runs unconfined, and there is no flag to make it.
//!
//! Exit status: 0 after Shutdown or EOF; 1 protocol violation, bad setup or
//! channel failure (an `Error` answer was sent when possible); 2 usage or a
//! missing/wrong fd 3; 3 confinement failed (also sent as an `Error` answer on
//! fd 3, since confinement points stderr at /dev/null).

use nix::sys::socket::{getsockopt, sockopt, SockType};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::ExitCode;
use sysward_gateway::args::{Args, USAGE};
use sysward_gateway::{serve, ServeConfig};
use sysward_ipc::gateway::GatewayAnswer;
use sysward_ipc::Channel;
use sysward_sandbox::GatewayConfinement;

const CHANNEL_FD: RawFd = 3;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args_os().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("sysward-gateway: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let channel_fd = match take_channel_fd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("sysward-gateway: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let channel = Channel::new(channel_fd);

    // Confinement first: no thread or runtime exists yet, so every thread
    // created later inherits the Landlock domain and the seccomp filter.
    // Confinement points fds 0-2 at /dev/null, so a failure is reported on
    // the channel too (the broker reads it as the answer to its Hello).
    let confinement = GatewayConfinement {
        uid: args.uid,
        gid: args.gid,
        api_port: args.port,
        read_paths: vec![],
        keep_fds: vec![CHANNEL_FD],
    };
    let confined = sysward_sandbox::confine_gateway(&confinement)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            sysward_sandbox::set_non_dumpable().map_err(|e| format!("set non-dumpable: {e}"))
        });
    if let Err(e) = confined {
        let message = format!(
            "sysward-gateway refuses to run unconfined: {e} (the gateway holds the model API key; \
             it starts only when every confinement layer applies — run `sysward doctor` to see \
             which kernel feature or user is missing)"
        );
        eprintln!("{message}");
        let _ = channel.send(&GatewayAnswer::Error { message });
        return ExitCode::from(3);
    }

    match serve(
        channel,
        ServeConfig {
            api_port: Some(args.port),
        },
    ) {
        Ok(()) => ExitCode::SUCCESS,
        // The broker already got an `Error` answer when the channel still
        // worked; stderr is /dev/null by now.
        Err(_) => ExitCode::from(1),
    }
}

/// Takes ownership of fd 3 after checking that it is an open SEQPACKET socket.
fn take_channel_fd() -> Result<OwnedFd, String> {
    // SAFETY: fcntl(F_GETFD) on any integer only queries the descriptor table;
    // it touches no memory.
    let flags = unsafe { libc::fcntl(CHANNEL_FD, libc::F_GETFD) };
    if flags == -1 {
        return Err(format!(
            "fd {CHANNEL_FD} is not open: the broker passes its channel there"
        ));
    }
    // SAFETY: fd 3 is open (checked above), and nothing else in this freshly
    // exec'd, single-threaded process owns it, so the OwnedFd is its only owner.
    let fd = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    match getsockopt(&fd, sockopt::SockType) {
        Ok(SockType::SeqPacket) => Ok(fd),
        Ok(other) => Err(format!(
            "fd {CHANNEL_FD} is a {other:?} socket, not SOCK_SEQPACKET"
        )),
        Err(e) => Err(format!("fd {CHANNEL_FD} is not a socket ({e})")),
    }
}
