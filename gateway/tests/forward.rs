//! Forwarding over real sockets: a loopback HTTP server, the gateway's serve
//! loop on a thread, and the broker's side of a SEQPACKET pair.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::net::TcpListener;
use std::time::{Duration, Instant};
use sysward_ipc::model::{ModelEndpoint, ModelFailure, ModelRequest};

const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

#[test]
fn forwards_the_three_endpoints_with_the_bearer_key() {
    let server = Server::start(|req| match req.path.as_str() {
        "/v1/models" => json_ok(r#"{"data":[{"id":"m","max_model_len":4096}]}"#),
        "/props" => json_ok(r#"{"n_ctx":8192}"#),
        "/v1/chat/completions" => json_ok(r#"{"choices":[{"message":{"content":"ok"}}]}"#),
        _ => Action::Raw(response("404 Not Found", &[], b"nope")),
    });
    let mut s = Session::start(setup_for(server.port));

    let (status, _, ct, body) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    assert_eq!(ct, "application/json");
    assert_eq!(body, br#"{"data":[{"id":"m","max_model_len":4096}]}"#);

    let (status, _, _, body) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Props, vec![], false)));
    assert_eq!((status, body.as_slice()), (200, &br#"{"n_ctx":8192}"#[..]));

    let (status, _, _, body) = http(s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        CHAT.as_bytes().to_vec(),
        false,
    )));
    assert_eq!(status, 200);
    assert_eq!(body, br#"{"choices":[{"message":{"content":"ok"}}]}"#);
    s.shutdown();

    let seen = server.seen();
    let got: Vec<(&str, &str)> = seen
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("GET", "/v1/models"),
            ("GET", "/props"),
            ("POST", "/v1/chat/completions")
        ]
    );
    let version = env!("CARGO_PKG_VERSION");
    for r in &seen {
        assert_eq!(r.headers["authorization"], format!("Bearer {KEY}"));
        assert_eq!(r.headers["user-agent"], format!("sysward/{version}"));
        assert_eq!(r.headers["host"], format!("127.0.0.1:{}", server.port));
        assert!(!r.headers.contains_key("proxy-authorization"));
    }
    assert!(!seen[0].headers.contains_key("content-type"));
    assert_eq!(seen[2].headers["content-type"], "application/json");
    assert_eq!(seen[2].body, CHAT.as_bytes());
}

#[test]
fn no_authorization_header_without_a_key() {
    let server = Server::start(|_| json_ok("{}"));
    let mut setup = setup_for(server.port);
    setup.api_key.clear();
    let mut s = Session::start(setup);
    http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    s.shutdown();
    assert!(!server.seen()[0].headers.contains_key("authorization"));
}

#[test]
fn a_host_name_connects_only_to_the_resolved_addresses() {
    let server = Server::start(|_| json_ok("{}"));
    let mut setup = setup_for(server.port);
    // .invalid never resolves: the request can only succeed through `resolved`.
    setup.api_url = format!("http://model.invalid:{}/api/v1/", server.port);
    let mut s = Session::start(setup);
    let (status, ..) = http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    let (status, ..) = http(s.forward(ModelRequest::new(ModelEndpoint::Props, vec![], false)));
    assert_eq!(status, 200);
    s.shutdown();
    let seen = server.seen();
    assert_eq!(seen[0].path, "/api/v1/models");
    assert_eq!(seen[1].path, "/props");
    assert_eq!(
        seen[0].headers["host"],
        format!("model.invalid:{}", server.port)
    );
}

#[test]
fn other_paths_and_mismatched_requests_are_refused_without_contacting_the_server() {
    let server = Server::start(|_| json_ok("{}"));
    let mut s = Session::start(setup_for(server.port));
    let bad = [
        ModelRequest {
            endpoint: ModelEndpoint::Models,
            path: "../../admin".to_string(),
            body: vec![],
            stream: false,
        },
        ModelRequest {
            endpoint: ModelEndpoint::ChatCompletions,
            path: "models".to_string(),
            body: vec![],
            stream: false,
        },
        ModelRequest {
            endpoint: ModelEndpoint::Props,
            path: "http://evil.example:80/props".to_string(),
            body: vec![],
            stream: false,
        },
        ModelRequest {
            endpoint: ModelEndpoint::ChatCompletions,
            path: "/v1/chat/completions".to_string(),
            body: CHAT.as_bytes().to_vec(),
            stream: false,
        },
        ModelRequest {
            endpoint: ModelEndpoint::Models,
            path: "models".to_string(),
            body: b"{}".to_vec(),
            stream: false,
        },
    ];
    for req in bad {
        let (kind, msg) = failed(&s.forward(req.clone()));
        assert_eq!(kind, ModelFailure::Refused, "{req:?}: {msg}");
        assert!(msg.contains("refused"), "{msg}");
    }
    s.shutdown();
    assert!(
        server.seen().is_empty(),
        "a refused request reached the server"
    );
}

