//! A classification abandoned at its deadline keeps running: a thread cannot
//! be stopped. If it also allocates without bound (a generated script once
//! grew a test process to 24 GB), the host's OOM killer would pick a victim.
//! While any classification is abandoned, this watchdog compares the broker's
//! resident memory with what it was when the first one was abandoned. Past
//! the budget, the broker stops (abort) with a message saying why; systemd
//! restarts it. Losing the sessions in flight is better than losing the host.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How much the broker may grow while a classification is abandoned.
pub const BUDGET_BYTES: u64 = 1 << 30;

static RUNNING: AtomicBool = AtomicBool::new(false);

/// The resident memory of this process.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Starts the watchdog unless it runs: it stays while `stuck` is above zero.
pub fn watch(stuck: &'static AtomicUsize, budget: u64) {
    if RUNNING.swap(true, Ordering::SeqCst) {
        return;
    }
    let Some(baseline) = rss_bytes() else {
        RUNNING.store(false, Ordering::SeqCst);
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("classify-watchdog".to_string())
        .spawn(move || {
            while stuck.load(Ordering::SeqCst) > 0 {
                if let Some(now) = rss_bytes() {
                    if now > baseline.saturating_add(budget) {
                        eprintln!(
                            "sysward: a command the classifier gave up on kept allocating memory ({} MiB, {} MiB when it was abandoned); stopping the broker to protect the host (systemd restarts it)",
                            now >> 20,
                            baseline >> 20
                        );
                        std::process::abort();
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            RUNNING.store(false, Ordering::SeqCst);
        });
    if spawned.is_err() {
        RUNNING.store(false, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    static STUCK: AtomicUsize = AtomicUsize::new(0);

    /// Run by the test below in a child process: a "stuck" classification
    /// that allocates; the watchdog must abort the process.
    #[test]
    #[ignore = "run by the_broker_stops_when_an_abandoned_classification_keeps_allocating"]
    fn child_allocates_while_stuck() {
        STUCK.store(1, Ordering::SeqCst);
        watch(&STUCK, 64 << 20);
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        for _ in 0..128 {
            hoard.push(vec![1u8; 8 << 20]);
            std::thread::sleep(Duration::from_millis(10));
        }
        println!("NOT STOPPED with {} MiB", hoard.len() * 8);
    }

    #[test]
    fn the_broker_stops_when_an_abandoned_classification_keeps_allocating() {
        use std::os::unix::process::ExitStatusExt;
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "watchdog::tests::child_allocates_while_stuck",
                "--ignored",
                "--nocapture",
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{stderr}");
        assert!(stderr.contains("stopping the broker"), "{stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("NOT STOPPED"));
    }

    /// Run by the test below in a child process, where no other test's
    /// abandoned classification keeps the watchdog running.
    #[test]
    #[ignore = "run by nothing_is_watched_while_nothing_is_stuck"]
    fn child_watches_an_idle_counter() {
        static IDLE: AtomicUsize = AtomicUsize::new(0);
        watch(&IDLE, 0);
        // The thread sees zero and ends; the watchdog can start again.
        for _ in 0..500 {
            if !RUNNING.load(Ordering::SeqCst) {
                println!("WATCHDOG ENDED");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the watchdog kept running with nothing stuck");
    }

    #[test]
    fn nothing_is_watched_while_nothing_is_stuck() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "watchdog::tests::child_watches_an_idle_counter",
                "--ignored",
                "--nocapture",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("WATCHDOG ENDED"),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
