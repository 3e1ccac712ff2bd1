//! An operator who floods a session with input while it is busy is held back:
//! the daemon's memory stays flat, and the session still takes the input it
//! asks for (as root, the real daemon).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::operator::{OperatorRequest, RunOptions};
use sysward_tests::daemon::{connect_greeted, TestDaemon};
use sysward_tests::*;

fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
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
    let mut daemon = TestDaemon::start(&p, "flood", false);
    let daemon_pid = daemon.pid();
    let (writer, _reader) = connect_greeted(&daemon.socket);
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
    daemon.stop();
    println!("sent {held} of 4000 frames; daemon RSS {before} KiB → {after} KiB");
    assert!(held < 4000, "nothing held the client back");
    assert!(
        after < before + 32 * 1024,
        "the daemon grew from {before} KiB to {after} KiB"
    );
}