#[test]
fn a_response_over_the_cap_is_too_large() {
    let big = vec![b'x'; 5000];
    let big2 = big.clone();
    let server = Server::start(move |req| {
        if req.path == "/props" {
            // No Content-Length: chunked, the cap trips while reading.
            let mut out =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    .to_vec();
            for piece in big2.chunks(700) {
                out.extend(chunk(piece));
            }
            out.extend_from_slice(b"0\r\n\r\n");
            Action::Raw(out)
        } else {
            Action::Raw(response("200 OK", &[], &big2))
        }
    });
    let mut setup = setup_for(server.port);
    setup.max_response_bytes = 1000;
    let mut s = Session::start(setup);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::TooLarge, "{msg}");
    assert!(msg.contains("5000") && msg.contains("1000"), "{msg}");
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Props, vec![], false)));
    assert_eq!(kind, ModelFailure::TooLarge, "{msg}");
    // Exactly at the cap is fine.
    drop(big);
    s.shutdown();
}

#[test]
fn a_body_of_exactly_the_cap_passes() {
    let server = Server::start(|_| Action::Raw(response("200 OK", &[], &[b'y'; 1000])));
    let mut setup = setup_for(server.port);
    setup.max_response_bytes = 1000;
    let mut s = Session::start(setup);
    let (_, _, _, body) = http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(body.len(), 1000);
    s.shutdown();
}

#[test]
fn a_server_that_hangs_times_out() {
    let server = Server::start(|req| {
        if req.path == "/props" {
            // Headers, part of the body, then silence.
            Action::Pieces(vec![
                (
                    Duration::ZERO,
                    b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"n_ctx\"".to_vec(),
                ),
                (Duration::from_secs(20), b"x".to_vec()),
            ])
        } else {
            Action::Hang(Duration::from_secs(20))
        }
    });
    let mut setup = setup_for(server.port);
    setup.request_timeout_secs = 1;
    let mut s = Session::start(setup);
    for endpoint in [ModelEndpoint::Models, ModelEndpoint::Props] {
        let start = Instant::now();
        let (kind, msg) = failed(&s.forward(ModelRequest::new(endpoint, vec![], false)));
        let took = start.elapsed();
        assert_eq!(kind, ModelFailure::Timeout, "{msg}");
        assert!(msg.contains("REQUEST_TIMEOUT"), "{msg}");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
    s.shutdown();
}

#[test]
fn a_server_that_speaks_garbage_is_a_protocol_failure() {
    let server =
        Server::start(|_| Action::Raw(b"SSH-2.0-OpenSSH_9.6\r\nnot http at all\r\n\r\n".to_vec()));
    let mut s = Session::start(setup_for(server.port));
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Protocol, "{msg}");
    assert!(msg.contains("valid HTTP"), "{msg}");
    s.shutdown();
}

#[test]
fn a_server_that_closes_mid_body_is_a_protocol_failure() {
    let server = Server::start(|_| {
        Action::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"partial".to_vec())
    });
    let mut s = Session::start(setup_for(server.port));
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Protocol, "{msg}");
    assert!(msg.contains("broke off"), "{msg}");
    s.shutdown();
}

#[test]
fn connection_refused_asks_whether_the_server_runs() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut s = Session::start(setup_for(port));
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Connect, "{msg}");
    assert!(msg.contains("is the model server running"), "{msg}");
    assert!(msg.contains(&port.to_string()), "{msg}");
    s.shutdown();
}

