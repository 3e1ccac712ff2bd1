//! The test bed itself: a throwaway Debian host boots with systemd as PID 1,
//! runs a command, and leaves nothing behind on this machine once dropped —
//! no mount, process, cgroup, directory or listening socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Instant;
use sysward_tests::hosts::Host;

/// Listening TCP sockets (local address and port, hex as in /proc/net/tcp*).
fn listeners() -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.get(3) == Some(&"0A") {
                set.insert(fields[1].to_string());
            }
        }
    }
    set
}

#[test]
fn a_booted_host_runs_a_command_and_leaves_nothing_behind() {
    let before = listeners();
    let t0 = Instant::now();
    let Some(host) = Host::boot("a_booted_host_runs_a_command_and_leaves_nothing_behind") else {
        return;
    };
    println!(
        "booted {} in {:.1} s",
        host.name(),
        t0.elapsed().as_secs_f64()
    );
    let state = host.run(&["systemctl", "is-system-running"]);
    let state = String::from_utf8_lossy(&state.stdout).trim().to_string();
    assert!(
        state == "running" || state == "degraded",
        "systemctl is-system-running: {state:?}"
    );
    assert_eq!(
        host.sh_ok("cat /proc/1/comm").trim(),
        "systemd",
        "PID 1 of the container"
    );
    assert!(host
        .ok(&["cat", "/etc/os-release"])
        .contains("VERSION_CODENAME=bookworm"));
    // Writes land in the container only.
    host.sh_ok("echo written-inside > /root/inside.txt");
    assert_eq!(
        host.read("/root/inside.txt").as_deref(),
        Some("written-inside\n")
    );
    assert!(!std::path::Path::new("/root/inside.txt").exists());
    host.write("/etc/copied-in.conf", "copied\n", 0o600);
    assert_eq!(host.ok(&["cat", "/etc/copied-in.conf"]), "copied\n");
    // A failing command is reported, not hidden.
    assert!(!host.run(&["false"]).status.success());

    let traces = host.traces();
    assert!(traces.dir.exists());
    assert!(!traces.cgroups.is_empty());
    let t1 = Instant::now();
    let problems = host.shutdown();
    println!("torn down in {:.1} s", t1.elapsed().as_secs_f64());
    assert!(problems.is_empty(), "teardown: {problems:?}");
    let left = traces.leftovers();
    assert!(left.is_empty(), "left behind: {left:#?}");
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(traces.dir.to_str().unwrap()),
        "a mount under {} is left:\n{mountinfo}",
        traces.dir.display()
    );
    let new: Vec<String> = listeners().difference(&before).cloned().collect();
    assert!(new.is_empty(), "new listening sockets: {new:?}");
}

#[test]
fn a_host_without_systemd_runs_commands_and_is_removed_on_panic() {
    let Some(host) = Host::start("a_host_without_systemd_runs_commands_and_is_removed_on_panic")
    else {
        return;
    };
    assert!(host.ok(&["id", "-u"]).trim() == "0");
    assert_ne!(host.sh_ok("cat /proc/1/comm").trim(), "systemd");
    let traces = host.traces();
    // A panicking test still tears its host down (the drop runs during the
    // unwinding).
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let _host = host;
        panic!("a test failure");
    }));
    assert!(result.is_err());
    let left = traces.leftovers();
    assert!(left.is_empty(), "left behind after a panic: {left:#?}");
}

/// What a container does to its clock stays in it: `timedatectl
/// set-timezone` (through timedated, which holds the container's
/// capabilities) changes the container's zone and not this machine's time
/// (with CAP_SYS_TIME the kernel warps the clock by the zone's offset), and a
/// `date -s` run in it (nsenter) is refused.
#[test]
fn a_host_changes_its_time_zone_without_moving_this_machines_clock() {
    let Some(host) = Host::boot("a_host_changes_its_time_zone_without_moving_this_machines_clock")
    else {
        return;
    };
    let skew = || {
        let inside: i64 = host.sh_ok("date +%s").trim().parse().unwrap();
        let here = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        (inside - here).abs()
    };
    // Europe/Berlin is east of UTC: a warp would move the clock by an hour.
    host.sh_ok("timedatectl set-timezone Europe/Berlin");
    assert!(
        host.ok(&["readlink", "/etc/localtime"])
            .contains("Europe/Berlin"),
        "the zone did not change in the container"
    );
    assert!(skew() < 30, "the clock moved by {} s", skew());
    let set = host.run(&["date", "-s", "@0"]);
    assert!(!set.status.success(), "date -s succeeded in a container");
    assert!(skew() < 30, "the clock moved by {} s", skew());
    assert!(host.shutdown().is_empty());
}
