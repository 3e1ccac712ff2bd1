//! The daemon (`sysward broker`) and its control socket: who may connect, and
//! that it keeps serving after an agent or gateway is killed mid-request.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::daemon::{connect_raw, TestDaemon};
use sysward_tests::*;

/// The test daemon, with the console commands these tests run against it.
struct Daemon(TestDaemon);

impl std::ops::Deref for Daemon {
    type Target = TestDaemon;
    fn deref(&self) -> &TestDaemon {
        &self.0
    }
}

impl std::ops::DerefMut for Daemon {
    fn deref_mut(&mut self) -> &mut TestDaemon {
        &mut self.0
    }
}

impl Daemon {
    fn start(project: &TestProject, tag: &str) -> Daemon {
        Daemon(TestDaemon::start(project, tag, true))
    }

    fn client(&self, extra: &[&str]) -> Command {
        let mut c = Command::new(sysward());
        c.args(["run", "--socket", self.socket.to_str().unwrap(), "--json"])
            .args(extra);
        c.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// Runs `command` as `user` with that user's groups.
fn as_user(user: &str, command: Command) -> Command {
    let prog = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(|a| a.to_owned()).collect();
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={user}"),
        &format!("--regid={user}"),
        "--init-groups",
        "--",
    ]);
    c.arg(prog).args(args);
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn done_scenario(n: usize) -> String {
    let step = r#"{"content":"Done.\nTASK_STATUS: DONE"}"#;
    format!(r#"{{"steps":[{}]}}"#, vec![step; n].join(","))
}

#[test]
fn operators_in_the_group_are_served_and_others_refused() {
    if !require_root("operators_in_the_group_are_served") {
        return;
    }
    ensure_accounts();
    let _op = test_user("sysward-test-op", &["sysward"]);
    let _out = test_user("sysward-test-out", &[]);
    let server = scenario(&done_scenario(4));
    let p = TestProject::new("daemon-peers");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay done. No action is needed.\n");
    let mut d = Daemon::start(&p, "peers");
    let meta = std::fs::metadata(&d.socket).unwrap();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);
    assert_eq!(
        std::fs::metadata(d.socket.parent().unwrap())
            .unwrap()
            .mode()
            & 0o7777,
        0o750
    );

    let out = wait_output(
        d.client(&["--rerun"]).spawn().unwrap(),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "root: {}", describe(&out));

    let out = wait_output(
        as_user("sysward-test-op", d.client(&["--rerun"]))
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "member of sysward: {}",
        describe(&out)
    );

    let out = wait_output(
        as_user("sysward-test-out", d.client(&["--rerun"]))
            .spawn()
            .unwrap(),
        Duration::from_secs(60),
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "non-member was served: {}",
        describe(&out)
    );
    let text = describe(&out);
    assert!(
        text.contains("permission denied") || text.contains("cannot connect"),
        "{text}"
    );

    // The agent's own user is refused by the broker even if it could connect.
    let out = wait_output(
        as_user("sysward-agent", d.client(&[])).spawn().unwrap(),
        Duration::from_secs(30),
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "agent user was served: {}",
        describe(&out)
    );
    assert!(d.alive());
}

#[test]
fn an_action_cannot_act_as_an_operator() {
    if !require_root("an_action_cannot_act_as_an_operator") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("daemon-descendant");
    let socket_dir = format!("/run/sysward-test-desc-{}", std::process::id());
    let nested = format!(
        "{} run --socket {socket_dir}/control.sock --json; echo nested-exit=$?",
        sysward().display()
    );
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"shell","arguments":{{"command":{}}}}}]}},
          {{"content":"Done.\nTASK_STATUS: DONE"}}
        ]}}"#,
        serde_json::to_string(&nested).unwrap()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-t.md", "# T\nRun it.\n");
    let d = Daemon::start(&p, "desc");
    assert_eq!(d.socket.parent().unwrap(), Path::new(&socket_dir));
    let out = wait_output(
        d.client(&["--rerun"]).spawn().unwrap(),
        Duration::from_secs(90),
    );
    let audit = audit_records(&p);
    let refused: Vec<_> = audit
        .iter()
        .filter(|r| r["event"]["event"] == "operator_refused")
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "the nested client was not refused: {}\n{audit:#?}",
        describe(&out)
    );
    let reason = refused[0]["event"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("descends from the broker") || reason.contains("cgroup"),
        "{reason}"
    );
    let chats = server.chat_requests();
    assert!(
        chats.len() >= 2 && chats[1].contains("nested-exit=1"),
        "the nested client did not fail"
    );
}

