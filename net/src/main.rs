//! `sysward-net`: the one-shot confined network executor.
//!
//! Contract with the broker: exec'd as root with no arguments, an empty
//! environment, stdin/stdout/stderr `/dev/null`, and fd 3 a SEQPACKET socket
//! carrying exactly one [`NetRequest::Run`]. It confines itself in two layers
//! ([`confine`]), resolves the destination, refuses internal addresses the
//! operator did not list ([`address`]), makes its one connection and answers
//! one [`NetReport`]. It never follows a redirect: the broker decides whether
//! the next hop gets an executor of its own.
//!
//! Everything the network sends is hostile: bodies are read up to the spec's
//! cap and within its time, HTML is reduced to text here (never in the
//! broker), and what goes back is plain text marked as untrusted.

use std::os::fd::{FromRawFd, OwnedFd};
use sysward_ipc::net::{NetOp, NetReport, NetRequest, NetSpec, NET_CHANNEL_FD};
use sysward_ipc::Channel;
use sysward_net::{http, probe, Stop};

/// Exit status when nothing was sent (confinement failed, spec refused).
const EXIT_NOT_RUN: i32 = 126;

fn send(chan: &Channel, report: &NetReport) {
    if let Err(e) = chan.send(report) {
        eprintln!("sysward-net: cannot report to the broker: {e}");
    }
}

fn main() {
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(NET_CHANNEL_FD, libc::F_GETFD) } < 0 {
        eprintln!(
            "sysward-net: fd {NET_CHANNEL_FD} is not open; this program is started by the sysward broker"
        );
        std::process::exit(EXIT_NOT_RUN);
    }
    // SAFETY: fd 3 is open (checked) and nothing else in this fresh process
    // owns it.
    let mut chan = Channel::new(unsafe { OwnedFd::from_raw_fd(NET_CHANNEL_FD) });
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        send(
            &chan,
            &NetReport::Refused {
                error: "sysward-net must be started by the root broker".into(),
            },
        );
        std::process::exit(EXIT_NOT_RUN);
    }
    let spec = match chan.recv::<NetRequest>() {
        Ok(NetRequest::Run(spec)) => spec,
        Err(e) => {
            send(
                &chan,
                &NetReport::Refused {
                    error: format!("cannot read the spec: {e}"),
                },
            );
            std::process::exit(EXIT_NOT_RUN);
        }
    };
    let report = run(&spec);
    let code = match report {
        NetReport::ConfinementFailed { .. } | NetReport::Refused { .. } => EXIT_NOT_RUN,
        NetReport::Failed { .. } => 1,
        NetReport::Done { .. }
        | NetReport::Redirect { .. }
        | NetReport::Nvd(_)
        | NetReport::Tracker(_)
        | NetReport::Downloaded { .. } => 0,
    };
    send(&chan, &report);
    std::process::exit(code);
}

fn run(spec: &NetSpec) -> NetReport {
    let result = match &spec.op {
        NetOp::ProbeTcp { host, port } => probe::tcp(spec, host, *port),
        NetOp::ProbeDns { name, kind, server } => probe::dns(spec, name, *kind, *server),
        NetOp::Http { url, purpose } => http::get(spec, url, purpose.clone()),
    };
    match result {
        Ok(report) => report,
        Err(Stop::Failed(error)) => NetReport::Failed { error },
        Err(Stop::Confinement(e)) => {
            let step = e.step_name().to_string();
            let error = match e {
                sysward_sandbox::SandboxError::Step { detail, .. } => detail,
            };
            NetReport::ConfinementFailed { step, error }
        }
    }
}
