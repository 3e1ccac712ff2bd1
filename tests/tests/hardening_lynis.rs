//! The hardening pack (examples/hardening) measured by Lynis on a booted
//! Debian 12 host: the packaged daemon runs the pack unattended (every
//! change pre-approved by the task's own ```approvals block) with a scripted
//! model replaying the pack's reference steps; Lynis before and after. And
//! one test per safety rule of the pack. examples/hardening/measure.sh runs
//! the first test and keeps its report.
//!
//! Each host has its own network namespace (the pack loads a firewall and
//! sets network sysctls); apt reaches the archive through a proxy on the
//! host's loopback (tests/src/hardening.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Output;
use std::time::{Duration, Instant};
use sysward_tests::hardening::*;
use sysward_tests::hosts::{Host, Options};
use sysward_tests::packaged::host_with_package;
use sysward_tests::*;

const ADMIN: &str = "sysadm";
/// The lowest acceptable index after the pack (dev-sec's two roles: 74).
const MIN_INDEX: u32 = 76;
const RUN_TIMEOUT: Duration = Duration::from_secs(1800);

fn private_host(test: &str) -> Option<Host> {
    host_with_package(
        test,
        Options {
            nspawn_args: vec!["--private-network".into()],
            ..Options::default()
        },
    )
}

/// SSH as a site has it: host keys, the server running (on the host's own
/// loopback and network namespace), an administrator in group sudo, with a
/// key when `with_key`.
fn prepare(host: &Host, with_key: bool) {
    host.sh_ok(&format!(
        "ssh-keygen -A >/dev/null && systemctl unmask ssh.service ssh.socket >/dev/null 2>&1; systemctl start ssh.service \
         && useradd -m -s /bin/bash -G sudo {ADMIN} && chmod 755 /home/{ADMIN}"
    ));
    if with_key {
        host.sh_ok(&format!(
            "ssh-keygen -q -t ed25519 -N '' -f /root/admin_key && install -d -m 0700 -o {ADMIN} -g {ADMIN} /home/{ADMIN}/.ssh \
             && install -m 0600 -o {ADMIN} -g {ADMIN} /root/admin_key.pub /home/{ADMIN}/.ssh/authorized_keys"
        ));
    }
}

fn key_login(host: &Host) -> Output {
    host.run(&[
        "ssh",
        "-i",
        "/root/admin_key",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-p",
        "22",
        &format!("{ADMIN}@127.0.0.1"),
        "true",
    ])
}

fn run_pack(host: &Host, rerun: bool) -> (Output, f64) {
    let t = Instant::now();
    let mut argv = vec!["sysward", "run", "--json"];
    if rerun {
        argv.push("--rerun");
    }
    let out = host.run_timeout(&argv, RUN_TIMEOUT);
    (out, t.elapsed().as_secs_f64())
}

fn status_of<'a>(statuses: &'a [(String, String)], task: &str) -> &'a str {
    statuses
        .iter()
        .find(|(t, _)| t == task)
        .map(|(_, s)| s.as_str())
        .unwrap_or("")
}

/// Content hashes of every file under /etc (the daemon's own state and the
/// broker's backups excepted).
fn etc_state(host: &Host) -> String {
    host.sh_ok("find /etc -xdev -type f ! -path '/etc/sysward/*' -print0 | sort -z | xargs -0 sha256sum; find /etc -xdev -printf '%m %u %p\\n' | grep -v ' /etc/sysward' | sort")
}

fn failed_units(host: &Host) -> Vec<String> {
    host.sh_ok("systemctl --failed --plain --no-legend | awk '{print $1}'")
        .lines()
        .map(str::to_string)
        .filter(|u| !u.is_empty())
        .collect()
}

/// Units a container cannot run (kernel-wide knobs that belong to the
/// machine, not to a container).
const CONTAINER_UNITS: &[&str] = &["systemd-sysctl.service", "sysstat.service"];

