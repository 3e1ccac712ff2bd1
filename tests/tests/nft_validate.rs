//! `write_file` with `validate: nft -c -f {file}`: the kernel checks a
//! ruleset only for a process with CAP_NET_ADMIN, so the check keeps it when
//! it is exactly that form run from the root-owned nft, and a good ruleset
//! is written while a bad one leaves nothing. A validate that would load
//! (`nft -f {file}`, or a shell around it) keeps no capability and its load
//! fails. Run through the real broker → agent → gateway → executor tree, in
//! a network namespace this test makes (never this machine's own ruleset).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use sysward_tests::*;

const GOOD: &str = "table inet swcheck {\n  chain input {\n    type filter hook input priority 0; policy accept;\n    tcp dport 4713 drop\n  }\n}\n";
const BAD: &str = "table inet swcheck {\n  chain input {\n    type filter hook input priority 0; policy accept;\n    tcp dport 4713 frobnicate\n  }\n}\n";

fn write(path: &str, content: &str, command: &str, args: &[&str]) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":"write_file","arguments":{
        "path": path, "content": content,
        "validate": {"command": command, "args": args}}}]})
}

fn ok(argv: &[&str]) -> String {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(out.status.success(), "{argv:?}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn nft_check_validates_a_ruleset_and_a_loading_validate_loads_nothing() {
    let test = "nft_check_validates_a_ruleset_and_a_loading_validate_loads_nothing";
    if !require_root(test) {
        return;
    }
    if Command::new("sh")
        .args(["-c", "command -v nft"])
        .output()
        .unwrap()
        .stdout
        .is_empty()
    {
        eprintln!("skipped: nft is not installed");
        return;
    }
    ensure_accounts();
    let project = PathBuf::from(format!("/var/tmp/sysward-nftcheck-{}", std::process::id()));
    let file = |name: &str| project.join(name).display().to_string();
    let steps = vec![
        write(&file("good.nft"), GOOD, "nft", &["-c", "-f", "{file}"]),
        write(&file("bad.nft"), BAD, "nft", &["-c", "-f", "{file}"]),
        write(&file("load.nft"), GOOD, "nft", &["-f", "{file}"]),
        write(
            &file("shell.nft"),
            GOOD,
            "sh",
            &["-c", "nft -f \"$0\"", "{file}"],
        ),
    ];
    let (results, before, after, records) = std::thread::spawn({
        let project = project.clone();
        move || {
            // This thread, the broker's threads and every action they fork
            // live in a fresh network namespace.
            // SAFETY: integer argument only; it affects this thread alone.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            ok(&["ip", "link", "set", "lo", "up"]);
            ok(&["nft", "add", "table", "inet", "swkeep"]);
            let before = ok(&["nft", "list", "ruleset"]);
            let (_server, results) = run_scripted_in_process(
                &project,
                steps,
                "MAX_STEPS=30",
                "Check the firewall files.",
            );
            let after = ok(&["nft", "list", "ruleset"]);
            let records: Vec<serde_json::Value> =
                std::fs::read_to_string(project.join("audit.log"))
                    .unwrap_or_default()
                    .lines()
                    .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].clone())
                    .collect();
            (results, before, after, records)
        }
    })
    .join()
    .unwrap();
    let exists = |name: &str| project.join(name).exists();
    let good_written = std::fs::read_to_string(project.join("good.nft")).ok();
    let leftover: Vec<String> = std::fs::read_dir(&project)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".nft") && !["good.nft"].contains(&n.as_str()))
        .collect();
    let granted: Vec<String> = records
        .iter()
        .filter(|r| r["event"] == "tool" && r["tool"] == "write_file")
        .map(|r| r["profile"].as_str().unwrap_or("").to_string())
        .collect();
    let (load_made, shell_made) = (exists("load.nft"), exists("shell.nft"));
    let _ = std::fs::remove_dir_all(&project);
    let mut wrong = Vec::new();
    let mut check = |cond: bool, what: &str, detail: &str| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            wrong.push(format!(
                "{what}: {}",
                detail.chars().take(1500).collect::<String>()
            ));
        }
    };
    check(
        results[0].contains("validate passed") && good_written.as_deref() == Some(GOOD),
        "a good ruleset passes nft -c and is written",
        &results[0],
    );
    check(
        results[1].contains("failed") && !exists("bad.nft"),
        "a bad ruleset fails nft -c and leaves nothing",
        &results[1],
    );
    check(
        !load_made && results[2].contains("not permitted"),
        "a validate of nft -f keeps no capability: its load fails, nothing is written",
        &results[2],
    );
    check(
        !shell_made && !results[3].contains("validate passed"),
        "nft -f inside a shell validate keeps no capability",
        &results[3],
    );
    check(
        leftover.is_empty(),
        "no candidate file is left over",
        &leftover.join(" "),
    );
    check(
        granted.len() == 4
            && granted[0].contains("CAP_NET_ADMIN")
            && granted[1].contains("CAP_NET_ADMIN")
            && !granted[2].contains("CAP_NET_ADMIN")
            && !granted[3].contains("CAP_NET_ADMIN"),
        "the audit record's profile shows the capability exactly for the check form",
        &granted.join("\n"),
    );
    check(
        before == after && !after.contains("swcheck") && after.contains("swkeep"),
        "the namespace's ruleset did not change",
        &after,
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}