#[test]
fn a_sse_stream_is_collected_whole() {
    let events: Vec<Vec<u8>> = vec![
        b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n".to_vec(),
        b"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n".to_vec(),
        b": keep-alive comment\n\n".to_vec(),
        b"data: [DONE]\n\n".to_vec(),
    ];
    let expected: Vec<u8> = events.concat();
    let server = Server::start(move |req| {
        assert_eq!(req.headers["accept"], "text/event-stream");
        let mut pieces = vec![(
            Duration::ZERO,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                .to_vec(),
        )];
        for e in &events {
            pieces.push((Duration::from_millis(100), chunk(e)));
        }
        pieces.push((Duration::from_millis(50), b"0\r\n\r\n".to_vec()));
        Action::Pieces(pieces)
    });
    let mut s = Session::start(setup_for(server.port));
    let body = br#"{"model":"m","stream":true,"messages":[]}"#.to_vec();
    let (status, _, ct, got) = http(s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        body,
        true,
    )));
    assert_eq!(status, 200);
    assert_eq!(ct, "text/event-stream");
    assert_eq!(got, expected);
    s.shutdown();
}

#[test]
fn a_stream_is_capped_and_timed_like_any_response() {
    let server = Server::start(|_| {
        let mut pieces = vec![(
            Duration::ZERO,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                .to_vec(),
        )];
        for _ in 0..40 {
            pieces.push((Duration::from_millis(100), chunk(b"data: {\"x\":1}\n\n")));
        }
        Action::Pieces(pieces)
    });
    let mut setup = setup_for(server.port);
    setup.max_response_bytes = 100;
    let mut s = Session::start(setup);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        b"{}".to_vec(),
        true,
    )));
    assert_eq!(kind, ModelFailure::TooLarge, "{msg}");
    s.shutdown();

    let mut setup = setup_for(server.port);
    setup.request_timeout_secs = 1;
    let mut s = Session::start(setup);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        b"{}".to_vec(),
        true,
    )));
    assert_eq!(kind, ModelFailure::Timeout, "{msg}");
    s.shutdown();
}

#[test]
fn any_status_is_returned_with_retry_after_and_redirects_are_not_followed() {
    let server = Server::start(|req| match req.path.as_str() {
        "/v1/models" => Action::Raw(response(
            "429 Too Many Requests",
            &[("Retry-After", "7"), ("Content-Type", "application/json")],
            br#"{"error":"slow down"}"#,
        )),
        "/props" => Action::Raw(response(
            "302 Found",
            &[("Location", "http://127.0.0.1:1/elsewhere")],
            b"",
        )),
        _ => Action::Raw(response("503 Service Unavailable", &[], b"loading model")),
    });
    let mut s = Session::start(setup_for(server.port));
    let (status, retry, ct, body) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!((status, retry), (429, Some(7)));
    assert_eq!(ct, "application/json");
    assert_eq!(body, br#"{"error":"slow down"}"#);
    let (status, retry, ..) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Props, vec![], false)));
    assert_eq!((status, retry), (302, None));
    let (status, _, _, body) = http(s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        b"{}".to_vec(),
        false,
    )));
    assert_eq!((status, body.as_slice()), (503, &b"loading model"[..]));
    s.shutdown();
    assert_eq!(server.seen().len(), 3, "the redirect was followed");
}

#[test]
fn a_server_echoing_the_key_does_not_hand_it_to_the_agent() {
    let server = Server::start(|req| {
        let body = format!(
            r#"{{"error":"Incorrect API key provided: {}"}}"#,
            req.headers["authorization"].trim_start_matches("Bearer ")
        );
        Action::Raw(response("401 Unauthorized", &[], body.as_bytes()))
    });
    let mut s = Session::start(setup_for(server.port));
    let (status, _, _, body) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 401);
    let body = String::from_utf8(body).unwrap();
    assert!(!body.contains(KEY), "{body}");
    assert!(body.contains("sk-2f1...8a9"), "{body}");
    s.shutdown();
}

#[test]
fn a_reply_larger_than_one_datagram_never_kills_the_session() {
    // 1 MiB exceeds the default SO_SNDBUF (~208 KiB). With a channel that
    // fragments large messages it arrives whole; with one datagram per message
    // the agent gets a TooLarge failure that says why. Either way the session
    // goes on.
    let server = Server::start(|req| {
        if req.path == "/props" {
            json_ok("{}")
        } else {
            Action::Raw(response("200 OK", &[], &vec![b'z'; 1 << 20]))
        }
    });
    let mut setup = setup_for(server.port);
    setup.max_response_bytes = 4 << 20;
    let mut s = Session::start(setup);
    match s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)) {
        sysward_ipc::model::ModelReply::Http { status, body, .. } => {
            assert_eq!((status, body.len()), (200, 1 << 20));
            assert!(body.iter().all(|&b| b == b'z'));
        }
        reply => {
            let (kind, msg) = failed(&reply);
            assert_eq!(kind, ModelFailure::TooLarge, "{msg}");
            assert!(msg.contains("does not fit the broker channel"), "{msg}");
        }
    }
    let (status, ..) = http(s.forward(ModelRequest::new(ModelEndpoint::Props, vec![], false)));
    assert_eq!(status, 200);
    s.shutdown();
}

