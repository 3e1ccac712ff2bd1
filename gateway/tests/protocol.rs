//! The broker-facing protocol: order, version, bad frames, bad setups, EOF.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::{Duration, Instant};
use sysward_gateway::ServeConfig;
use sysward_ipc::gateway::{GatewayAnswer, GatewayRequest};
use sysward_ipc::model::{ModelEndpoint, ModelRequest};
use sysward_ipc::BUILD_VERSION;

fn models() -> ModelRequest {
    ModelRequest::new(ModelEndpoint::Models, vec![], false)
}

#[test]
fn hello_setup_forward_shutdown() {
    let server = Server::start(|_| json_ok("{}"));
    let mut s = Session::start(setup_for(server.port));
    http(s.forward(models()));
    http(s.forward(models()));
    s.shutdown();
}

#[test]
fn eof_in_any_state_ends_cleanly() {
    let s = Session::spawn(ServeConfig::default());
    let Session { broker, thread, .. } = s;
    drop(broker);
    thread.unwrap().join().unwrap().unwrap();

    let server = Server::start(|_| json_ok("{}"));
    let s = Session::start(setup_for(server.port));
    let Session { broker, thread, .. } = s;
    drop(broker);
    thread.unwrap().join().unwrap().unwrap();
}

#[test]
fn shutdown_or_eof_interrupt_a_request_in_flight() {
    let server = Server::start(|_| Action::Hang(Duration::from_secs(30)));
    let mut setup = setup_for(server.port);
    setup.request_timeout_secs = 60;
    let s = Session::start(setup);
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    s.send(GatewayRequest::Shutdown);
    s.finish().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));

    let mut setup = setup_for(server.port);
    setup.request_timeout_secs = 60;
    let s = Session::start(setup);
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let Session { broker, thread, .. } = s;
    drop(broker);
    thread.unwrap().join().unwrap().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_new_forward_supersedes_one_in_flight() {
    // The broker gives up on a request (operator cancel) and sends the next
    // one: the old id is answered Cancelled, the new one is served.
    let server = Server::start(|req| {
        if req.path == "/props" {
            json_ok(r#"{"n_ctx":1}"#)
        } else {
            Action::Hang(Duration::from_secs(30))
        }
    });
    let mut setup = setup_for(server.port);
    setup.request_timeout_secs = 60;
    let mut s = Session::start(setup);
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    s.send(GatewayRequest::Forward {
        id: 2,
        request: ModelRequest::new(ModelEndpoint::Props, vec![], false),
    });
    match s.recv() {
        GatewayAnswer::Reply { id: 1, reply } => {
            let (kind, msg) = failed(&reply);
            assert_eq!(kind, sysward_ipc::model::ModelFailure::Cancelled, "{msg}");
        }
        other => panic!("expected Reply 1, got {other:?}"),
    }
    match s.recv() {
        GatewayAnswer::Reply { id: 2, reply } => assert_eq!(http(reply).0, 200),
        other => panic!("expected Reply 2, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(5));
    // Still serving.
    s.send(GatewayRequest::Forward {
        id: 3,
        request: ModelRequest::new(ModelEndpoint::Props, vec![], false),
    });
    assert!(matches!(s.recv(), GatewayAnswer::Reply { id: 3, .. }));
    s.shutdown();
}

#[test]
fn hello_or_setup_in_flight_is_a_violation() {
    let server = Server::start(|_| Action::Hang(Duration::from_secs(30)));
    let s = Session::start(setup_for(server.port));
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    s.send(GatewayRequest::Setup(setup_for(server.port)));
    let msg = expect_error(s);
    assert!(
        msg.contains("Setup is not permitted while a Forward is in flight"),
        "{msg}"
    );
}

#[test]
fn another_build_is_a_version_mismatch() {
    let s = Session::spawn(ServeConfig::default());
    s.send(GatewayRequest::Hello {
        build: "0.0.0-other".to_string(),
    });
    let msg = expect_error(s);
    assert!(msg.contains("version mismatch"), "{msg}");
    assert!(
        msg.contains("0.0.0-other") && msg.contains(BUILD_VERSION),
        "{msg}"
    );
}

#[test]
fn another_protocol_version_is_a_version_mismatch() {
    let s = Session::spawn(ServeConfig::default());
    let mut frame = sysward_ipc::codec::encode(&GatewayRequest::Hello {
        build: BUILD_VERSION.to_string(),
    })
    .unwrap();
    frame[2] = 0x7f;
    s.broker.send_frame(&frame).unwrap();
    let msg = expect_error(s);
    assert!(msg.contains("version mismatch"), "{msg}");
}

#[test]
fn out_of_order_requests_are_refused() {
    let server = Server::start(|_| json_ok("{}"));
    // Forward before Hello.
    let s = Session::spawn(ServeConfig::default());
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    let msg = expect_error(s);
    assert!(
        msg.contains("Forward is not permitted before Hello"),
        "{msg}"
    );

    // Setup before Hello.
    let s = Session::spawn(ServeConfig::default());
    s.send(GatewayRequest::Setup(setup_for(server.port)));
    let msg = expect_error(s);
    assert!(msg.contains("Setup is not permitted"), "{msg}");

    // Forward before Setup.
    let mut s = Session::spawn(ServeConfig::default());
    s.hello();
    s.send(GatewayRequest::Forward {
        id: 1,
        request: models(),
    });
    let msg = expect_error(s);
    assert!(msg.contains("Forward is not permitted"), "{msg}");

    // A second Hello.
    let mut s = Session::spawn(ServeConfig::default());
    s.hello();
    s.send(GatewayRequest::Hello {
        build: BUILD_VERSION.to_string(),
    });
    expect_error(s);

    // A second Setup.
    let s = Session::start(setup_for(server.port));
    s.send(GatewayRequest::Setup(setup_for(server.port)));
    let msg = expect_error(s);
    assert!(msg.contains("Setup is not permitted after Setup"), "{msg}");
    assert!(server.seen().is_empty());
}

#[test]
fn garbage_frames_are_refused() {
    for frame in [
        b"hello".to_vec(),
        vec![0u8; 64],
        b"SW\x01\x00\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
        b"SW\x01\x00\x63\x00\x00\x00".to_vec(),
    ] {
        let s = Session::spawn(ServeConfig::default());
        s.broker.send_frame(&frame).unwrap();
        expect_error(s);
    }
    // A truncated Hello body in the right state.
    let s = Session::spawn(ServeConfig::default());
    let frame = sysward_ipc::codec::encode(&GatewayRequest::Hello {
        build: BUILD_VERSION.to_string(),
    })
    .unwrap();
    s.broker.send_frame(&frame[..frame.len() - 2]).unwrap();
    expect_error(s);
}

#[test]
fn bad_setups_are_refused_with_what_to_fix() {
    let port = 8080;
    type Edit = Box<dyn Fn(&mut sysward_ipc::gateway::GatewaySetup)>;
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|s| s.api_url = "ftp://127.0.0.1:8080/v1".into()),
            "scheme",
        ),
        (Box::new(|s| s.api_url = "not a url".into()), "not a URL"),
        (
            Box::new(|s| s.api_url = format!("http://user:{KEY}@127.0.0.1:8080/v1")),
            "credentials",
        ),
        (
            Box::new(|s| s.api_url = "http://127.0.0.1:8080/v1?x=1".into()),
            "query",
        ),
        (
            Box::new(|s| {
                s.api_url = "http://model.example:8080/v1".into();
                s.resolved.clear();
            }),
            "no resolved address",
        ),
        (
            Box::new(|s| s.resolved = vec!["10.0.0.1:8080".into()]),
            "resolved it to",
        ),
        (
            Box::new(|s| s.resolved = vec!["127.0.0.1:9999".into()]),
            "port",
        ),
        (
            Box::new(|s| s.resolved = vec!["localhost:8080".into()]),
            "ip:port",
        ),
        (Box::new(|s| s.request_timeout_secs = 0), "REQUEST_TIMEOUT"),
        (Box::new(|s| s.max_response_bytes = 0), "cap"),
        (Box::new(|s| s.max_response_bytes = 1 << 40), "cap"),
        (
            Box::new(|s| s.api_url = "https://127.0.0.1:8080/v1".into()),
            "trust roots",
        ),
        (
            Box::new(|s| {
                s.api_url = "https://127.0.0.1:8080/v1".into();
                s.extra_roots_pem =
                    b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".to_vec();
            }),
            "extra roots",
        ),
        (
            Box::new(|s| s.api_key = format!("{KEY}\r\nX-Evil: 1")),
            "API_KEY",
        ),
    ];
    for (edit, expect) in cases {
        let mut setup = setup_for(port);
        edit(&mut setup);
        let mut s = Session::spawn(ServeConfig::default());
        s.hello();
        s.send(GatewayRequest::Setup(setup.clone()));
        let msg = expect_error(s);
        assert!(
            msg.contains(expect),
            "{setup:?}: expected {expect:?} in {msg:?}"
        );
    }
}

#[test]
fn setup_port_must_match_the_confined_port() {
    let mut s = Session::spawn(ServeConfig {
        api_port: Some(8081),
    });
    s.hello();
    s.send(GatewayRequest::Setup(setup_for(8080)));
    let msg = expect_error(s);
    assert!(msg.contains("--port"), "{msg}");

    let mut s = Session::spawn(ServeConfig {
        api_port: Some(8080),
    });
    s.hello();
    s.send(GatewayRequest::Setup(setup_for(8080)));
    assert_eq!(s.recv(), GatewayAnswer::Ready);
    s.shutdown();
}
