//! The operator's console is not the root broker: the root binary
//! (`sysward-broker`, package `sysward`) links no line editor, no
//! man-page or completion generator and no shell parser; the broker has one operator, the
//! operator channel, which both the daemon's control socket and the
//! standalone `--root` mode end in; and a standalone broker serves only the
//! console that started it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::*;

/// The crates (`name vX.Y.Z`) of `package`'s normal dependency tree.
fn normal_dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let out = Command::new(cargo)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .args(["--offline", "--quiet"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

const CONSOLE_ONLY: [&str; 3] = ["rustyline", "clap_mangen", "clap_complete"];

#[test]
fn the_root_binary_links_no_line_editor_and_no_generators() {
    let broker = normal_dependencies("sysward");
    assert!(
        broker.iter().any(|c| c == "sysward-ipc"),
        "the broker's tree was not read: {broker:?}"
    );
    for crate_name in CONSOLE_ONLY {
        assert!(
            !broker.iter().any(|c| c == crate_name),
            "the root broker's dependency tree has {crate_name}: it belongs to the console (console/)"
        );
    }
    // The same check on the console finds them: the test can fail.
    let console = normal_dependencies("sysward-console");
    for crate_name in CONSOLE_ONLY {
        assert!(
            console.iter().any(|c| c == crate_name),
            "{crate_name} missing from the console's tree: {console:?}"
        );
    }
}

/// The shell parser runs only in the confined classifier helper: the root
/// broker reads the policy crate without its `engine` feature.
#[test]
fn the_root_binary_links_no_shell_parser() {
    let broker = normal_dependencies("sysward");
    assert!(
        broker.iter().any(|c| c == "sysward-policy"),
        "the broker's tree was not read: {broker:?}"
    );
    assert!(
        !broker.iter().any(|c| c == "brush-parser"),
        "the root broker's dependency tree has brush-parser: only the classifier helper (classifier/) may parse shell"
    );
    let helper = normal_dependencies("sysward-classify");
    assert!(
        helper.iter().any(|c| c == "brush-parser"),
        "brush-parser missing from the classifier helper's tree: {helper:?}"
    );
}

/// The broker's non-test source files, by path beneath `broker/src`
/// (`session/mod.rs`).
fn broker_sources() -> Vec<(String, String)> {
    crate_sources("broker")
}

/// A workspace crate's non-test source files, by path beneath its `src`.
fn crate_sources(folder: &str) -> Vec<(String, String)> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                let name = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((name, code));
            }
        }
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(folder)
        .join("src");
    let mut files = Vec::new();
    walk(&dir, &dir, &mut files);
    files.sort();
    files
}

#[test]
fn the_broker_has_one_operator_and_both_modes_reach_it() {
    let files = broker_sources();
    let implementing: Vec<&str> = files
        .iter()
        .filter(|(_, code)| {
            code.contains("impl Operator for")
                || code.contains("impl crate::operator::Operator for")
        })
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        implementing,
        vec!["operator_channel.rs"],
        "the broker must have exactly one operator implementation, the operator channel"
    );
    let starting: Vec<&str> = files
        .iter()
        .filter(|(name, code)| name != "session/mod.rs" && code.contains("run_session("))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        starting,
        vec!["operator_channel.rs"],
        "only the operator channel starts sessions"
    );
    for mode in ["control.rs", "standalone.rs"] {
        let (_, code) = files.iter().find(|(n, _)| n == mode).unwrap();
        assert!(
            code.contains("operator_channel::serve_session("),
            "{mode} does not serve its sessions through the operator channel"
        );
    }
    for (name, code) in &files {
        for terminal in ["rustyline", "termios", "tcsetattr", "isatty"] {
            assert!(
                !code.contains(terminal),
                "broker/src/{name} uses {terminal}: terminal code belongs to the console"
            );
        }
    }
}

/// The crates split out of the broker run as root too: no terminal code in
/// them either.
#[test]
fn the_crates_split_from_the_broker_have_no_terminal_code() {
    for folder in ["store", "secrets", "actions"] {
        let files = crate_sources(folder);
        assert!(!files.is_empty(), "{folder}/src was not read");
        for (name, code) in &files {
            for terminal in ["rustyline", "termios", "tcsetattr", "isatty"] {
                assert!(
                    !code.contains(terminal),
                    "{folder}/src/{name} uses {terminal}: terminal code belongs to the console"
                );
            }
        }
    }
}

fn broker_binary() -> std::path::PathBuf {
    bin_dir().join("sysward-broker")
}

#[test]
fn a_standalone_broker_refuses_anything_but_its_consoles_socketpair() {
    if !require_root("a_standalone_broker_refuses_anything_but_its_consoles_socketpair") {
        return;
    }
    let p = TestProject::new("standalone-refuses");
    // Nothing on fd 3: started by hand, not by the console.
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" --standalone \"$1\" 3<&-"])
        .arg(broker_binary())
        .arg(&p.dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no operator channel on fd 3"),
        "{}",
        describe(&out)
    );
    // The refusal is a decision: it is in the project's audit log.
    let refused = audit_records(&p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "operator_refused" && r["event"]["mode"] == "standalone")
        .count();
    assert_eq!(refused, 1, "{:?}", audit_records(&p));
    // A file on fd 3 is no channel either.
    let out = Command::new("sh")
        .args(["-c", "exec \"$0\" --standalone \"$1\" 3</dev/null"])
        .arg(broker_binary())
        .arg(&p.dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not the console's SEQPACKET socketpair"),
        "{}",
        describe(&out)
    );
    // Options of the daemon do not mix with --standalone.
    let out = Command::new(broker_binary())
        .args([
            "--standalone",
            p.dir.to_str().unwrap(),
            "--socket",
            "/tmp/x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn a_root_run_is_served_by_the_broker_the_console_started() {
    if !require_root("a_root_run_is_served_by_the_broker_the_console_started") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uptime","args":["-p"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("standalone-served");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nUptime.\n");
    let console = Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap(), "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let console_pid = console.id();
    let broker = standalone_broker(console_pid);
    let agent = wait_for(Duration::from_secs(15), "the agent", || {
        children_named(broker, "sysward-agent").pop()
    });
    // The agent is the broker's child, never the console's.
    assert!(children_named(console_pid, "sysward-agent").is_empty());
    assert!(agent > 0);
    let out = wait_output(console, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let summary = json_lines(&out).pop().unwrap_or_default();
    assert_eq!(summary["tasks"][0]["status"], "DONE", "{}", describe(&out));
    // The broker recorded the console it served as the kernel named it
    // (SO_PEERCRED on the pair): root, and the console's own pid.
    let records = audit_records(&p);
    let start = records
        .iter()
        .find(|r| r["event"]["event"] == "session_start")
        .unwrap();
    let operator = start["event"]["operator"].as_str().unwrap_or("");
    assert!(
        operator.starts_with("uid 0 (root)") && operator.contains(&format!(" pid {console_pid}")),
        "{start}"
    );
}
