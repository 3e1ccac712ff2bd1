//! A file operation killed mid-write leaves its temporary next to the target;
//! the broker removes it when the action ends, and a later session removes
//! what a killed broker left, audited both times. A normal write leaves
//! nothing to remove (as root, real process tree).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::*;

/// A write_file of `work/app.conf` whose validate command is `validate`,
/// then DONE.
fn write_with_validate(p: &TestProject, validate: &str) -> Handle {
    std::fs::create_dir_all(p.path("work")).unwrap();
    std::fs::write(p.path("work/app.conf"), "original\n").unwrap();
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"write_file","arguments":{{"path":"{}","content":"new\n","validate":{validate}}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        p.path("work/app.conf").display()
    ));
    p.init_conf(&server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nDEFAULT_COMMAND_TIMEOUT=600",
        )
        .write("01-write.md", "# Write\nWrite the file.\n");
    server
}

fn temporaries(p: &TestProject) -> Vec<String> {
    std::fs::read_dir(p.path("work"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".sysward-tmp."))
        .collect()
}

fn removals(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "stale_temp_removed")
        .collect()
}

fn parent_of(pid: u32) -> u32 {
    status_field(pid, "PPid:").unwrap().parse().unwrap()
}

fn kill9(pid: u32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
}

fn start_run(p: &TestProject) -> std::process::Child {
    Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// The validate command's `sleep`, somewhere below `broker`.
fn validating_sleep(broker: u32) -> u32 {
    wait_for(
        Duration::from_secs(30),
        "the validate command to run",
        || {
            std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
                let pid: u32 = e.file_name().to_string_lossy().parse().ok()?;
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                if cmd != b"sleep\x004711\x00" && !cmd.ends_with(b"/sleep\x004711\x00") {
                    return None;
                }
                // Below the broker: its parent chain reaches it.
                let mut up = pid;
                for _ in 0..8 {
                    up = status_field(up, "PPid:")?.parse().ok()?;
                    if up == broker {
                        return Some(pid);
                    }
                }
                None
            })
        },
    )
}

#[test]
fn a_normal_write_leaves_nothing_to_remove() {
    if !require_root("a_normal_write_leaves_nothing_to_remove") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("temps-control");
    let _server = write_with_validate(&p, r#"{"command":"true"}"#);
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(p.path("work/app.conf")).unwrap(),
        "new\n"
    );
    assert!(temporaries(&p).is_empty());
    assert!(removals(&p).is_empty());
}

#[test]
fn a_killed_executor_s_temporary_is_removed_when_the_action_ends() {
    if !require_root("a_killed_executor_s_temporary_is_removed") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("temps-exec");
    let _server = write_with_validate(&p, r#"{"command":"sleep","args":["4711"]}"#);
    let broker = start_run(&p);
    let sleeper = validating_sleep(broker.id());
    // The temporary exists while validate runs; the executor dies without
    // its clean-up.
    assert_eq!(temporaries(&p).len(), 1, "{:?}", temporaries(&p));
    kill9(parent_of(sleeper));
    let out = wait_output(broker, Duration::from_secs(60));
    assert!(
        temporaries(&p).is_empty(),
        "left: {:?} ({})",
        temporaries(&p),
        describe(&out)
    );
    assert_eq!(
        std::fs::read_to_string(p.path("work/app.conf")).unwrap(),
        "original\n"
    );
    let removed = removals(&p);
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(
        removed[0]["event"]["paths"][0]
            .as_str()
            .unwrap()
            .contains(".app.conf.sysward-tmp."),
        "{}",
        removed[0]
    );
}

#[test]
fn a_killed_broker_s_temporary_is_removed_by_the_next_session() {
    if !require_root("a_killed_broker_s_temporary_is_removed") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("temps-broker");
    let _server = write_with_validate(&p, r#"{"command":"sleep","args":["4711"]}"#);
    let mut broker = start_run(&p);
    let sleeper = validating_sleep(broker.id());
    let executor = parent_of(sleeper);
    // Broker and executor die together: nobody sweeps in this session.
    kill9_standalone(&mut broker);
    kill9(executor);
    kill9(sleeper);
    wait_for(Duration::from_secs(10), "the executor to die", || {
        (!std::path::Path::new(&format!("/proc/{executor}")).exists()).then_some(())
    });
    assert_eq!(temporaries(&p).len(), 1, "{:?}", temporaries(&p));
    // The next session (a task that needs no action) sweeps it.
    let server = scenario(r#"{"steps":[{"content":"done\nTASK_STATUS: DONE"}]}"#);
    p.init_conf(&server, "")
        .write("01-write.md", "# Nothing\nSay done. No action is needed.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(temporaries(&p).is_empty(), "{:?}", temporaries(&p));
    assert_eq!(removals(&p).len(), 1);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("temporary file")
            || String::from_utf8_lossy(&out.stdout).contains("temporary file"),
        "the operator was not told: {}",
        describe(&out)
    );
}
