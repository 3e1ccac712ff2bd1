//! One scenario run: a throwaway booted Debian host (sysward-hostbed) with
//! the .deb installed, the scenario's setup, the session(s) through the
//! daemon with pending approvals answered by the scenario's rule, the check,
//! and everything kept under the run's output directory.

use crate::scenario::{solution_steps, Scenario};
use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use sysward_hostbed::{Host, Options};
use sysward_scripted_model::{Handle, Scenario as Script, ScriptedServer};

/// At most this many sessions per scenario: the first, and one more after
/// each round of answered approvals.
pub const MAX_ROUNDS: usize = 3;

/// An OpenAI-compatible endpoint: init.conf lines (API_URL, MODEL, API_KEY,
/// TOOL_CALLING, CONTEXT_SIZE, …) from a `--model FILE`.
#[derive(Clone, Debug)]
pub struct Model {
    pub label: String,
    pub conf: Vec<(String, String)>,
}

impl Model {
    pub fn from_file(path: &Path) -> Result<Model> {
        let text = fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
        let mut conf = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                bail!("{}:{}: not KEY=VALUE", path.display(), n + 1);
            };
            let k = k.trim();
            if k.is_empty() || !k.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                bail!("{}:{}: bad key {k:?}", path.display(), n + 1);
            }
            if v.contains('\n') {
                bail!("{}:{}: value spans lines", path.display(), n + 1);
            }
            conf.push((k.to_string(), v.trim().to_string()));
        }
        for need in ["API_URL", "MODEL"] {
            if !conf.iter().any(|(k, _)| k == need) {
                bail!("{}: {need}= is required", path.display());
            }
        }
        let label = conf
            .iter()
            .find(|(k, _)| k == "MODEL")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        Ok(Model { label, conf })
    }
}

#[derive(Clone, Debug)]
pub enum Endpoint {
    Model(Model),
    /// The scenario's reference solution replayed by a scripted model.
    Oracle,
    /// A scripted model that does nothing and claims success: the negative
    /// control (a check that passes here does not inspect the change).
    Null,
    /// The plain-loop baseline (no sysward) with this model.
    Baseline(Model),
}

impl Endpoint {
    pub fn label(&self) -> String {
        match self {
            Endpoint::Model(m) => m.label.clone(),
            Endpoint::Oracle => "oracle".into(),
            Endpoint::Null => "null".into(),
            Endpoint::Baseline(m) => format!("baseline-{}", m.label),
        }
    }
}

/// The scripted model that replays a solution: one `shell` call per line,
/// then the final answer, once per possible session.
fn null_script() -> Result<Script> {
    let script = json!({
        "flavor": "vllm",
        "model": "sysward-null",
        "context_size": 32768,
        "steps": [],
        "exhausted": {"content": "EXECUTED: nothing.\nVERIFIED: nothing.\n\nAll good.\n\nTASK_STATUS: DONE"},
    });
    Script::from_str(&script.to_string()).map_err(|e| anyhow::anyhow!("null script: {e}"))
}

fn oracle_script(sc: &Scenario) -> Result<Script> {
    let solution = sc
        .solution
        .as_deref()
        .with_context(|| format!("{}: --oracle needs a reference solution", sc.name))?;
    let (lines, answer, status) = solution_steps(solution);
    let mut steps = Vec::new();
    for _ in 0..MAX_ROUNDS {
        for (i, l) in lines.iter().enumerate() {
            // One reason for every line: identical lines are identical calls.
            let reason = "reference solution";
            let call = match (tool_line(l)?, plain_argv(l)) {
                (Some(call), _) => call,
                (None, Some((cmd, args))) => json!({"name": "exec", "arguments": {
                    "command": cmd, "args": args, "reason": reason, "timeout_seconds": 600}}),
                (None, None) => json!({"name": "shell", "arguments": {
                    "command": l, "reason": reason, "timeout_seconds": 600}}),
            };
            let mut step = json!({"tool_calls": [call]});
            if i > 0 {
                step["expect"] = json!({"role_of_last": "tool"});
            }
            steps.push(step);
        }
        let executed: Vec<&str> = lines.iter().map(String::as_str).collect();
        steps.push(json!({"content": format!(
            "EXECUTED: {}\nVERIFIED: by the commands' results above.\n\n{answer}\n\nTASK_STATUS: {status}",
            executed.join("; "))}));
    }
    let script = json!({
        "flavor": "vllm",
        "model": "sysward-oracle",
        "context_size": 32768,
        "steps": steps,
        "exhausted": {"content": "Nothing more to do.\n\nTASK_STATUS: DONE"},
    });
    Script::from_str(&script.to_string()).map_err(|e| anyhow::anyhow!("oracle script: {e}"))
}

