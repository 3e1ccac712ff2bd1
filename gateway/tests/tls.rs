//! HTTPS: only the roots the broker passes are trusted, the certificate must
//! name the API host, and the host is reached through the resolved address.
//! Certificates are made with the `openssl` command at test time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use sysward_ipc::model::{ModelEndpoint, ModelFailure, ModelRequest};

fn https_setup(port: u16, host: &str) -> sysward_ipc::gateway::GatewaySetup {
    let mut setup = setup_for(port);
    setup.api_url = format!("https://{host}:{port}/v1");
    setup
}

#[test]
fn https_with_the_servers_root_in_the_extra_roots() {
    let pki = pki("ok");
    let server = Server::start_tls(pki.server.clone(), |_| json_ok(r#"{"data":[]}"#));
    let mut setup = https_setup(server.port, "model.test");
    setup.extra_roots_pem = pki.ca_pem.clone();
    // Unrelated system roots are accepted alongside.
    setup.system_roots_pem = pki.other_ca_pem.clone();
    let mut s = Session::start(setup);
    let (status, _, _, body) =
        http(s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!((status, body.as_slice()), (200, &br#"{"data":[]}"#[..]));
    let (status, ..) = http(s.forward(ModelRequest::new(
        ModelEndpoint::ChatCompletions,
        b"{}".to_vec(),
        false,
    )));
    assert_eq!(status, 200);
    s.shutdown();
    let seen = server.seen();
    assert_eq!(seen[0].path, "/v1/models");
    assert_eq!(seen[0].headers["authorization"], format!("Bearer {KEY}"));
    assert_eq!(
        seen[0].headers["host"],
        format!("model.test:{}", server.port)
    );
}

#[test]
fn https_with_an_untrusted_certificate_fails_before_sending_anything() {
    let pki = pki("untrusted");
    let server = Server::start_tls(pki.server.clone(), |_| json_ok("{}"));
    let mut setup = https_setup(server.port, "model.test");
    setup.system_roots_pem = pki.other_ca_pem.clone();
    let mut s = Session::start(setup);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Protocol, "{msg}");
    assert!(msg.contains("TLS") && msg.contains("extra roots"), "{msg}");
    s.shutdown();
    assert!(
        server.seen().is_empty(),
        "the request (and key) went to an untrusted server"
    );
}

#[test]
fn https_to_a_name_the_certificate_does_not_carry_fails() {
    let pki = pki("name");
    let server = Server::start_tls(pki.server.clone(), |_| json_ok("{}"));
    let mut setup = https_setup(server.port, "other.test");
    setup.extra_roots_pem = pki.ca_pem.clone();
    let mut s = Session::start(setup);
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert_eq!(kind, ModelFailure::Protocol, "{msg}");
    s.shutdown();
    assert!(server.seen().is_empty());
}

#[test]
fn plain_http_to_a_tls_server_is_a_protocol_failure() {
    let pki = pki("plain");
    let server = Server::start_tls(pki.server.clone(), |_| json_ok("{}"));
    let mut s = Session::start(setup_for(server.port));
    let (kind, msg) = failed(&s.forward(ModelRequest::new(ModelEndpoint::Models, vec![], false)));
    assert!(matches!(kind, ModelFailure::Protocol), "{kind:?}: {msg}");
    s.shutdown();
}
