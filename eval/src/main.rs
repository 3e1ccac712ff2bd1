//! `sysward-eval` (also `sysward eval`): scored ops scenarios, each in a
//! throwaway Debian host with sysward installed, against any
//! OpenAI-compatible model, or against a scripted replay of each scenario's
//! reference solution (`--oracle`).

mod baseline;
mod chart;
mod netns;
mod report;
mod run;
mod scenario;

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const USAGE: &str =
    "usage: sysward eval [--model FILE]... [--baseline FILE]... [--oracle] [--null-model]
                    [--tags T,T] [--repeat N] [--jobs N] [--time-limit S]
                    [--output DIR] [--deb FILE] SCENARIO_DIR...

Runs each scenario in a throwaway Debian host (systemd-nspawn over the cached
base, see scripts/hosts/base.sh) with sysward's .deb installed, and scores it
with the scenario's check script. A directory of scenario directories runs
them all.
  --model FILE   an endpoint: init.conf lines (API_URL=, MODEL=, API_KEY=,
                 TOOL_CALLING=, CONTEXT_SIZE=, …); repeatable
  --oracle       replay each scenario's reference solution through a scripted
                 model (checks the scenario and the harness)
  --baseline FILE  the plain-loop baseline (no sysward: model → bash as
                 root → model) with that endpoint (plain http only); repeatable
  --null-model   a scripted model that does nothing and claims DONE: the
                 negative control (a repair scenario must fail under it)
  --tags T,T     only scenarios with one of these tags
  --repeat N     run each scenario N times per endpoint (default 1)
  --jobs N       hosts at a time (default 2)
  --output DIR   reports and transcripts (default eval-out/<time>)
  --time-limit S cap every scenario's session time at S seconds
  --deb FILE     the sysward .deb to install (default $SYSWARD_DEB, else the
                 newest target/debian/sysward_*.deb)
Writes DIR/report.json, DIR/report.md and DIR/report.svg (a chart of the
pass rates); exits 0 when every run passed, 1 when one failed, 2 on a usage
or configuration error.";

struct Args {
    models: Vec<PathBuf>,
    baselines: Vec<PathBuf>,
    oracle: bool,
    null: bool,
    tags: Vec<String>,
    repeat: usize,
    jobs: usize,
    output: Option<PathBuf>,
    deb: Option<PathBuf>,
    time_limit: Option<u64>,
    dirs: Vec<PathBuf>,
}

fn parse_args() -> Result<Option<Args>> {
    let mut a = Args {
        models: Vec::new(),
        baselines: Vec::new(),
        oracle: false,
        null: false,
        tags: Vec::new(),
        repeat: 1,
        jobs: 2,
        output: None,
        deb: None,
        time_limit: None,
        dirs: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().with_context(|| format!("{name} needs a value")),
            }
        };
        let number = |name: &str, v: String| -> Result<usize> {
            v.parse::<usize>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .with_context(|| format!("{name}: {v:?} is not a number from 1 to 1000"))
        };
        match flag.as_str() {
            "--model" => a.models.push(PathBuf::from(value("--model")?)),
            "--oracle" => a.oracle = true,
            "--baseline" => a.baselines.push(PathBuf::from(value("--baseline")?)),
            "--null-model" => a.null = true,
            "--tags" => a.tags.extend(
                value("--tags")?
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string),
            ),
            "--repeat" => a.repeat = number("--repeat", value("--repeat")?)?,
            "--jobs" => a.jobs = number("--jobs", value("--jobs")?)?,
            "--output" => a.output = Some(PathBuf::from(value("--output")?)),
            "--deb" => a.deb = Some(PathBuf::from(value("--deb")?)),
            "--time-limit" => {
                a.time_limit = Some(number("--time-limit", value("--time-limit")?)? as u64)
            }
            "-h" | "--help" => return Ok(None),
            f if f.starts_with('-') => bail!("unknown option {f:?}"),
            _ => a.dirs.push(PathBuf::from(arg)),
        }
    }
    if a.dirs.is_empty() {
        bail!("name at least one scenario directory (the package installs its set in /usr/share/sysward/eval/scenarios)");
    }
    if a.models.is_empty() && a.baselines.is_empty() && !a.oracle && !a.null {
        bail!("name an endpoint with --model FILE, or use --oracle or --null-model");
    }
    for t in &a.tags {
        if !scenario::TAGS.contains(&t.as_str()) {
            bail!(
                "--tags: unknown tag {t:?} (known: {})",
                scenario::TAGS.join(", ")
            );
        }
    }
    Ok(Some(a))
}

