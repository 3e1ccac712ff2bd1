//! Action cgroups: a broker removes its own directory when it exits, judges
//! another broker's directory by pid only within its own PID namespace, and
//! says nothing about routine cleanup.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use sysward_tests::*;

fn actions_top() -> Option<PathBuf> {
    sysward_broker::cgroup::v2_mount().map(|m| m.join("sysward"))
}

#[test]
fn brokers_remove_their_own_cgroup_and_spare_other_namespaces() {
    if !require_root("brokers_remove_their_own_cgroup_and_spare_other_namespaces") {
        return;
    }
    let Some(top) = actions_top().filter(|t| t.join("cgroup.kill").exists() || !t.exists()) else {
        eprintln!("SKIPPED: no cgroup v2 with cgroup.kill here");
        return;
    };
    ensure_accounts();
    std::fs::create_dir_all(&top).unwrap();
    let our_ns = std::fs::metadata("/proc/self/ns/pid").unwrap().ino();
    // A directory of a broker in another PID namespace, with a live process:
    // its pid means nothing here, so it must survive our broker's start.
    let foreign = top.join(format!("b{}-4242-1", our_ns + 1));
    std::fs::create_dir(&foreign).unwrap();
    let mut sleeper = Command::new("sleep").arg("300").spawn().unwrap();
    std::fs::write(foreign.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    // The same in the older naming (no namespace recorded): as observed with
    // brokers in systemd-nspawn containers, which killed each other's actions.
    let old_style = top.join("b4243-1");
    std::fs::create_dir(&old_style).unwrap();
    let mut sleeper2 = Command::new("sleep").arg("300").spawn().unwrap();
    std::fs::write(old_style.join("cgroup.procs"), sleeper2.id().to_string()).unwrap();
    // An empty leftover of a dead broker of this namespace.
    let empty = top.join(format!("b{our_ns}-999999-1"));
    std::fs::create_dir(&empty).unwrap();

    let server = scenario(
        r#"{"steps":[{"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]},{"content":"Printed.\nTASK_STATUS: DONE"}]}"#,
    );
    let p = TestProject::new("cgroups");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nPrint the kernel release.\n");
    let child = spawn_sysward(&["run", "--root", p.dir.to_str().unwrap()]);
    let broker_pid = standalone_broker(child.id());
    let out = wait_output(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();

    let foreign_alive = sleeper.try_wait().unwrap().is_none();
    let foreign_kept = foreign.exists();
    let old_alive = sleeper2.try_wait().unwrap().is_none();
    let _ = sleeper2.kill();
    let _ = sleeper2.wait();
    let _ = std::fs::remove_dir(&old_style);
    // Clean up before asserting: nothing of ours stays behind.
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = std::fs::remove_dir(&foreign);
    let _ = std::fs::remove_dir(&empty);

    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        foreign_alive,
        "a process of another namespace's broker was killed"
    );
    assert!(
        foreign_kept,
        "another namespace's broker directory was removed"
    );
    assert!(
        old_alive,
        "a process under an older broker's directory was killed by pid"
    );
    assert!(!empty.exists(), "an empty dead broker's directory was kept");
    assert!(
        !stderr.contains("cleaned a stale"),
        "routine cleanup was reported: {stderr}"
    );
    // The broker that ran removed its own directory when it exited.
    let own: Vec<_> = std::fs::read_dir(&top)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("b{our_ns}-{broker_pid}-")))
        .collect();
    assert!(own.is_empty(), "left behind: {own:?}");
}
