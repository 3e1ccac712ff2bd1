//! Test fixtures: a hand-written HTTP/1.1 server on loopback and a broker-side
//! driver for the gateway protocol over a real SEQPACKET pair.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use sysward_gateway::{serve, ServeConfig, ServeError};
use sysward_ipc::gateway::{GatewayAnswer, GatewayRequest, GatewaySetup};
use sysward_ipc::model::{ModelReply, ModelRequest};
use sysward_ipc::{Channel, BUILD_VERSION};

pub const KEY: &str = "sk-2f1test0123456789abcdef8a9";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
}

/// What the server does with a request.
pub enum Action {
    /// Write these bytes, then close.
    Raw(Vec<u8>),
    /// Write each piece after its delay, then close.
    Pieces(Vec<(Duration, Vec<u8>)>),
    /// Keep the connection open and say nothing for this long.
    Hang(Duration),
}

type Handler = dyn Fn(&Seen) -> Action + Send + Sync;

pub struct Server {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub fn start(handler: impl Fn(&Seen) -> Action + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Self::start_on(listener, handler)
    }

    pub fn start_on(
        listener: TcpListener,
        handler: impl Fn(&Seen) -> Action + Send + Sync + 'static,
    ) -> Server {
        Self::start_inner(listener, None, handler)
    }

    /// The same server behind TLS (rustls) with `config`.
    pub fn start_tls(
        config: Arc<rustls::ServerConfig>,
        handler: impl Fn(&Seen) -> Action + Send + Sync + 'static,
    ) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Self::start_inner(listener, Some(config), handler)
    }

    fn start_inner(
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
        handler: impl Fn(&Seen) -> Action + Send + Sync + 'static,
    ) -> Server {
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let handler = handler.clone();
                let seen = seen2.clone();
                let tls = tls.clone();
                std::thread::spawn(move || {
                    conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
                    match tls {
                        None => {
                            let mut conn = conn;
                            handle(&mut conn, &*handler, &seen);
                            let _ = conn.shutdown(Shutdown::Both);
                        }
                        Some(config) => {
                            let Ok(session) = rustls::ServerConnection::new(config) else {
                                return;
                            };
                            let mut stream = rustls::StreamOwned::new(session, conn);
                            handle(&mut stream, &*handler, &seen);
                            stream.conn.send_close_notify();
                            let _ = stream.flush();
                            let _ = stream.sock.shutdown(Shutdown::Both);
                        }
                    }
                });
            }
        });
        Server { port, seen }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn handle<S: Read + Write>(conn: &mut S, handler: &Handler, seen: &Mutex<Vec<Seen>>) {
    let Some(req) = read_request(conn) else {
        return;
    };
    seen.lock().unwrap().push(req.clone());
    match handler(&req) {
        Action::Raw(bytes) => {
            let _ = conn.write_all(&bytes);
        }
        Action::Pieces(pieces) => {
            for (delay, bytes) in pieces {
                std::thread::sleep(delay);
                if conn.write_all(&bytes).is_err() {
                    return;
                }
                let _ = conn.flush();
            }
        }
        Action::Hang(d) => std::thread::sleep(d),
    }
}

fn read_request<S: Read>(conn: &mut S) -> Option<Seen> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
        if buf.len() > 64 << 10 {
            return None;
        }
    }
    let head = String::from_utf8(buf).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let mut headers = HashMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (k, v) = line.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers
        .get("content-length")
        .map(|v| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        path,
        headers,
        body,
    })
}

/// A complete HTTP/1.1 response with Content-Length and `Connection: close`.
pub fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

pub fn json_ok(body: &str) -> Action {
    Action::Raw(response(
        "200 OK",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    ))
}

pub fn setup_for(port: u16) -> GatewaySetup {
    GatewaySetup {
        api_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: KEY.to_string(),
        request_timeout_secs: 5,
        max_response_bytes: 64 << 10,
        resolved: vec![format!("127.0.0.1:{port}")],
        extra_roots_pem: Vec::new(),
        system_roots_pem: Vec::new(),
    }
}

/// The broker's side of a gateway session, with `serve` running on a thread.
pub struct Session {
    pub broker: Channel,
    pub thread: Option<JoinHandle<Result<(), ServeError>>>,
    next_id: u64,
}

impl Session {
    /// Spawns the serve loop; no message sent yet.
    pub fn spawn(config: ServeConfig) -> Session {
        Self::spawn_inner(config, false)
    }

