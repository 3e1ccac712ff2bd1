//! The Ansible collection (packaging/ansible, `sysward.fleet`) against a
//! fleet of booted Debian hosts (tests/src/hosts.rs): each runs an sshd on
//! its own loopback port with a throwaway key, and `ansible-playbook` from
//! the venv that scripts/fleet/setup.sh caches does all the fleet work over
//! Ansible's builtin ssh connection: install the .deb built from this tree,
//! configure (a broken agent.md is refused by `validate:`), run, fetch,
//! aggregate, a second play that changes nothing, an approval decided
//! through approvals.yml, verify. `ansible-lint` checks the collection.
//!
//! Skips loudly without root, the host bed or the venv, unless
//! SYSWARD_REQUIRE_HOSTS=1 (CI), when that is a failure.
//!
//! `fleet_bench` (ignored; scripts/fleet/bench.sh) plays the same against
//! SYSWARD_FLEET_HOSTS hosts and prints the wall time of each phase.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use sysward_tests::hosts::Host;
use sysward_tests::packaged::{deb, wait_active};
use sysward_tests::*;

/// The remote account Ansible logs in as (inside the hosts only).
const REMOTE_USER: &str = "swfleet";
const VAULT_SECRET: &str = "fleet-token-7f3a9c1e";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn collection() -> PathBuf {
    repo().join("packaging/ansible/ansible_collections/sysward/fleet")
}

fn venv_bin() -> PathBuf {
    let cache =
        std::env::var_os("SYSWARD_CI_CACHE").unwrap_or_else(|| "/var/cache/sysward-ci".into());
    PathBuf::from(cache).join("ansible-venv/bin")
}

fn required() -> bool {
    std::env::var("SYSWARD_REQUIRE_HOSTS").is_ok_and(|v| v == "1")
}

/// The venv, or a loud skip (a failure when hosts are required).
fn venv_or_skip(test: &str) -> Option<PathBuf> {
    let bin = venv_bin();
    if bin.join("ansible-playbook").is_file() && bin.join("ansible-lint").is_file() {
        return Some(bin);
    }
    let msg = format!(
        "{test}: no Ansible controller: {} is missing. Fix: sudo bash scripts/fleet/setup.sh",
        bin.join("ansible-playbook").display()
    );
    if required() {
        panic!("{msg} (SYSWARD_REQUIRE_HOSTS=1: this is a failure, not a skip)");
    }
    let line = format!("\n*** SKIPPED {msg}. (CI sets SYSWARD_REQUIRE_HOSTS=1.) ***\n");
    if fs::OpenOptions::new()
        .append(true)
        .open("/proc/self/fd/2")
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .is_err()
    {
        eprintln!("{line}");
    }
    None
}

/// The controller's side of one play: its directory (inventory, vars, key,
/// vault password, Ansible's own state: nothing lands in this machine's
/// HOME) and the environment every ansible command gets.
struct Controller {
    dir: PathBuf,
    bin: PathBuf,
    phases: Vec<(String, f64)>,
}

impl Controller {
    fn new(bin: PathBuf) -> Controller {
        // Short: ssh's ControlPath must fit a socket address.
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let k = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = PathBuf::from(format!("/var/tmp/swf-{}-{k}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for sub in ["home", "cp", "tmp", "tasks", "group_vars/all", "results"] {
            fs::create_dir_all(dir.join(sub)).unwrap();
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let out = Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "sysward-fleet-test",
                "-f",
            ])
            .arg(dir.join("id_ed25519"))
            .stdin(Stdio::null())
            .output()
            .expect("ssh-keygen (openssh-client)");
        assert!(out.status.success(), "ssh-keygen: {}", describe(&out));
        write(&dir.join("vault-pass"), "fleet-test-vault-password\n");
        write(
            &dir.join("ansible.cfg"),
            &format!(
                "[defaults]\ninventory = {d}/inventory.yml\ncollections_path = {c}\nvault_password_file = {d}/vault-pass\n\
                 host_key_checking = False\nforks = 30\nlocal_tmp = {d}/tmp\ntimeout = 60\n\
                 interpreter_python = /usr/bin/python3\nretry_files_enabled = False\n\n\
                 [ssh_connection]\npipelining = True\ncontrol_path_dir = {d}/cp\n\
                 ssh_args = -o ControlMaster=auto -o ControlPersist=30s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR\n",
                d = dir.display(),
                c = repo().join("packaging/ansible").display()
            ),
        );
        Controller {
            dir,
            bin,
            phases: Vec::new(),
        }
    }