fn find_deb(given: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = given.or_else(|| std::env::var_os("SYSWARD_DEB").map(PathBuf::from)) {
        if !d.is_file() {
            bail!("{}: no such .deb", d.display());
        }
        return Ok(d);
    }
    let dir = PathBuf::from("target/debian");
    let newest = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("sysward_") && n.ends_with(".deb")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok());
    newest.map(|e| e.path()).with_context(|| {
        "no sysward .deb: pass --deb FILE or set SYSWARD_DEB (build one with bash packaging/build-deb.sh)"
    })
}

fn main() {
    match real_main() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("sysward eval: {e:#}\n\n{USAGE}");
            std::process::exit(2);
        }
    }
}

fn real_main() -> Result<i32> {
    let Some(args) = parse_args()? else {
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), "{USAGE}");
        return Ok(0);
    };
    let mut scenarios = Vec::new();
    for d in scenario::expand(&args.dirs)? {
        let mut s = scenario::load(&d)?;
        if let Some(cap) = args.time_limit {
            s.time_limit = s.time_limit.min(std::time::Duration::from_secs(cap));
        }
        if args.tags.is_empty() || s.tags.iter().any(|t| args.tags.contains(t)) {
            scenarios.push(s);
        }
    }
    if scenarios.is_empty() {
        bail!("no scenario matches --tags {}", args.tags.join(","));
    }
    let mut endpoints = Vec::new();
    if args.oracle {
        endpoints.push(run::Endpoint::Oracle);
    }
    if args.null {
        endpoints.push(run::Endpoint::Null);
    }
    for m in &args.models {
        endpoints.push(run::Endpoint::Model(run::Model::from_file(m)?));
    }
    for m in &args.baselines {
        endpoints.push(run::Endpoint::Baseline(run::Model::from_file(m)?));
    }
    let deb = find_deb(args.deb.clone())?;
    let output = args.output.clone().unwrap_or_else(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from(format!("eval-out/{now}"))
    });
    std::fs::create_dir_all(&output).with_context(|| format!("{}", output.display()))?;

    let mut queue = Vec::new();
    for ep in &endpoints {
        for s in &scenarios {
            for rep in 1..=args.repeat {
                queue.push((s.clone(), ep.clone(), rep));
            }
        }
    }
    let total = queue.len();
    eprintln!(
        "sysward eval: {total} runs ({} scenarios x {} endpoints x {}), {} at a time, deb {}, output {}",
        scenarios.len(),
        endpoints.len(),
        args.repeat,
        args.jobs,
        deb.display(),
        output.display()
    );
    queue.reverse();
    let queue = Arc::new(Mutex::new(queue));
    let results = Arc::new(Mutex::new(Vec::new()));
    let t0 = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..args.jobs.min(total) {
            let queue = Arc::clone(&queue);
            let results = Arc::clone(&results);
            let deb = deb.clone();
            let output = output.clone();
            scope.spawn(move || loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop());
                let Some((s, ep, rep)) = next else { break };
                let o = run::run(&s, &ep, &deb, &output, rep);
                let j = &o.json;
                eprintln!(
                    "  {} {} [{}#{}] {:.0} s, {} steps, {} actions{}",
                    if j["pass"] == true { "PASS" } else { "FAIL" },
                    s.name,
                    ep.label(),
                    rep,
                    j["wall_s"].as_f64().unwrap_or(0.0),
                    j["steps"],
                    j["actions"],
                    j["error"]
                        .as_str()
                        .map(|e| format!(": {}", e.lines().next().unwrap_or("")))
                        .unwrap_or_default()
                );
                if let Ok(mut r) = results.lock() {
                    r.push(o.json);
                }
            });
        }
    });
    let mut results = results.lock().map(|r| r.clone()).unwrap_or_default();
    results.sort_by(|a, b| {
        (
            a["model"].as_str(),
            a["scenario"].as_str(),
            a["repeat"].as_u64(),
        )
            .cmp(&(
                b["model"].as_str(),
                b["scenario"].as_str(),
                b["repeat"].as_u64(),
            ))
    });
    let wall = t0.elapsed().as_secs_f64();
    let (json, md) = report::render(&results, wall);
    std::fs::write(
        output.join("report.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    std::fs::write(output.join("report.md"), &md)?;
    std::fs::write(
        output.join("report.svg"),
        chart::render(&results, scenario::TAGS),
    )?;
    {
        use std::io::Write;
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{md}");
        let _ = writeln!(out, "report: {}", output.join("report.json").display());
    }
    let all = results.iter().all(|r| r["pass"] == true);
    Ok(if all && results.len() == total { 0 } else { 1 })
}
