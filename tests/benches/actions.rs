//! End to end through the broker: request → decision → audit → confined
//! `/bin/true` (read-only) and `touch` of a project file (a write, in its
//! protecting mount namespace) → result, beside a bare spawn of `/bin/true` and
//! `bwrap --ro-bind / / --unshare-net --unshare-pid --die-with-parent /bin/true`
//! and a bare spawn of the same `touch`, in the same run (as root).
//!
//! `cargo build --release --workspace --bins && cargo bench -p sysward-tests --bench actions [-- N] [--rounds R]`
//!
//! N actions of each kind (default 1000), in R rounds (default 10) that take
//! turns between the kinds; each round's session runs one action more, its
//! first, which fills the caches and is shown on a line of its own.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Instant;
use sysward_broker::project::Layout;
use sysward_broker::session::{run_session, SessionRequest};
use sysward_ipc::agent::SessionMode;
use sysward_tests::*;

fn stats(name: &str, mut us: Vec<f64>) -> f64 {
    us.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| us[((us.len() as f64 * p) as usize).min(us.len() - 1)];
    println!(
        "{name:<44} n={} median {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms",
        us.len(),
        q(0.5) / 1e3,
        q(0.9) / 1e3,
        q(0.99) / 1e3
    );
    q(0.5)
}