#[test]
fn the_daemon_survives_a_killed_agent_or_gateway() {
    if !require_root("the_daemon_survives_a_killed_agent_or_gateway") {
        return;
    }
    ensure_accounts();
    for victim in ["sysward-agent", "sysward-gateway"] {
        let server = scenario(
            r#"{"steps":[{"delay_ms":4000,"content":"late\nTASK_STATUS: DONE"},{"content":"Done.\nTASK_STATUS: DONE"},{"content":"Done.\nTASK_STATUS: DONE"}]}"#,
        );
        let p = TestProject::new(&format!("daemon-kill-{victim}"));
        p.init_conf(&server, "")
            .agent_md("EXECUTION_MODE=guarded")
            .write("01-t.md", "# T\nSay done. No action is needed.\n");
        let mut d = Daemon::start(&p, &format!("kill-{victim}"));
        let client = d.client(&["--rerun"]).spawn().unwrap();
        server.wait_for_requests(1, Duration::from_secs(20));
        let broker = d.child.id();
        let pid = wait_for(Duration::from_secs(10), victim, || {
            children_named(broker, victim).pop()
        });
        Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        let out = wait_output(client, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(1), "{victim}: {}", describe(&out));
        let text = describe(&out);
        let expected = if victim == "sysward-agent" {
            "agent"
        } else {
            "gateway"
        };
        assert!(
            text.contains(expected),
            "{victim}: no clear message:\n{text}"
        );
        assert!(d.alive(), "the daemon died with the {victim}");
        let again = wait_output(
            d.client(&["--rerun"]).spawn().unwrap(),
            Duration::from_secs(60),
        );
        assert_eq!(
            again.status.code(),
            Some(0),
            "after killing {victim}: {}",
            describe(&again)
        );
    }
}

