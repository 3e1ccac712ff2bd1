//! Issue 2 acceptance: the real process tree, as root, against the scripted
//! OpenAI-compatible server over real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::time::Duration;
use sysward_tests::*;

const KEY: &str = "sk-test-0123456789abcdef";

fn read_only_policy() -> &'static str {
    "EXECUTION_MODE=guarded\nALLOW_OUTSIDE_PROJECT_READ=true\nDEFAULT_COMMAND_TIMEOUT=30"
}

#[test]
fn a_task_runs_end_to_end_through_broker_agent_gateway_and_executor() {
    if !require_root("a_task_runs_end_to_end") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"flavor":"vllm","context_size":32768,"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"df","args":["-h"],"reason":"disk usage"}}]},
          {"expect":{"role_of_last":"tool"},"content":"EXECUTED: df -h\nVERIFIED: listed.\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("e2e");
    p.init_conf(&server, "")
        .agent_md(read_only_policy())
        .write("01-disk.md", "# Disk\nCheck disk usage.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--json"],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let lines = json_lines(&out);
    let summary = lines.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["tasks"][0]["status"], "DONE", "{}", describe(&out));
    // The command's real output reached the model as a tool result.
    let chats = server.chat_requests();
    assert_eq!(chats.len(), 2);
    assert!(
        chats[1].contains("Filesystem"),
        "df output did not reach the model"
    );
    // The gateway, not the agent, sent the key.
    assert_eq!(
        chats[0].authorization(),
        Some(format!("Bearer {KEY}").as_str())
    );
    // The audit trail has the action with its decision, and verifies.
    let audit = audit_records(&p);
    let tool = audit
        .iter()
        .find(|r| r["event"]["event"] == "tool")
        .expect("tool record");
    assert_eq!(tool["event"]["decision"], "allow");
    assert_eq!(tool["event"]["status"], "ok");
    assert_eq!(tool["event"]["exit_code"], 0);
    let verify = run_sysward(
        &["audit", "verify", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(10),
    );
    assert!(verify.status.success(), "{}", describe(&verify));
}

/// During a session the agent is confined exactly as promised, and neither the
/// agent's environment nor its memory holds the API key.
#[test]
fn the_running_agent_is_confined_and_holds_no_key() {
    if !require_root("the_running_agent_is_confined") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"delay_ms":2500,"content":"Nothing to do.\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("confined");
    p.init_conf(&server, "")
        .agent_md(read_only_policy())
        .write("01-t.md", "# T\nSay done. No action is needed.\n");
    let child = spawn_sysward(&["run", "--root", p.dir.to_str().unwrap()]);
    let broker = standalone_broker(child.id());
    let agent = wait_for(Duration::from_secs(10), "the agent", || {
        children_named(broker, "sysward-agent").pop()
    });
    let gateway = wait_for(Duration::from_secs(10), "the gateway", || {
        children_named(broker, "sysward-gateway").pop()
    });
    // Let the agent finish confining itself and send its model request.
    server.wait_for_requests(1, Duration::from_secs(10));
    let uid: u32 = status_field(agent, "Uid:")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(uid, 0, "agent runs as root");
    for cap in ["CapEff:", "CapPrm:", "CapBnd:", "CapInh:", "CapAmb:"] {
        assert_eq!(
            status_field(agent, cap).unwrap(),
            "0000000000000000",
            "{cap}"
        );
    }
    assert_eq!(status_field(agent, "NoNewPrivs:").unwrap(), "1");
    assert_eq!(status_field(agent, "Seccomp:").unwrap(), "2");
    assert_eq!(status_field(agent, "Groups:").unwrap_or_default(), "");
    let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    assert_ne!(
        ns(agent),
        ns(broker),
        "agent shares the broker's network namespace"
    );
    let dev = std::fs::read_to_string(format!("/proc/{agent}/net/dev")).unwrap();
    let ifaces: Vec<&str> = dev
        .lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(str::trim)
        .collect();
    assert_eq!(ifaces, vec!["lo"], "agent netns has interfaces {ifaces:?}");
    // No key in the agent's or the gateway's environment, nor the agent's memory.
    for pid in [agent, gateway] {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        assert!(
            !String::from_utf8_lossy(&env).contains(KEY),
            "key in environ of {pid}"
        );
    }
    assert!(
        !process_memory_contains(agent, KEY.as_bytes()),
        "the API key is in the agent's memory"
    );
    let out = wait_output(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
}

/// Scans every readable mapping of `pid` for `needle` (as root).
fn process_memory_contains(pid: u32, needle: &[u8]) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    for line in maps.lines() {
        let mut parts = line.split_whitespace();
        let (Some(range), Some(perms)) = (parts.next(), parts.next()) else {
            continue;
        };
        if !perms.starts_with('r') {
            continue;
        }
        let (a, b) = range.split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(a, 16).unwrap(),
            u64::from_str_radix(b, 16).unwrap(),
        );
        if end - start > 512 << 20 || mem.seek(SeekFrom::Start(start)).is_err() {
            continue;
        }
        let mut buf = vec![0u8; (end - start) as usize];
        if mem.read_exact(&mut buf).is_ok() && buf.windows(needle.len()).any(|w| w == needle) {
            return true;
        }
    }
    false
}

