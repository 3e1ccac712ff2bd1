//! `sysward-scripted-model --scenario FILE [--listen ADDR] [--record FILE.jsonl]
//! [--port-file FILE] [--exit-after-idle SECS] [--check]`

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sysward_scripted_model::{Scenario, ScriptedServer, ServerOptions};

const USAGE: &str = "usage: sysward-scripted-model --scenario FILE [--listen 127.0.0.1:0] [--record FILE.jsonl] [--port-file FILE] [--exit-after-idle SECS] [--check]

Serves an OpenAI-compatible API (GET /v1/models, POST /v1/chat/completions, GET /props)
that replays the scenario's steps and records every request.
  --scenario FILE        the scenario (JSON; see scripted-model/README.md)
  --listen ADDR          address to bind (default 127.0.0.1:0, any free port)
  --record FILE          append every request received as a JSON line
  --port-file FILE       write the bound port there (atomically) once listening
  --exit-after-idle SECS exit 0 after SECS without any request
  --check                validate the scenario and exit
Prints `listening on ADDR` on stdout once bound.";

struct Args {
    scenario: PathBuf,
    listen: SocketAddr,
    record: Option<PathBuf>,
    port_file: Option<PathBuf>,
    idle: Option<Duration>,
    check: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut scenario = None;
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut record = None;
    let mut port_file = None;
    let mut idle = None;
    let mut check = false;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it.next().ok_or_else(|| format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "--scenario" => scenario = Some(PathBuf::from(value("--scenario")?)),
            "--listen" => {
                let v = value("--listen")?;
                listen = v.parse().map_err(|_| {
                    format!("--listen: {v:?} is not an address like 127.0.0.1:8080")
                })?;
            }
            "--record" => record = Some(PathBuf::from(value("--record")?)),
            "--port-file" => port_file = Some(PathBuf::from(value("--port-file")?)),
            "--exit-after-idle" => {
                let v = value("--exit-after-idle")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        format!("--exit-after-idle: {v:?} is not a positive number of seconds")
                    })?;
                idle = Some(Duration::from_secs_f64(secs));
            }
            "--check" => check = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let scenario = scenario.ok_or_else(|| "--scenario FILE is required".to_string())?;
    Ok(Args {
        scenario,
        listen,
        record,
        port_file,
        idle,
        check,
    })
}

fn write_port_file(path: &PathBuf, port: u16) -> std::io::Result<()> {
    let mut tmp = path.clone().into_os_string();
    tmp.push(".tmp");
    std::fs::write(&tmp, format!("{port}\n"))?;
    std::fs::rename(&tmp, path)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sysward-scripted-model: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let scenario = match Scenario::from_file(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sysward-scripted-model: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        println!(
            "scenario ok: {} steps, {} replies",
            scenario.steps.len(),
            scenario.total_replies()
        );
        return ExitCode::SUCCESS;
    }
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "sysward-scripted-model: warning: listening on {}, which is not a loopback address",
            args.listen
        );
    }
    let opts = ServerOptions {
        listen: args.listen,
        record: args.record.clone(),
    };
    let handle = match ScriptedServer::start_with(scenario, opts) {
        Ok(h) => h,
        Err(e) => {
            eprintln!(
                "sysward-scripted-model: cannot start on {}: {e}",
                args.listen
            );
            return ExitCode::from(1);
        }
    };
    let addr = handle.addr();
    if let Some(p) = &args.port_file {
        if let Err(e) = write_port_file(p, addr.port()) {
            eprintln!("sysward-scripted-model: cannot write {}: {e}", p.display());
            return ExitCode::from(1);
        }
    }
    let mut out = std::io::stdout();
    let _ = writeln!(out, "listening on {addr}");
    let _ = out.flush();
    loop {
        std::thread::sleep(Duration::from_millis(100));
        if let Some(limit) = args.idle {
            if handle.idle_for() >= limit {
                handle.shutdown();
                return ExitCode::SUCCESS;
            }
        }
    }
}
