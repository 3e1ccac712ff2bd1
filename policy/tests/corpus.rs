//! The table-driven corpus: every command in tests/corpus/*.tsv is decided
//! in guarded/privileged/unrestricted × strict/permissive, with the ALLOW_*
//! flags all off and all on, and compared with its expected category, risk
//! and twelve verdicts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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

fn facts() -> HostFacts {
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    f
}

fn engine(mode: &str, approval: &str, open: bool) -> Engine {
    let mut md = format!("```policy\nEXECUTION_MODE={mode}\nAPPROVAL_MODE={approval}\n");
    for f in sysward_policy::ALLOW_FLAGS {
        md.push_str(&format!("{f}={open}\n"));
    }
    md.push_str("```\n");
    Engine::new(parse_agent_md(&md).unwrap().block, facts())
}

fn letter(v: &Verdict) -> char {
    match v {
        Verdict::Allow => 'A',
        Verdict::Ask => 'Q',
        Verdict::Deny { .. } => 'D',
    }
}

#[test]
fn corpus() {
    let text = include_str!("corpus/commands.tsv");
    let closed: Vec<Engine> = MODES.iter().map(|(m, a)| engine(m, a, false)).collect();
    let open: Vec<Engine> = MODES.iter().map(|(m, a)| engine(m, a, true)).collect();
    let cwd = Path::new("/srv/agent/work");
    let mut failures = Vec::new();
    let mut count = 0;
    for (lineno, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 5, "line {}: {line:?}", lineno + 1);
        count += 1;
        let script = cols[0].replace("\\n", "\n");
        let decide = |e: &Engine| {
            e.decide(
                &Request::Shell {
                    script: &script,
                    cwd,
                },
                &LexicalPaths,
            )
        };
        let got_closed: String = closed.iter().map(|e| letter(&decide(e).verdict)).collect();
        let got_open: String = open.iter().map(|e| letter(&decide(e).verdict)).collect();
        let reference = decide(&open[5]);
        let got = format!(
            "{}\t{}\t{}\t{}",
            reference.category, reference.risk, got_closed, got_open
        );
        let want = cols[1..].join("\t");
        if got != want {
            failures.push(format!(
                "line {}: {}\n   want {want}\n   got  {got}\n   ({})",
                lineno + 1,
                cols[0],
                sysward_policy::explain(&reference)
            ));
        }
    }
    assert!(
        count >= 400,
        "the corpus must hold at least 400 commands, has {count}"
    );
    assert!(
        failures.is_empty(),
        "{} corpus mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
