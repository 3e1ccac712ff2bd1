//! A read-only action lists the host's firewall: `nft list ruleset`,
//! `iptables -L -n` and `iptables-save` keep CAP_NET_ADMIN as exactly those
//! forms (the kernel refuses a listing without it), run through the real
//! broker → agent → gateway → executor tree. The broker runs in a network
//! namespace this test makes and fills with rules of its own, never this
//! machine's. Any other shape gets no capability, and changes stay
//! requests a person must approve (nobody does here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;
use sysward_tests::*;

fn shell(cmd: &str) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":"shell","arguments":{"command":cmd}}]})
}

fn exec(command: &str, args: &[&str]) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":"exec","arguments":{"command":command,"args":args}}]})
}

fn run(argv: &[&str]) -> std::process::Output {
    Command::new(argv[0]).args(&argv[1..]).output().unwrap()
}

fn ok(argv: &[&str]) -> String {
    let out = run(argv);
    assert!(out.status.success(), "{argv:?}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_read_only_action_lists_the_hosts_firewall_and_changes_nothing() {
    let test = "a_read_only_action_lists_the_hosts_firewall_and_changes_nothing";
    if !require_root(test) {
        return;
    }
    for program in ["nft", "iptables", "iptables-save"] {
        if run(&["sh", "-c", &format!("command -v {program}")])
            .stdout
            .is_empty()
        {
            eprintln!("skipped: {program} is not installed");
            return;
        }
    }
    if !std::fs::canonicalize("/usr/sbin/iptables").is_ok_and(|p| p.ends_with("xtables-nft-multi"))
    {
        eprintln!("skipped: iptables is not iptables-nft here");
        return;
    }
    ensure_accounts();
    let project = PathBuf::from(format!("/var/tmp/sysward-nft-{}", std::process::id()));
    let steps = vec![
        exec("nft", &["list", "ruleset"]),
        shell("iptables -L INPUT -n"),
        shell("iptables-save"),
        shell("nft -a list chain inet swtest input"),
        // Not a listing form alone: no capability, the kernel refuses.
        shell("nft list ruleset | cat"),
        shell("iptables -L -n --modprobe=/bin/true"),
        // Changes: requests nobody approves here.
        shell("nft add table inet sysward_attack"),
        shell("nft -f /dev/null"),
        shell("iptables -A INPUT -p tcp --dport 4799 -j DROP"),
    ];
    let (results, after) = std::thread::spawn({
        let project = project.clone();
        move || {
            // This thread, the broker's threads it starts and every action
            // they fork live in a fresh network namespace.
            // SAFETY: integer argument only; it affects this thread alone.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            ok(&["ip", "link", "set", "lo", "up"]);
            ok(&["nft", "add", "table", "inet", "swtest"]);
            ok(&[
                "nft",
                "add",
                "chain",
                "inet",
                "swtest",
                "input",
                "{ type filter hook input priority 0 ; }",
            ]);
            ok(&[
                "nft",
                "add",
                "rule",
                "inet",
                "swtest",
                "input",
                "tcp",
                "dport",
                "4711",
                "drop",
                "comment",
                "\"swtest-marker\"",
            ]);
            ok(&[
                "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "4712", "-j", "DROP",
            ]);
            let (_server, results) = run_scripted_in_process(
                &project,
                steps,
                "ALLOW_OUTSIDE_PROJECT_READ=true\nMAX_STEPS=30",
                "Show the firewall.",
            );
            let after = ok(&["nft", "list", "ruleset"]);
            (results, after)
        }
    })
    .join()
    .unwrap();
    let _ = std::fs::remove_dir_all(&project);
    let mut wrong = Vec::new();
    let mut check = |cond: bool, what: &str, i: usize| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            wrong.push(format!(
                "{what}: {}",
                results[i].chars().take(1200).collect::<String>()
            ));
        }
    };
    check(
        results[0].contains("swtest-marker") && results[0].contains("4711"),
        "nft list ruleset shows the test's rule",
        0,
    );
    check(
        results[1].contains("dpt:4712"),
        "iptables -L INPUT -n shows the test's rule",
        1,
    );
    check(
        results[2].contains("--dport 4712"),
        "iptables-save shows the test's rule",
        2,
    );
    check(
        results[3].contains("swtest-marker") && results[3].contains("# handle"),
        "nft -a list chain shows the chain with handles",
        3,
    );
    check(
        !results[4].contains("swtest-marker") && results[4].contains("Operation not permitted"),
        "a listing in a pipeline keeps no capability",
        4,
    );
    check(
        !results[5].contains("dpt:4712"),
        "an iptables listing with --modprobe keeps no capability",
        5,
    );
    for (i, what) in [
        (6, "nft add table ran nothing"),
        (7, "nft -f ran nothing"),
        (8, "iptables -A ran nothing"),
    ] {
        check(!results[i].contains("status=\"ok\""), what, i);
    }
    let unchanged =
        !after.contains("sysward_attack") && !after.contains("4799") && after.contains("4711");
    if !unchanged {
        wrong.push(format!("the namespace's ruleset changed:\n{after}"));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}