#[test]
fn a_model_answering_garbage_or_hanging_ends_the_session_clearly() {
    if !require_root("a_model_answering_garbage_or_hanging") {
        return;
    }
    ensure_accounts();
    for (name, step, expect) in [
        ("garbage", r#"{"garbage":"this is not json {{{"}"#, "model"),
        (
            "hang",
            r#"{"hang":true}"#,
            "did not answer within request_timeout",
        ),
    ] {
        let server = scenario(&format!(
            r#"{{"steps":[{step},{step},{step},{step},{step}]}}"#
        ));
        let p = TestProject::new(&format!("fault-{name}"));
        p.init_conf_with_timeout(&server, 2)
            .agent_md(read_only_policy())
            .write("01-t.md", "# T\nDo it.\n");
        let out = run_sysward(
            &["run", "--root", p.dir.to_str().unwrap()],
            Duration::from_secs(90),
        );
        assert_ne!(out.status.code(), Some(0), "{name}: {}", describe(&out));
        let text = describe(&out).to_lowercase();
        assert!(
            text.contains(expect),
            "{name}: expected {expect:?} in\n{text}"
        );
    }
}

/// Nothing the operator's shell exported can be read from the broker by an
/// action: the broker is not dumpable (the read is refused here) and, in case a
/// kernel or profile lets it through, restarts itself with an empty environment.
#[test]
fn an_action_finds_nothing_in_the_broker_environment() {
    if !require_root("an_action_finds_nothing_in_the_broker_environment") {
        return;
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"shell","arguments":{"command":"tr '\\0' '\\n' < /proc/$PPID/environ; echo rc=$?"}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("environ");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-t.md", "# T\nLook.\n");
    let out = Command::new(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .env("OPERATOR_TOKEN", "tok-7f3a9c1e5b")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let chats = server.chat_requests();
    // rc=0: the file was readable (the kernel allows it), so only the scrub protects.
    // Either the read is refused (non-dumpable broker, no CAP_SYS_PTRACE) or it
    // finds an empty environment (the broker restarted itself without one).
    assert!(
        chats.len() >= 2 && chats[1].contains("rc="),
        "the action did not run"
    );
    assert!(
        !chats[1].contains("tok-7f3a9c1e5b"),
        "the broker's environment leaked to an action"
    );
}

/// A temporary DNS failure is retried (the command provably did nothing), and
/// the result says so; a permission failure comes back with its likely causes.
#[test]
fn transient_failures_are_retried_and_permission_failures_explained() {
    if !require_root("transient_failures_are_retried") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("retry");
    let marker = p.path("attempted");
    let script = format!(
        "if [ -e {m} ]; then echo resolved; else : > {m}; echo 'curl: (6) Could not resolve host: example.invalid' >&2; exit 6; fi",
        m = marker.display()
    );
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"shell","arguments":{{"command":{}}}}}]}},
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"python3","args":["-c","import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM)"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        serde_json::to_string(&script).unwrap()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-t.md", "# T\nResolve.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let chats = server.chat_requests();
    let first = chats[1].message_text();
    assert!(first.contains("resolved"), "not retried: {first}");
    assert!(
        first.contains("retried after 2 s"),
        "the retry is not reported: {first}"
    );
    let second = chats[2].message_text();
    assert!(
        second.contains("permission failure"),
        "no explanation: {second}"
    );
}

