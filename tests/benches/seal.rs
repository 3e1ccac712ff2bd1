//! The cost of forward-secure sealing: a session end (`anchor()`: sync, the
//! anchor written) with and without a seal (one more record, an HMAC, the
//! key's successor written and synced), and a plain durable record beside
//! them, in the same run.
//!
//! `cargo bench -p sysward-tests --bench seal [-- N]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;
use sysward_broker::audit::{self, Audit};

fn median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
}

fn timed(n: usize, sealed: bool, dir: &std::path::Path) -> (Vec<f64>, Vec<f64>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join(".agent")).unwrap();
    let (log, head) = (dir.join("audit.log"), dir.join(".agent/audit.head"));
    if sealed {
        audit::setup_keys(&log, &head).unwrap();
    }
    let a = Audit::open(&log, &head).unwrap();
    let (mut records, mut anchors) = (Vec::new(), Vec::new());
    for i in 0..n {
        let t = Instant::now();
        a.record(serde_json::json!({"event": "bench", "i": i}))
            .unwrap();
        records.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        a.anchor().unwrap();
        anchors.push(t.elapsed().as_secs_f64() * 1e6);
    }
    (records, anchors)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let dir = std::env::temp_dir().join(format!("sysward-seal-bench-{}", std::process::id()));
    let (rec, plain) = timed(n, false, &dir);
    let (_, sealed) = timed(n, true, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let (r, r99) = median(rec);
    let (p, p99) = median(plain);
    let (s, s99) = median(sealed);
    println!(
        "durable record                 n={n} median {:>8.1} µs  p99 {:>8.1} µs",
        r, r99
    );
    println!(
        "session end, no sealing        n={n} median {:>8.1} µs  p99 {:>8.1} µs",
        p, p99
    );
    println!(
        "session end with a seal        n={n} median {:>8.1} µs  p99 {:>8.1} µs",
        s, s99
    );
    println!(
        "sealing adds per session end (medians): {:.1} µs ({:.2}x)",
        s - p,
        s / p
    );
}
