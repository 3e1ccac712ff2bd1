//! Decisions through the confined classifier helper beside the same
//! decisions in process, in the same run: every command of the policy corpus
//! decided by one engine (privileged, every flag on, so nothing is cut short
//! by a gate), round after round, alternating in-process and helper rounds
//! so that machine noise falls on both. Also the cost of starting a helper
//! (spawn, confinement, hello).
//!
//! `cargo bench -p sysward-tests --bench classifier [-- ROUNDS]` (as root:
//! the helper confines itself as the broker's child does). Build the binaries
//! first in the same profile (`cargo build --release --bins`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};
use sysward_broker::classifier::{ClassifierPool, EngineHandle};
use sysward_policy::{parse_agent_md, Engine, HostFacts, OwnedRequest};

fn corpus() -> Vec<OwnedRequest> {
    include_str!("../../policy/tests/corpus/commands.tsv")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .map(|s| OwnedRequest::Shell {
            script: s.replace("\\n", "\n"),
            cwd: PathBuf::from("/srv/agent/work"),
        })
        .collect()
}

fn stats(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p) as usize];
    (at(0.5), at(0.99), v[v.len() - 1])
}

fn helper_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let mut dir = exe.parent().unwrap().to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join("sysward-classify")
}

fn main() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: the classifier bench needs root (the helper confines itself as root)");
        return;
    }
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(10);
    let md = "```policy\nEXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nALLOW_REBOOT=true\n```\n";
    let block = parse_agent_md(md).unwrap().block;
    let mut facts = HostFacts::packaged(0, 0);
    facts.project_root = "/srv/agent".into();
    facts.scratch_dir = "/srv/agent/.agent/tmp".into();
    let in_process = Engine::new(block.clone(), facts.clone());
    let handle = EngineHandle::new(block, facts);
    let cmds = corpus();

    let program = helper_path();
    let mut starts = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let pool = ClassifierPool::start(&program, 1).unwrap();
        starts.push(t.elapsed());
        drop(pool);
    }
    let pool = ClassifierPool::start(&program, 1).unwrap();
    // Warm both: the helper loads the engine, both fault their code in.
    for c in &cmds {
        std::hint::black_box(sysward_classify::decide(&in_process, c));
        std::hint::black_box(pool.decide(&handle, c.clone(), "", Duration::from_secs(5)));
    }

    let (mut here, mut there) = (Vec::new(), Vec::new());
    let (mut here_total, mut there_total) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..rounds {
        let round = Instant::now();
        for c in &cmds {
            let t = Instant::now();
            std::hint::black_box(sysward_classify::decide(&in_process, c));
            here.push(t.elapsed());
        }
        here_total += round.elapsed();
        let round = Instant::now();
        for c in &cmds {
            let t = Instant::now();
            let d = pool.decide(&handle, c.clone(), "", Duration::from_secs(5));
            there.push(t.elapsed());
            assert!(d.incident.is_none(), "{d:?}");
        }
        there_total += round.elapsed();
    }
    let n = here.len();
    let (h50, h99, hmax) = stats(here);
    let (t50, t99, tmax) = stats(there);
    let (s50, s99, smax) = stats(starts);
    println!(
        "{n} decisions each ({} commands x {rounds} rounds, alternating)",
        cmds.len()
    );
    println!(
        "in process:  {:.0} commands/s, p50 {h50:?}, p99 {h99:?}, max {hmax:?}",
        n as f64 / here_total.as_secs_f64()
    );
    println!(
        "helper:      {:.0} commands/s, p50 {t50:?}, p99 {t99:?}, max {tmax:?}",
        n as f64 / there_total.as_secs_f64()
    );
    println!(
        "ratio helper/in process: p50 {:.2}x, p99 {:.2}x, throughput {:.2}x slower",
        t50.as_secs_f64() / h50.as_secs_f64(),
        t99.as_secs_f64() / h99.as_secs_f64(),
        there_total.as_secs_f64() / here_total.as_secs_f64()
    );
    println!(
        "helper start (spawn, confine, hello), 20 starts: p50 {s50:?}, p99 {s99:?}, max {smax:?}"
    );
    println!(
        "p99 through the helper {} the 300 µs budget",
        if t99 <= Duration::from_micros(300) {
            "is within"
        } else {
            "EXCEEDS"
        }
    );
}
