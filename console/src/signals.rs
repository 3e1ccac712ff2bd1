//! SIGINT/SIGTERM for the console: the first Ctrl+C cancels the turn in
//! flight (the broker is told over the channel), a second one (or one at the
//! prompt) exits. SIGTERM to a console that started its own broker is passed
//! on to that broker, which stops the session cleanly (the running action
//! cancelled and recorded, the session's end and the audit anchor written)
//! and ends it; the console then exits with [`EXIT_TERMINATED`]. A client of
//! the daemon exits at once (the daemon's session sees the connection close
//! and ends itself). Signals are blocked in every thread and taken by one
//! thread with sigwait, so no handler runs in a library call.

use anyhow::Result;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use sysward_broker::cancel::CancelToken;

/// The exit status after a SIGTERM (128 + 15, as a shell reports it).
pub const EXIT_TERMINATED: i32 = sysward_broker::signals::EXIT_TERMINATED;

pub struct Signals {
    pub cancel: CancelToken,
    pub at_prompt: Arc<AtomicBool>,
}

/// The standalone broker this console started (0: none, a daemon client).
static BROKER_CHILD: AtomicI32 = AtomicI32::new(0);
static TERMINATED: AtomicBool = AtomicBool::new(false);

/// From now on SIGTERM is passed on to the broker `pid` this console started.
pub fn forward_sigterm_to(pid: u32) {
    BROKER_CHILD.store(i32::try_from(pid).unwrap_or(0), Ordering::SeqCst);
}

/// True once a SIGTERM was passed on to the standalone broker.
pub fn terminated() -> bool {
    TERMINATED.load(Ordering::SeqCst)
}

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
            let broker = BROKER_CHILD.load(Ordering::SeqCst);
            if sig == Signal::SIGTERM && broker > 0 {
                // The broker says it is stopping; the session's end arrives
                // as usual, and a second SIGTERM changes nothing.
                if !TERMINATED.swap(true, Ordering::SeqCst) {
                    let _ =
                        nix::sys::signal::kill(nix::unistd::Pid::from_raw(broker), Signal::SIGTERM);
                }
                continue;
            }
            if sig == Signal::SIGTERM || c.is_cancelled() || p.load(Ordering::SeqCst) {
                eprintln!("\nsysward: interrupted");
                std::process::exit(130);
            }
            eprintln!("\nsysward: cancelling (Ctrl+C again to exit)");
            c.cancel();
        })?;
    Ok(Signals { cancel, at_prompt })
}
