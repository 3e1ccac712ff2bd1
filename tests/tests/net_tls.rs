//! https through the network executor, as root, against a TLS server on
//! loopback with a CA this test makes (the `openssl` command): trusted only
//! through the policy's NETWORK_EXTRA_ROOTS, its certificate shown by
//! probe_http, a download over https placed, and a redirect from it down to
//! plain http refused (for web_fetch and download alike).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use sysward_tests::*;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("this test needs the `openssl` command");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a leaf for IP 127.0.0.1 signed by it; returns the CA file and
/// the server configuration.
fn pki(dir: &Path) -> (PathBuf, Arc<rustls::ServerConfig>) {
    std::fs::create_dir_all(dir).unwrap();
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
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=sysward test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    openssl(
        dir,
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
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
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
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    (dir.join("ca.pem"), Arc::new(config))
}

/// Serves `/page` and `/down` (a redirect to plain http on `plain_port`).
fn tls_server(config: Arc<rustls::ServerConfig>, plain_port: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let Ok(session) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(session, conn);
                let path = {
                    let mut reader = BufReader::new(&mut stream);
                    let mut line = String::new();
                    if reader.read_line(&mut line).is_err() {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                            break;
                        }
                    }
                    line.split_whitespace().nth(1).unwrap_or("/").to_string()
                };
                let reply = match path.as_str() {
                    "/page" => {
                        let body = "<html><body><p>secure page</p></body></html>";
                        format!("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())
                    }
                    "/down" => format!("HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:{plain_port}/notes.txt\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
                    _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string(),
                };
                let _ = stream.write_all(reply.as_bytes());
                stream.conn.send_close_notify();
                let _ = stream.flush();
            });
        }
    });
    port
}

/// Runs the steps; returns each step's result and what the project's
/// downloads directory holds afterwards.
fn run(name: &str, policy: &str, steps: Vec<serde_json::Value>) -> (Vec<String>, Vec<String>) {
    ensure_accounts();
    let p = TestProject::new(name);
    let run = run_scripted_with(&p, steps, policy, "Check the site.", 20, "");
    let mut downloads: Vec<String> = std::fs::read_dir(p.path(".agent/downloads"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    downloads.sort();
    (run.results, downloads)
}

#[test]
fn https_with_the_operators_ca_and_never_down_to_http() {
    if !require_root("https_with_the_operators_ca") {
        return;
    }
    if !bin_dir().join("sysward-net").exists() {
        eprintln!("skipped: sysward-net is not built (cargo build --workspace --bins)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sysward-net-tls-{}", std::process::id()));
    use sysward_testdir::RemoveOnDrop;
    let _cleanup = RemoveOnDrop(dir.clone());
    let (ca, config) = pki(&dir);
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    plain.set_nonblocking(true).unwrap();
    let plain_port = plain.local_addr().unwrap().port();
    let port = tls_server(config, plain_port);
    let base = format!("https://127.0.0.1:{port}");
    let policy = |roots: &str| {
        format!("ALLOW_NETWORK=true\nALLOW_WEB_RESEARCH=true\nALLOW_DOWNLOADS=true\nNETWORK_ALLOW=127.0.0.1\n{roots}")
    };
    let (with_ca, downloaded) = run(
        "nettls",
        &policy(&format!("NETWORK_EXTRA_ROOTS={}", ca.display())),
        vec![
            tool_call(
                "web_fetch",
                serde_json::json!({"url": format!("{base}/page")}),
            ),
            tool_call(
                "probe_http",
                serde_json::json!({"url": format!("{base}/page")}),
            ),
            tool_call(
                "web_fetch",
                serde_json::json!({"url": format!("{base}/down")}),
            ),
            tool_call(
                "download",
                serde_json::json!({"url": format!("{base}/page"), "path": ".agent/downloads/page.html"}),
            ),
            tool_call(
                "download",
                serde_json::json!({"url": format!("{base}/down"), "path": ".agent/downloads/down.txt"}),
            ),
        ],
    );
    let (without_ca, _) = run(
        "nettlsnoca",
        &policy(""),
        vec![tool_call(
            "web_fetch",
            serde_json::json!({"url": format!("{base}/page")}),
        )],
    );
    let _ = std::fs::remove_dir_all(&dir);
    let mut wrong = Vec::new();
    let mut check = |cond: bool, what: &str, shown: &str| {
        println!("  {} {what}", if cond { "ok  " } else { "FAIL" });
        if !cond {
            wrong.push(format!("{what}:\n{shown}"));
        }
    };
    check(
        with_ca[0].contains("UNTRUSTED WEB CONTENT from https://127.0.0.1")
            && with_ca[0].contains("secure page"),
        "an https page arrives with the operator's CA",
        &with_ca[0],
    );
    check(
        with_ca[1].contains("tls certificate subject: CN=127.0.0.1")
            && with_ca[1].contains("issuer: CN=sysward test CA")
            && with_ca[1].contains("days left"),
        "probe_http shows the certificate's subject, issuer and expiry",
        &with_ca[1],
    );
    check(
        with_ca[2].contains("https to plain http") && with_ca[2].contains("status=\"error\""),
        "a redirect from https to http is refused",
        &with_ca[2],
    );
    check(
        with_ca[3].contains("DATA FROM THE NETWORK: a download from https://127.0.0.1")
            && with_ca[3].contains("content type: text/html"),
        "an https download arrives with the operator's CA",
        &with_ca[3],
    );
    check(
        with_ca[4].contains("https to plain http") && with_ca[4].contains("status=\"error\""),
        "a download redirected from https to http is refused",
        &with_ca[4],
    );
    check(
        downloaded == ["page.html"],
        "only the https download is on disk, no temporary file",
        &format!("{downloaded:?}"),
    );
    check(
        plain.accept().is_err(),
        "the plain http server was never contacted",
        "",
    );
    check(
        without_ca[0].to_lowercase().contains("certificate")
            && !without_ca[0].contains("secure page"),
        "without the operator's CA the certificate is refused",
        &without_ca[0],
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n---\n"));
}
