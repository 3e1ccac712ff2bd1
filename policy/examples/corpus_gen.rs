//! Prints corpus lines (as policy/tests/corpus.rs expects them) for the
//! commands on stdin, one per line (`\n` escapes a newline). Used to draft
//! expectations, which are then reviewed by hand.

use std::io::BufRead;
use std::path::Path;
use sysward_policy::{parse_agent_md, Engine, HostFacts, LexicalPaths, Request, Verdict};

const MODES: [(&str, &str); 6] = [
    ("guarded", "strict"),
    ("guarded", "permissive"),
    ("privileged", "strict"),
    ("privileged", "permissive"),
    ("unrestricted", "strict"),
    ("unrestricted", "permissive"),
];
const FLAGS: [&str; 10] = [
    "ALLOW_NETWORK",
    "ALLOW_WEB_RESEARCH",
    "ALLOW_DOWNLOADS",
    "ALLOW_PACKAGE_INSTALL",
    "ALLOW_SERVICE_RESTART",
    "ALLOW_OUTSIDE_PROJECT_READ",
    "ALLOW_OUTSIDE_PROJECT_WRITE",
    "ALLOW_DELETE",
    "ALLOW_REBOOT",
    "ALLOW_SELF_TOOL_CREATION",
];

fn facts() -> HostFacts {
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    f
}

fn engine(mode: &str, approval: &str, open: bool) -> Engine {
    let mut md = format!("```policy\nEXECUTION_MODE={mode}\nAPPROVAL_MODE={approval}\n");
    for f in FLAGS {
        md.push_str(&format!("{f}={open}\n"));
    }
    md.push_str("```\n");
    let block = parse_agent_md(&md).map(|p| p.block).unwrap_or_default();
    Engine::new(block, facts())
}

fn letter(v: &Verdict) -> char {
    match v {
        Verdict::Allow => 'A',
        Verdict::Ask => 'Q',
        Verdict::Deny { .. } => 'D',
    }
}

fn main() {
    let engines: Vec<(bool, Engine)> = [false, true]
        .into_iter()
        .flat_map(|open| MODES.iter().map(move |(m, a)| (open, engine(m, a, open))))
        .collect();
    let stdin = std::io::stdin();
    for line in stdin.lock().lines().map_while(Result::ok) {
        if line.trim().is_empty() || line.starts_with('#') {
            println!("{line}");
            continue;
        }
        let script = line.replace("\\n", "\n");
        let mut cat = String::new();
        let mut risk = String::new();
        let mut closed = String::new();
        let mut open = String::new();
        for (is_open, e) in &engines {
            let d = e.decide(
                &Request::Shell {
                    script: &script,
                    cwd: Path::new("/srv/agent/work"),
                },
                &LexicalPaths,
            );
            cat = d.category.to_string();
            risk = d.risk.to_string();
            if *is_open {
                open.push(letter(&d.verdict))
            } else {
                closed.push(letter(&d.verdict))
            }
        }
        println!("{line}\t{cat}\t{risk}\t{closed}\t{open}");
    }
}
