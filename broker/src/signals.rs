//! SIGINT/SIGTERM for the broker: the first Ctrl+C cancels the turn in flight,
//! a second one (or one at the prompt) exits; SIGTERM stops cleanly (the
//! running action cancelled and recorded, the session's end and the audit
//! anchor written). Signals are blocked in every thread and taken by one
//! thread with sigwait, so no handler runs in a library call. Also sd_notify
//! readiness for the daemon.

use crate::cancel::CancelToken;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Signals {
    pub cancel: CancelToken,
    pub at_prompt: Arc<AtomicBool>,
}

/// How long a stop may take once SIGTERM arrived: the running action is
/// cancelled (killed with everything it started) and its outcome, the
/// session's end and the audit anchor are written; past this the process
/// exits anyway.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// The exit status after a SIGTERM (128 + 15, as a shell reports it).
pub const EXIT_TERMINATED: i32 = 143;

static STOPPING: AtomicBool = AtomicBool::new(false);

/// Set once the daemon listens on its socket: only then is the socket its
/// own to remove at the stop.
static LISTENING: AtomicBool = AtomicBool::new(false);

/// What the daemon's stop does last, before it exits (its process exit
/// skips destructors): removing its cgroup directory.
static AT_STOP: Mutex<Vec<Box<dyn FnOnce() + Send>>> = Mutex::new(Vec::new());

/// Runs `f` at the daemon's clean stop.
pub fn at_stop(f: impl FnOnce() + Send + 'static) {
    AT_STOP
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Box::new(f));
}

/// Tells the stop that the daemon's socket is its own now.
pub fn listening() {
    LISTENING.store(true, Ordering::SeqCst);
}

/// True once SIGTERM arrived: no session starts, and a running one ends at
/// its next request to the model or for an action.
pub fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// The cancel tokens of the sessions running now, to cancel on SIGTERM.
static RUNNING: Mutex<Vec<(u64, CancelToken)>> = Mutex::new(Vec::new());

/// A running session's place in [`RUNNING`]; leaving it (drop) tells a
/// stopping daemon this session has written its end.
pub struct Running {
    id: u64,
}

/// Registers a session's cancel token until the returned guard is dropped.
/// A session registered after the stop began is cancelled at once.
pub fn register(token: &CancelToken) -> Running {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let id = NEXT.fetch_add(1, Ordering::SeqCst);
    lock_running().push((id, token.clone()));
    if stopping() {
        token.cancel();
    }
    Running { id }
}

impl Drop for Running {
    fn drop(&mut self) {
        lock_running().retain(|(id, _)| *id != self.id);
    }
}

fn lock_running() -> std::sync::MutexGuard<'static, Vec<(u64, CancelToken)>> {
    RUNNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Begins the stop: every running session is cancelled, and a watchdog
/// exits the process with `code` if the stop outlasts [`STOP_GRACE`].
fn begin_stop(code: i32) {
    STOPPING.store(true, Ordering::SeqCst);
    for (_, token) in lock_running().iter() {
        token.cancel();
    }
    let _ = std::thread::Builder::new()
        .name("stop-watchdog".to_string())
        .spawn(move || {
            std::thread::sleep(STOP_GRACE);
            eprintln!(
                "sysward: the stop took longer than {} s; exiting now",
                STOP_GRACE.as_secs()
            );
            std::process::exit(code);
        });
}

/// Why the signal handling cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SignalsError {
    #[error(transparent)]
    Mask(#[from] nix::errno::Errno),
    /// The cancel pipe or the signal thread.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T> = std::result::Result<T, SignalsError>;

fn blocked_set() -> Result<SigSet> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
    Ok(set)
}

impl Signals {
    /// For `run` and `cli`: the first Ctrl+C cancels the turn in flight, a
    /// second one (or one at the prompt) exits at once; SIGTERM stops the
    /// session cleanly (see [`STOP_GRACE`]): the caller's session ends at
    /// its next request and `main` exits with [`EXIT_TERMINATED`].
    /// Must run before any other thread starts, so they all inherit the mask.
    pub fn install() -> Result<Signals> {
        Signals::install_with(true)
    }

    /// For a client of the daemon: SIGTERM exits at once (the daemon's
    /// session sees the connection close and ends itself).
    pub fn install_client() -> Result<Signals> {
        Signals::install_with(false)
    }

    fn install_with(term_stops: bool) -> Result<Signals> {
        let set = blocked_set()?;
        let cancel = CancelToken::new()?;
        let at_prompt = Arc::new(AtomicBool::new(false));
        let (c, p) = (cancel.clone(), Arc::clone(&at_prompt));
        std::thread::Builder::new()
            .name("signals".to_string())
            .spawn(move || loop {
                let Ok(sig) = set.wait() else { continue };
                if sig == Signal::SIGTERM && term_stops {
                    if stopping() {
                        continue;
                    }
                    eprintln!("\nsysward: stopping (SIGTERM): the running action is cancelled and recorded");
                    begin_stop(EXIT_TERMINATED);
                    c.cancel();
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

    /// For the daemon: SIGTERM or SIGINT stops it cleanly. Every running
    /// session is cancelled and ends (its action's outcome, `session_end`
    /// and the anchor written), then `socket` is removed and the process
    /// exits 0; past [`STOP_GRACE`] it exits 1. Must run before any other
    /// thread starts.
    pub fn install_daemon(socket: std::path::PathBuf) -> Result<()> {
        let set = blocked_set()?;
        std::thread::Builder::new()
            .name("signals".to_string())
            .spawn(move || loop {
                let Ok(_) = set.wait() else { continue };
                if stopping() {
                    continue;
                }
                eprintln!("sysward broker: stopping: running sessions are cancelled and recorded");
                begin_stop(1);
                let deadline = std::time::Instant::now() + STOP_GRACE;
                while !lock_running().is_empty() && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if LISTENING.load(Ordering::SeqCst) {
                    let _ = std::fs::remove_file(&socket);
                }
                let hooks = std::mem::take(
                    &mut *AT_STOP
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                );
                for hook in hooks {
                    hook();
                }
                eprintln!("sysward broker: stopped");
                std::process::exit(0);
            })?;
        Ok(())
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
