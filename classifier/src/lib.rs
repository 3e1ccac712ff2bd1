//! The command classifier helper (`sysward-classify`): the policy engine's
//! shell analysis (brush-parser's bash AST, wrapper unwrapping, path facts)
//! in a process of its own that the root broker starts, confines and can
//! kill. A parse that runs away or allocates without bound costs the broker
//! one denial and one restart of this process, never a thread it cannot stop.
//!
//! The binary (`src/main.rs`) takes its channel on fd 3, confines itself
//! ([`confine`]) and then answers the broker's typed requests ([`serve`]).

use std::collections::VecDeque;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use sysward_ipc::classify::{ClassifyAnswer, ClassifyRequest};
use sysward_ipc::{Channel, ChannelError, CodecError, Message, BUILD_VERSION};
use sysward_policy::{Decision, Engine, EngineSetup, OwnedRequest, PathFacts};

/// broker → classifier.
pub type Request = ClassifyRequest<EngineSetup, OwnedRequest>;
/// classifier → broker.
pub type Answer = ClassifyAnswer<Decision>;

/// The channel to the broker.
pub const CHANNEL_FD: RawFd = 3;

/// The helper's address space: the largest analysis the engine admits (a
/// 1 MiB script, a parse thread of 130 MiB of stack for 2,048 nesting levels,
/// its allocator arena) fits several times over; a runaway allocation fails
/// here, long before the host notices.
pub const ADDRESS_SPACE_BYTES: u64 = 1 << 30;

/// The helper's CPU time, in seconds, after which the kernel kills it.
pub const CPU_LIMIT_SECS: u64 = 60;

/// Past this much CPU time the helper retires after its answer (and the
/// broker starts a fresh one), so that an ordinary decision never meets the
/// CPU limit: one decision takes at most the broker's deadline (1.5 s) of
/// wall time on at most two threads, far less than the 30 s left.
pub const RETIRE_AFTER_CPU_SECS: u64 = CPU_LIMIT_SECS / 2;

/// Engines kept at once (a session's own, one per task with pre-approvals,
/// one per policy reload); the oldest goes first, and the broker loads it
/// again if it asks for it.
pub const MAX_ENGINES: usize = 16;

/// Symlinks are judged by their real target; a path that does not exist yet
/// is judged by its parent's real path. The helper resolves paths as the
/// root broker would: it is uid 0 with CAP_DAC_READ_SEARCH.
pub struct HostPaths;

impl PathFacts for HostPaths {
    fn real_path(&self, p: &Path) -> Option<PathBuf> {
        if let Ok(real) = std::fs::canonicalize(p) {
            return Some(real);
        }
        let parent = std::fs::canonicalize(p.parent()?).ok()?;
        Some(parent.join(p.file_name()?))
    }
}

/// The engines the helper decides with, by the broker's id.
#[derive(Default)]
pub struct Engines {
    held: VecDeque<(u64, Engine)>,
}

impl Engines {
    pub fn load(&mut self, id: u64, setup: EngineSetup) {
        self.held.retain(|(held, _)| *held != id);
        if self.held.len() >= MAX_ENGINES {
            self.held.pop_front();
        }
        self.held.push_back((id, Engine::from_setup(setup)));
    }

    pub fn get(&self, id: u64) -> Option<&Engine> {
        self.held
            .iter()
            .find(|(held, _)| *held == id)
            .map(|(_, e)| e)
    }
}

/// Decides one request with one engine, resolving paths on this host.
pub fn decide(engine: &Engine, request: &OwnedRequest) -> Decision {
    engine.decide(&request.as_request(), &HostPaths)
}

/// Takes ownership of fd 3 after checking that it is an open SEQPACKET socket.
pub fn take_channel_fd() -> Result<OwnedFd, String> {
    use nix::sys::socket::{getsockopt, sockopt, SockType};
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

/// Confines this process (see [`sysward_sandbox::confine_classifier`]);
/// must run before any thread starts.
pub fn confine() -> Result<(), String> {
    sysward_sandbox::confine_classifier(&sysward_sandbox::ClassifierConfinement {
        address_space_bytes: ADDRESS_SPACE_BYTES,
        cpu_seconds: CPU_LIMIT_SECS,
        keep_fds: vec![CHANNEL_FD],
    })
    .map_err(|e| e.to_string())
}

/// CPU time this process has used (all threads), in seconds.
fn cpu_seconds_used() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the live local `t`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    if rc != 0 {
        // Unknown: retire, a fresh helper costs a millisecond.
        return u64::MAX;
    }
    u64::try_from(t.tv_sec).unwrap_or(0)
}

