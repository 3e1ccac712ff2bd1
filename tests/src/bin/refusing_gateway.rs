//! A stand-in for `sysward-gateway` that refuses to start the way the real
//! one does when a confinement layer is missing: it sends its reason and
//! exits. It waits first, so that the broker's hello is already queued and
//! never read — the exit then leaves a connection reset pending on the
//! broker's end, ahead of the reason.

use std::os::fd::{FromRawFd, OwnedFd};
use sysward_ipc::gateway::GatewayAnswer;
use sysward_ipc::Channel;

fn main() {
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: the broker passes the channel as fd 3 and nothing else owns it.
    let chan = Channel::new(unsafe { OwnedFd::from_raw_fd(3) });
    let _ = chan.send(&GatewayAnswer::Error {
        message: "refusing-gateway: a confinement layer is missing".into(),
    });
}
