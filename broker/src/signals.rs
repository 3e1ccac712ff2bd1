//! SIGINT/SIGTERM for the broker: the first Ctrl+C cancels the turn in flight,
//! a second one (or one at the prompt) exits. Signals are blocked in every
//! thread and taken by one thread with sigwait, so no handler runs in a
//! library call. Also sd_notify readiness for the daemon.

use crate::cancel::CancelToken;
use anyhow::Result;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Signals {
    pub cancel: CancelToken,
    pub at_prompt: Arc<AtomicBool>,
}

impl Signals {
    /// Must run before any other thread starts, so they all inherit the mask.
    pub fn install() -> Result<Signals> {
        let mut set = SigSet::empty();
        set.add(Signal::SIGINT);
        set.add(Signal::SIGTERM);
        nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
        let cancel = CancelToken::new()?;
        let at_prompt = Arc::new(AtomicBool::new(false));
        let (c, p) = (cancel.clone(), Arc::clone(&at_prompt));
        std::thread::Builder::new()
            .name("signals".to_string())
            .spawn(move || loop {
                let Ok(sig) = set.wait() else { continue };
                if sig == Signal::SIGTERM || c.is_cancelled() || p.load(Ordering::SeqCst) {
                    eprintln!("\nsysward: interrupted");
                    std::process::exit(130);
                }
                eprintln!("\nsysward: cancelling (Ctrl+C again to exit)");
                c.cancel();
            })?;
        Ok(Signals { cancel, at_prompt })
    }
}

/// Tells systemd (Type=notify) the daemon is ready, when NOTIFY_SOCKET is set.
pub fn notify_ready() {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let sent = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|addr| sock.send_to_addr(b"READY=1", &addr))
    } else {
        sock.send_to(b"READY=1", std::path::Path::new(&path))
    };
    if let Err(e) = sent {
        eprintln!("sd_notify: {e}");
    }
}