/// The audit head anchor is mirrored to the system log at every session end.
/// Plays syslogd on /dev/log when the host has none (skips if one runs).
#[test]
fn the_audit_head_is_mirrored_to_syslog() {
    if !require_root("the_audit_head_is_mirrored_to_syslog") {
        return;
    }
    if std::path::Path::new("/dev/log").exists() {
        eprintln!("*** SKIPPED the_audit_head_is_mirrored_to_syslog: a syslog daemon owns /dev/log; check its log for `sysward`");
        return;
    }
    ensure_accounts();
    let log = std::os::unix::net::UnixDatagram::bind("/dev/log").unwrap();
    log.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let server = scenario(r#"{"steps":[{"content":"ok\nTASK_STATUS: DONE"}]}"#);
    let p = TestProject::new("syslog");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay ok. No action is needed.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(30),
    );
    let mut buf = vec![0u8; 4096];
    let mut got = String::new();
    while let Ok(n) = log.recv(&mut buf) {
        got = String::from_utf8_lossy(&buf[..n]).into_owned();
        // Other tests' sessions may log too: wait for this project's line.
        if got.contains("audit head") && got.contains(p.dir.to_str().unwrap()) {
            break;
        }
    }
    let _ = std::fs::remove_file("/dev/log");
    assert!(out.status.success(), "{}", describe(&out));
    let head = std::fs::read_to_string(p.path(".agent/audit.head")).unwrap();
    let hash = head.split_whitespace().nth(1).unwrap();
    assert!(
        got.contains("sysward") && got.contains(hash),
        "syslog got {got:?}, head {head:?}"
    );
}

/// Escape sequences, bidi overrides and zero-width characters in a model's
/// answer reach the operator's terminal stripped (the bytes written).
#[test]
fn model_text_reaches_the_terminal_sanitized() {
    if !require_root("model_text_reaches_the_terminal_sanitized") {
        return;
    }
    ensure_accounts();
    let evil = "A\u{1b}[2J\u{1b}]0;pwned\u{7} B\u{202e}drowssap C\u{200b}D\u{feff}E\u{9b}31m F\nTASK_STATUS: DONE";
    let server = scenario(&format!(
        r#"{{"steps":[{{"content":{}}}]}}"#,
        serde_json::to_string(evil).unwrap()
    ));
    let p = TestProject::new("sanitize");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nSay ok. No action is needed.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", describe(&out));
    let bytes = &out.stdout;
    for bad in [
        "\u{1b}", "\u{7}", "\u{202e}", "\u{200b}", "\u{feff}", "\u{9b}",
    ] {
        assert!(
            !bytes.windows(bad.len()).any(|w| w == bad.as_bytes()),
            "{bad:?} reached the terminal: {:?}",
            String::from_utf8_lossy(bytes)
        );
    }
    let text = String::from_utf8_lossy(bytes);
    assert!(text.contains("A[2J]0;pwned B"), "{text}");
    assert!(text.contains("CDE"), "{text}");
}

/// Landlock cannot refuse connect() to a pathname socket, so an action that is
/// not a service/package/admin one finds systemd's and D-Bus's directories
/// empty: it cannot ask PID 1 to run something outside its confinement.
#[test]
fn actions_cannot_reach_the_system_bus_or_systemd() {
    if !require_root("actions_cannot_reach_the_system_bus") {
        return;
    }
    ensure_accounts();
    std::fs::create_dir_all("/run/dbus").unwrap();
    let path = format!("/run/dbus/sysward-test-bus-{}", std::process::id());
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    // positive control: the socket accepts connections from the host
    std::os::unix::net::UnixStream::connect(&path).unwrap();
    assert!(listener.accept().is_ok());
    let script = format!(
        "ls -A /run/dbus | wc -l; python3 -c \"import socket;s=socket.socket(socket.AF_UNIX);s.connect('{path}')\" && echo CONNECTED || echo refused"
    );
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"shell","arguments":{{"command":{}}}}}]}},
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"ls","args":["-A","/run/dbus"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        serde_json::to_string(&script).unwrap()
    ));
    let p = TestProject::new("bus");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-t.md", "# T\nTalk to the bus.\n");
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{}", describe(&out));
    let chats = server.chat_requests();
    let result = chats[1].message_text();
    // stdout: no entry in /run/dbus, and the connection was refused
    assert!(result.contains("stdout:\n0\nrefused"), "{result}");
    // Read-only diagnosis keeps the real directories (`systemctl status` needs
    // the bus): the trade-off is documented in executor/src/confine.rs.
    let listing = chats[2].message_text();
    assert!(listing.contains("sysward-test-bus-"), "{listing}");
    assert!(
        listener.accept().is_err(),
        "the action reached the bus socket"
    );
}

