//! HTTPS: only the roots the broker passes are trusted, the certificate must
//! name the API host, and the host is reached through the resolved address.
//! Certificates are made with the `openssl` command at test time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use sysward_ipc::model::{ModelEndpoint, ModelFailure, ModelRequest};

struct Pki {
    dir: PathBuf,
    ca_pem: Vec<u8>,
    other_ca_pem: Vec<u8>,
    server: Arc<rustls::ServerConfig>,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the TLS tests need the `openssl` command (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

fn pki(tag: &str) -> Pki {
    let dir =
        std::env::temp_dir().join(format!("sysward-gateway-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    make_ca(&dir, "ca");
    make_ca(&dir, "other-ca");
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=model.test",
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:model.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(dir.join("leaf.pem"))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("leaf.key")).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    Pki {
        ca_pem: std::fs::read(dir.join("ca.pem")).unwrap(),
        other_ca_pem: std::fs::read(dir.join("other-ca.pem")).unwrap(),
        dir,
        server: Arc::new(server),
    }
}

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