    /// Like [`Session::start`], with both socket buffers forced up to the
    /// gateway limits as the broker does (needs CAP_NET_ADMIN, i.e. root).
    pub fn start_forced(setup: GatewaySetup) -> Session {
        let mut s = Session::spawn_inner(ServeConfig::default(), true);
        s.hello();
        s.send(GatewayRequest::Setup(setup));
        assert_eq!(s.recv(), GatewayAnswer::Ready);
        s
    }

    fn spawn_inner(config: ServeConfig, force: bool) -> Session {
        let (broker, gateway) = Channel::pair().unwrap();
        if force {
            broker
                .force_send_buffer(sysward_ipc::gateway::GATEWAY_REQUEST_MAX)
                .unwrap();
            gateway
                .force_send_buffer(sysward_ipc::gateway::GATEWAY_ANSWER_MAX)
                .unwrap();
        }
        let thread = std::thread::spawn(move || serve(gateway, config));
        Session {
            broker,
            thread: Some(thread),
            next_id: 1,
        }
    }

    /// Hello → Welcome, Setup → Ready.
    pub fn start(setup: GatewaySetup) -> Session {
        let mut s = Session::spawn(ServeConfig::default());
        s.hello();
        s.send(GatewayRequest::Setup(setup));
        match s.recv() {
            GatewayAnswer::Ready => {}
            other => panic!("expected Ready, got {other:?}"),
        }
        s
    }

    pub fn hello(&mut self) {
        self.send(GatewayRequest::Hello {
            build: BUILD_VERSION.to_string(),
        });
        match self.recv() {
            GatewayAnswer::Welcome { build, pid } => {
                assert_eq!(build, BUILD_VERSION);
                assert_eq!(pid, std::process::id());
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
    }

    pub fn send(&self, req: GatewayRequest) {
        self.broker.send(&req).unwrap();
    }

    pub fn recv(&mut self) -> GatewayAnswer {
        assert!(
            self.broker.wait_readable(30_000).unwrap(),
            "no answer from the gateway within 30 s"
        );
        self.broker.recv::<GatewayAnswer>().unwrap()
    }

    pub fn forward(&mut self, request: ModelRequest) -> ModelReply {
        let id = self.next_id;
        self.next_id += 7;
        self.send(GatewayRequest::Forward { id, request });
        match self.recv() {
            GatewayAnswer::Reply { id: got, reply } => {
                assert_eq!(got, id, "reply id");
                reply
            }
            other => panic!("expected Reply, got {other:?}"),
        }
    }

    /// Joins the serve thread and returns its result.
    pub fn finish(mut self) -> Result<(), ServeError> {
        self.thread.take().unwrap().join().unwrap()
    }

    pub fn shutdown(self) {
        self.send(GatewayRequest::Shutdown);
        self.finish().unwrap();
    }
}

/// Expects an `Error` answer and a failed serve loop; returns the message.
pub fn expect_error(mut s: Session) -> String {
    let msg = match s.recv() {
        GatewayAnswer::Error { message } => message,
        other => panic!("expected Error, got {other:?}"),
    };
    let res = s.finish();
    assert!(res.is_err(), "serve should fail after {msg:?}");
    assert!(!msg.contains(KEY), "key leaked in {msg:?}");
    msg
}

pub fn failed(reply: &ModelReply) -> (sysward_ipc::model::ModelFailure, String) {
    match reply {
        ModelReply::Failed { kind, message } => {
            assert!(!message.contains(KEY), "key leaked in {message:?}");
            (*kind, message.clone())
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

pub fn http(reply: ModelReply) -> (u16, Option<u32>, String, Vec<u8>) {
    match reply {
        ModelReply::Http {
            status,
            retry_after,
            content_type,
            body,
        } => (status, retry_after, content_type, body),
        other => panic!("expected Http, got {other:?}"),
    }
}

// ---- PKI for the TLS tests (made with the `openssl` command) ----

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: Vec<u8>,
    pub other_ca_pem: Vec<u8>,
    pub server: Arc<rustls::ServerConfig>,
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

pub fn pki(tag: &str) -> Pki {
    let dir =
        std::env::temp_dir().join(format!("sysward-gateway-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    /// Removes the directory when making the PKI fails part-way (the
    /// finished `Pki` removes it when dropped).
    struct Unfinished(Option<PathBuf>);
    impl Drop for Unfinished {
        fn drop(&mut self) {
            if let Some(dir) = &self.0 {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    let mut unfinished = Unfinished(Some(dir.clone()));
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
    let pki = Pki {
        ca_pem: std::fs::read(dir.join("ca.pem")).unwrap(),
        other_ca_pem: std::fs::read(dir.join("other-ca.pem")).unwrap(),
        dir,
        server: Arc::new(server),
    };
    unfinished.0 = None;
    pki
}
