//! One model request → one HTTP(S) exchange with exactly the configured server.
//!
//! The three target URLs are computed once from `API_URL` when the gateway is
//! set up; a request only chooses among them, so nothing the agent sends can
//! change the scheme, host, port or path that is contacted.

use crate::retry_after;
use crate::secret::{mask, scrub};
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Certificate, Client, Method, Url};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use sysward_ipc::gateway::{GatewaySetup, GATEWAY_ANSWER_MAX};
use sysward_ipc::model::{ModelEndpoint, ModelFailure, ModelReply, ModelRequest};

/// The largest response body the channel can carry back (an answer frame holds
/// the body plus at most 64 KiB of header, status and content type).
pub const MAX_RESPONSE_LIMIT: u64 = (GATEWAY_ANSWER_MAX - (64 << 10)) as u64;

/// Longest `Content-Type` passed back; anything longer is cut.
const CONTENT_TYPE_MAX: usize = 256;

/// A setup the gateway refuses. The message never contains the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "gateway setup refused: {}", self.0)
    }
}

impl std::error::Error for SetupError {}

fn bad(msg: impl Into<String>) -> SetupError {
    SetupError(msg.into())
}

/// A configured gateway: one HTTP client bound to one server.
pub struct Gateway {
    client: Client,
    api_url: String,
    /// `host:port` as the operator wrote it, for messages.
    target: String,
    models_url: Url,
    props_url: Url,
    chat_url: Url,
    timeout: Duration,
    max_response: u64,
    /// Kept only to scrub it out of error text.
    key: String,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("api_url", &self.api_url)
            .field("api_key", &mask(&self.key))
            .field("timeout", &self.timeout)
            .field("max_response", &self.max_response)
            .finish()
    }
}

/// A resolver for every name `resolve_to_addrs` does not cover: it refuses, so
/// the gateway never performs a DNS lookup (no resolv.conf, no DNS socket).
struct NoDns;

impl reqwest::dns::Resolve for NoDns {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let msg = format!(
            "the gateway does no DNS; {:?} is not the configured API host",
            name.as_str()
        );
        Box::pin(async move { Err(msg.into()) })
    }
}

impl Gateway {
    /// Validates `setup` and builds the client. Must be called inside a tokio
    /// runtime context.
    pub fn new(setup: &GatewaySetup) -> Result<Gateway, SetupError> {
        let key = setup.api_key.clone();
        Self::build(setup).map_err(|e| SetupError(scrub(&e.0, &key)))
    }

