//! The action's scratch directory in the packaged layout. Installed from the
//! .deb, the state directory is /var/lib/sysward and an action's TMPDIR is
//! /var/lib/sysward/.agent/tmp, beneath the directory a writing action's
//! mount namespace hides: the scratch directory must be put back inside it,
//! or every write to TMPDIR (a maintainer script's `mktemp`) fails. Each test
//! boots a throwaway Debian host (hostbed/) and drives the real daemon.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;
use std::time::{Duration, Instant};
use sysward_tests::hosts::{Host, Options};
use sysward_tests::packaged::{configure, host_with_package};
use sysward_tests::*;

const OPERATOR: &str = "swop";
const PROBE: &str = "swtmpdir-probe";

const ADMIN_POLICY: &str = "EXECUTION_MODE=unrestricted
APPROVAL_MODE=permissive
ALLOW_OUTSIDE_PROJECT_READ=true
ALLOW_OUTSIDE_PROJECT_WRITE=true
ALLOW_PACKAGE_INSTALL=true
ALLOW_DELETE=true
MAX_STEPS=40
DEFAULT_COMMAND_TIMEOUT=300";

/// `sysward ARGS` run in the host by the operator (through the daemon).
fn sysward_as_operator(host: &Host, args: &[&str], timeout: Duration) -> Output {
    let mut argv = vec![
        "setpriv",
        "--reuid",
        OPERATOR,
        "--regid",
        OPERATOR,
        "--init-groups",
        "--",
        "env",
        "-i",
        "PATH=/usr/bin:/bin",
        "LANG=C.UTF-8",
        "HOME=/home/swop",
        "/usr/bin/sysward",
    ];
    argv.extend_from_slice(args);
    wait_output(host.command(&argv).spawn().unwrap(), timeout)
}

/// A local package whose maintainer scripts need a working TMPDIR, as many
/// do (`mktemp`, debconf, ucf): built in the host with dpkg-deb, so the test
/// needs no mirror. The postinst records the TMPDIR it saw and the program it
/// installs in /usr/bin.
fn build_probe_package(host: &Host) {
    let root = format!("/root/{PROBE}");
    host.sh_ok(&format!(
        "rm -rf {root} && mkdir -p {root}/DEBIAN {root}/usr/bin && \
         printf 'Package: {PROBE}\\nVersion: 1.0\\nArchitecture: all\\nMaintainer: sysward tests <root@localhost>\\nDescription: maintainer scripts that use TMPDIR\\n' > {root}/DEBIAN/control"
    ));
    let postinst = format!(
        "#!/bin/sh\nset -e\nt=$(mktemp)\necho configured > \"$t\"\nmkdir -p /var/lib/{PROBE}\ncp \"$t\" /var/lib/{PROBE}/state\necho \"${{TMPDIR:-unset}}\" > /var/lib/{PROBE}/tmpdir\nrm -f \"$t\"\n"
    );
    let prerm =
        format!("#!/bin/sh\nset -e\nt=$(mktemp -d)\nrmdir \"$t\"\nrm -rf /var/lib/{PROBE}\n");
    host.write(&format!("{root}/DEBIAN/postinst"), postinst, 0o755);
    host.write(&format!("{root}/DEBIAN/prerm"), prerm, 0o755);
    host.write(
        &format!("{root}/usr/bin/{PROBE}"),
        format!("#!/bin/sh\necho probe-ran\ncat /var/lib/{PROBE}/state /var/lib/{PROBE}/tmpdir\n"),
        0o755,
    );
    host.sh_ok(&format!(
        "dpkg-deb --root-owner-group --build {root} /root/{PROBE}.deb"
    ));
}

fn tool(name: &str, args: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"tool_calls":[{"name":name,"arguments":args}]})
}

/// The tool result the model received for step `i` of the session that
/// started at request `offset`.
fn result_of(server: &Handle, offset: usize, i: usize) -> String {
    server
        .chat_requests()
        .get(offset + i + 1)
        .and_then(|c| c.messages().last().cloned())
        .map(|m| sysward_scripted_model::message_text(&m))
        .unwrap_or_else(|| format!("no result for step {i}"))
}