/// Bare spawns of `argv`, with exactly the environment an action gets. Not
/// the bench's own: under `cargo bench` that holds cargo's LD_LIBRARY_PATH
/// (seven directories), through which the dynamic loader searches before it
/// finds libc, which made a bare `/bin/true` about 0.2 ms slower than an
/// action's and every ratio look better than it is.
fn spawn_times(n: usize, argv: &[&str]) -> Vec<f64> {
    let env = sysward_broker::command_plan::action_env(None);
    (0..n)
        .map(|_| {
            let t = Instant::now();
            let st = Command::new(argv[0])
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .args(&argv[1..])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success(), "{argv:?} failed");
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect()
}

/// Runs the bench agent's task and returns its per-action round trips (µs);
/// every action must have succeeded.
fn timed_session(
    ctx: &sysward_broker::session::BrokerContext,
    op: &Recorder,
    what: &str,
) -> Vec<f64> {
    let summary = run_session(
        ctx,
        SessionRequest {
            mode: SessionMode::Tasks { rerun: true },
            dry_run: false,
            operator: "bench".into(),
        },
        op,
    );
    let report = op
        .last_info()
        .unwrap_or_else(|| panic!("no report: {summary:?}"));
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(v["failures"], 0, "some {what} failed: {report:.300}");
    v["micros"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// The median and p99 of each stage of the actions whose request starts with
/// `request` (every round's session), from their outcome records
/// (`stages_us`), slowest median first.
fn stage_breakdown(p: &TestProject, request: &str) {
    let records = audit_records(p);
    let tools: Vec<&serde_json::Value> = records
        .iter()
        .map(|r| &r["event"])
        .filter(|e| {
            e["event"] == "tool"
                && e["stages_us"].is_object()
                && e["request"]
                    .as_str()
                    .is_some_and(|r| r.starts_with(request))
        })
        .collect();
    if tools.is_empty() {
        println!("  (no stage timings in the audit log)");
        return;
    }
    let mut by_stage: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for e in &tools {
        for (name, us) in e["stages_us"].as_object().unwrap() {
            by_stage
                .entry(name.clone())
                .or_default()
                .push(us.as_u64().unwrap_or(0));
        }
    }
    let mut rows: Vec<(String, u64, u64)> = by_stage
        .into_iter()
        .map(|(name, mut v)| {
            v.sort_unstable();
            let q = |f: f64| v[((v.len() as f64 * f) as usize).min(v.len() - 1)];
            (name, q(0.5), q(0.99))
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    let sum: u64 = rows.iter().map(|r| r.1).sum();
    for (name, median, p99) in rows {
        println!("    {name:<18} median {median:>6} µs  p99 {p99:>6} µs");
    }
    println!("    (sum of medians {sum} µs; the rest of the round trip is the agent, the socket and the outcome record)");
}

/// The number after `flag` among `args`.
fn arg_after(args: &[String], flag: &str) -> Option<usize> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() {
    if !require_root("actions bench") {
        return;
    }
    ensure_accounts();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let n: usize = args
        .iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || args[i - 1] != "--rounds")
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(1000);
    // The kinds take turns, a slice of each per round, so that the machine's
    // noise (a shared 2-core VM drifts by tens of percent within a minute)
    // falls on every kind alike and the ratios compare like with like.
    let rounds = arg_after(&args, "--rounds")
        .unwrap_or(10)
        .clamp(1, n.max(1));
    let per_round = n.div_ceil(rounds);
    let server = scenario(r#"{"steps":[]}"#);
    let p = TestProject::new("bench-actions");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-bench.md", &per_round.to_string());
    let layout = Layout::standalone(&p.dir).unwrap();
    let mut ctx =
        sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    ctx.agent_path = bin_dir().join("sysward-test-bench-agent");
    let op = Recorder::new();
    // A write in the project: its mount namespace (sysward's own paths
    // read-only, secrets covered), prepared once and entered per action.
    let target = p.path("bench-write-target");
    let target_text = target.display().to_string();
    // By its path: std spawns a program it must look up in a PATH that the
    // command's own environment sets with fork, not with the vfork-style
    // posix_spawn it uses otherwise, and a fork of this process (its page
    // tables copied) made the bare touch slower than a spawn is.
    let touch = ["/usr/bin/touch", "/bin/touch"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("touch is installed");
    let (mut bare, mut through, mut writes, mut bare_touch) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // The first action of a session builds what later ones find cached (the
    // Landlock ruleset, the mount namespace): shown apart, so that the
    // steady state's p99 is not the rounds' start-up.
    let breakdown = args.iter().any(|a| a == "--breakdown");
    let mut no_cgroup = Vec::new();
    let mut firsts = Vec::new();
    let mut steady = |samples: Vec<f64>, into: &mut Vec<f64>| {
        let mut samples = samples.into_iter();
        firsts.extend(samples.next());
        into.extend(samples);
    };
    for _ in 0..rounds {
        bare.extend(spawn_times(per_round, &["/bin/true"]));
        p.write("01-bench.md", &(per_round + 1).to_string());
        steady(timed_session(&ctx, &op, "actions"), &mut through);
        if breakdown {
            // The same program under its other name, so that its records
            // can be told apart, without the per-action cgroup.
            p.write("01-bench.md", &format!("{} /usr/bin/true", per_round + 1));
            let cgroup_root = ctx.runner.cgroup_root.take();
            steady(
                timed_session(&ctx, &op, "actions without a cgroup"),
                &mut no_cgroup,
            );
            ctx.runner.cgroup_root = cgroup_root;
        }
        p.write(
            "01-bench.md",
            &format!("{} touch {target_text}", per_round + 1),
        );
        steady(timed_session(&ctx, &op, "write actions"), &mut writes);
        // The same program spawned bare: `touch` itself costs more than
        // `true` (coreutils' start-up), which is not the confinement's cost.
        bare_touch.extend(spawn_times(per_round, &[touch, target_text.as_str()]));
    }
    println!("{rounds} rounds of {per_round} of each kind, taking turns");
    let bare = stats("bare spawn of /bin/true", bare);
    let broker = stats("read-only action through the broker", through);
    stage_breakdown(&p, "/bin/true");
    let write = stats("write action (+ protecting mount namespace)", writes);
    stage_breakdown(&p, "touch");
    let bare_touch = stats("bare spawn of the same touch", bare_touch);
    stats("  first action of each session (not above)", firsts);
    p.write("01-bench.md", &n.to_string());
    if breakdown {
        stats("read-only action without the per-action cgroup", no_cgroup);
        stage_breakdown(&p, "/usr/bin/true");
    }
    let bwrap_ok = Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    let bwrap = if bwrap_ok {
        stats(
            "bwrap --ro-bind / / --unshare-net --unshare-pid",
            spawn_times(
                n,
                &[
                    "bwrap",
                    "--ro-bind",
                    "/",
                    "/",
                    "--unshare-net",
                    "--unshare-pid",
                    "--die-with-parent",
                    "/bin/true",
                ],
            ),
        )
    } else {
        println!("bwrap not installed (apt-get install bubblewrap): skipped");
        f64::NAN
    };
    if args.iter().any(|a| a == "--unknown") {
        // A program the catalog does not know runs under the "unknown" profile,
        // which also hides the system buses (a private mount namespace).
        let copy = "/usr/local/bin/sysward-bench-true";
        std::fs::copy("/bin/true", copy).unwrap();
        p.agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
        )
        .write("01-bench.md", &format!("{n} {copy}"));
        let us = timed_session(&ctx, &op, "unknown-profile actions");
        stats("  unknown profile (+ mount namespace)", us);
        let _ = std::fs::remove_file(copy);
    }
    println!("ratio broker/bare (medians): {:.2}", broker / bare);
    println!("ratio write/bare (medians): {:.2}", write / bare);
    println!(
        "ratio write/bare touch (medians, the same program): {:.2}",
        write / bare_touch
    );
    println!("ratio bwrap/broker (medians): {:.2}", bwrap / broker);
}
