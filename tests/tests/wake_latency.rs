//! While an approved command starts, the session asks the kernel for zero
//! CPU wake-up latency (`/dev/cpu_dma_latency`), and only for a few
//! milliseconds: a short command runs with the limit at 0, a command that
//! runs longer sees it given back, and after the session the system's
//! limit is what it was. Read from inside the actions themselves, through
//! the real broker → agent → gateway → action tree; and with
//! `CPU_LATENCY_REQUEST=off` in init.conf nothing is requested. Needs root
//! (the device is root's) and skips loudly otherwise, or where the device is
//! missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;
use sysward_tests::*;

const DEVICE: &str = "/dev/cpu_dma_latency";

fn current_limit() -> i32 {
    let mut b = [0u8; 4];
    std::fs::File::open(DEVICE)
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    i32::from_ne_bytes(b)
}

/// The number `od -An -td4` printed in a tool result.
fn limit_in(result: &str) -> Option<i64> {
    result
        .split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .filter(|w| !w.is_empty() && *w != "-")
        .filter_map(|w| w.parse().ok())
        .next_back()
}

/// The limit is the system's: one test at a time reads or changes it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Root, the device and the accounts the tree runs as, or None (skipped):
/// this test's turn with the limit, and the limit before it.
fn begin(test: &str) -> Option<(std::sync::MutexGuard<'static, ()>, i32)> {
    if !require_root(test) {
        return None;
    }
    if !std::path::Path::new(DEVICE).exists() {
        eprintln!("SKIPPED: {test}: {DEVICE} is missing here (a container?)");
        return None;
    }
    ensure_accounts();
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    Some((turn, current_limit()))
}

fn od() -> serde_json::Value {
    serde_json::json!({"command": "od", "args": ["-An", "-td4", DEVICE]})
}

const POLICY: &str = "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true";

#[test]
fn a_starting_command_runs_with_zero_wake_latency_and_a_longer_one_gives_it_back() {
    let Some((_turn, before)) =
        begin("a_starting_command_runs_with_zero_wake_latency_and_a_longer_one_gives_it_back")
    else {
        return;
    };
    let p = TestProject::new("wake-latency");
    let later = serde_json::json!({
        "command": "sh",
        "args": ["-c", format!("sleep 0.2; od -An -td4 {DEVICE}")],
    });
    let run = run_scripted(
        &p,
        vec![tool_call("exec", od()), tool_call("exec", later)],
        POLICY,
        "Read the CPU latency limit.",
    );
    let (short, long) = (&run.results[0], &run.results[1]);
    assert_eq!(
        limit_in(short),
        Some(0),
        "a short command runs with the limit at 0: {short}"
    );
    assert_eq!(
        limit_in(long),
        Some(i64::from(before)),
        "a command past the hold's bound sees the limit given back: {long}"
    );
    assert_eq!(current_limit(), before, "after the session");
}

#[test]
fn with_the_request_off_in_init_conf_nothing_is_requested() {
    let Some((_turn, before)) = begin("with_the_request_off_in_init_conf_nothing_is_requested")
    else {
        return;
    };
    let p = TestProject::new("wake-latency-off");
    let run = run_scripted_with(
        &p,
        vec![tool_call("exec", od())],
        POLICY,
        "Read the CPU latency limit.",
        60,
        "CPU_LATENCY_REQUEST=off",
    );
    assert_eq!(
        limit_in(&run.results[0]),
        Some(i64::from(before)),
        "the limit is left alone: {}",
        run.results[0]
    );
}

/// A command retried after a transient failure (seconds later) runs its
/// next attempt without the request: the CPUs may halt while it waits.
#[test]
fn a_retry_waits_and_runs_without_the_request() {
    let Some((_turn, before)) = begin("a_retry_waits_and_runs_without_the_request") else {
        return;
    };
    let p = TestProject::new("wake-latency-retry");
    let marker = p.path("attempted");
    // The first attempt fails the way a name that did not resolve does
    // (retried); the second reads the limit.
    let script = format!(
        "if [ -e {m} ]; then od -An -td4 {DEVICE}; else : > {m}; echo 'curl: (6) Could not resolve host: example.invalid' >&2; exit 6; fi",
        m = marker.display()
    );
    let run = run_scripted(
        &p,
        vec![tool_call("shell", serde_json::json!({ "command": script }))],
        "EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
        "Read the CPU latency limit.",
    );
    let result = &run.results[0];
    assert!(result.contains("retried after"), "not retried: {result}");
    assert_eq!(
        limit_in(result),
        Some(i64::from(before)),
        "the retry ran with the limit given back: {result}"
    );
}