#[test]
fn a_writing_action_and_a_maintainer_script_use_tmpdir_in_the_packaged_layout() {
    let test = "a_writing_action_and_a_maintainer_script_use_tmpdir_in_the_packaged_layout";
    let Some(host) = host_with_package(test, Options::default()) else {
        return;
    };
    host.ok(&[
        "useradd",
        "-m",
        "-s",
        "/bin/bash",
        "-G",
        "sysward",
        OPERATOR,
    ]);
    build_probe_package(&host);
    let steps = [
        // A redirection makes this a writing action (its own mount
        // namespace), and the file goes to TMPDIR.
        tool(
            "shell",
            serde_json::json!({"command":"echo scratch-ok > \"$TMPDIR/probe\" && cat \"$TMPDIR/probe\" && rm \"$TMPDIR/probe\" && echo \"tmpdir=$TMPDIR\""}),
        ),
        tool(
            "shell",
            serde_json::json!({"command":format!("DEBIAN_FRONTEND=noninteractive apt-get install -y -q /root/{PROBE}.deb"),"timeout_seconds":300}),
        ),
        tool("exec", serde_json::json!({"command":PROBE,"args":[]})),
        tool(
            "shell",
            serde_json::json!({"command":format!("DEBIAN_FRONTEND=noninteractive apt-get remove -y -q {PROBE}"),"timeout_seconds":300}),
        ),
    ];
    let mut script = Vec::new();
    for _ in 0..2 {
        script.extend(steps.iter().cloned());
        script.push(serde_json::json!({"content":"EXECUTED and VERIFIED.\n\nTASK_STATUS: DONE"}));
    }
    let server = scenario(&serde_json::json!({ "steps": script }).to_string());
    configure(
        &host,
        &server,
        ADMIN_POLICY,
        &[(
            "01-tmpdir.md",
            "# Scratch\nWrite to TMPDIR, install the local probe package, run it, remove it.\n",
        )],
    );
    let timeout = Duration::from_secs(600);
    let t = Instant::now();
    let first = sysward_as_operator(&host, &["run", "--json"], timeout);
    println!("first run: {:.1} s", t.elapsed().as_secs_f64());
    // The install waits for a person in permissive mode: approve what is
    // pending, as the operator would, and run again.
    let mut offset = 0;
    if first.status.code() == Some(2) {
        let list = sysward_as_operator(&host, &["approvals", "--json"], Duration::from_secs(30));
        assert!(list.status.success(), "{}", describe(&list));
        let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
        let pending: Vec<String> = v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["status"] == "pending")
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect();
        assert!(
            !pending.is_empty(),
            "BLOCKED without a pending approval: {v:#}"
        );
        for id in &pending {
            let out = sysward_as_operator(&host, &["approve", id], Duration::from_secs(30));
            assert!(out.status.success(), "approve {id}: {}", describe(&out));
        }
        let second = sysward_as_operator(&host, &["run", "--json"], timeout);
        assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
        offset = steps.len() + 1;
    } else {
        assert_eq!(first.status.code(), Some(0), "{}", describe(&first));
    }
    let results: Vec<String> = (0..steps.len())
        .map(|i| result_of(&server, offset, i))
        .collect();
    let ok = |i: usize| results[i].contains("status=\"ok\"");
    let mut failures = Vec::new();
    let mut check = |cond: bool, what: &str, i: usize| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            failures.push(format!(
                "{what}: {}",
                results[i].chars().take(1500).collect::<String>()
            ));
        }
    };
    check(
        ok(0)
            && results[0].contains("scratch-ok")
            && results[0].contains("tmpdir=/var/lib/sysward/.agent/tmp"),
        "a writing action writes its TMPDIR",
        0,
    );
    // What the postinst left, as the installed program prints it before
    // the removal (its prerm removes the state).
    check(
        ok(1)
            && ok(2)
            && results[2].contains("probe-ran")
            && results[2].contains("configured")
            && results[2].contains("/var/lib/sysward/.agent/tmp"),
        "the postinst's mktemp worked in TMPDIR, and the installed program runs",
        2,
    );
    let status = host.run(&["dpkg-query", "-W", "-f=${Status}", PROBE]);
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    check(
        ok(3)
            && !status.contains("installed")
            && !host
                .run(&["test", "-e", &format!("/usr/bin/{PROBE}")])
                .status
                .success(),
        &format!("apt-get remove runs its prerm (status now {status:?})"),
        3,
    );
    let audit = host.run(&["dpkg", "--audit"]);
    check(
        audit.status.success() && audit.stdout.is_empty(),
        "dpkg --audit prints nothing",
        1,
    );
    let verify = host.run(&["sysward", "audit", "verify"]);
    check(verify.status.success(), "the audit chain verifies", 0);
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n---\n")
    );
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}