#[test]
fn the_pack_hardens_a_debian_host_unattended_as_lynis_measures() {
    let test = "the_pack_hardens_a_debian_host_unattended_as_lynis_measures";
    let t0 = Instant::now();
    let Some(host) = private_host(test) else {
        return;
    };
    let mut timings = vec![("boot and dpkg -i".to_string(), t0.elapsed().as_secs_f64())];
    let proxy = AptProxy::start(host.pid1());
    use_proxy(&host, &proxy);
    prepare(&host, true);
    let login = key_login(&host);
    assert!(
        login.status.success(),
        "key login before: {}",
        describe(&login)
    );

    let before = lynis(&host);
    timings.push(("lynis before".into(), before.seconds));
    println!("lynis before: {}", before.index);

    let facts = read_facts(&host);
    let server = ModelIn::start(host.pid1(), scenario_json(&facts, &[], 1));
    install_pack(&host, &server, &[]);
    let (first, secs) = run_pack(&host, false);
    timings.push(("sysward run (the pack)".into(), secs));
    let sum = summary(&first);
    let statuses = task_statuses(&sum);
    let checks = verifications(&server);
    let tasks: Vec<(String, String, String)> = reference()
        .iter()
        .map(|t| {
            (
                t.task.clone(),
                status_of(&statuses, &t.task).to_string(),
                verification_of(&checks, &t.task),
            )
        })
        .collect();
    println!("first run: exit {:?} in {secs:.0} s", first.status.code());
    for (task, status, text) in &tasks {
        println!("  {task}: {status}");
        for (id, state, detail) in measures(text) {
            println!("      {state:<15} {id} {detail}");
        }
    }

    let after = lynis(&host);
    timings.push(("lynis after".into(), after.seconds));

    let mut wrong = Vec::new();
    for (task, status, text) in &tasks {
        let ok = if task == "50-auditd.md" {
            status == "BLOCKED" && text.contains("NOT-APPLICABLE")
        } else {
            status == "DONE"
        };
        if !ok {
            wrong.push(format!("{task} ended {status:?}:\n{text}"));
        }
        for (id, state, detail) in measures(text) {
            if state == "FAILED" {
                wrong.push(format!("{task}: measure {id} FAILED: {detail}"));
            }
        }
    }
    if after.index < MIN_INDEX {
        wrong.push(format!(
            "lynis index {} -> {} (at least {MIN_INDEX} wanted); still suggested: {:#?}",
            before.index, after.index, after.suggestions
        ));
    }
    let failed: Vec<String> = failed_units(&host)
        .into_iter()
        .filter(|u| !CONTAINER_UNITS.contains(&u.as_str()))
        .collect();
    if !failed.is_empty() {
        wrong.push(format!(
            "failed units: {failed:?}\n{}",
            String::from_utf8_lossy(
                &host
                    .sh("systemctl status --no-pager -l --failed 2>&1 | head -n 60")
                    .stdout
            )
        ));
    }
    let sshd_t = host.run(&["sshd", "-t"]);
    if !sshd_t.status.success() {
        wrong.push(format!("sshd -t: {}", describe(&sshd_t)));
    }
    let login = key_login(&host);
    if !login.status.success() {
        wrong.push(format!("key login after: {}", describe(&login)));
    }
    let effective = host.sh_ok(
        "sshd -T | grep -Ei '^(passwordauthentication|permitrootlogin|pubkeyauthentication) '",
    );
    for want in [
        "passwordauthentication no",
        "permitrootlogin no",
        "pubkeyauthentication yes",
    ] {
        if !effective.contains(want) {
            wrong.push(format!("sshd -T lacks {want:?}: {effective}"));
        }
    }
    let t = Instant::now();
    let update = host.run_timeout(&["apt-get", "update", "-q"], Duration::from_secs(600));
    timings.push(("apt-get update after".into(), t.elapsed().as_secs_f64()));
    if !update.status.success() || String::from_utf8_lossy(&update.stdout).contains("Err:") {
        wrong.push(format!(
            "apt-get update after the pack: {}",
            describe(&update)
        ));
    }

    // A second run of every task (--rerun) changes nothing. The model reads
    // the host as it is now (new facts, a new replay).
    let etc_before = etc_state(&host);
    let facts2 = read_facts(&host);
    let server2 = ModelIn::start(host.pid1(), scenario_json(&facts2, &[], 1));
    point_at(&host, &server2);
    let (second, secs) = run_pack(&host, true);
    timings.push(("sysward run --rerun (changes nothing)".into(), secs));
    let again = task_statuses(&summary(&second));
    if again != statuses {
        let checks = verifications(&server2);
        let differing: Vec<String> = again
            .iter()
            .filter(|a| !statuses.contains(a))
            .map(|(t, _)| {
                let line = format!("CHECK {t}");
                let last = checks
                    .iter()
                    .rev()
                    .find(|c| c.lines().any(|l| l.trim() == line))
                    .cloned()
                    .unwrap_or_default();
                format!("{t}:\n{last}")
            })
            .collect();
        let errors: Vec<&str> = std::str::from_utf8(&second.stdout)
            .unwrap_or("")
            .lines()
            .filter(|l| l.contains("\"status\":\"error\"") || l.contains("\"status\":\"denied\""))
            .collect();
        wrong.push(format!(
            "the second run ended {again:?}, the first {statuses:?}\n{}\n{}",
            differing.join("\n"),
            errors.join("\n")
        ));
    }
    let etc_after = etc_state(&host);
    if etc_before != etc_after {
        let b: Vec<&str> = etc_before.lines().collect();
        let changed: Vec<&str> = etc_after.lines().filter(|l| !b.contains(l)).collect();
        wrong.push(format!("the second run changed /etc: {changed:?}"));
    }
    let mut failures = server.expectation_failures();
    failures.extend(server2.expectation_failures());
    if !failures.is_empty() {
        wrong.push(format!("scripted model: {failures:?}"));
    }
    timings.push(("total".into(), t0.elapsed().as_secs_f64()));

    let dir = std::env::var_os("SYSWARD_HARDENING_REPORT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| pack_dir().join("../../target/hardening-report"));
    let (md, html) = Report {
        before: &before,
        after: &after,
        tasks: tasks.clone(),
        timings: timings.clone(),
    }
    .write(&dir);
    println!(
        "\n| | Lynis hardening index |\n| --- | --- |\n| before | {} |\n| after | {} |",
        before.index, after.index
    );
    for (what, s) in &timings {
        println!("  {what}: {s:.0} s");
    }
    println!("report: {} and {}", md.display(), html.display());
    println!("lynis hardening index: {} -> {}", before.index, after.index);
    assert!(
        wrong.is_empty(),
        "{} problems:\n{}\n\nfirst run:\n{}",
        wrong.len(),
        wrong.join("\n---\n"),
        describe(&first)
    );
    drop(proxy);
    drop(server);
    drop(server2);
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// No administrator holds a key: the keys-only settings are refused on the
/// host (the validate check), password login stays on and the task ends
/// BLOCKED saying what the operator must do.
#[test]
fn without_a_key_holding_admin_password_login_stays_on() {
    let test = "without_a_key_holding_admin_password_login_stays_on";
    let Some(host) = private_host(test) else {
        return;
    };
    prepare(&host, false);
    let facts = read_facts(&host);
    let server = ModelIn::start(host.pid1(), scenario_json(&facts, &["10-ssh.md"], 1));
    install_pack(&host, &server, &["10-ssh.md"]);
    let (out, _) = run_pack(&host, false);
    let statuses = task_statuses(&summary(&out));
    let checks = verifications(&server);
    let requests = server.chat_requests();
    let said = requests
        .iter()
        .map(|r| {
            r.messages()
                .iter()
                .map(sysward_scripted_model::message_text)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        status_of(&statuses, "10-ssh.md"),
        "BLOCKED",
        "{}",
        describe(&out)
    );
    assert!(
        said.contains("BLOCKED: no account other than root")
            && said.contains("password login stays on"),
        "the host-side check's reason is missing: {said}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("password login stays on"),
        "{}",
        describe(&out)
    );
    assert!(host
        .read("/etc/ssh/sshd_config.d/01-sysward-keys-only.conf")
        .is_none());
    assert!(host
        .read("/etc/ssh/sshd_config.d/00-sysward-hardening.conf")
        .is_some());
    let effective = host.sh_ok("sshd -T | grep -Ei '^(passwordauthentication|permitrootlogin) '");
    assert!(
        effective.contains("passwordauthentication yes"),
        "{effective}"
    );
    assert!(!effective.contains("permitrootlogin no"), "{effective}");
    assert!(
        checks
            .iter()
            .any(|c| c.contains("MEASURE ssh:keys-only BLOCKED")),
        "{checks:?}"
    );
    drop(server);
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// A service listens: a model that forgets it gets its ruleset refused on
/// the host (nothing is loaded, the task ends BLOCKED); the reference
/// ruleset keeps it and SSH open.
#[test]
fn the_firewall_keeps_a_listening_service_open() {
    let test = "the_firewall_keeps_a_listening_service_open";
    let Some(host) = private_host(test) else {
        return;
    };
    prepare(&host, true);
    host.sh_ok(
        "systemd-run --unit=test-web python3 -m http.server 8765 --bind 0.0.0.0 >/dev/null 2>&1",
    );
    wait_for(Duration::from_secs(30), "the test service listens", || {
        host.sh("ss -Htln | grep -q ':8765 '")
            .status
            .success()
            .then_some(())
    });
    let facts = read_facts(&host);
    assert!(
        facts
            .scalars
            .iter()
            .any(|(k, v)| k == "TCP_PORTS" && v == "8765"),
        "{facts:?}"
    );
    // The forgetful model's ruleset: SSH only.
    let mut forgetful = facts.clone();
    for (k, v) in forgetful.scalars.iter_mut() {
        if k == "TCP_RULE" {
            v.clear();
        }
    }
    let steps_forgetful: serde_json::Value =
        serde_json::from_str(&scenario_json(&forgetful, &["40-nftables.md"], 1)).unwrap();
    let steps_right: serde_json::Value =
        serde_json::from_str(&scenario_json(&facts, &["40-nftables.md"], 1)).unwrap();
    let mut all = steps_forgetful["steps"].as_array().unwrap().clone();
    all.extend(steps_right["steps"].as_array().unwrap().iter().cloned());
    let json = serde_json::json!({"context_size": 32768, "steps": all}).to_string();
    let server = ModelIn::start(host.pid1(), json);
    install_pack(&host, &server, &["40-nftables.md"]);

    let (first, _) = run_pack(&host, false);
    let s1 = task_statuses(&summary(&first));
    assert_eq!(
        status_of(&s1, "40-nftables.md"),
        "BLOCKED",
        "{}",
        describe(&first)
    );
    let text1 = String::from_utf8_lossy(&first.stdout).to_string();
    let ruleset = host.sh_ok("nft list ruleset");
    let said: String = server
        .chat_requests()
        .iter()
        .filter_map(|r| {
            r.messages()
                .last()
                .map(sysward_scripted_model::message_text)
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        said.contains("REFUSED: listening services would be cut off: tcp/8765"),
        "the guard did not name the service: {said}\n{text1}"
    );
    assert!(ruleset.trim().is_empty(), "a ruleset was loaded: {ruleset}");

    let (second, _) = run_pack(&host, false);
    let s2 = task_statuses(&summary(&second));
    assert_eq!(
        status_of(&s2, "40-nftables.md"),
        "DONE",
        "{}",
        describe(&second)
    );
    let chain = host.sh_ok("nft list chain inet filter input");
    assert!(chain.contains("policy drop"), "{chain}");
    assert!(chain.contains("tcp dport 22 "), "{chain}");
    assert!(chain.contains("8765"), "{chain}");
    let login = key_login(&host);
    assert!(login.status.success(), "key login: {}", describe(&login));
    drop(server);
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}

/// The SSH configuration is invalid (a broken drop-in an administrator left):
/// the pack's `sshd -t` fails, ssh is never reloaded, the task ends FAILED.
#[test]
fn an_invalid_ssh_configuration_is_never_reloaded() {
    let test = "an_invalid_ssh_configuration_is_never_reloaded";
    let Some(host) = private_host(test) else {
        return;
    };
    prepare(&host, true);
    host.write(
        "/etc/ssh/sshd_config.d/50-broken.conf",
        "NoSuchKeyword yes\n",
        0o644,
    );
    let pid_before = host.ok(&["systemctl", "show", "-p", "MainPID", "--value", "ssh"]);
    let facts = read_facts(&host);
    let server = ModelIn::start(host.pid1(), scenario_json(&facts, &["10-ssh.md"], 1));
    install_pack(&host, &server, &["10-ssh.md"]);
    let (out, _) = run_pack(&host, false);
    let statuses = task_statuses(&summary(&out));
    assert_eq!(
        status_of(&statuses, "10-ssh.md"),
        "FAILED",
        "{}",
        describe(&out)
    );
    let said: String = server
        .chat_requests()
        .iter()
        .filter_map(|r| {
            r.messages()
                .last()
                .map(sysward_scripted_model::message_text)
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(said.contains("ssh was NOT reloaded"), "{said}");
    let journal = host.sh_ok("journalctl --no-pager -u ssh.service");
    assert!(
        !journal.contains("Reloading") && !journal.contains("Received SIGHUP"),
        "ssh was reloaded: {journal}"
    );
    assert_eq!(
        host.ok(&["systemctl", "show", "-p", "MainPID", "--value", "ssh"]),
        pid_before
    );
    drop(server);
    let problems = host.shutdown();
    assert!(problems.is_empty(), "teardown: {problems:?}");
}
