//! Classification throughput over the corpus, single thread: every corpus
//! command decided by one engine (privileged, every flag on, so nothing is
//! cut short by a gate). Target: ≥ 20,000 commands/s and p99 ≤ 200 µs.
//!
//! `cargo bench -p sysward-policy --bench classify` prints criterion's
//! throughput and then a per-command latency distribution (p50/p99/max).

use criterion::{black_box, Criterion, Throughput};
use std::path::Path;
use std::time::{Duration, Instant};
use sysward_policy::{parse_agent_md, Engine, HostFacts, LexicalPaths, Request};

fn corpus() -> Vec<String> {
    include_str!("../tests/corpus/commands.tsv")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').next())
        .map(|s| s.replace("\\n", "\n"))
        .collect()
}

fn engine() -> Engine {
    let md = "```policy\nEXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nALLOW_REBOOT=true\n```\n";
    let block = parse_agent_md(md).map(|p| p.block).unwrap_or_default();
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    Engine::new(block, f)
}

fn decide_all(e: &Engine, cmds: &[String]) {
    for c in cmds {
        let d = e.decide(
            &Request::Shell {
                script: c,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        black_box(d);
    }
}

fn latency_report(e: &Engine, cmds: &[String]) {
    let rounds = 20;
    let mut samples: Vec<Duration> = Vec::with_capacity(cmds.len() * rounds);
    let start = Instant::now();
    for _ in 0..rounds {
        for c in cmds {
            let t = Instant::now();
            let d = e.decide(
                &Request::Shell {
                    script: c,
                    cwd: Path::new("/srv/agent/work"),
                },
                &LexicalPaths,
            );
            samples.push(t.elapsed());
            black_box(d);
        }
    }
    let total = start.elapsed();
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 - 1.0) * p) as usize];
    let n = samples.len();
    println!(
        "latency over {n} decisions ({} commands x {rounds}): {:.0} commands/s, p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
        cmds.len(),
        n as f64 / total.as_secs_f64(),
        pct(0.50),
        pct(0.90),
        pct(0.99),
        samples[n - 1]
    );
}

fn main() {
    let cmds = corpus();
    let e = engine();
    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(20)
        .measurement_time(Duration::from_secs(8));
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(cmds.len() as u64));
    g.bench_function("corpus", |b| b.iter(|| decide_all(&e, &cmds)));
    g.finish();
    c.final_summary();
    latency_report(&e, &cmds);
}