/// `@tool NAME {JSON arguments}`: a solution line that calls a tool other
/// than exec or shell. None for any other line.
fn tool_line(line: &str) -> Result<Option<serde_json::Value>> {
    let Some(rest) = line.strip_prefix("@tool ") else {
        return Ok(None);
    };
    let (name, arguments) = rest
        .trim()
        .split_once(' ')
        .with_context(|| format!("solution line {line:?}: write @tool NAME {{JSON arguments}}"))?;
    let arguments: serde_json::Value = serde_json::from_str(arguments.trim())
        .with_context(|| format!("solution line {line:?}: the arguments are not JSON"))?;
    if !arguments.is_object() {
        anyhow::bail!("solution line {line:?}: the arguments must be a JSON object");
    }
    Ok(Some(json!({"name": name, "arguments": arguments})))
}

/// A line without shell syntax as a command and its arguments (an `exec`
/// call); None when it needs a shell.
fn plain_argv(line: &str) -> Option<(String, Vec<String>)> {
    if line.chars().any(|c| "|&;<>()$`'\"\\*?[]{}~#!".contains(c)) {
        return None;
    }
    let mut words = line.split_whitespace().map(str::to_string);
    let cmd = words.next()?;
    if cmd.contains('=') {
        return None;
    }
    Some((cmd, words.collect()))
}

/// Runs a shell script in the host; the output must be success.
fn sh(host: &Host, script: &str, limit: Duration) -> Result<String> {
    let l = host.try_run(&["/bin/bash", "-c", script], limit)?;
    if l.timed_out {
        bail!("`{script}` did not finish within {limit:?}");
    }
    if !l.output.status.success() {
        bail!(
            "`{script}` failed: {}",
            sysward_hostbed::describe(&l.output)
        );
    }
    Ok(String::from_utf8_lossy(&l.output.stdout).into_owned())
}

#[derive(Default)]
struct Tally {
    steps: u64,
    actions: u64,
    denials: u64,
    tokens_in: u64,
    tokens_out: u64,
    approvals_asked: u64,
    approved: u64,
    denied_by_rule: u64,
    statuses: Vec<String>,
    answer: String,
    exit_codes: Vec<Option<i32>>,
    timed_out: bool,
}