#[test]
fn ask_secret_through_the_daemon_client_never_reaches_the_model() {
    if !require_root("ask_secret_through_the_daemon_client") {
        return;
    }
    ensure_accounts();
    let typed = "Daemon-Typed-5d7a11";
    let server = ask_secret_scenario(typed);
    let p = TestProject::new("daemon-ask-secret");
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
    );
    let d = Daemon::start(&p, "asksecret");
    let child = Command::new(sysward())
        .args(["cli", "--socket", d.socket.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = answer_secret_dialogue(child, &server, typed);
    assert!(
        server.expectation_failures().is_empty(),
        "the secret reached the model: {}",
        describe(&out)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(typed));
    let audit = std::fs::read_to_string(p.path("audit.log")).unwrap();
    assert!(!audit.contains(typed), "secret in the audit log");
    assert!(audit.contains("\"stored\""), "{}", describe(&out));
    assert!(server
        .chat_requests()
        .iter()
        .any(|r| r.contains("got={{secret:db}}")));
}

#[test]
fn a_group_member_approves_through_the_daemon() {
    if !require_root("a_group_member_approves_through_the_daemon") {
        return;
    }
    ensure_accounts();
    let _op = test_user("sysward-test-op", &["sysward"]);
    let p = TestProject::new("daemon-approve");
    // Outside the project, so that strict mode asks.
    let marker = std::path::PathBuf::from(format!(
        "/var/tmp/sysward-daemon-approve-{}",
        std::process::id()
    ));
    std::fs::write(&marker, "x").unwrap();
    let call = format!(
        r#"{{"tool_calls":[{{"name":"exec","arguments":{{"command":"truncate","args":["-s","0","{}"]}}}}]}}"#,
        marker.display()
    );
    let done = r#"{"content":"done\nTASK_STATUS: DONE"}"#;
    let server = scenario(&format!(r#"{{"steps":[{call},{done},{call},{done}]}}"#));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=privileged\nAPPROVAL_MODE=strict\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true")
        .write("01-t.md", "# T\nEmpty the file.\n");
    let d = Daemon::start(&p, "approve");
    let socket = d.socket.to_str().unwrap().to_string();
    // unattended client: the ask becomes a pending approval
    let first = wait_output(d.client(&[]).spawn().unwrap(), Duration::from_secs(60));
    assert_eq!(first.status.code(), Some(2), "{}", describe(&first));
    assert_eq!(
        std::fs::metadata(&marker).unwrap().len(),
        1,
        "ran without approval"
    );
    let mut list = Command::new(sysward());
    list.args(["approvals", "--socket", &socket, "--json"]);
    let listed = wait_output(
        as_user("sysward-test-op", list).spawn().unwrap(),
        Duration::from_secs(20),
    );
    let v: serde_json::Value =
        serde_json::from_slice(&listed.stdout).unwrap_or_else(|_| panic!("{}", describe(&listed)));
    let id = v["approvals"][0]["id"].as_str().unwrap().to_string();
    let mut approve = Command::new(sysward());
    approve.args(["approve", &id, "--socket", &socket]);
    let ok = wait_output(
        as_user("sysward-test-op", approve).spawn().unwrap(),
        Duration::from_secs(20),
    );
    assert!(ok.status.success(), "{}", describe(&ok));
    let second = wait_output(d.client(&[]).spawn().unwrap(), Duration::from_secs(60));
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    assert_eq!(
        std::fs::metadata(&marker).unwrap().len(),
        0,
        "the approved action did not run"
    );
    let audit = audit_records(&p);
    let decided = audit
        .iter()
        .find(|r| r["event"]["event"] == "approval_decided")
        .expect("decision audited");
    assert!(
        decided["event"]["by"]
            .as_str()
            .unwrap()
            .contains("via the control socket"),
        "{decided}"
    );
    let _ = std::fs::remove_file(&marker);
}

#[test]
fn a_second_broker_on_the_same_socket_is_refused() {
    if !require_root("a_second_broker_on_the_same_socket_is_refused") {
        return;
    }
    ensure_accounts();
    let server = scenario(&done_scenario(2));
    let p = TestProject::new("daemon-single");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay done. No action is needed.\n");
    let mut d = Daemon::start(&p, "single");
    let second = Command::new(sysward())
        .args([
            "broker",
            "--root",
            p.dir.to_str().unwrap(),
            "--socket",
            d.socket.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("already running") && err.contains(&d.child.id().to_string()),
        "{err}"
    );
    // The first keeps its socket and serves.
    assert!(d.alive());
    let out = wait_output(d.client(&[]).spawn().unwrap(), Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

#[test]
fn idle_connections_are_capped_per_user_and_dropped_after_the_handshake_timeout() {
    if !require_root("idle_connections_are_capped_per_user_and_dropped_after_the_handshake_timeout")
    {
        return;
    }
    ensure_accounts();
    let server = scenario(&done_scenario(2));
    let p = TestProject::new("daemon-caps");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay done. No action is needed.\n");
    let d = Daemon::start(&p, "caps");
    let open = || connect_raw(&d.socket);
    // Sixteen idle connections from one uid: each holds a slot.
    let idle: Vec<_> = (0..16).map(|_| open()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // The seventeenth is refused with the reason.
    let mut extra = sysward_ipc::Channel::new(open());
    let answer: sysward_ipc::operator::OperatorAnswer = extra.recv().unwrap();
    let text = format!("{answer:?}");
    assert!(text.contains("already holds 16 connections"), "{text}");
    // After the handshake timeout the idle ones are dropped, and a real
    // client of the same uid is served.
    std::thread::sleep(Duration::from_secs(11));
    let out = wait_output(d.client(&[]).spawn().unwrap(), Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    drop(idle);
}