    fn build(setup: &GatewaySetup) -> Result<Gateway, SetupError> {
        let url = Url::parse(setup.api_url.trim()).map_err(|e| {
            // A URL with '@' may carry a password: never echo it.
            let shown = if setup.api_url.contains('@') {
                "(not shown: it contains '@')".to_string()
            } else {
                format!("{:?}", setup.api_url)
            };
            bad(format!(
                "API_URL {shown} is not a URL ({e}); write it like http://127.0.0.1:8080/v1"
            ))
        })?;
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(bad(format!(
                    "API_URL scheme {other:?} is not supported; use http:// or https://"
                )))
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad(
                "API_URL carries credentials; remove them from the URL and set API_KEY instead",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "API_URL has a query or fragment; it must be the API prefix only, e.g. http://host:8080/v1",
            ));
        }
        let host_str = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("API_URL has no host"))?
            .to_string();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| bad("API_URL has no port"))?;
        // An IP literal (IPv6 in brackets) or a domain name.
        let literal_ip = host_str
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .ok();
        let target = format!("{host_str}:{port}");

        if setup.request_timeout_secs == 0 {
            return Err(bad("REQUEST_TIMEOUT must be at least 1 second"));
        }
        if setup.max_response_bytes == 0 || setup.max_response_bytes > MAX_RESPONSE_LIMIT {
            return Err(bad(format!(
                "the response cap must be between 1 and {MAX_RESPONSE_LIMIT} bytes (64 MiB), got {}",
                setup.max_response_bytes
            )));
        }

        // Addresses: the broker resolved the host; the gateway resolves nothing.
        let mut addrs = Vec::with_capacity(setup.resolved.len());
        for entry in &setup.resolved {
            let addr = parse_addr(entry, port).map_err(bad)?;
            if !addrs.contains(&addr) {
                addrs.push(addr);
            }
        }
        match literal_ip {
            Some(ip) => {
                if addrs.iter().any(|a| a.ip() != ip) {
                    return Err(bad(format!(
                        "API_URL names the address {ip} but the broker resolved it to {}",
                        list(&addrs)
                    )));
                }
            }
            None => {
                if addrs.is_empty() {
                    return Err(bad(format!(
                        "no resolved address for {host_str:?}: the broker must resolve the API host \
                         and pass its addresses (the gateway does no DNS)"
                    )));
                }
            }
        }

        // Trust roots: only what the broker passed; nothing is read from /etc.
        let mut roots = load_roots("system roots", &setup.system_roots_pem, true)?;
        roots.extend(load_roots("extra roots", &setup.extra_roots_pem, false)?);
        if https && roots.is_empty() {
            return Err(bad(
                "API_URL is https but no trust roots were passed: the broker must send the system \
                 roots (e.g. /etc/ssl/certs/ca-certificates.crt) and/or the extra roots file",
            ));
        }

        let mut headers = HeaderMap::new();
        if !setup.api_key.is_empty() {
            if !setup.api_key.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(bad(
                    "API_KEY contains spaces, control or non-ASCII characters; check the secret's value",
                ));
            }
            let mut value = HeaderValue::from_str(&format!("Bearer {}", setup.api_key))
                .map_err(|_| bad("API_KEY cannot be sent as a header"))?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }

        let timeout = Duration::from_secs(u64::from(setup.request_timeout_secs));
        let mut builder = Client::builder()
            .user_agent(concat!("sysward/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .referer(false)
            .http1_only()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(2)
            .dns_resolver(Arc::new(NoDns))
            .tls_certs_only(roots)
            .tls_sni(true);
        if literal_ip.is_none() {
            builder = builder.resolve_to_addrs(&host_str, &addrs);
        }
        let client = builder
            .build()
            .map_err(|e| bad(format!("cannot build the HTTP client: {}", chain(&e))))?;

        let base = url.path().trim_end_matches('/').to_string();
        let mut models_url = url.clone();
        models_url.set_path(&format!("{base}/{}", ModelEndpoint::Models.path()));
        let mut chat_url = url.clone();
        chat_url.set_path(&format!("{base}/{}", ModelEndpoint::ChatCompletions.path()));
        let mut props_url = url.clone();
        props_url.set_path(ModelEndpoint::Props.path());

        Ok(Gateway {
            client,
            api_url: url.to_string(),
            target,
            models_url,
            props_url,
            chat_url,
            timeout,
            max_response: setup.max_response_bytes,
            key: setup.api_key.clone(),
        })
    }

    /// The URL a request for `endpoint` goes to.
    pub fn url_of(&self, endpoint: ModelEndpoint) -> &Url {
        match endpoint {
            ModelEndpoint::Models => &self.models_url,
            ModelEndpoint::Props => &self.props_url,
            ModelEndpoint::ChatCompletions => &self.chat_url,
        }
    }

    /// Forwards one request. Never panics, never returns the key; every failure
    /// is a [`ModelReply::Failed`] whose message says what to do.
    pub async fn forward(&self, request: ModelRequest) -> ModelReply {
        if let Err(why) = request.check() {
            return failed(
                ModelFailure::Refused,
                format!(
                    "refused: {why}; the gateway forwards only GET {{API_URL}}/models, GET /props \
                     and POST {{API_URL}}/chat/completions"
                ),
            );
        }
        let url = self.url_of(request.endpoint).clone();
        let reply = match tokio::time::timeout(self.timeout, self.exchange_retrying(&request, &url))
            .await
        {
            Ok(reply) => reply,
            Err(_) => self.timed_out(&url),
        };
        match reply {
            ModelReply::Failed { kind, message } => ModelReply::Failed {
                kind,
                message: scrub(&message, &self.key),
            },
            http => http,
        }
    }

    /// One exchange, repeated once on a fresh connection when the server
    /// closed the connection before any answer: a restarted server leaves the
    /// pooled keep-alive connection dead, and the first request on it fails
    /// at once. The request never reached a model, so sending it again is safe.
    async fn exchange_retrying(&self, request: &ModelRequest, url: &Url) -> ModelReply {
        match self.exchange(request, url).await {
            Exchanged::Reply(reply) => reply,
            Exchanged::Closed(_) => match self.exchange(request, url).await {
                Exchanged::Reply(reply) => reply,
                Exchanged::Closed(detail) => failed(
                    ModelFailure::Protocol,
                    format!(
                        "the model server at {} closed the connection before answering, twice, \
                         the second time on a fresh connection ({detail}); it may be restarting \
                         or crashing — check its log",
                        self.target
                    ),
                ),
            },
        }
    }

    async fn exchange(&self, request: &ModelRequest, url: &Url) -> Exchanged {
        let method = match request.endpoint.method() {
            "POST" => Method::POST,
            _ => Method::GET,
        };
        let accept = if request.stream {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut rb = self
            .client
            .request(method.clone(), url.clone())
            .header(header::ACCEPT, accept);
        if method == Method::POST {
            rb = rb
                .header(header::CONTENT_TYPE, "application/json")
                .body(request.body.clone());
        }
        let mut resp = match rb.send().await {
            Ok(r) => r,
            Err(e) if closed_before_answer(&e) => return Exchanged::Closed(chain(&e)),
            Err(e) => return Exchanged::Reply(self.classify(&e, url, false)),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after::parse(v, SystemTime::now()));
        let content_type = resp
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .map(|s| sysward_ipc::model::truncate(&s, CONTENT_TYPE_MAX).to_string())
            .unwrap_or_default();
        if let Some(len) = resp.content_length() {
            if len > self.max_response {
                return Exchanged::Reply(self.too_large(url, Some(len)));
            }
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if (body.len() as u64).saturating_add(chunk.len() as u64) > self.max_response {
                        return Exchanged::Reply(self.too_large(url, None));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Exchanged::Reply(self.classify(&e, url, true)),
            }
        }
        Exchanged::Reply(ModelReply::Http {
            status,
            retry_after,
            content_type: scrub(&content_type, &self.key),
            body: scrub_bytes(body, &self.key),
        })
    }

    fn timed_out(&self, url: &Url) -> ModelReply {
        failed(
            ModelFailure::Timeout,
            format!(
                "no complete answer from {url} within REQUEST_TIMEOUT ({} s); check that the model \
                 server is not stuck or overloaded, or raise REQUEST_TIMEOUT in init.conf",
                self.timeout.as_secs()
            ),
        )
    }

    fn too_large(&self, url: &Url, announced: Option<u64>) -> ModelReply {
        let what = match announced {
            Some(n) => format!("announces {n} bytes"),
            None => "grew past the cap".to_string(),
        };
        failed(
            ModelFailure::TooLarge,
            format!(
                "the response from {url} {what}; the limit is {} bytes — ask for a shorter answer \
                 (max_tokens) or check that API_URL points at the model API",
                self.max_response
            ),
        )
    }

    /// Maps a reqwest error onto a failure kind and a message that says what to do.
    fn classify(&self, e: &reqwest::Error, url: &Url, in_body: bool) -> ModelReply {
        let detail = chain(e);
        if e.is_timeout() || has_io_kind(e, std::io::ErrorKind::TimedOut) {
            return self.timed_out(url);
        }
        if has_io_kind(e, std::io::ErrorKind::ConnectionRefused) {
            return failed(
                ModelFailure::Connect,
                format!(
                    "connection refused by {}: is the model server running at {}?",
                    self.target, self.api_url
                ),
            );
        }
        if e.is_connect() {
            let lower = detail.to_ascii_lowercase();
            if lower.contains("certificate")
                || lower.contains("tls")
                || lower.contains("handshake")
                || lower.contains("alert")
            {
                return failed(
                    ModelFailure::Protocol,
                    format!(
                        "TLS with {} failed ({detail}); the server's certificate must be valid for \
                         the API host and issued by a trusted root — for a self-signed server add \
                         its certificate to the extra roots",
                        self.target
                    ),
                );
            }
            if has_io_kind(e, std::io::ErrorKind::PermissionDenied) {
                return failed(
                    ModelFailure::Connect,
                    format!(
                        "connecting to {} was denied ({detail}); the gateway's sandbox allows only \
                         the API port — check that the broker confined it to the port of API_URL",
                        self.target
                    ),
                );
            }
            return failed(
                ModelFailure::Connect,
                format!(
                    "cannot connect to {} ({detail}); is the model server running and reachable at {}?",
                    self.target, self.api_url
                ),
            );
        }
        if in_body {
            return failed(
                ModelFailure::Protocol,
                format!(
                    "the response from {url} broke off ({detail}); the model server may have \
                     crashed or closed the connection — check its log"
                ),
            );
        }
        failed(
            ModelFailure::Protocol,
            format!(
                "the server at {} did not answer with valid HTTP ({detail}); check that API_URL \
                 names the model server and the right scheme (http:// or https://)",
                self.target
            ),
        )
    }
}

/// Keys shorter than this are not searched for in response bodies: masking
/// every occurrence of a short string would corrupt ordinary text.
pub const SCRUB_BODY_MIN_KEY: usize = 8;

/// A server that echoes the key (some print it in an "invalid key" error) must
/// not hand it to the agent: every occurrence in the body is masked.
fn scrub_bytes(body: Vec<u8>, key: &str) -> Vec<u8> {
    let key = key.as_bytes();
    if key.len() < SCRUB_BODY_MIN_KEY || body.len() < key.len() {
        return body;
    }
    if !body.windows(key.len()).any(|w| w == key) {
        return body;
    }
    let masked = mask(&String::from_utf8_lossy(key));
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i..].starts_with(key) {
            out.extend_from_slice(masked.as_bytes());
            i += key.len();
        } else {
            out.push(body[i]);
            i += 1;
        }
    }
    out
}

