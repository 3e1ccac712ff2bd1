//! diff_files, tail_file, apply_patch and read_journal through the real
//! broker → agent → gateway → executor tree (`sysward run --root`), each
//! beside the refusal next to it: a patch with one hunk that does not apply
//! changes none of its files, a patch whose second write fails puts the
//! first file back, a patch outside the project waits for a person (nobody
//! answers here) and changes nothing, a name with `..` is refused, and
//! read_journal takes no option that changes the journal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use sysward_tests::*;

/// Runs the project's tasks with `steps` as the model's tool calls and
/// returns what the model got back for each.
fn run_steps(project: &TestProject, steps: Vec<serde_json::Value>, policy: &str) -> Vec<String> {
    run_scripted(project, steps, policy, "Review and patch the files.").results
}

/// Clears the immutable attribute a test set, even when the test fails.
struct Immutable(PathBuf);

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

#[test]
fn review_and_patch_tools_do_what_they_say_and_nothing_else() {
    let test = "review_and_patch_tools_do_what_they_say_and_nothing_else";
    if !require_root(test) {
        return;
    }
    ensure_accounts();
    let project = TestProject::new("review-tools");
    let p = |n: &str| project.path(n).display().to_string();
    project
        .write("a.conf", "alpha\nbeta\ngamma\ndelta\n")
        .write("b.conf", "alpha\nBETA\ngamma\ndelta\n")
        .write(
            "log.txt",
            &(1..=50).map(|i| format!("line {i}\n")).collect::<String>(),
        )
        .write("grow.log", "start\n");
    std::fs::create_dir_all(project.path("locked")).unwrap();
    project.write("locked/l.conf", "one\ntwo\n");
    let outside = PathBuf::from(format!(
        "/var/tmp/sysward-review-outside-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x.conf"), "keep\n").unwrap();
    let good_patch = "--- a/a.conf\n+++ b/a.conf\n@@ -1,4 +1,4 @@\n alpha\n-beta\n+BETA\n gamma\n delta\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+created by\n+a patch\n";
    let bad_hunk = "--- a/b.conf\n+++ b/b.conf\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n BETA\n--- a/a.conf\n+++ b/a.conf\n@@ -1,2 +1,2 @@\n alpha\n-nosuchline\n+x\n";
    let second_write_fails = "--- a/b.conf\n+++ b/b.conf\n@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n BETA\n--- a/locked/l.conf\n+++ b/locked/l.conf\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n";
    let outside_patch = format!(
        "--- {0}/x.conf\n+++ {0}/x.conf\n@@ -1 +1 @@\n-keep\n+changed\n",
        outside.display()
    );
    let escape = "--- a/../../etc/hostname\n+++ b/../../etc/hostname\n@@ -1 +1 @@\n-x\n+y\n";
    let steps = vec![
        tool_call(
            "diff_files",
            serde_json::json!({"path": p("a.conf"), "other": p("b.conf")}),
        ),
        tool_call(
            "diff_files",
            serde_json::json!({"path": p("a.conf"), "content": "alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\nDELTA-ADDED\n"}),
        ),
        tool_call("diff_files", serde_json::json!({"path": p("a.conf")})),
        tool_call(
            "tail_file",
            serde_json::json!({"path": p("log.txt"), "lines": 3}),
        ),
        tool_call(
            "tail_file",
            serde_json::json!({"path": p("grow.log"), "lines": 1, "follow_seconds": 3}),
        ),
        tool_call(
            "apply_patch",
            serde_json::json!({"patch": good_patch, "directory": project.dir.display().to_string()}),
        ),
        tool_call(
            "apply_patch",
            serde_json::json!({"patch": bad_hunk, "directory": project.dir.display().to_string()}),
        ),
        tool_call(
            "apply_patch",
            serde_json::json!({"patch": second_write_fails, "directory": project.dir.display().to_string()}),
        ),
        tool_call("apply_patch", serde_json::json!({"patch": outside_patch})),
        tool_call(
            "apply_patch",
            serde_json::json!({"patch": escape, "directory": project.dir.display().to_string()}),
        ),
    ];
    // The second write of step 7 fails: its directory is immutable.
    assert!(Command::new("chattr")
        .arg("+i")
        .arg(project.path("locked"))
        .status()
        .unwrap()
        .success());
    let unlock = Immutable(project.path("locked"));
    // grow.log grows while the run goes on (step 4 follows it).
    let stop = Arc::new(AtomicBool::new(false));
    let grower = std::thread::spawn({
        let stop = Arc::clone(&stop);
        let path = project.path("grow.log");
        move || {
            use std::io::Write;
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && n < 1000 {
                if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&path) {
                    let _ = writeln!(f, "tick {n}");
                }
                n += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    let results = run_steps(&project, steps, "MAX_STEPS=30");
    stop.store(true, Ordering::SeqCst);
    grower.join().unwrap();
    drop(unlock);
    let records = audit_records(&project);
    let kept: Vec<PathBuf> = std::fs::read_dir(project.path(".agent/patches"))
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    let outside_now = read(&outside.join("x.conf"));
    let _ = std::fs::remove_dir_all(&outside);

    let mut c = Checks::default();
    c.check(
        results[0].contains("-beta")
            && results[0].contains("+BETA")
            && results[0].contains(" alpha"),
        "diff_files of two files is a unified diff",
        &results[0],
    );
    c.check(
        results[1].contains("+epsilon")
            && results[1].contains("+DELTA-ADDED")
            && results[1].contains(" delta")
            && !results[1].contains(" alpha"),
        "diff_files against proposed content, with 3 context lines",
        &results[1],
    );
    c.check(
        results[2].contains("exactly one of"),
        "diff_files without other or content is refused with the reason",
        &results[2],
    );
    c.check(
        results[3].contains("line 48")
            && results[3].contains("line 50")
            && !results[3].contains("line 47"),
        "tail_file shows the last 3 lines",
        &results[3],
    );
    let appended = results[4]
        .split("s: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    c.check(
        results[4].contains("[followed") && appended > 0 && results[4].contains("tick"),
        "tail_file follows what is appended",
        &results[4],
    );
    c.check(
        results[5].contains("status=\"ok\"")
            && read(&project.path("a.conf")) == "alpha\nBETA\ngamma\ndelta\n"
            && read(&project.path("new.txt")) == "created by\na patch\n"
            && results[5].contains("2 files, 2 hunks"),
        "a good patch changes one file and creates another",
        &results[5],
    );
    c.check(
        kept.len() == 1 && kept.first().is_some_and(|k| read(k) == good_patch),
        "the applied patch is kept under .agent/patches/",
        &format!("{kept:?}"),
    );
    c.check(
        !results[6].contains("status=\"ok\"")
            && results[6].contains("nothing was changed")
            && read(&project.path("b.conf")) == "alpha\nBETA\ngamma\ndelta\n",
        "one hunk that does not apply leaves every file untouched",
        &results[6],
    );
    c.check(
        !results[7].contains("status=\"ok\"")
            && results[7].contains("restored")
            && read(&project.path("b.conf")) == "alpha\nBETA\ngamma\ndelta\n"
            && read(&project.path("locked/l.conf")) == "one\ntwo\n",
        "a failed second write puts the first file back",
        &results[7],
    );
    c.check(
        !results[8].contains("status=\"ok\"") && outside_now == "keep\n",
        "a patch outside the project is not applied without a person",
        &results[8],
    );
    c.check(
        results[9].contains("not a usable file name"),
        "a name with .. is refused",
        &results[9],
    );
    let tools: Vec<&str> = records
        .iter()
        .filter(|r| r["event"]["event"] == "tool")
        .filter_map(|r| r["event"]["tool"].as_str())
        .collect();
    c.check(
        tools.iter().filter(|t| **t == "diff_files").count() == 2
            && tools.iter().filter(|t| **t == "tail_file").count() == 2
            && tools.iter().filter(|t| **t == "apply_patch").count() == 4,
        "each planned call has its audit row (the refused ones a tool_refused row)",
        &format!("{tools:?}"),
    );
    c.check(
        records
            .iter()
            .filter(|r| r["event"]["event"] == "tool_refused")
            .filter(|r| r["event"]["tool"] == "diff_files" || r["event"]["tool"] == "apply_patch")
            .count()
            == 2,
        "the two refused before deciding are audited as refused",
        "",
    );
}

#[test]
fn read_journal_reads_entries_and_changes_no_journal() {
    let test = "read_journal_reads_entries_and_changes_no_journal";
    if !require_root(test) {
        return;
    }
    let journald = [
        "/usr/lib/systemd/systemd-journald",
        "/lib/systemd/systemd-journald",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists());
    let Some(journald) = journald else {
        eprintln!("skipped: systemd-journald is not installed");
        return;
    };
    ensure_accounts();
    let project = TestProject::new("read-journal");
    let steps = vec![
        tool_call(
            "read_journal",
            serde_json::json!({"grep": "swtest-marker", "lines": 20}),
        ),
        tool_call("read_journal", serde_json::json!({"rotate": true})),
        tool_call(
            "read_journal",
            serde_json::json!({"grep": "swtest-marker", "priority": "warning"}),
        ),
        tool_call(
            "read_journal",
            serde_json::json!({"unit": "--vacuum-size=1"}),
        ),
    ];
    let results = std::thread::spawn({
        let journald = journald.to_string();
        move || {
            // This thread, and the journald and sysward it starts, get a
            // mount namespace of their own: the journal lives on tmpfs there,
            // never in this machine's /var/log or /run.
            // SAFETY: integer argument only; it affects this thread alone.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNS) }, 0);
            let sh = |script: &str| {
                let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
                assert!(out.status.success(), "{script}: {}", describe(&out));
            };
            sh("mount --make-rprivate / && mkdir -p /run/systemd /run/log /var/log/journal && mount -t tmpfs tmpfs /run/systemd && mount -t tmpfs tmpfs /run/log && mount -t tmpfs tmpfs /var/log/journal");
            let mut daemon = Command::new(&journald).spawn().unwrap();
            wait_for(Duration::from_secs(10), "journald's socket", || {
                Path::new("/run/systemd/journal/stdout").exists().then_some(())
            });
            sh("echo 'swtest-marker warning entry' | systemd-cat -t swtest -p warning && echo 'swtest-marker info entry' | systemd-cat -t swtest -p info");
            wait_for(Duration::from_secs(10), "the entries in the journal", || {
                let out = Command::new("journalctl")
                    .args(["--no-pager", "-q", "-t", "swtest"])
                    .output()
                    .ok()?;
                String::from_utf8_lossy(&out.stdout)
                    .contains("info entry")
                    .then_some(())
            });
            let results = run_steps(&project, steps, "MAX_STEPS=30");
            let files_after = Command::new("sh")
                .args(["-c", "find /var/log/journal /run/log/journal -name '*.journal' | wc -l"])
                .output()
                .unwrap();
            let _ = daemon.kill();
            let _ = daemon.wait();
            (results, String::from_utf8_lossy(&files_after.stdout).trim().to_string())
        }
    })
    .join()
    .unwrap();
    let (results, files_after) = results;
    let mut c = Checks::default();
    c.check(
        results[0].contains("swtest")
            && results[0].contains("warning: swtest-marker warning entry")
            && results[0].contains("info: swtest-marker info entry"),
        "read_journal shows the entries, one line each",
        &results[0],
    );
    c.check(
        results[1].contains("unknown argument") || results[1].contains("unknown field"),
        "an argument read_journal does not have is refused",
        &results[1],
    );
    c.check(
        results[2].contains("warning entry") && !results[2].contains("info entry"),
        "priority warning leaves out the info entry",
        &results[2],
    );
    c.check(
        results[3].contains("not accepted"),
        "an option as a unit name is refused",
        &results[3],
    );
    c.check(
        files_after != "0",
        "the journal is still there",
        &files_after,
    );
}
