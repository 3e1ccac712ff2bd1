//! An operator who floods a session with input while it is busy is held back:
//! the daemon's memory stays flat, and the session still takes the input it
//! asks for (as root, the real daemon).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::operator::{OperatorAnswer, OperatorRequest, RunOptions};
use sysward_ipc::Channel;
use sysward_tests::*;

fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn connect(path: &std::path::Path) -> (Channel, Channel) {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    connect(
        std::os::fd::AsRawFd::as_raw_fd(&fd),
        &UnixAddr::new(path).unwrap(),
    )
    .unwrap();
    let writer = Channel::new(fd.try_clone().unwrap());
    let mut reader = Channel::new(fd);
    writer
        .send(&OperatorRequest::Hello {
            build: sysward_ipc::BUILD_VERSION.to_string(),
        })
        .unwrap();
    assert!(matches!(
        reader.recv::<OperatorAnswer>().unwrap(),
        OperatorAnswer::Welcome { .. }
    ));
    (writer, reader)
}

#[test]
fn a_flood_of_input_is_held_back_and_memory_stays_flat() {
    if !require_root("a_flood_of_input_is_held_back") {
        return;
    }
    ensure_accounts();
    // The first input starts a long action; the session takes no more input
    // while it runs.
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"sleep","args":["4949"]}}]},
          {"content":"slept"}
        ]}"#,
    );
    let p = TestProject::new("daemon-flood");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded\nDEFAULT_COMMAND_TIMEOUT=600");
    let dir = PathBuf::from(format!("/run/sysward-test-flood-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("control.sock");
    let mut daemon = Command::new(sysward())
        .args(["broker", "--root", p.dir.to_str().unwrap(), "--socket"])
        .arg(&socket)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let daemon_pid = daemon.id();
    wait_for(Duration::from_secs(15), "the control socket", || {
        socket.exists().then_some(())
    });
    let (writer, _reader) = connect(&socket);
    writer
        .send(&OperatorRequest::Cli(RunOptions {
            rerun: false,
            dry_run: false,
            interactive: true,
        }))
        .unwrap();
    writer
        .send(&OperatorRequest::Input("sleep a while".into()))
        .unwrap();
    wait_for(Duration::from_secs(30), "the action to run", || {
        children_named(daemon_pid, "sleep").first().copied()
    });
    let before = rss_kib(daemon_pid);
    // 4,000 inputs of 60 KB (240 MB) from a thread: it blocks once the
    // daemon stops reading.
    let sent = Arc::new(AtomicUsize::new(0));
    {
        let sent = Arc::clone(&sent);
        std::thread::spawn(move || {
            let frame = "x".repeat(60_000);
            for _ in 0..4000 {
                if writer.send(&OperatorRequest::Input(frame.clone())).is_err() {
                    return;
                }
                sent.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    // Until the sender stalls (or, without a bound, all is sent).
    let mut last = (0, Instant::now());
    while last.1.elapsed() < Duration::from_secs(3) {
        let now = sent.load(Ordering::SeqCst);
        if now != last.0 {
            last = (now, Instant::now());
        }
        if now == 4000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let after = rss_kib(daemon_pid);
    let held = sent.load(Ordering::SeqCst);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon_pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = wait_output_status(&mut daemon);
    let _ = std::fs::remove_dir_all(&dir);
    println!("sent {held} of 4000 frames; daemon RSS {before} KiB → {after} KiB");
    assert!(held < 4000, "nothing held the client back");
    assert!(
        after < before + 32 * 1024,
        "the daemon grew from {before} KiB to {after} KiB"
    );
}

fn wait_output_status(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while Instant::now() < deadline {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}