/// What one exchange came to.
enum Exchanged {
    Reply(ModelReply),
    /// The connection closed before a status line arrived (the detail).
    Closed(String),
}

/// Whether the server closed (or reset) the connection before it sent any
/// answer: hyper's "connection closed before message completed", a reset or
/// a broken pipe while the request was written.
fn closed_before_answer(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() {
        return false;
    }
    let detail = chain(e).to_ascii_lowercase();
    detail.contains("connection closed before message completed")
        || has_io_kind(e, std::io::ErrorKind::ConnectionReset)
        || has_io_kind(e, std::io::ErrorKind::BrokenPipe)
        || has_io_kind(e, std::io::ErrorKind::UnexpectedEof)
}

fn failed(kind: ModelFailure, message: String) -> ModelReply {
    ModelReply::Failed { kind, message }
}

/// Reads a PEM bundle into trust anchors. A certificate rustls cannot use as a
/// root is skipped in the system bundle (`lenient`: one odd entry must not
/// break every session) and refused in the operator's extra roots.
fn load_roots(what: &str, pem: &[u8], lenient: bool) -> Result<Vec<Certificate>, SetupError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::CertificateDer;
    if pem.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Vec::new());
    }
    let mut roots = Vec::new();
    for (i, item) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let der = item.map_err(|e| {
            bad(format!(
                "cannot read the {what} PEM bundle at certificate {}: {e}",
                i + 1
            ))
        })?;
        match webpki::anchor_from_trusted_cert(&der) {
            Ok(_) => roots.push(
                Certificate::from_der(&der)
                    .map_err(|e| bad(format!("certificate {} of the {what}: {e}", i + 1)))?,
            ),
            Err(_) if lenient => {}
            Err(e) => {
                return Err(bad(format!(
                    "certificate {} of the {what} is not a usable root certificate ({e}); \
                     check the PEM file",
                    i + 1
                )))
            }
        }
    }
    if roots.is_empty() {
        return Err(bad(format!(
            "the {what} PEM bundle holds no usable certificate"
        )));
    }
    Ok(roots)
}

/// `ip:port`, `[v6]:port` or a bare IP (then the API port). A port other than
/// the API port is refused: the gateway may connect to that port only.
fn parse_addr(entry: &str, port: u16) -> Result<SocketAddr, String> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let addr = entry.parse::<SocketAddr>().map_err(|_| {
        format!("resolved address {entry:?} is not ip:port; the broker must pass numeric addresses")
    })?;
    if addr.port() != port {
        return Err(format!(
            "resolved address {addr} has port {} but API_URL's port is {port}",
            addr.port()
        ));
    }
    Ok(addr)
}

fn list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The error and its sources, deduplicated, joined with ": ".
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    sysward_ipc::model::truncate(&parts.join(": "), 1000).to_string()
}

fn has_io_kind(e: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == kind {
                return true;
            }
        }
        cur = err.source();
    }
    false
}
