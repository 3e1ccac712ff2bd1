//! The real `sysward-gateway` binary, started the way the broker starts it
//! (argv, channel on fd 3, empty environment), as root: it must confine itself
//! and then serve. Skipped (loudly) when not root.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use sysward_ipc::gateway::{GatewayAnswer, GatewayRequest};
use sysward_ipc::model::{ModelEndpoint, ModelRequest};
use sysward_ipc::{Channel, BUILD_VERSION};

const NOBODY: &str = "65534";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Spawns the binary with `child` on fd 3 and nothing else inherited.
fn spawn_gateway(child: Channel, port: u16) -> Child {
    spawn_gateway_as(child, port, None)
}

/// The same, optionally already running as `as_uid` (so confinement cannot
/// drop privileges and must fail).
fn spawn_gateway_as(child: Channel, port: u16, as_uid: Option<u32>) -> Child {
    let fd = child.into_fd();
    let raw = fd.as_raw_fd();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sysward-gateway"));
    cmd.args([
        "--uid",
        NOBODY,
        "--gid",
        NOBODY,
        "--port",
        &port.to_string(),
    ])
    .env_clear()
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    // SAFETY: the closure only calls setgroups/setresgid/setresuid/dup2/fcntl,
    // which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(uid) = as_uid {
                if libc::setgroups(0, std::ptr::null()) == -1
                    || libc::setresgid(uid, uid, uid) == -1
                    || libc::setresuid(uid, uid, uid) == -1
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if raw == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(raw, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let proc = cmd.spawn().unwrap();
    drop(fd);
    proc
}

fn stderr_of(proc: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = proc.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// Waits for an answer; if the gateway exits instead, fails with its stderr.
fn answer(broker: &mut Channel, proc: &mut Child) -> GatewayAnswer {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if broker.wait_readable(100).unwrap() {
            match broker.recv::<GatewayAnswer>() {
                Ok(GatewayAnswer::Error { message }) => {
                    let _ = proc.wait();
                    panic!(
                        "the sysward-gateway binary answered Error: {message}\n(while \
                         sysward_sandbox::confine_gateway is a stub or fails on this host this is \
                         expected: the gateway never runs unconfined)"
                    );
                }
                Ok(a) => return a,
                Err(e) => {
                    let _ = proc.wait();
                    let err = stderr_of(proc);
                    panic!(
                        "the confined sysward-gateway closed the channel ({e}) — it refused to \
                         start or died. Its stderr:\n{err}\n(while sysward_sandbox::confine_gateway \
                         is a stub this is expected: the gateway never runs unconfined)"
                    );
                }
            }
        }
        assert!(Instant::now() < deadline, "no answer from the gateway");
    }
}

fn status_field(pid: u32, name: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in /proc/{pid}/status"))
        .trim()
        .to_string()
}

#[test]
fn the_real_binary_confines_itself_then_forwards() {
    if !is_root() {
        eprintln!(
            "SKIPPED the_real_binary_confines_itself_then_forwards: needs root (the gateway drops \
             to uid {NOBODY} and applies Landlock/seccomp itself)"
        );
        return;
    }
    let server = Server::start(|req| {
        match req.path.as_str() {
        "/v1/chat/completions" => Action::Raw(
            [
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec(),
                chunk(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"),
                chunk(b"data: [DONE]\n\n"),
                b"0\r\n\r\n".to_vec(),
            ]
            .concat(),
        ),
        _ => json_ok(r#"{"data":[{"id":"m"}]}"#),
    }
    });
    let (mut broker, child) = Channel::pair().unwrap();
    let mut proc = spawn_gateway(child, server.port);

    broker
        .send(&GatewayRequest::Hello {
            build: BUILD_VERSION.to_string(),
        })
        .unwrap();
    let pid = match answer(&mut broker, &mut proc) {
        GatewayAnswer::Welcome { build, pid } => {
            assert_eq!(build, BUILD_VERSION);
            pid
        }
        other => panic!("expected Welcome, got {other:?}"),
    };
    assert_eq!(pid, proc.id());

    // Confined before it read anything: uid, capabilities, no_new_privs,
    // seccomp, non-dumpable (/proc/<pid>/environ is then root's).
    let uid = status_field(pid, "Uid");
    assert!(uid.split_whitespace().all(|u| u == NOBODY), "Uid: {uid}");
    let gid = status_field(pid, "Gid");
    assert!(gid.split_whitespace().all(|g| g == NOBODY), "Gid: {gid}");
    for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert_eq!(status_field(pid, cap), "0000000000000000", "{cap}");
    }
    assert_eq!(status_field(pid, "NoNewPrivs"), "1");
    assert_eq!(status_field(pid, "Seccomp"), "2");
    assert_eq!(status_field(pid, "Groups"), "");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(environ.is_empty(), "environment: {environ:?}");

    broker
        .send(&GatewayRequest::Setup(setup_for(server.port)))
        .unwrap();
    match answer(&mut broker, &mut proc) {
        GatewayAnswer::Ready => {}
        other => panic!("expected Ready, got {other:?}"),
    }
    let fwd = |broker: &mut Channel, proc: &mut Child, id, req| {
        broker
            .send(&GatewayRequest::Forward { id, request: req })
            .unwrap();
        match answer(broker, proc) {
            GatewayAnswer::Reply { id: got, reply } => {
                assert_eq!(got, id);
                http(reply)
            }
            other => panic!("expected Reply, got {other:?}"),
        }
    };
    let (status, _, _, body) = fwd(
        &mut broker,
        &mut proc,
        1,
        ModelRequest::new(ModelEndpoint::Models, vec![], false),
    );
    assert_eq!(
        (status, body.as_slice()),
        (200, &br#"{"data":[{"id":"m"}]}"#[..])
    );
    let (status, _, ct, body) = fwd(
        &mut broker,
        &mut proc,
        2,
        ModelRequest::new(
            ModelEndpoint::ChatCompletions,
            b"{\"stream\":true}".to_vec(),
            true,
        ),
    );
    assert_eq!((status, ct.as_str()), (200, "text/event-stream"));
    assert!(body.ends_with(b"data: [DONE]\n\n"));

    // Every thread the runtime made is under the same filter.
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let status = std::fs::read_to_string(task.join("status")).unwrap();
        assert!(status.contains("\nSeccomp:\t2\n"), "{task:?} unconfined");
    }

    // Shutdown while a request hangs in flight: served from the runtime's
    // channel watch (epoll + poll under the seccomp filter).
    broker
        .send(&GatewayRequest::Forward {
            id: 3,
            request: ModelRequest::new(ModelEndpoint::Props, vec![], false),
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    broker.send(&GatewayRequest::Shutdown).unwrap();
    let code = proc.wait().unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "shutdown waited for the request"
    );
    let err = stderr_of(&mut proc);
    assert!(code.success(), "exit {code:?}, stderr: {err}");
    assert_eq!(
        server.seen()[0].headers["authorization"],
        format!("Bearer {KEY}")
    );
}

#[test]
fn the_real_binary_refuses_bad_argv_and_a_missing_channel() {
    let bin = env!("CARGO_BIN_EXE_sysward-gateway");
    let out = Command::new(bin)
        .args(["--uid", "1000"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--gid is required"));

    // fd 3 closed (Command closes everything but 0-2).
    let out = Command::new(bin)
        .args(["--uid", "1000", "--gid", "1000", "--port", "8080"])
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("fd 3 is not open"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_confinement_failure_is_reported_on_the_channel_and_nothing_is_served() {
    // Already unprivileged, the gateway cannot apply its confinement (it needs
    // root to drop the bounding set and switch users): it must refuse to run.
    let as_uid = if is_root() { Some(65534) } else { None };
    let (mut broker, child) = Channel::pair().unwrap();
    let mut proc = spawn_gateway_as(child, 8080, as_uid);
    let code = proc.wait().unwrap();
    assert_eq!(code.code(), Some(3), "stderr: {}", stderr_of(&mut proc));
    assert!(broker.wait_readable(5000).unwrap());
    match broker.recv::<GatewayAnswer>().unwrap() {
        GatewayAnswer::Error { message } => {
            eprintln!("{message}");
            assert!(message.contains("refuses to run unconfined"), "{message}")
        }
        other => panic!("expected Error, got {other:?}"),
    }
    // And it never read the Hello: the next thing is EOF.
    assert!(broker.recv::<GatewayAnswer>().unwrap_err().is_disconnect());
}

#[test]
fn the_real_binary_speaks_https_with_only_the_passed_roots_under_confinement() {
    if !is_root() {
        eprintln!(
            "SKIPPED the_real_binary_speaks_https_with_only_the_passed_roots_under_confinement: \
             needs root"
        );
        return;
    }
    // TLS under Landlock with no readable path and the seccomp allow-list:
    // nothing in rustls/aws-lc may need a file or a syscall outside it.
    let pki = pki("confined");
    let server = Server::start_tls(pki.server.clone(), |_| json_ok(r#"{"n_ctx":4096}"#));
    let (mut broker, child) = Channel::pair().unwrap();
    // As the broker must: the Setup with the system bundle (~220 KiB) exceeds
    // the default SO_SNDBUF; answers may reach GATEWAY_ANSWER_MAX.
    broker.force_send_buffer(8 << 20).unwrap();
    child
        .force_send_buffer(sysward_ipc::gateway::GATEWAY_ANSWER_MAX)
        .unwrap();
    let mut proc = spawn_gateway(child, server.port);
    broker
        .send(&GatewayRequest::Hello {
            build: BUILD_VERSION.to_string(),
        })
        .unwrap();
    assert!(matches!(
        answer(&mut broker, &mut proc),
        GatewayAnswer::Welcome { .. }
    ));
    let mut setup = setup_for(server.port);
    setup.api_url = format!("https://model.test:{}/v1", server.port);
    setup.extra_roots_pem = pki.ca_pem.clone();
    if let Ok(system) = std::fs::read("/etc/ssl/certs/ca-certificates.crt") {
        setup.system_roots_pem = system;
    }
    broker.send(&GatewayRequest::Setup(setup)).unwrap();
    assert_eq!(answer(&mut broker, &mut proc), GatewayAnswer::Ready);
    broker
        .send(&GatewayRequest::Forward {
            id: 9,
            request: ModelRequest::new(ModelEndpoint::Props, vec![], false),
        })
        .unwrap();
    match answer(&mut broker, &mut proc) {
        GatewayAnswer::Reply { id: 9, reply } => {
            let (status, _, _, body) = http(reply);
            assert_eq!((status, body.as_slice()), (200, &br#"{"n_ctx":4096}"#[..]));
        }
        other => panic!("expected Reply 9, got {other:?}"),
    }
    drop(broker);
    assert!(proc.wait().unwrap().success());
    assert_eq!(server.seen()[0].path, "/props");
}
