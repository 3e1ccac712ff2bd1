//! One-shot secret files (`tmpfile PROGRAM`) over the real process tree: a
//! whole-argument placeholder of that program becomes the path of a file
//! holding the value (0600, the action's uid) that exists only while that
//! action runs — removed after success, error and timeout — and that no
//! later action can read (not even base64'd, which redaction cannot catch
//! at every width). What a killed broker left is removed by the next session.
//! Persistent secret files (`file PATH`) stay for their service, and no later
//! action reads them either.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use sysward_tests::*;

const VALUE: &str = "OneShot-Value-5c1f9e27";
const PERSISTENT: &str = "Persistent-Value-8d41c0b3";

fn events(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect()
}

/// Every 6-byte piece of the value's base64 at each alignment: what
/// `base64 -w20` of the file would leave on lines the redactor cannot join.
fn base64_pieces() -> Vec<String> {
    base64_pieces_of(VALUE)
}

fn base64_pieces_of(value: &str) -> Vec<String> {
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
        .map(|skip| enc(&value.as_bytes()[skip..]))
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

/// A project with an open policy, one task and an empty secrets directory
/// (0700).
fn open_project(p: &TestProject, server: &Handle, task: &str) {
    p.init_conf(server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true",
        )
        .write("01-t.md", task);
    let dir = p.path("secrets");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// Runs the project's tasks; the scripted model's `never_contains` values
/// must not have reached it.
fn run_keeping_values_from_the_model(p: &TestProject, server: &Handle) -> std::process::Output {
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
    out
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
    open_project(&p, &server, "# T\nUse the db secret.\n");
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

    let out = run_keeping_values_from_the_model(&p, &server);
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

/// `file PATH`: write_file delivers the value where the service reads it
/// (0600, no backup, no diff), a second delivery rotates it, and no later
/// action reads it — not `cat`, not `edit_file`, not a recursive `grep` or a
/// `base64 -w20` of the directory.
#[test]
fn a_file_secret_stays_for_its_service_and_no_later_action_reads_it() {
    if !require_root("a_file_secret_stays_for_its_service") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("file-secret");
    let app = p.path("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("app.conf"), "user=app\n").unwrap();
    let target = app.join("db.password");
    let t = target.display();
    let a = app.display();
    let calls = [
        format!(
            r#"{{"name":"write_file","arguments":{{"path":"{t}","content":"{{{{secret:db}}}}","reason":"the service's password file"}}}}"#
        ),
        // Rotation: the same delivery again works and keeps no copy.
        format!(
            r#"{{"name":"write_file","arguments":{{"path":"{t}","content":"{{{{secret:db}}}}"}}}}"#
        ),
        // Refused: a validate command would read the value.
        format!(
            r#"{{"name":"write_file","arguments":{{"path":"{a}/other.password","content":"{{{{secret:other}}}}","validate":{{"command":"cat","args":["%s"]}}}}}}"#
        ),
        // Attacks after the delivery.
        format!(r#"{{"name":"exec","arguments":{{"command":"cat","args":["{t}"]}}}}"#),
        format!(
            r#"{{"name":"edit_file","arguments":{{"path":"{t}","old_text":"Persist","new_text":"x"}}}}"#
        ),
        format!(
            r#"{{"name":"shell","arguments":{{"command":"grep -r . {a}; base64 -w20 {a}/*; cp -r {a} copied-app; base64 -w20 copied-app/*; echo probe-done"}}}}"#
        ),
        // The legitimate neighbour in the same directory stays readable.
        format!(r#"{{"name":"exec","arguments":{{"command":"cat","args":["{a}/app.conf"]}}}}"#),
    ];
    let mut steps: Vec<String> = calls
        .iter()
        .map(|c| format!(r#"{{"tool_calls":[{c}]}}"#))
        .collect();
    steps.push(r#"{"content":"done\nTASK_STATUS: DONE"}"#.to_string());
    let server = scenario(&format!(
        r#"{{"never_contains":["{PERSISTENT}","Other-Value-3b7e9a12"],"steps":[{}]}}"#,
        steps.join(",")
    ));
    open_project(&p, &server, "# T\nDeliver the db secret.\n");
    p.write("secrets/db", &format!("{PERSISTENT}\n"));
    p.write("secrets/db.scope", &format!("file {t}\n"));
    p.write("secrets/other", "Other-Value-3b7e9a12\n");
    p.write("secrets/other.scope", &format!("file {a}/other.password\n"));

    run_keeping_values_from_the_model(&p, &server);
    // The host has the value, private to its owner, and no backup of it.
    assert_eq!(std::fs::read_to_string(&target).unwrap(), PERSISTENT);
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
    let names: Vec<String> = std::fs::read_dir(&app)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| n == "db.password" || n == "app.conf"),
        "a copy was left beside the secret: {names:?}"
    );
    let chats = server.chat_requests();
    let seen = |s: &str| chats.iter().any(|r| r.contains(s));
    assert!(seen("probe-done"), "the probe did not run");
    assert!(seen("user=app"), "the neighbour file was not readable");
    for piece in base64_pieces_of(PERSISTENT) {
        assert!(
            !seen(&piece),
            "a base64 piece of the value reached the model"
        );
    }
    if let Ok(copied) = std::fs::read_to_string(p.path("copied-app/db.password")) {
        assert!(!copied.contains(PERSISTENT), "the copy holds the value");
    }
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(PERSISTENT), "value in the audit log");

    let ev = events(&p);
    let records = |needle: &str| -> Vec<serde_json::Value> {
        ev.iter()
            .filter(|e| {
                (e["event"] == "tool" || e["event"] == "tool_refused")
                    && e.to_string().contains(needle)
            })
            .cloned()
            .collect()
    };
    let writes = records("\"write_file\"");
    assert_eq!(writes.len(), 3, "{writes:#?}");
    assert_eq!(writes[0]["status"], "ok", "{:#}", writes[0]);
    assert_eq!(writes[1]["status"], "ok", "{:#}", writes[1]);
    assert_eq!(writes[2]["status"], "error", "{:#}", writes[2]);
    assert!(
        seen("takes no validate command"),
        "no reason for the refusal"
    );
    assert!(
        !app.join("other.password").exists(),
        "written despite the refusal"
    );
    let cat = records(&format!("cat {t}"));
    assert!(cat.iter().all(|c| c["decision"] == "deny"), "{cat:#?}");
    assert!(!cat.is_empty(), "no record of the cat: {ev:#?}");
    let edit = records("\"edit_file\"");
    assert!(
        !edit.is_empty() && edit.iter().all(|c| c["decision"] == "deny"),
        "{edit:#?}"
    );

    // `policy explain` judges the path as the session does.
    let explain = run_sysward(
        &[
            "policy",
            "explain",
            "--root",
            p.dir.to_str().unwrap(),
            "--",
            "cat",
            &t.to_string(),
        ],
        Duration::from_secs(30),
    );
    let said = String::from_utf8_lossy(&explain.stdout);
    assert!(said.starts_with("decision: deny"), "{}", describe(&explain));
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
