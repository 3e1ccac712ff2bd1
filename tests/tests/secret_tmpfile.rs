//! One-shot secret files (`tmpfile PROGRAM`) over the real process tree: a
//! whole-argument placeholder of that program becomes the path of a file
//! holding the value (0600, the action's uid) that exists only while that
//! action runs — removed after success, error and timeout — and that no
//! later action can read (not even base64'd, which redaction cannot catch
//! at every width). What a killed broker left is removed by the next session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use sysward_tests::*;

const VALUE: &str = "OneShot-Value-5c1f9e27";

fn events(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect()
}

/// Every 6-byte piece of the value's base64 at each alignment: what
/// `base64 -w20` of the file would leave on lines the redactor cannot join.
fn base64_pieces() -> Vec<String> {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let enc = |b: &[u8]| -> String {
        let mut out = String::new();
        for c in b.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for i in 0..=c.len() {
                out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            }
        }
        out
    };
    (0..3)
        .map(|skip| enc(&VALUE.as_bytes()[skip..]))
        .flat_map(|e| {
            let chars: Vec<char> = e.chars().collect();
            chars
                .chunks(8)
                .filter(|c| c.len() == 8)
                .map(|c| c.iter().collect::<String>())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_tmpfile_secret_exists_only_for_its_action_and_no_later_action_reads_it() {
    if !require_root("a_tmpfile_secret_exists_only_for_its_action") {
        return;
    }
    ensure_accounts();
    let calls = [
        // Delivered: wc counts the file's bytes, stat shows its mode and owner.
        r#"{"name":"exec","arguments":{"command":"wc","args":["-c","{{secret:db}}"],"reason":"count the password file"}}"#,
        r#"{"name":"exec","arguments":{"command":"stat","args":["-c","mode=%a uid=%u type=%F","{{secret:db}}"]}}"#,
        // A command that may write (its own mount namespace) reads it too.
        r#"{"name":"exec","arguments":{"command":"cp","args":["{{secret:db}}","copied-pw"]}}"#,
        // A failing command and a timed-out one get the file too, and lose it.
        r#"{"name":"exec","arguments":{"command":"wc","args":["-c","{{secret:db}}","/nonexistent-sysward"]}}"#,
        r#"{"name":"exec","arguments":{"command":"tail","args":["-f","{{secret:db}}"],"timeout_seconds":2}}"#,
        // Attacks: another program, and later actions looking for the file.
        r#"{"name":"exec","arguments":{"command":"cat","args":["{{secret:db}}"]}}"#,
        r#"{"name":"shell","arguments":{"command":"ls -laR .agent/deliver; cat .agent/deliver/*/*; base64 -w20 .agent/deliver/*/*; find / -xdev -name 'secret-[0-9]*' -path '*deliver*' 2>/dev/null | xargs -r base64 -w20; echo probe-done"}}"#,
    ];
    let mut steps: Vec<String> = calls
        .iter()
        .map(|c| format!(r#"{{"tool_calls":[{c}]}}"#))
        .collect();
    steps.push(r#"{"content":"done\nTASK_STATUS: DONE"}"#.to_string());
    let server = scenario(&format!(
        r#"{{"never_contains":["{VALUE}"],"steps":[{}]}}"#,
        steps.join(",")
    ));
    let p = TestProject::new("tmpfile-secret");
    p.init_conf(&server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true",
        )
        .write("01-t.md", "# T\nUse the db secret.\n");
    let dir = p.path("secrets");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    p.write("secrets/db", &format!("{VALUE}\n"));
    p.write(
        "secrets/db.scope",
        "tmpfile /usr/bin/wc\ntmpfile /usr/bin/stat\ntmpfile /usr/bin/tail\ntmpfile /usr/bin/cp\n",
    );
    // What a broker killed during an action would have left.
    let leftover = p.path(".agent/deliver/a-killed-0");
    std::fs::create_dir_all(&leftover).unwrap();
    for d in [p.path(".agent"), p.path(".agent/deliver"), leftover.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(leftover.join("secret-1"), VALUE).unwrap();

    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(120),
    );
    assert!(
        server.expectation_failures().is_empty(),
        "the value reached the model: {:?}\n{}",
        server.expectation_failures(),
        describe(&out)
    );
    let chats = server.chat_requests();
    let seen = |s: &str| chats.iter().any(|r| r.contains(s));
    // The value's bytes were in the file the program read, at mode 0600,
    // owned by the action's uid (root).
    assert!(
        seen(&format!("{} /", VALUE.len())) && seen("/.agent/deliver/a-"),
        "wc did not read a one-shot file: {}",
        describe(&out)
    );
    assert!(
        seen("mode=600 uid=0 type=regular file"),
        "stat of the file: {}",
        describe(&out)
    );
    for piece in base64_pieces() {
        assert!(
            !seen(&piece),
            "a base64 piece of the value reached the model"
        );
    }
    assert!(seen("probe-done"), "the probe did not run");
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(VALUE), "value in the audit log");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(VALUE));

    let ev = events(&p);
    let tool = |needle: &str| {
        ev.iter()
            .find(|e| {
                (e["event"] == "tool" || e["event"] == "tool_refused")
                    && e.to_string().contains(needle)
            })
            .unwrap_or_else(|| panic!("no record of {needle}: {ev:#?}"))
            .clone()
    };
    // The audit shows the placeholder, never the path's content.
    let wc = tool("wc -c '{{secret:db}}'");
    assert_eq!(wc["status"], "ok", "{wc}");
    let failing = tool("/nonexistent-sysward");
    assert_eq!(failing["status"], "error", "{failing}");
    let tail = tool("tail -f");
    assert_eq!(tail["status"], "timeout", "{tail}");
    let cat = tool("a whole argument of /usr/bin/cat");
    assert_eq!(cat["event"], "tool_refused", "{cat}");
    let delivered: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "secrets_delivered")
        .flat_map(|e| e["deliveries"].as_array().unwrap().clone())
        .map(|d| d["delivery"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(delivered.len(), 5, "{delivered:?}");
    let cp = tool("cp '{{secret:db}}' copied-pw");
    assert_eq!(cp["status"], "ok", "{cp}");
    assert_eq!(std::fs::read_to_string(p.path("copied-pw")).unwrap(), VALUE);
    assert!(
        delivered.iter().all(|d| d.starts_with("argv[")
            && d.contains("as a one-shot file")
            && d.contains("/.agent/deliver/a-")),
        "{delivered:?}"
    );
    // Removed after each of the five actions, whatever their ending, and the
    // killed broker's leftover at the session's start.
    let removed: Vec<&serde_json::Value> = ev
        .iter()
        .filter(|e| e["event"] == "secret_files_removed")
        .collect();
    assert!(
        removed
            .iter()
            .any(|e| e["leftover"].as_array().is_some_and(|l| l
                .iter()
                .any(|x| x.as_str().unwrap().ends_with("a-killed-0")))),
        "{removed:#?}"
    );
    assert_eq!(
        removed.iter().filter(|e| e["files"] == 1).count(),
        5,
        "{removed:#?}"
    );
    let left: Vec<_> = std::fs::read_dir(p.path(".agent/deliver"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The scope file refuses `arg` and `tmpfile` for one program (which one
/// would apply would be the request's choice), naming the line.
#[test]
fn arg_and_tmpfile_for_one_program_are_refused() {
    let scope = "arg /usr/bin/psql\ntmpfile /usr/bin/psql\n";
    let e = sysward_broker_scope_error(scope);
    assert!(e.contains(":2:") && e.contains("choose one"), "{e}");
    assert!(sysward_broker_scope_ok(
        "tmpfile /usr/bin/psql\nenv /usr/bin/psql PGPASSWORD\n"
    ));
}

fn sysward_broker_scope_error(text: &str) -> String {
    sysward_broker::secrets::Scope::parse(text, "db.scope")
        .unwrap_err()
        .to_string()
}

fn sysward_broker_scope_ok(text: &str) -> bool {
    sysward_broker::secrets::Scope::parse(text, "db.scope").is_ok()
}
