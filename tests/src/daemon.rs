//! A test daemon (`sysward broker --root DIR --socket PATH`, as root) and
//! raw connections to its control socket, for the tests that speak the
//! operator protocol themselves.

use crate::{sysward, wait_for, TestProject};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest};
use sysward_ipc::Channel;

/// The daemon of one test, on a socket in a directory of its own beneath
/// `/run`; stopped with SIGTERM (a clean stop removes its cgroup) and its
/// directory removed when dropped.
pub struct TestDaemon {
    pub child: Child,
    pub socket: PathBuf,
}

impl TestDaemon {
    /// Starts it for `project`; `tag` names its socket directory. The
    /// daemon's stderr goes to the test's when `show_stderr`.
    pub fn start(project: &TestProject, tag: &str, show_stderr: bool) -> TestDaemon {
        let dir = PathBuf::from(format!("/run/sysward-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let socket = dir.join("control.sock");
        let child = Command::new(sysward())
            .args(["broker", "--root", &project.dir.display().to_string()])
            .arg("--socket")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if show_stderr {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("start the daemon");
        wait_for(Duration::from_secs(15), "the control socket", || {
            socket.exists().then_some(())
        });
        TestDaemon { child, socket }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to 12 s for the daemon to end (then
    /// kills it); its exit status.
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let deadline = Instant::now() + Duration::from_secs(12);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        self.child.wait().ok()
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.stop();
        }
        if let Some(dir) = self.socket.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A connection to the control socket at `path` that has said nothing yet.
pub fn connect_raw(path: &Path) -> OwnedFd {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .expect("a SEQPACKET socket");
    connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &UnixAddr::new(path).expect("a socket path"),
    )
    .expect("connect to the control socket");
    fd
}

/// A connection split into its writing and reading channel.
pub fn channels(fd: OwnedFd) -> (Channel, Channel) {
    (
        Channel::new(fd.try_clone().expect("dup the connection")),
        Channel::new(fd),
    )
}

/// This build's `Hello`.
pub fn hello() -> OperatorRequest {
    OperatorRequest::Hello {
        build: sysward_ipc::BUILD_VERSION.to_string(),
    }
}

/// A connection that said hello and was welcomed.
pub fn connect_greeted(path: &Path) -> (Channel, Channel) {
    let (writer, mut reader) = channels(connect_raw(path));
    writer.send(&hello()).expect("send Hello");
    let answer = reader
        .recv::<OperatorAnswer>()
        .expect("the daemon's answer");
    assert!(
        matches!(answer, OperatorAnswer::Welcome { .. }),
        "not welcomed: {answer:?}"
    );
    (writer, reader)
}