/// Why [`serve`] stopped.
#[derive(Debug)]
pub enum ServeEnd {
    /// The broker closed the channel: a normal end.
    Closed,
    /// This helper used most of its CPU time and said so in its last answer.
    Retired,
    /// The broker sent something this helper does not accept, or the channel
    /// failed; the message says which.
    Failed(String),
}

/// Answers the broker until it closes the channel. `probe` is asked first
/// about every request to decide; when it returns a decision, that is the
/// answer. The shipped binary's probe never answers; the test helper uses it
/// to loop, allocate or try what the confinement forbids.
pub fn serve(
    mut chan: Channel,
    mut probe: impl FnMut(&OwnedRequest) -> Option<Decision>,
) -> ServeEnd {
    let mut greeted = false;
    let mut engines = Engines::default();
    loop {
        let request = chan.recv_checked::<Request>(|header| {
            // Hello first and only once; nothing else before it.
            let hello = header.kind == 1;
            if hello == greeted {
                return Err(ChannelError::Illegal {
                    kind: Request::kind_name(header.kind)
                        .unwrap_or("unknown")
                        .to_string(),
                    state: if greeted {
                        "after the hello".to_string()
                    } else {
                        "before the hello".to_string()
                    },
                });
            }
            Ok(Request::MAX_FRAME)
        });
        let answer = match request {
            Err(e) if e.is_disconnect() => return ServeEnd::Closed,
            Err(e) => {
                let message = format!("sysward-classify: {e}");
                let _ = chan.send(&Answer::Error {
                    message: message.clone(),
                });
                return ServeEnd::Failed(message);
            }
            Ok(ClassifyRequest::Hello { build }) => {
                if build != BUILD_VERSION {
                    let message = format!(
                        "sysward-classify is version {BUILD_VERSION}, the broker {build}: reinstall sysward so all binaries match"
                    );
                    let _ = chan.send(&Answer::Error {
                        message: message.clone(),
                    });
                    return ServeEnd::Failed(message);
                }
                greeted = true;
                Answer::Welcome {
                    build: BUILD_VERSION.to_string(),
                    pid: std::process::id(),
                }
            }
            Ok(ClassifyRequest::LoadEngine { id, setup }) => {
                engines.load(id, setup);
                Answer::Loaded { id }
            }
            Ok(ClassifyRequest::Decide { engine, request }) => match engines.get(engine) {
                None => Answer::UnknownEngine { id: engine },
                Some(e) => {
                    let decision = probe(&request).unwrap_or_else(|| decide(e, &request));
                    Answer::Decided {
                        decision,
                        retiring: cpu_seconds_used() >= RETIRE_AFTER_CPU_SECS,
                    }
                }
            },
        };
        let retiring = matches!(answer, Answer::Decided { retiring: true, .. });
        match chan.send(&answer) {
            Ok(()) if retiring => return ServeEnd::Retired,
            Ok(()) => {}
            Err(e) if e.is_disconnect() => return ServeEnd::Closed,
            Err(ChannelError::Codec(CodecError::TooLarge { len, max })) => {
                // A decision's text is bounded by its request's, so this
                // cannot happen; if it does, the broker hears why.
                let message = format!("sysward-classify: an answer of {len} bytes exceeds {max}");
                let _ = chan.send(&Answer::Error {
                    message: message.clone(),
                });
                return ServeEnd::Failed(message);
            }
            Err(e) => return ServeEnd::Failed(format!("sysward-classify: {e}")),
        }
    }
}

/// The whole helper process: fd 3, confinement, then [`serve`]. Exit status:
/// 0 after the broker closed the channel or the helper retired; 1 protocol
/// violation or channel failure; 2 usage or a wrong fd 3; 3 confinement
/// failed (also sent to the broker as an `Error` answer).
pub fn run(probe: impl FnMut(&OwnedRequest) -> Option<Decision>) -> std::process::ExitCode {
    use std::process::ExitCode;
    if std::env::args_os().len() > 1 {
        eprintln!("sysward-classify takes no arguments: the broker starts it with its channel on fd {CHANNEL_FD}");
        return ExitCode::from(2);
    }
    let fd = match take_channel_fd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("sysward-classify: {e}");
            return ExitCode::from(2);
        }
    };
    let chan = Channel::new(fd);
    if let Err(e) = confine() {
        let message = format!(
            "sysward-classify refuses to run unconfined: {e} (run `sysward doctor` to see which kernel feature is missing)"
        );
        let _ = chan.send(&Answer::Error { message });
        return ExitCode::from(3);
    }
    match serve(chan, probe) {
        ServeEnd::Closed | ServeEnd::Retired => ExitCode::SUCCESS,
        ServeEnd::Failed(_) => ExitCode::from(1),
    }
}