    fn public_key(&self) -> String {
        fs::read_to_string(self.dir.join("id_ed25519.pub")).unwrap()
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        let home = self.dir.join("home");
        cmd.current_dir(&self.dir)
            .env("ANSIBLE_CONFIG", self.dir.join("ansible.cfg"))
            .env("ANSIBLE_HOME", home.join(".ansible"))
            .env("HOME", &home)
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .env("SYSWARD_RESULTS_DIR", self.dir.join("results"))
            .env("ANSIBLE_FORCE_COLOR", "0")
            .env("ANSIBLE_NOCOLOR", "1")
            .env("NO_COLOR", "1")
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                    self.bin.display()
                ),
            )
            .env("USER", "fleet-test-operator")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// `ansible-playbook sysward.fleet.PLAYBOOK ARGS`, timed as `phase`.
    fn play(&mut self, phase: &str, playbook: &str, args: &[&str]) -> Output {
        let t = Instant::now();
        let child = self
            .command("ansible-playbook")
            .arg(format!("sysward.fleet.{playbook}"))
            .args(args)
            .spawn()
            .unwrap();
        let out = wait_output(child, Duration::from_secs(1800));
        let secs = t.elapsed().as_secs_f64();
        println!(
            "== {phase}: ansible-playbook {playbook} {}: {secs:.1} s, exit {:?}",
            args.join(" "),
            out.status.code()
        );
        let log = self.dir.join(format!("{}.log", phase.replace(' ', "-")));
        fs::write(&log, [&out.stdout[..], &out.stderr[..]].concat()).unwrap();
        self.phases.push((phase.to_string(), secs));
        out
    }

    fn play_ok(&mut self, phase: &str, playbook: &str, args: &[&str]) -> String {
        let out = self.play(phase, playbook, args);
        assert!(
            out.status.success(),
            "{phase}: ansible-playbook {playbook} failed\n{}",
            describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The aggregator's JSON (and its table, printed).
    fn report(&mut self, phase: &str) -> serde_json::Value {
        let t = Instant::now();
        let script = collection().join("scripts/fleet_report.py");
        let results = self.dir.join("results");
        let html = self.dir.join("fleet.html");
        let table = Command::new("python3")
            .arg(&script)
            .arg(&results)
            .arg("--html")
            .arg(&html)
            .output()
            .unwrap();
        assert!(
            table.status.success(),
            "fleet_report.py: {}",
            describe(&table)
        );
        println!("{}", String::from_utf8_lossy(&table.stdout));
        let json = Command::new("python3")
            .arg(&script)
            .arg(&results)
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            json.status.success(),
            "fleet_report.py --json: {}",
            describe(&json)
        );
        self.phases
            .push((phase.to_string(), t.elapsed().as_secs_f64()));
        let page = fs::read_to_string(&html).unwrap();
        assert!(page.starts_with("<!DOCTYPE html>") && !page.contains("<script"));
        serde_json::from_slice(&json.stdout).unwrap()
    }

    fn print_phases(&self, hosts: usize) {
        println!("\nphase timings, {hosts} hosts (wall time, a shared 2-core machine):");
        for (phase, secs) in &self.phases {
            println!("  {phase:<34} {secs:>7.1} s");
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        // ssh control masters end with their sshd (the hosts' teardown); the
        // directory goes unless kept.
        if std::env::var_os("SYSWARD_KEEP_TEST_DIRS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("kept {}", self.dir.display());
        }
    }
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
}

/// inotify instances in use on this machine (every process's fds).
fn inotify_in_use() -> usize {
    let mut count = 0;
    for p in fs::read_dir("/proc").into_iter().flatten().flatten() {
        for fd in fs::read_dir(p.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify") {
                count += 1;
            }
        }
    }
    count
}