fn tally_session(t: &mut Tally, events: &[Value]) {
    for e in events {
        match e["event"].as_str() {
            Some("usage") => {
                t.tokens_in += e["prompt_tokens"].as_u64().unwrap_or(0);
                t.tokens_out += e["completion_tokens"].as_u64().unwrap_or(0);
            }
            Some("answer") => {
                if let Some(a) = e["text"].as_str() {
                    t.answer = a.to_string();
                }
            }
            Some("summary") => {
                t.actions += e["actions"].as_u64().unwrap_or(0);
                t.denials += e["denials"].as_u64().unwrap_or(0);
                for task in e["tasks"].as_array().into_iter().flatten() {
                    t.steps += task["steps"].as_u64().unwrap_or(0);
                    t.statuses
                        .push(task["status"].as_str().unwrap_or("?").to_string());
                    if t.answer.is_empty() {
                        t.answer = task["summary"].as_str().unwrap_or("").to_string();
                    }
                }
            }
            _ => {}
        }
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Everything one run produced, for the report.
pub struct Outcome {
    pub json: Value,
}

pub fn run(sc: &Scenario, ep: &Endpoint, deb: &Path, out: &Path, rep: usize) -> Outcome {
    let t0 = Instant::now();
    let dir = out.join(&sc.name).join(format!("{}-{rep}", ep.label()));
    let _ = fs::create_dir_all(&dir);
    let mut tally = Tally::default();
    let mut timings = serde_json::Map::new();
    let result = run_inner(sc, ep, deb, &dir, &mut tally, &mut timings);
    let (pass, check_exit, error) = match result {
        Ok(code) => (code == Some(0), code, None),
        Err(e) => (false, None, Some(format!("{e:#}"))),
    };
    let json = json!({
        "scenario": sc.name,
        "description": sc.description,
        "format": sc.format,
        "tags": sc.tags,
        "model": ep.label(),
        "repeat": rep,
        "pass": pass,
        "check_exit": check_exit,
        "error": error,
        "task_status": tally.statuses,
        "sessions": tally.exit_codes.len(),
        "session_exit_codes": tally.exit_codes,
        "timed_out": tally.timed_out,
        "steps": tally.steps,
        "tokens_in": tally.tokens_in,
        "tokens_out": tally.tokens_out,
        "actions": tally.actions,
        "policy_denials": tally.denials,
        "approvals_asked": tally.approvals_asked,
        "approved": tally.approved,
        "denied_by_rule": tally.denied_by_rule,
        "approval_rule": sc.approvals.name(),
        "wall_s": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "timings_s": timings,
        "answer": tally.answer,
        "artifacts": dir.display().to_string(),
    });
    let _ = fs::write(
        dir.join("result.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    );
    Outcome { json }
}

fn secs(t: Instant) -> Value {
    json!((t.elapsed().as_secs_f64() * 10.0).round() / 10.0)
}

fn run_inner(
    sc: &Scenario,
    ep: &Endpoint,
    deb: &Path,
    dir: &Path,
    tally: &mut Tally,
    timings: &mut serde_json::Map<String, Value>,
) -> Result<Option<i32>> {
    // The scripted model starts first: a scenario without a solution fails
    // before any host boots.
    let oracle: Option<Handle> = match ep {
        Endpoint::Oracle => {
            Some(ScriptedServer::start(oracle_script(sc)?).context("start the scripted model")?)
        }
        Endpoint::Null => {
            Some(ScriptedServer::start(null_script()?).context("start the scripted model")?)
        }
        Endpoint::Model(_) | Endpoint::Baseline(_) => None,
    };
    let t = Instant::now();
    // (The host bed starts every host without CAP_SYS_TIME and
    // CAP_SYS_MODULE: a model cannot set this machine's clock or its kernel
    // modules.)
    let mut nspawn_args = Vec::new();
    if sc.private_network {
        nspawn_args.push("--private-network".to_string());
    }
    let host = Host::try_start(Options {
        boot: true,
        nspawn_args,
        ..Options::default()
    })
    .context("boot a host")?;
    timings.insert("boot".into(), secs(t));

    let t = Instant::now();
    let bytes = fs::read(deb).with_context(|| format!("{}", deb.display()))?;
    host.try_write("/root/sysward.deb", bytes, 0o644)?;
    sh(
        &host,
        "dpkg -i /root/sysward.deb >/dev/null",
        Duration::from_secs(300),
    )
    .context("install sysward")?;
    sh(
        &host,
        "for i in $(seq 1 300); do systemctl is-active -q sysward.service && exit 0; sleep 0.2; done; systemctl status --no-pager sysward.service; exit 1",
        Duration::from_secs(90),
    )
    .context("sysward.service is not active")?;
    timings.insert("install".into(), secs(t));

    if !sc.packages.is_empty() {
        let t = Instant::now();
        let pkgs: Vec<String> = sc.packages.iter().map(|p| shell_quote(p)).collect();
        sh(
            &host,
            &format!("apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends {} >/dev/null", pkgs.join(" ")),
            Duration::from_secs(900),
        )
        .context("install the scenario's packages")?;
        timings.insert("packages".into(), secs(t));
    }

    let t = Instant::now();
    host.try_write("/root/eval/setup.sh", &sc.setup, 0o700)?;
    host.try_write("/root/eval/check.sh", &sc.check, 0o700)?;
    // A Terminal-Bench test may name files beside it (tests/…).
    if sc.format == "terminal-bench" {
        copy_tree(&host, &sc.dir.join("tests"), "/tests")?;
    }
    let setup = host.try_run(
        &["/bin/bash", "/root/eval/setup.sh"],
        Duration::from_secs(600),
    )?;
    fs::write(
        dir.join("setup.log"),
        sysward_hostbed::describe(&setup.output),
    )?;
    if setup.timed_out || !setup.output.status.success() {
        bail!("the setup script failed (see setup.log)");
    }
    if let Some(bg) = &sc.background {
        host.try_write("/root/eval/background.sh", bg, 0o700)?;
        sh(
            &host,
            "systemd-run --quiet --unit=eval-background --collect /bin/bash /root/eval/background.sh && sleep 1",
            Duration::from_secs(60),
        )
        .context("start the background script")?;
    }
    timings.insert("setup".into(), secs(t));

    if let Endpoint::Baseline(m) = ep {
        let t = Instant::now();
        let b = crate::baseline::run(&host, m, &sc.instruction, sc.time_limit)?;
        timings.insert("session".into(), secs(t));
        tally.steps = b.steps;
        tally.actions = b.actions;
        tally.tokens_in = b.tokens_in;
        tally.tokens_out = b.tokens_out;
        tally.answer = b.answer;
        tally.timed_out = b.timed_out;
        tally.statuses.push("plain-loop".into());
        let lines: Vec<String> = b.transcript.iter().map(Value::to_string).collect();
        fs::write(dir.join("session-1.jsonl"), lines.join("\n") + "\n")?;
        // No sysward: no audit log for the checks that read one.
        host.try_write("/root/eval/audit.jsonl", "", 0o600)?;
        return finish(host, tally, dir, timings, oracle);
    }

    // sysward's configuration, as an operator writes it.
    let conf: Vec<(String, String)> = match (ep, &oracle) {
        (_, Some(server)) => vec![
            ("API_URL".into(), server.base_url()),
            ("MODEL".into(), format!("sysward-{}", ep.label())),
        ],
        (Endpoint::Model(m) | Endpoint::Baseline(m), None) => m.conf.clone(),
        (_, None) => bail!("no scripted server"),
    };
    // A host with its own network reaches the endpoint through a forwarder.
    let _forwarder = if sc.private_network {
        let url = conf
            .iter()
            .find(|(k, _)| k == "API_URL")
            .map(|(_, v)| v.clone())
            .context("no API_URL")?;
        let (name, port) = crate::netns::host_port(&url)?;
        let f = crate::netns::forward(host.pid1(), &name, port)?;
        match name.parse::<std::net::IpAddr>() {
            Ok(ip) if ip.is_loopback() => {}
            Ok(ip) => {
                sh(
                    &host,
                    &format!("ip addr add {ip} dev lo"),
                    Duration::from_secs(30),
                )?;
            }
            Err(_) => {
                if !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                {
                    bail!("API_URL host {name:?} is not a plain host name");
                }
                sh(
                    &host,
                    &format!("echo '127.0.0.1 {name}' >> /etc/hosts"),
                    Duration::from_secs(30),
                )?;
            }
        }
        Some(f)
    } else {
        None
    };
    let current = host
        .read("/etc/sysward/init.conf")
        .context("/etc/sysward/init.conf is missing in the host")?;
    let mut init: Vec<String> = current
        .lines()
        .filter(|l| {
            let key = l.split('=').next().unwrap_or("").trim();
            !conf.iter().any(|(k, _)| k == key) && key != "REQUEST_TIMEOUT"
        })
        .map(str::to_string)
        .collect();
    if !conf.iter().any(|(k, _)| k == "REQUEST_TIMEOUT") {
        init.push("REQUEST_TIMEOUT=300".into());
    }
    init.extend(conf.iter().map(|(k, v)| format!("{k}={v}")));
    host.try_write("/etc/sysward/init.conf", init.join("\n") + "\n", 0o600)?;
    host.try_write(
        "/etc/sysward/agent.md",
        format!(
            "# Eval host\nYou administer this Debian host.\n\n```policy\n{}\n```\n",
            sc.policy
        ),
        0o600,
    )?;
    host.try_write("/etc/sysward/01-task.md", &sc.instruction, 0o600)?;

    let t = Instant::now();
    let deadline = t + sc.time_limit;
    for round in 0..MAX_ROUNDS {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tally.timed_out = true;
            break;
        }
        let jsonl = dir.join(format!("session-{}.jsonl", round + 1));
        let stderr = dir.join(format!("session-{}.stderr", round + 1));
        let (code, timed_out) = session(&host, &jsonl, &stderr, left)?;
        let text = fs::read_to_string(&jsonl).unwrap_or_default();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|x| serde_json::from_str(x).ok())
            .collect();
        tally_session(tally, &events);
        tally.exit_codes.push(code);
        if timed_out {
            tally.timed_out = true;
            break;
        }
        if code != Some(2) {
            break;
        }
        // BLOCKED: answer what waits for a person.
        let list = sh(&host, "sysward approvals --json", Duration::from_secs(60))?;
        let v: Value = serde_json::from_str(&list).context("sysward approvals --json")?;
        let pending: Vec<&Value> = v["approvals"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["status"] == "pending")
            .collect();
        if pending.is_empty() {
            break;
        }
        let mut any_approved = false;
        for a in pending {
            let id = a["id"].as_str().context("an approval without an id")?;
            let request = a["request"]["command"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| a["request"].to_string());
            tally.approvals_asked += 1;
            if sc.approvals.approves(&request) {
                sh(
                    &host,
                    &format!("sysward approve {}", shell_quote(id)),
                    Duration::from_secs(60),
                )?;
                tally.approved += 1;
                any_approved = true;
            } else {
                sh(
                    &host,
                    &format!(
                        "sysward deny {} --note 'denied by the eval scenario rule'",
                        shell_quote(id)
                    ),
                    Duration::from_secs(60),
                )?;
                tally.denied_by_rule += 1;
            }
        }
        if !any_approved {
            break;
        }
    }
    timings.insert("session".into(), secs(t));

    // The record, kept, and given to the check.
    let audit = host.try_run(
        &["sysward", "audit", "show", "--json"],
        Duration::from_secs(120),
    )?;
    fs::write(dir.join("audit.jsonl"), &audit.output.stdout)?;
    host.try_write("/root/eval/audit.jsonl", &audit.output.stdout, 0o600)?;
    if let Some(server) = &oracle {
        let reqs: Vec<String> = server
            .chat_requests()
            .iter()
            .map(|r| r.message_text())
            .collect();
        fs::write(
            dir.join("model-requests.json"),
            serde_json::to_string_pretty(&reqs)?,
        )?;
    }
    if let Some(m) = host.read("/var/lib/sysward/contexto.mem") {
        fs::write(dir.join("contexto.mem"), m)?;
    }

    finish(host, tally, dir, timings, oracle)
}

/// One `sysward run --json --rerun` through the daemon, its output into
/// files (a long transcript must not fill a pipe). At the time limit the
/// client gets SIGTERM, which ends the session cleanly (the running action
/// cancelled, the session's end audited), and is killed 20 s later.
fn session(
    host: &Host,
    jsonl: &Path,
    stderr: &Path,
    limit: Duration,
) -> Result<(Option<i32>, bool)> {
    let mut child = host
        .command(&["sysward", "run", "--json", "--rerun"])
        .stdout(fs::File::create(jsonl)?)
        .stderr(fs::File::create(stderr)?)
        .spawn()
        .context("start sysward run in the host")?;
    let start = Instant::now();
    let mut term_sent: Option<Instant> = None;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((st.code(), term_sent.is_some()));
        }
        match term_sent {
            None if start.elapsed() > limit => {
                let _ = host.try_run(
                    &["pkill", "-TERM", "-f", "^sysward run --json"],
                    Duration::from_secs(20),
                );
                term_sent = Some(Instant::now());
            }
            Some(t) if t.elapsed() > Duration::from_secs(20) => {
                let _ = child.kill();
                let st = child.wait()?;
                return Ok((st.code(), true));
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The check, then the teardown.
fn finish(
    host: Host,
    tally: &mut Tally,
    dir: &Path,
    timings: &mut serde_json::Map<String, Value>,
    oracle: Option<Handle>,
) -> Result<Option<i32>> {
    let t = Instant::now();
    host.try_write("/root/eval/answer.txt", &tally.answer, 0o600)?;
    let env = format!(
        "EVAL_ANSWER_FILE=/root/eval/answer.txt EVAL_ACTIONS={} EVAL_APPROVALS_ASKED={} EVAL_DENIALS={} EVAL_STATUS={}",
        tally.actions,
        tally.approvals_asked,
        tally.denials + tally.denied_by_rule,
        shell_quote(&tally.statuses.last().cloned().unwrap_or_default()),
    );
    let check = host.try_run(
        &[
            "/bin/bash",
            "-c",
            &format!("{env} exec /bin/bash /root/eval/check.sh \"$(cat /root/eval/answer.txt)\""),
        ],
        Duration::from_secs(300),
    )?;
    fs::write(
        dir.join("check.log"),
        sysward_hostbed::describe(&check.output),
    )?;
    timings.insert("check".into(), secs(t));
    let code = if check.timed_out {
        None
    } else {
        check.output.status.code()
    };
    let t = Instant::now();
    let problems = host.shutdown();
    timings.insert("teardown".into(), secs(t));
    if !problems.is_empty() {
        fs::write(dir.join("teardown.log"), problems.join("\n"))?;
    }
    if let Some(s) = oracle {
        s.shutdown();
    }
    Ok(code)
}

fn copy_tree(host: &Host, src: &Path, dst: &str) -> Result<()> {
    let mut stack: Vec<(PathBuf, String)> = vec![(src.to_path_buf(), dst.to_string())];
    while let Some((s, d)) = stack.pop() {
        for e in fs::read_dir(&s).with_context(|| format!("{}", s.display()))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let target = format!("{d}/{name}");
            if e.file_type()?.is_dir() {
                stack.push((e.path(), target));
            } else if e.file_type()?.is_file() {
                host.try_write(&target, fs::read(e.path())?, 0o755)?;
            }
        }
    }
    Ok(())
}
