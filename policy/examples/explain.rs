//! `cargo run -p sysward-policy --example explain -- [--mode M] [--approval A] [--allow FLAG]... '<script>'`
//! prints what `sysward policy explain` would print, on the packaged layout.

use std::path::Path;
use sysward_policy::{explain, parse_agent_md, Engine, HostFacts, LexicalPaths, Request};

fn main() {
    let mut directives = Vec::new();
    let mut script = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mode" => directives.push(format!(
                "EXECUTION_MODE={}",
                args.next().unwrap_or_default()
            )),
            "--approval" => {
                directives.push(format!("APPROVAL_MODE={}", args.next().unwrap_or_default()))
            }
            "--allow" => directives.push(format!("{}=true", args.next().unwrap_or_default())),
            "--set" => directives.push(args.next().unwrap_or_default()),
            _ => script = Some(a),
        }
    }
    let md = format!("```policy\n{}\n```\n", directives.join("\n"));
    let parsed = match parse_agent_md(&md) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("policy: {e}");
            std::process::exit(2);
        }
    };
    let mut facts = HostFacts::packaged(0, 0);
    facts.project_root = "/srv/agent".into();
    facts.scratch_dir = "/srv/agent/.agent/tmp".into();
    let engine = Engine::new(parsed.block, facts);
    let mut script = script.unwrap_or_default();
    // `@FILE` reads the script from a file (for scripts over the argv limit).
    if let Some(path) = script.strip_prefix('@') {
        script = std::fs::read_to_string(path).unwrap_or_default();
    }
    let d = engine.decide(
        &Request::Shell {
            script: &script,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    );
    println!("{}", explain(&d));
}
