//! Any script, any argv: the engine answers without panicking or aborting,
//! and every decision keeps the basic invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use sysward_policy::{explain, parse_agent_md, Engine, HostFacts, LexicalPaths, Request, Risk};

fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let md = "```policy\nEXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_DELETE=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_PACKAGE_INSTALL=true\n```\n";
        let block = parse_agent_md(md).map(|p| p.block).unwrap_or_default();
        let mut f = HostFacts::packaged(0, 0);
        f.project_root = "/srv/agent".into();
        f.scratch_dir = "/srv/agent/.agent/tmp".into();
        Engine::new(block, f)
    })
}

/// The engine catches panics inside brush-parser (a documented last line of
/// defence); libFuzzer's hook would turn even a caught panic into an abort.
/// Count them instead and report the first few: a panic that escapes
/// `decide` still aborts through libfuzzer-sys's own catch_unwind.
fn quiet_caught_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        std::panic::set_hook(Box::new(|info| {
            let n = CAUGHT.fetch_add(1, Ordering::Relaxed);
            if n < 5 {
                eprintln!("caught panic #{n}: {info}");
            }
        }));
    });
}

static CAUGHT: AtomicUsize = AtomicUsize::new(0);

fuzz_target!(|data: &[u8]| {
    quiet_caught_panics();
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let e = engine();
    let d = e.decide(&Request::Shell { script: s, cwd: Path::new("/srv/agent/work") }, &LexicalPaths);
    assert!(d.risk != Risk::Critical || d.verdict.is_deny());
    assert_eq!(d.profile.is_some(), !d.verdict.is_deny());
    assert!(!explain(&d).contains('\n'));
    let argv: Vec<String> = s.split('\u{1f}').map(str::to_string).collect();
    let d = e.decide(&Request::Exec { argv: &argv, env: &[], stdin: None, cwd: Path::new("/srv/agent") }, &LexicalPaths);
    assert_eq!(d.profile.is_some(), !d.verdict.is_deny());
});
