//! Secrets delivered the ways their scopes promise, over the real process
//! tree (scripted model, real broker, agent and confined commands, as root):
//! `exec`'s `env` and `stdin` carry a placeholder's value only where the
//! scope grants it; the model, the audit log and the console see
//! placeholders, never values and never mangled placeholders; `/secrets`
//! lists what was typed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use sysward_tests::*;

const VALUE: &str = "Deliver3d-Value-77ab01";

fn project_with_secret(name: &str, server: &Handle, scope: &str) -> TestProject {
    let p = TestProject::new(name);
    p.init_conf(server, "")
        .agent_md(
            "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
        )
        .write("01-t.md", "# T\nUse the db secret.\n");
    let dir = p.path("secrets");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    p.write("secrets/db", &format!("{VALUE}\n"));
    p.write("secrets/db.scope", scope);
    p
}

fn steps(calls: &[&str]) -> String {
    let mut s: Vec<String> = calls
        .iter()
        .map(|c| format!(r#"{{"tool_calls":[{c}]}}"#))
        .collect();
    s.push(r#"{"content":"done\nTASK_STATUS: DONE"}"#.to_string());
    s.join(",")
}

fn events(p: &TestProject) -> Vec<serde_json::Value> {
    audit_records(p)
        .into_iter()
        .map(|r| r["event"].clone())
        .collect()
}

#[test]
fn env_and_stdin_carry_a_secret_where_its_scope_allows() {
    if !require_root("env_and_stdin_carry_a_secret") {
        return;
    }
    ensure_accounts();
    let calls = [
        // in scope: env SW_PASS of printenv, stdin of wc
        r#"{"name":"exec","arguments":{"command":"printenv","args":["SW_PASS"],"env":{"SW_PASS":"{{secret:db}}"}}}"#,
        r#"{"name":"exec","arguments":{"command":"wc","args":["-c"],"stdin":"{{secret:db}}"}}"#,
        // plain values: env and stdin work without secrets too
        r#"{"name":"exec","arguments":{"command":"printenv","args":["SW_PLAIN"],"env":{"SW_PLAIN":"plain-env-ok"}}}"#,
        r#"{"name":"exec","arguments":{"command":"cat","stdin":"plain stdin ok\n"}}"#,
        // refused: another variable, another program, embedded, reserved names
        r#"{"name":"exec","arguments":{"command":"printenv","args":["SW_OTHER"],"env":{"SW_OTHER":"{{secret:db}}"}}}"#,
        r#"{"name":"exec","arguments":{"command":"cat","stdin":"{{secret:db}}"}}"#,
        r#"{"name":"exec","arguments":{"command":"printenv","args":["SW_PASS"],"env":{"SW_PASS":"x{{secret:db}}"}}}"#,
        r#"{"name":"exec","arguments":{"command":"printenv","args":["PATH"],"env":{"PATH":"/tmp"}}}"#,
        r#"{"name":"exec","arguments":{"command":"printenv","env":{"LD_PRELOAD":"/tmp/x.so"}}}"#,
        r#"{"name":"exec","arguments":{"command":"printenv","env":{"lower":"x"}}}"#,
        // a shell fed a script on stdin: the script is what is decided
        r#"{"name":"exec","arguments":{"command":"bash","stdin":"rm -rf --no-preserve-root /"}}"#,
    ];
    let server = scenario(&format!(
        r#"{{"never_contains":["{VALUE}"],"steps":[{}]}}"#,
        steps(&calls)
    ));
    let p = project_with_secret(
        "deliver-env",
        &server,
        "env /usr/bin/printenv SW_PASS\nstdin /usr/bin/wc\n",
    );
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(120),
    );
    assert!(
        server.expectation_failures().is_empty(),
        "the value reached the model: {}",
        describe(&out)
    );
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(VALUE), "value in the audit log");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(VALUE),
        "value on the console"
    );
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
    // The value was in printenv's environment: its output was masked.
    let env = tool("SW_PASS='{{secret:db}}' printenv SW_PASS");
    assert_eq!(env["status"], "ok", "{env}");
    assert_eq!(env["exit_code"], 0, "{env}");
    assert!(env["redactions"].as_u64().unwrap() >= 1, "{env}");
    // wc counted the value's bytes on its stdin.
    let wc = tool("wc -c <<<");
    assert_eq!(wc["status"], "ok", "{wc}");
    let chats = server.chat_requests();
    let seen = |s: &str| chats.iter().any(|r| r.contains(s));
    assert!(seen(&format!("{}\\n", VALUE.len())), "wc output not seen");
    assert!(seen("plain-env-ok"), "plain env not delivered");
    assert!(seen("plain stdin ok"), "plain stdin not delivered");
    let delivered: Vec<String> = ev
        .iter()
        .filter(|e| e["event"] == "secrets_delivered")
        .flat_map(|e| e["deliveries"].as_array().unwrap().clone())
        .map(|d| d["delivery"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(delivered, ["env SW_PASS", "stdin"], "{ev:#?}");
    // Refused before anything ran.
    for needle in [
        "SW_OTHER",
        "x{{secret:db}}",
        "\\\"PATH\\\"",
        "LD_PRELOAD",
        "lower",
    ] {
        let e = tool(needle);
        assert_eq!(e["event"], "tool_refused", "{needle}: {e}");
    }
    let cat = ev
        .iter()
        .filter(|e| e["event"] == "tool_refused")
        .find(|e| e.to_string().contains("cat") && e.to_string().contains("{{secret:db}}"));
    assert!(cat.is_some(), "stdin of cat got the secret: {ev:#?}");
    let bash = tool("bash <<<");
    assert_eq!(bash["decision"], "deny", "{bash}");
    assert!(bash["exit_code"].is_null(), "{bash}");
}

#[test]
fn the_console_and_the_model_see_placeholders_and_slash_secrets_lists_them() {
    if !require_root("the_console_and_the_model_see_placeholders") {
        return;
    }
    ensure_accounts();
    let typed = "Typed-Secret-9d31e7";
    let server = scenario(&format!(
        r#"{{"never_contains":["{typed}"],"steps":[
          {{"tool_calls":[{{"name":"ask_secret","arguments":{{"name":"prod-db","program":"printf","delivery":"arg","reason":"to show it"}}}}]}},
          {{"expect":{{"role_of_last":"tool"}},"tool_calls":[{{"name":"exec","arguments":{{"command":"printf","args":["got=%s\n","{{{{secret:prod-db}}}}"]}}}}]}},
          {{"content":"Used {{{{secret:prod-db}}}}."}}
        ]}}"#
    ));
    let p = TestProject::new("deliver-console");
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
    );
    let mut child = std::process::Command::new(sysward())
        .args(["cli", "--root", p.dir.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"use the db password\n").unwrap();
        server.wait_for_requests(1, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(500));
        stdin.write_all(format!("{typed}\n").as_bytes()).unwrap();
        server.wait_for_requests(3, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(800));
        stdin.write_all(b"/secrets\n").unwrap();
        std::thread::sleep(Duration::from_millis(800));
    }
    let out = wait_output(child, Duration::from_secs(60));
    let console = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        server.expectation_failures().is_empty(),
        "{}",
        describe(&out)
    );
    assert!(!console.contains(typed), "value on the console");
    assert!(!console.contains("[REDACTED]"), "mangled: {console}");
    let chats = server.chat_requests();
    assert!(
        chats.iter().all(|r| !r.contains("[REDACTED]")),
        "the model saw a mangled placeholder"
    );
    assert!(chats
        .iter()
        .any(|r| r.contains("use {{secret:prod-db}} exactly")));
    // `/secrets` after the value was typed lists it (never its value).
    assert!(
        !console.contains("no secrets in this session"),
        "/secrets: {console}"
    );
    assert!(
        console.contains("{{secret:prod-db}}  prod-db"),
        "/secrets: {console}"
    );
}