/// inotify instances one booted host's systemd and services hold (measured:
/// 7 to 8 on Debian 12).
const INOTIFY_PER_HOST: usize = 8;

/// The containers share root's fs.inotify.max_user_instances (no user
/// namespaces): past it a booting systemd stays "initializing" with "Failed
/// to create inotify object: Too many open files", and other tests' hosts on
/// this machine may fail too. Refuses up front, with the fix.
fn check_inotify_headroom(n: usize) {
    let limit: usize = fs::read_to_string("/proc/sys/fs/inotify/max_user_instances")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(128);
    let used = inotify_in_use();
    let fits = limit.saturating_sub(used) / INOTIFY_PER_HOST;
    assert!(
        n <= fits,
        "{n} booted hosts need about {} inotify instances; fs.inotify.max_user_instances={limit} and {used} are in use, \
         so about {fits} hosts fit. Raise it on a machine you may change (sysctl -w fs.inotify.max_user_instances=1024) \
         or bench fewer hosts",
        n * INOTIFY_PER_HOST
    );
}

/// Boots `n` hosts, a few at a time (a loaded 2-core machine).
fn boot_hosts(test: &str, n: usize) -> Option<Vec<Host>> {
    check_inotify_headroom(n);
    let before = inotify_in_use();
    let parallel: usize = std::env::var("SYSWARD_FLEET_BOOT_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut hosts = Vec::new();
    while hosts.len() < n {
        let batch = parallel.min(n - hosts.len());
        let booted: Vec<Option<Host>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..batch).map(|_| s.spawn(|| Host::boot(test))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for h in booted {
            hosts.push(h?);
        }
    }
    println!(
        "inotify instances in use: {before} before booting {n} hosts, {} after",
        inotify_in_use()
    );
    Some(hosts)
}

fn one_call(call: serde_json::Value, end: &str) -> Vec<serde_json::Value> {
    vec![
        serde_json::json!({"tool_calls":[call]}),
        serde_json::json!({"expect":{"role_of_last":"tool"},"content":end}),
    ]
}

fn uname_steps() -> Vec<serde_json::Value> {
    one_call(
        serde_json::json!({"name":"exec","arguments":{"command":"uname","args":["-r"]}}),
        "EXECUTED: uname -r. VERIFIED: printed.\n\nTASK_STATUS: DONE",
    )
}

const MARK: &str = "/etc/fleet-approved";

/// The request that needs a person on a gated host, then what the model says.
fn mark_steps(end: &str) -> Vec<serde_json::Value> {
    touch_steps(MARK, end)
}

/// A request the operator denies on the gated host.
const REFUSED: &str = "/etc/fleet-refused";

fn touch_steps(path: &str, end: &str) -> Vec<serde_json::Value> {
    one_call(
        serde_json::json!({"name":"exec","arguments":{"command":"touch","args":[path],"reason":"mark the host"}}),
        end,
    )
}

fn server_for(steps: Vec<serde_json::Value>) -> Handle {
    scenario(
        &serde_json::json!({
            "steps": steps,
            "exhausted": {"content": "Nothing more to do.\n\nTASK_STATUS: DONE"}
        })
        .to_string(),
    )
}

/// PLAY RECAP counts per host.
fn recap(stdout: &str) -> Vec<(String, u64, u64, u64)> {
    let mut rows = Vec::new();
    let mut in_recap = false;
    for line in stdout.lines() {
        if line.starts_with("PLAY RECAP") {
            in_recap = true;
            continue;
        }
        if !in_recap || !line.contains(" : ") {
            continue;
        }
        let (host, rest) = line.split_once(" : ").unwrap();
        let get = |key: &str| -> u64 {
            rest.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        rows.push((
            host.trim().to_string(),
            get("changed"),
            get("failed") + get("unreachable"),
            get("ok"),
        ));
    }
    rows
}

fn host_of<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == name)
        .unwrap_or_else(|| panic!("no host {name} in the report: {report:#}"))
}