/// The IPC traffic of the agent never carries the API key: every message the
/// agent sends or receives is traced (strace of the whole tree, one file per
/// process) and searched. The gateway's trace is the positive control: its
/// setup message does carry the key.
#[test]
fn the_agent_ipc_traffic_never_carries_the_key() {
    if !require_root("the_agent_ipc_traffic_never_carries_the_key") {
        return;
    }
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is missing: apt-get install strace (scripts/test.sh installs it)");
    }
    ensure_accounts();
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-a"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let p = TestProject::new("ipc-trace");
    p.init_conf(&server, "")
        .agent_md(read_only_policy())
        .write("01-t.md", "# T\nuname.\n");
    let traces = p.path("trace");
    let out = Command::new("strace")
        .args([
            "-f",
            "-ff",
            "-s",
            "1000000",
            "-e",
            "trace=sendmsg,recvmsg,sendto,recvfrom,read,write",
            "-o",
        ])
        .arg(&traces)
        .arg(sysward())
        .args(["run", "--root", p.dir.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let ready = audit_records(&p)
        .into_iter()
        .find(|r| r["event"]["event"] == "session_ready")
        .expect("session_ready");
    let read_trace = |pid: &serde_json::Value| {
        std::fs::read_to_string(format!("{}.{}", traces.display(), pid.as_u64().unwrap())).unwrap()
    };
    let agent = read_trace(&ready["event"]["agent_pid"]);
    let gateway = read_trace(&ready["event"]["gateway_pid"]);
    assert!(
        agent.contains("recvmsg(3") && agent.contains("sendto(3"),
        "the agent's traffic was not traced"
    );
    assert!(
        agent.contains("uname"),
        "the traced traffic does not show the tool call"
    );
    assert!(
        !agent.contains(KEY),
        "the API key crossed the agent's channel"
    );
    assert!(
        gateway.contains(KEY),
        "positive control: the gateway's setup should carry the key"
    );
}

/// The shared mount namespace that hides the buses follows the host: a
/// filesystem mounted after the broker started is visible to an action that
/// enters it (an unknown program), while the buses stay hidden.
#[test]
fn the_hidden_bus_namespace_sees_later_host_mounts() {
    if !require_root("the_hidden_bus_namespace_sees_later_host_mounts") {
        return;
    }
    ensure_accounts();
    // Both ways: here, and again where every mount is shared (a fresh mount
    // namespace made rshared), where the broker's shared namespace is used.
    let nested = std::env::var_os("SYSWARD_TEST_SHARED_MOUNTS").is_some();
    if !nested {
        let out = Command::new("unshare")
            .args([
                "-m",
                "--propagation",
                "shared",
                "env",
                "SYSWARD_TEST_SHARED_MOUNTS=1",
            ])
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_hidden_bus_namespace_sees_later_host_mounts",
                "--nocapture",
            ])
            .output()
            .unwrap();
        let text = describe(&out);
        assert!(out.status.success(), "{text}");
    }
    let p = TestProject::new(if nested { "mntns-shared" } else { "mntns" });
    let mnt = p.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    // An unknown program: a copy of cat under a name the catalog lacks.
    let tool = format!("/usr/local/bin/sysward-test-cat-{}", std::process::id());
    std::fs::copy("/bin/cat", &tool).unwrap();
    // ...and the buses stay hidden from it (positive control: the host sees it).
    std::fs::create_dir_all("/run/dbus").unwrap();
    let bus_marker = format!("/run/dbus/sysward-test-marker-{}", std::process::id());
    std::fs::write(&bus_marker, "host-bus-dir\n").unwrap();
    // The first action makes the broker prepare its namespace; the host
    // mounts a filesystem while the model "thinks" (the second reply is
    // delayed); the second action must see it.
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"{tool}","args":["{bus_marker}"]}}}}]}},
          {{"delay_ms":1500,"tool_calls":[{{"name":"exec","arguments":{{"command":"{tool}","args":["{}/marker"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        mnt.display()
    ));
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=unrestricted\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true")
        .write("01-t.md", "# T\nRead the marker.\n");
    let layout = sysward_broker::project::Layout::standalone(&p.dir).unwrap();
    let ctx = sysward_broker::context::broker_context_with_binaries(layout, &bin_dir()).unwrap();
    let session = std::thread::spawn(move || {
        let op = Recorder::new();
        let _ = run_tasks(&ctx, &op);
    });
    // The first tool result reaches the model: the namespace exists now.
    server.wait_for_requests(2, Duration::from_secs(30));
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=64k",
            "sysward-test",
            mnt.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(mounted.success());
    std::fs::write(mnt.join("marker"), "seen-through-the-namespace\n").unwrap();
    session.join().unwrap();
    let _ = Command::new("umount").arg(&mnt).status();
    let _ = std::fs::remove_file(&tool);
    let _ = std::fs::remove_file(&bus_marker);
    let chats = server.chat_requests();
    assert!(chats.len() >= 3, "no tool result");
    let hidden = chats[1].message_text();
    assert!(
        !hidden.contains("host-bus-dir"),
        "the bus directory is visible: {hidden}"
    );
    let result = chats[2].message_text();
    assert!(result.contains("seen-through-the-namespace"), "{result}");
}
