//! sysward-agent: started by the broker with its channel on fd 3 and an empty
//! environment. Confines itself before reading anything, then runs the harness.

use std::os::fd::{FromRawFd, OwnedFd};
use sysward_ipc::Channel;
use sysward_sandbox::{confine_agent, AgentConfinement};

const CHANNEL_FD: i32 = 3;

fn usage() -> ! {
    eprintln!("usage: sysward-agent --uid UID --gid GID   (started by the sysward broker)");
    std::process::exit(2);
}

fn parse_args() -> (u32, u32) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        usage();
    }
    let (mut uid, mut gid) = (None, None);
    for pair in args.chunks(2) {
        let v: u32 = match pair[1].parse() {
            Ok(v) => v,
            Err(_) => usage(),
        };
        match pair[0].as_str() {
            "--uid" if uid.is_none() => uid = Some(v),
            "--gid" if gid.is_none() => gid = Some(v),
            _ => usage(),
        }
    }
    match (uid, gid) {
        // Never run the model loop as root.
        (Some(u), Some(g)) if u != 0 && g != 0 => (u, g),
        _ => usage(),
    }
}

fn main() {
    let (uid, gid) = parse_args();
    if let Err(e) = confine_agent(&AgentConfinement {
        uid,
        gid,
        read_paths: vec![],
        keep_fds: vec![CHANNEL_FD],
    }) {
        eprintln!("sysward-agent: refusing to run unconfined: {e}");
        std::process::exit(1);
    }
    // SAFETY: fd 3 is the broker's channel, handed over at exec and owned by
    // nothing else in this process; confine_agent kept it open.
    let fd = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
    let end = sysward_agent::run(Channel::new(fd), sysward_agent::Options::default());
    if end.exit_code != 0 {
        eprintln!("sysward-agent: {}", end.reason);
    }
    std::process::exit(end.exit_code);
}