fn status(report: &serde_json::Value, host: &str, task: &str) -> String {
    host_of(report, host)["tasks"][task]["status"]
        .as_str()
        .unwrap_or("missing")
        .to_string()
}

/// The whole play against `n` hosts; host "h01" is gated (its second task
/// needs an approval), "h02"'s kernel task is a per-host override.
fn fleet_play(test: &str, n: usize) {
    if !require_root(test) {
        return;
    }
    let Some(bin) = venv_or_skip(test) else {
        return;
    };
    let total = Instant::now();
    let mut ctl = Controller::new(bin);
    let t = Instant::now();
    let deb = deb();
    ctl.phases.push((
        "build the .deb (or reuse)".into(),
        t.elapsed().as_secs_f64(),
    ));
    let t = Instant::now();
    let Some(hosts) = boot_hosts(test, n) else {
        return;
    };
    ctl.phases
        .push((format!("boot {n} hosts"), t.elapsed().as_secs_f64()));
    let t = Instant::now();
    let key = ctl.public_key();
    let ports: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|h| s.spawn(|| h.start_sshd(REMOTE_USER, &key)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    ctl.phases
        .push(("sshd in every host".into(), t.elapsed().as_secs_f64()));

    let names: Vec<String> = (0..n).map(|i| format!("h{i:02}")).collect();
    let gated = "h01";
    let overridden = "h02";
    // One scripted model per host (a scenario is one sequence of replies).
    let servers: Vec<Handle> = names
        .iter()
        .map(|name| {
            let mut steps = uname_steps();
            if name == gated {
                // First run: 02 and 03 wait for a person. Second run
                // (02 approved, 03 denied): 02 proceeds, 03 is refused.
                steps.extend(mark_steps(
                    "PLAN: touch the mark. It awaits an operator's approval.\n\nTASK_STATUS: BLOCKED",
                ));
                steps.extend(touch_steps(
                    REFUSED,
                    "PLAN: touch the file. It awaits an operator's approval.\n\nTASK_STATUS: BLOCKED",
                ));
                steps.extend(mark_steps(
                    "EXECUTED: touch /etc/fleet-approved. VERIFIED: exit 0.\n\nTASK_STATUS: DONE",
                ));
                steps.extend(touch_steps(
                    REFUSED,
                    "The operator denied it.\n\nTASK_STATUS: FAILED",
                ));
            }
            server_for(steps)
        })
        .collect();

    // Inventory: two groups; per-host API_URL and ssh port.
    let host_line = |i: usize| {
        format!(
            "        {}:\n          ansible_port: {}\n          sysward_api_url: {}\n",
            names[i],
            ports[i],
            servers[i].base_url()
        )
    };
    let mut inv = format!(
        "all:\n  vars:\n    ansible_host: 127.0.0.1\n    ansible_user: {REMOTE_USER}\n    ansible_ssh_private_key_file: {d}/id_ed25519\n  children:\n    gated:\n      hosts:\n",
        d = ctl.dir.display()
    );
    inv.push_str(&host_line(1));
    inv.push_str("    plain:\n      hosts:\n");
    for i in (0..n).filter(|i| *i != 1) {
        inv.push_str(&host_line(i));
    }
    write(&ctl.dir.join("inventory.yml"), &inv);
    write(
        &ctl.dir.join("group_vars/all/main.yml"),
        &format!(
            // The hourly timer would run the tasks before the run play when
            // a test crosses the hour: its schedule goes out of reach
            // through the role's drop-in (checked below).
            "---\nsysward_deb_path: {deb}\nsysward_model: scripted-model\nsysward_request_timeout: 120\nsysward_api_key: \"{{{{ vault_api_key }}}}\"\n\
             sysward_timer_on_calendar: \"2099-12-31 23:00:00\"\n\
             sysward_tasks_dir: {d}/tasks\nsysward_secrets:\n  - name: fleet_token\n    value: \"{{{{ vault_fleet_token }}}}\"\n    scope:\n      - env /usr/bin/curl FLEET_TOKEN\n",
            deb = deb.display(),
            d = ctl.dir.display()
        ),
    );
    write(
        &ctl.dir.join("group_vars/gated.yml"),
        "---\nsysward_policy_overrides:\n  EXECUTION_MODE: privileged\n  ALLOW_OUTSIDE_PROJECT_WRITE: true\n",
    );
    write(
        &ctl.dir.join("group_vars/all/vault.yml"),
        &format!(
            "---\nvault_fleet_token: {VAULT_SECRET}\nvault_api_key: sk-fleet-0123456789abcdef\n"
        ),
    );
    let enc = ctl
        .command("ansible-vault")
        .args(["encrypt", "group_vars/all/vault.yml"])
        .output()
        .unwrap();
    assert!(
        enc.status.success(),
        "ansible-vault encrypt: {}",
        describe(&enc)
    );
    let vault_text = fs::read_to_string(ctl.dir.join("group_vars/all/vault.yml")).unwrap();
    assert!(vault_text.starts_with("$ANSIBLE_VAULT;") && !vault_text.contains(VAULT_SECRET));
    // Task files: all/, groups/gated/, hosts/h02/ (replaces all/01-kernel.md).
    let kernel = "# Kernel\nPrint the kernel release with `uname -r`, then report.\n";
    let kernel_h02 =
        "# Kernel (h02)\nPrint the kernel release with `uname -r` on this host, then report.\n";
    write(&ctl.dir.join("tasks/all/01-kernel.md"), kernel);
    write(
        &ctl.dir.join("tasks/groups/gated/02-mark.md"),
        &format!("# Mark\nCreate the empty file {MARK} with `touch {MARK}`, then report.\n"),
    );
    write(
        &ctl.dir
            .join(format!("tasks/hosts/{overridden}/01-kernel.md")),
        kernel_h02,
    );
    write(
        &ctl.dir.join(format!("tasks/hosts/{gated}/03-refused.md")),
        &format!(
            "# Refused\nCreate the empty file {REFUSED} with `touch {REFUSED}`, then report.\n"
        ),
    );

    // ---- install + configure ------------------------------------------------
    let first = ctl.play_ok("site: install + configure", "site", &[]);
    for (host, changed, failed, _) in recap(&first) {
        assert!(
            changed > 0 && failed == 0,
            "{host}: first play: changed={changed} failed={failed}\n{first}"
        );
    }
    for (i, h) in hosts.iter().enumerate() {
        wait_active(h, "sysward.service");
        wait_active(h, "sysward-run.timer");
        assert_eq!(
            h.ok(&[
                "systemctl",
                "is-enabled",
                "sysward.service",
                "sysward-run.timer"
            ]),
            "enabled\nenabled\n"
        );
        assert!(
            h.ok(&[
                "systemctl",
                "show",
                "-p",
                "TimersCalendar",
                "sysward-run.timer"
            ])
            .contains("2099-12-31 23:00:00"),
            "the timer's schedule drop-in did not apply"
        );
        assert_eq!(
            h.ok(&[
                "stat",
                "-c",
                "%a %U",
                "/etc/sysward/init.conf",
                "/etc/sysward/agent.md",
                "/etc/sysward/secrets",
                "/etc/sysward/secrets/fleet_token",
                "/etc/sysward/secrets/fleet_token.scope"
            ]),
            "600 root\n600 root\n700 root\n600 root\n600 root\n"
        );
        assert_eq!(
            h.read("/etc/sysward/secrets/fleet_token").unwrap(),
            VAULT_SECRET
        );
        let init = h.read("/etc/sysward/init.conf").unwrap();
        assert!(
            init.contains(&format!("API_URL={}\n", servers[i].base_url())),
            "{init}"
        );
        let secrets = h.ok(&["sysward", "secrets", "list"]);
        assert!(
            secrets.contains("fleet_token") && !secrets.contains(VAULT_SECRET),
            "{secrets}"
        );
        let task = h.read("/etc/sysward/01-kernel.md").unwrap();
        assert_eq!(
            task,
            if names[i] == overridden {
                kernel_h02
            } else {
                kernel
            }
        );
        assert_eq!(
            h.path("/etc/sysward/02-mark.md").exists(),
            names[i] == gated
        );
    }
    let policy = hosts[1].ok(&["sysward", "policy", "check"]);
    assert!(policy.contains("EXECUTION_MODE=privileged"), "{policy}");

    // ---- idempotence: a second play changes nothing --------------------------
    let second = ctl.play_ok("site again (idempotence)", "site", &[]);
    let rows = recap(&second);
    assert_eq!(rows.len(), n, "{second}");
    for (host, changed, failed, _) in rows {
        assert!(
            changed == 0 && failed == 0,
            "{host}: second play changed={changed} failed={failed}\n{second}"
        );
    }

    // ---- a broken agent.md is refused; the host keeps its policy ---------------
    let before = hosts[0].read("/etc/sysward/agent.md").unwrap();
    let broken = ctl.play(
        "site with a broken policy",
        "site",
        &[
            "--limit",
            &names[0],
            "-e",
            r#"{"sysward_policy_overrides": {"EXECUTION_MODE": "bogus"}}"#,
        ],
    );
    let text = String::from_utf8_lossy(&broken.stdout);
    assert!(
        !broken.status.success(),
        "a broken policy was accepted:\n{text}"
    );
    assert!(
        text.contains("failed to validate") && text.contains("EXECUTION_MODE"),
        "{text}"
    );
    assert_eq!(hosts[0].read("/etc/sysward/agent.md").unwrap(), before);
    hosts[0].ok(&["sysward", "policy", "check"]);

    // ---- run everywhere, fetch, aggregate ------------------------------------
    let batch = if n > 3 { "5" } else { "2" };
    ctl.play_ok(
        "run (all hosts)",
        "run",
        &["-e", &format!("sysward_run_batch={batch}")],
    );
    let report = ctl.report("aggregate");
    for name in &names {
        assert_eq!(
            status(&report, name, "01-kernel.md"),
            "DONE",
            "{name}: {report:#}"
        );
        assert_eq!(
            host_of(&report, name)["audit"]["state"],
            "ok",
            "{name}: {report:#}"
        );
        assert!(ctl
            .dir
            .join("results")
            .join(name)
            .join("audit.head")
            .is_file());
    }
    assert_eq!(
        status(&report, gated, "02-mark.md"),
        "BLOCKED",
        "{report:#}"
    );
    let pending = host_of(&report, gated)["pending"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(pending.len(), 2, "{report:#}");
    let id_of = |path: &str| {
        pending
            .iter()
            .find(|a| a["command"] == format!("touch {path}").as_str())
            .unwrap_or_else(|| panic!("no pending touch {path}: {report:#}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let id = id_of(MARK);
    let refused_id = id_of(REFUSED);
    assert_eq!(
        status(&report, gated, "03-refused.md"),
        "BLOCKED",
        "{report:#}"
    );
    for name in names.iter().filter(|h| *h != gated) {
        assert!(host_of(&report, name)["pending"]
            .as_array()
            .unwrap()
            .is_empty());
    }
    assert!(!hosts[1].path(MARK).exists());

    // ---- approve it through approvals.yml; the next run proceeds ---------------
    let listed = ctl.play_ok("approvals (list)", "approvals", &[]);
    assert!(listed.contains(&id), "{listed}");
    let decided = ctl.play_ok(
        "approvals (approve)",
        "approvals",
        &["-e", &format!("approval_id={id}")],
    );
    let rows = recap(&decided);
    for (host, changed, _, _) in rows {
        assert_eq!(changed, u64::from(host == gated), "{host}: {decided}");
    }
    let denied = ctl.play_ok(
        "approvals (deny)",
        "approvals",
        &[
            "-e",
            &format!("approval_id={refused_id}"),
            "-e",
            "approval_decision=deny",
            "-e",
            r#"{"approval_note": "not on this host"}"#,
            "-e",
            &format!("approval_host={gated}"),
        ],
    );
    for (host, changed, _, _) in recap(&denied) {
        assert_eq!(changed, u64::from(host == gated), "{host}: {denied}");
    }
    let audit = hosts[1].read("/var/lib/sysward/audit.log").unwrap();
    let decided_record = |id: &str| {
        audit
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|r| r["event"].clone())
            .find(|e| e["event"] == "approval_decided" && e["id"] == id)
            .unwrap_or_else(|| panic!("no approval_decided record for {id}:\n{audit}"))
    };
    let refusal = decided_record(&refused_id);
    println!("audit: {refusal}");
    assert_eq!(refusal["decision"], "denied");
    assert!(
        refusal["note"]
            .as_str()
            .unwrap_or("")
            .contains("not on this host (denied through Ansible by fleet-test-operator)"),
        "{refusal}"
    );
    let decision = decided_record(&id);
    println!("audit: {decision}");
    assert_eq!(decision["decision"], "approved");
    assert!(
        decision["by"]
            .as_str()
            .unwrap()
            .contains(&format!("via sudo from {REMOTE_USER}")),
        "{decision}"
    );
    ctl.play_ok("run (the gated host)", "run", &["--limit", gated]);
    let report = ctl.report("aggregate again");
    assert_eq!(status(&report, gated, "02-mark.md"), "DONE", "{report:#}");
    // DONE in the first run and unchanged: not run again.
    assert_eq!(
        status(&report, gated, "01-kernel.md"),
        "SKIPPED",
        "{report:#}"
    );
    assert!(host_of(&report, gated)["pending"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(
        hosts[1].path(MARK).exists(),
        "the approved touch did not run"
    );
    assert_eq!(
        status(&report, gated, "03-refused.md"),
        "FAILED",
        "{report:#}"
    );
    assert!(!hosts[1].path(REFUSED).exists(), "the denied touch ran");

    // ---- verify everywhere ----------------------------------------------------
    let verified = ctl.play_ok("verify", "verify", &[]);
    assert_eq!(recap(&verified).len(), n);
    for name in &names {
        let rc =
            fs::read_to_string(ctl.dir.join("results").join(name).join("audit-verify.rc")).unwrap();
        assert_eq!(rc.trim(), "0", "{name}");
    }
    for s in &servers {
        assert!(
            s.expectation_failures().is_empty(),
            "{:?}",
            s.expectation_failures()
        );
    }
    ctl.phases
        .push(("total".into(), total.elapsed().as_secs_f64()));
    ctl.print_phases(n);
    let t = Instant::now();
    drop(hosts);
    println!("teardown of {n} hosts: {:.1} s", t.elapsed().as_secs_f64());
}

#[test]
fn the_collection_installs_configures_runs_and_approves_on_three_hosts() {
    fleet_play(
        "the_collection_installs_configures_runs_and_approves_on_three_hosts",
        3,
    );
}

/// scripts/fleet/bench.sh: the same play against SYSWARD_FLEET_HOSTS hosts.
#[test]
#[ignore = "a benchmark: scripts/fleet/bench.sh"]
fn fleet_bench() {
    let n: usize = std::env::var("SYSWARD_FLEET_HOSTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    assert!(n >= 3, "SYSWARD_FLEET_HOSTS must be at least 3");
    fleet_play("fleet_bench", n);
}

#[test]
fn the_collection_passes_ansible_lint() {
    let test = "the_collection_passes_ansible_lint";
    if !require_root(test) {
        return;
    }
    let Some(bin) = venv_or_skip(test) else {
        return;
    };
    let ctl = Controller::new(bin);
    let t = Instant::now();
    let out = ctl
        .command("ansible-lint")
        .arg("--nocolor")
        .current_dir(collection())
        .output()
        .unwrap();
    println!("ansible-lint: {:.1} s", t.elapsed().as_secs_f64());
    assert!(out.status.success(), "ansible-lint: {}", describe(&out));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("Profile 'production'") && text.contains("passed"),
        "{text}"
    );
    // The playbooks parse.
    for playbook in ["site", "run", "approvals", "verify"] {
        let out = ctl
            .command("ansible-playbook")
            .args(["--syntax-check", "-i", "localhost,"])
            .arg(format!("sysward.fleet.{playbook}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{playbook}: {}", describe(&out));
    }
}

#[test]
fn the_aggregator_reads_fetched_results() {
    let dir = std::env::temp_dir().join(format!("swf-report-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    use sysward_testdir::RemoveOnDrop;
    let _cleanup = RemoveOnDrop(dir.clone());
    let summary = |tasks: &[(&str, &str)], code: i32| {
        let tasks: Vec<_> = tasks
            .iter()
            .map(|(t, s)| serde_json::json!({"task": t, "status": s, "steps": 2, "summary": "x"}))
            .collect();
        format!(
            "{{\"event\":\"session_start\"}}\n{}\n",
            serde_json::json!({"event":"summary","session":"s1","exit_code":code,"actions":1,"denials":0,"duration_ms":5,"error":null,"tasks":tasks})
        )
    };
    let put = |host: &str, file: &str, text: &str| {
        let p = dir.join(host).join(file);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    put(
        "a",
        "run.jsonl",
        &summary(
            &[
                ("01-x.md", "DONE"),
                ("02-y.md", "BLOCKED"),
                ("03-z.md", "SKIPPED"),
            ],
            2,
        ),
    );
    put("a", "run.rc", "2\n");
    put(
        "a",
        "approvals.json",
        r#"{"approvals":[{"id":"0123456789ab","status":"pending","expires_rfc3339":"2026-12-02T00:00:00Z","tool":"exec","command":"touch /etc/x","task":"02-y.md","risk":"medium"},{"id":"ba9876543210","status":"approved","tool":"exec","command":"id"}],"problems":[]}"#,
    );
    put("a", "audit-verify.rc", "0\n");
    put(
        "a",
        "audit.head",
        "00000000000000000013 664f00dbeef1234567890abc\n",
    );
    put("a", "audit-verify.txt", "audit chain ok: 12 records\n");
    put("b", "run.jsonl", &summary(&[("01-x.md", "FAILED")], 3));
    put("b", "run.rc", "3\n");
    put("b", "audit-verify.rc", "1\n");
    put("b", "audit-verify.txt", "record 7: hash mismatch\n");
    put("c", "run.rc", "1\n");
    put("c", "run.stderr", "sysward: cannot reach the daemon\n");
    let script = collection().join("scripts/fleet_report.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .arg("--json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["tasks"],
        serde_json::json!(["01-x.md", "02-y.md", "03-z.md"])
    );
    assert_eq!(status(&v, "a", "02-y.md"), "BLOCKED");
    assert_eq!(host_of(&v, "a")["pending"][0]["id"], "0123456789ab");
    assert_eq!(host_of(&v, "a")["pending"].as_array().unwrap().len(), 1);
    assert_eq!(status(&v, "b", "01-x.md"), "FAILED");
    assert_eq!(host_of(&v, "b")["audit"]["state"], "BROKEN");
    assert_eq!(
        host_of(&v, "c")["run"]["error"],
        "sysward: cannot reach the daemon"
    );
    let table = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .arg("--strict")
        .output()
        .unwrap();
    assert_eq!(table.status.code(), Some(1));
    let text = String::from_utf8_lossy(&table.stdout);
    println!("{text}");
    for needle in [
        "BLOCKED",
        "FAILED",
        "ERROR",
        "0123456789ab",
        "BROKEN",
        "session error",
    ] {
        assert!(text.contains(needle), "{needle} missing:\n{text}");
    }
    // A host whose tasks are DONE, one of them in an earlier run (SKIPPED:
    // unchanged since), passes --strict on its own.
    let done_dir = dir.join("done-only");
    let put_done = |file: &str, text: &str| {
        let p = done_dir.join("d").join(file);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    put_done(
        "run.jsonl",
        &summary(&[("01-x.md", "DONE"), ("02-y.md", "SKIPPED")], 0),
    );
    put_done("run.rc", "0\n");
    put_done("audit-verify.rc", "0\n");
    put_done("audit-verify.txt", "audit chain ok: 3 records\n");
    let strict = Command::new("python3")
        .arg(&script)
        .arg(&done_dir)
        .arg("--strict")
        .output()
        .unwrap();
    assert!(strict.status.success(), "{}", describe(&strict));
    assert!(
        String::from_utf8_lossy(&strict.stdout).contains("DONE*"),
        "{}",
        describe(&strict)
    );
    let _ = fs::remove_dir_all(&dir);
}