#[test]
fn a_large_reply_passes_when_the_broker_raised_the_buffers() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED a_large_reply_passes_when_the_broker_raised_the_buffers: SO_SNDBUFFORCE needs root");
        return;
    }
    // 3 MiB: fits one datagram once the buffer is forced (Linux refuses a
    // SEQPACKET datagram above ~4 MiB whatever the buffer: ENOBUFS).
    let body = vec![b'q'; 3 << 20];
    let expected = body.clone();
    let server = Server::start(move |_| Action::Raw(response("200 OK", &[], &body)));
    let mut setup = setup_for(server.port);
    setup.max_response_bytes = 64 << 20;
    let mut s = Session::start_forced(setup);
    let (status, _, _, got) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    assert!(got == expected, "3 MiB body altered");
    s.shutdown();
}

#[test]
fn every_resolved_address_is_tried_in_order() {
    // The server listens on 127.0.0.1 only; 127.0.0.2 refuses.
    let server = Server::start(|_| json_ok("{}"));
    let mut setup = setup_for(server.port);
    setup.api_url = format!("http://model.invalid:{}/v1", server.port);
    setup.resolved = vec![
        format!("127.0.0.2:{}", server.port),
        "127.0.0.1".to_string(),
    ];
    let mut s = Session::start(setup);
    let (status, ..) = http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    s.shutdown();
}

#[test]
fn an_ipv6_literal_api_url() {
    let Ok(listener) = TcpListener::bind("[::1]:0") else {
        eprintln!("SKIPPED an_ipv6_literal_api_url: no IPv6 loopback here");
        return;
    };
    let server = Server::start_on(listener, |_| json_ok("{}"));
    let mut setup = setup_for(server.port);
    setup.api_url = format!("http://[::1]:{}/v1", server.port);
    setup.resolved = vec![format!("[::1]:{}", server.port)];
    let mut s = Session::start(setup);
    let (status, ..) = http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    s.shutdown();
    assert_eq!(
        server.seen()[0].headers["host"],
        format!("[::1]:{}", server.port)
    );
}

/// Reads one request head (and a Content-Length body) off `conn`; false at EOF.
fn read_one(conn: &mut std::net::TcpStream) -> bool {
    use std::io::Read;
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return false,
        }
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).is_ok()
}

const KEEP_ALIVE_OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"data\":[]}";

/// A server that answers the first request on a keep-alive connection, then
/// drops that connection when the next request arrives on it (as a restarted
/// server's dead socket does); `fresh` says how new connections are served.
fn restarting_server(fresh_answers: bool) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let conns = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = conns.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let n = counter.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                if n == 0 {
                    if read_one(&mut conn) {
                        let _ = conn.write_all(KEEP_ALIVE_OK);
                    }
                    // The next request on this connection is never answered.
                    let _ = read_one(&mut conn);
                } else if fresh_answers {
                    if read_one(&mut conn) {
                        let _ = conn.write_all(KEEP_ALIVE_OK);
                    }
                } else {
                    let _ = read_one(&mut conn);
                }
                let _ = conn.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (port, conns)
}

#[test]
fn a_restarted_server_is_asked_again_on_a_fresh_connection() {
    let (port, conns) = restarting_server(true);
    let mut s = Session::start(setup_for(port));
    for round in 0..2 {
        let (status, _, _, body) = http(s.forward(ModelRequest::new(
            ModelEndpoint::ChatCompletions,
            CHAT.as_bytes().to_vec(),
            false,
        )));
        assert_eq!(status, 200, "round {round}");
        assert_eq!(body, b"{\"data\":[]}");
    }
    // The first connection served round 0 and died on round 1; round 1 was
    // answered on a second connection.
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 2);
    s.shutdown();
}

#[test]
fn a_server_that_keeps_closing_is_reported_after_one_retry() {
    let (port, conns) = restarting_server(false);
    let mut s = Session::start(setup_for(port));
    let (status, _, _, _) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(status, 200);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Protocol, "{msg}");
    assert!(
        msg.contains("closed the connection before answering, twice"),
        "{msg}"
    );
    // One retry, not more: the dead keep-alive connection and one fresh one.
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 2);
    s.shutdown();
}
