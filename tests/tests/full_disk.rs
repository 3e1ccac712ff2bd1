//! A full disk is not tampering: a session on a nearly full filesystem is
//! refused before anything starts, one that fills it mid-session runs nothing
//! it cannot record, and once space is freed the next session starts on an
//! intact chain with a note of what the previous one could not record (as
//! root; the project lives on a small tmpfs made for the test).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use sysward_broker::project::Layout;
use sysward_tests::*;

/// A tmpfs mounted over a directory, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size_mib: u32) -> Tmpfs {
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size_mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        assert!(st.success(), "cannot mount a tmpfs on {}", dir.display());
        Tmpfs(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Writes `path` until the filesystem is full (or `leave` bytes remain).
fn fill(path: &Path, leave: u64) {
    let mut f = std::fs::File::create(path).unwrap();
    let free = |p: &Path| {
        let st = nix::sys::statvfs::statvfs(p).unwrap();
        st.blocks_available() as u64 * st.fragment_size() as u64
    };
    let dir = path.parent().unwrap();
    for chunk in [1 << 20, 4 << 10, 512] {
        let buf = vec![0u8; chunk];
        while free(dir) > leave + chunk as u64 || (leave == 0 && free(dir) > 0) {
            if f.write_all(&buf).is_err() {
                break;
            }
            let _ = f.flush();
        }
    }
    let _ = f.sync_all();
}

fn verify(p: &TestProject) -> std::process::Output {
    run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(10),
    )
}

fn done_task(p: &TestProject) -> Handle {
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"true"}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-true.md", "# True\nRun true.\n");
    server
}

#[test]
fn a_nearly_full_disk_is_refused_up_front_and_runs_once_freed() {
    if !require_root("a_nearly_full_disk_is_refused_up_front") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("disk-upfront");
    let _fs = Tmpfs::mount(&p.dir, 24);
    let _server = done_task(&p);
    let filler = p.path("filler");
    fill(&filler, 1 << 20);
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        describe(&out).contains("free some space"),
        "{}",
        describe(&out)
    );
    assert!(verify(&p).status.success(), "{}", describe(&verify(&p)));
    std::fs::remove_file(&filler).unwrap();
    let _server = done_task(&p);
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(verify(&p).status.success(), "{}", describe(&verify(&p)));
}

#[test]
fn a_disk_filled_mid_session_leaves_an_intact_chain_and_a_note() {
    if !require_root("a_disk_filled_mid_session_leaves_an_intact_chain") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("disk-midway");
    let _fs = Tmpfs::mount(&p.dir, 40);
    std::fs::create_dir_all(p.path("work")).unwrap();
    let marker = p.path("work/ran");
    // A request longer than the slack of the log's last page (a record that
    // fits in an allocated page is written even on a full tmpfs).
    let mut args = vec![serde_json::json!(marker.display().to_string())];
    for i in 0..50 {
        args.push(serde_json::json!(format!(
            "{}/missing/{i}{}",
            p.dir.display(),
            "x".repeat(240)
        )));
    }
    let server = scenario(
        &serde_json::json!({"steps": [
            {"tool_calls": [{"name": "exec", "arguments": {"command": "touch", "args": args}}]},
            {"content": "done\nTASK_STATUS: DONE"}
        ]})
        .to_string(),
    );
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive")
        .write("01-touch.md", "# Touch\nMake a marker.\n");
    let layout = Layout::standalone(&p.dir).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    // Once the action is decided the disk fills up: its start record cannot
    // be written.
    let filler = p.path("filler");
    let op = {
        let filler = filler.clone();
        Recorder::on_decided(move || fill(&filler, 0))
    };
    let _ = run_tasks(&ctx, &op);
    assert!(!marker.exists(), "the action ran without its record");
    // The log holds only whole records.
    assert!(verify(&p).status.success(), "{}", describe(&verify(&p)));
    std::fs::remove_file(&filler).unwrap();
    std::fs::remove_file(p.path("01-touch.md")).unwrap();

    // The same broker (the daemon's case) notes the failure it saw.
    let _server = done_task(&p);
    let summary = run_tasks(&ctx, &Recorder::new());
    assert_eq!(summary.exit_code, 0, "{summary:?}");
    // Small records still fit in the slack of the log's last page, so the
    // session's end may be there: then the note is the failed write alone.
    let is_note = |r: &serde_json::Value| {
        r["event"]["event"] == "previous_session_unfinished"
            || r["event"]["event"] == "audit_write_failed"
    };
    let notes: Vec<_> = audit_records(&p).into_iter().filter(is_note).collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]["event"]["failure"]
            .as_str()
            .unwrap_or("")
            .contains("No space left"),
        "{}",
        notes[0]
    );
    assert!(verify(&p).status.success(), "{}", describe(&verify(&p)));
    // A session that ends normally leaves nothing for the next one to note.
    drop(ctx);
    let _server = done_task(&p);
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--rerun"],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let notes = audit_records(&p).into_iter().filter(is_note).count();
    assert_eq!(notes, 1);
}

#[test]
fn a_killed_broker_s_unfinished_session_is_noted_by_the_next_one() {
    if !require_root("a_killed_broker_s_unfinished_session_is_noted") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"sleep","args":["4848"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("disk-killed");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-sleep.md", "# Sleep\nSleep.\n");
    let mut broker = Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = standalone_broker(broker.id());
    wait_for(Duration::from_secs(30), "the action to run", || {
        children_named(pid, "sleep").first().copied()
    });
    kill9_standalone(&mut broker);
    std::fs::remove_file(p.path("01-sleep.md")).unwrap();
    let _server = done_task(&p);
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        describe(&out).contains("before its session_end"),
        "the operator was not told: {}",
        describe(&out)
    );
    let records = audit_records(&p);
    let note = records
        .iter()
        .find(|r| r["event"]["event"] == "previous_session_unfinished")
        .unwrap_or_else(|| panic!("no note: {records:?}"));
    let killed = records
        .iter()
        .find(|r| r["event"]["event"] == "session_start")
        .unwrap();
    assert_eq!(
        note["event"]["previous_session"],
        killed["event"]["session"]
    );
}
