//! A small, strict HTTP/1.1 server side: request parsing and response writing.
//!
//! Hand-rolled on purpose: the scripted server must be able to send broken replies
//! (truncated bodies, garbage, a closed connection, no reply at all) byte for byte.

use std::io::{self, BufRead, BufReader, Write};
use std::net::TcpStream;

/// Largest request head (request line + headers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// A parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub version: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client wants the connection kept open after this exchange.
    pub fn keep_alive(&self) -> bool {
        let conn = self.header("connection").map(str::to_ascii_lowercase);
        match conn.as_deref() {
            Some(c) if c.split(',').any(|t| t.trim() == "close") => false,
            Some(c) if c.split(',').any(|t| t.trim() == "keep-alive") => true,
            _ => self.version == "HTTP/1.1",
        }
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed before sending anything: not an error.
    Closed,
    /// I/O failure mid-request.
    Io,
    /// Malformed or oversized: answer with this status and message, then close.
    Bad(u16, String),
}

impl From<io::Error> for ReadError {
    fn from(_: io::Error) -> Self {
        ReadError::Io
    }
}

fn read_line_limited<R: BufRead>(r: &mut R, budget: &mut usize) -> Result<String, ReadError> {
    let mut buf = Vec::new();
    loop {
        let available = r.fill_buf()?;
        if available.is_empty() {
            if buf.is_empty() {
                return Err(ReadError::Closed);
            }
            return Err(ReadError::Bad(400, "unexpected end of request head".into()));
        }
        let (used, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if used > *budget {
            return Err(ReadError::Bad(431, "request head too large".into()));
        }
        *budget -= used;
        buf.extend_from_slice(&available[..used]);
        r.consume(used);
        if done {
            break;
        }
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| ReadError::Bad(400, "request head is not UTF-8".into()))
}

/// Read one request. `on_continue` is called when the client sent
/// `Expect: 100-continue` and the body should be requested.
pub fn read_request<R: BufRead>(
    r: &mut R,
    mut on_continue: impl FnMut() -> io::Result<()>,
) -> Result<Request, ReadError> {
    let mut budget = MAX_HEAD;
    // Tolerate stray empty lines before a request line (RFC 9112 §2.2).
    let mut line = read_line_limited(r, &mut budget)?;
    while line.is_empty() {
        line = read_line_limited(r, &mut budget)?;
    }
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() => (m, t, v),
        _ => return Err(ReadError::Bad(400, "malformed request line".into())),
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(ReadError::Bad(505, "HTTP version not supported".into()));
    }
    if !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(ReadError::Bad(400, "malformed method".into()));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), Some(q.to_string())),
        None => (target.to_string(), None),
    };
    let mut headers = Vec::new();
    loop {
        let h = read_line_limited(r, &mut budget)?;
        if h.is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            return Err(ReadError::Bad(400, "malformed header line".into()));
        };
        if k.is_empty() || k.contains(' ') {
            return Err(ReadError::Bad(400, "malformed header name".into()));
        }
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
        if headers.len() > 200 {
            return Err(ReadError::Bad(431, "too many headers".into()));
        }
    }
    let mut req = Request {
        method: method.to_string(),
        path,
        query,
        version: version.to_string(),
        headers,
        body: Vec::new(),
    };
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = match req.header("content-length") {
        None => None,
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| ReadError::Bad(400, "invalid Content-Length".into()))?,
        ),
    };
    if chunked && length.is_some() {
        return Err(ReadError::Bad(
            400,
            "both Content-Length and Transfer-Encoding".into(),
        ));
    }
    if length.is_some_and(|n| n > MAX_BODY) {
        return Err(ReadError::Bad(413, "request body too large".into()));
    }
    let has_body = chunked || length.is_some_and(|n| n > 0);
    if has_body
        && req
            .header("expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        on_continue()?;
    }
    if chunked {
        req.body = read_chunked(r)?;
    } else if let Some(n) = length {
        let mut body = vec![0u8; n];
        r.read_exact(&mut body).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                ReadError::Bad(400, "request body shorter than Content-Length".into())
            } else {
                ReadError::Io
            }
        })?;
        req.body = body;
    }
    Ok(req)
}

fn read_chunked<R: BufRead>(r: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let mut budget = 4096;
        let line = read_line_limited(r, &mut budget).map_err(|e| match e {
            ReadError::Closed => ReadError::Bad(400, "truncated chunked body".into()),
            other => other,
        })?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Bad(400, "invalid chunk size".into()))?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut budget = MAX_HEAD;
                let t = read_line_limited(r, &mut budget).map_err(|e| match e {
                    ReadError::Closed => ReadError::Bad(400, "truncated chunked body".into()),
                    other => other,
                })?;
                if t.is_empty() {
                    return Ok(body);
                }
            }
        }
        if body.len().saturating_add(size) > MAX_BODY {
            return Err(ReadError::Bad(413, "request body too large".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])
            .map_err(|_| ReadError::Bad(400, "truncated chunked body".into()))?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)
            .map_err(|_| ReadError::Bad(400, "truncated chunked body".into()))?;
        if &crlf != b"\r\n" {
            return Err(ReadError::Bad(400, "chunk not followed by CRLF".into()));
        }
    }
}

/// Reason phrase for the statuses the server uses.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Status",
    }
}

/// The head of a response with a known body length.
pub fn response_head(
    status: u16,
    content_type: &str,
    content_length: usize,
    extra: &[(String, String)],
    keep_alive: bool,
) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {content_length}\r\nServer: sysward-scripted-model\r\n",
        reason(status)
    );
    for (k, v) in extra {
        if valid_header(k, v) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    head.into_bytes()
}

/// Header names/values a scenario supplies must not smuggle CR/LF.
fn valid_header(k: &str, v: &str) -> bool {
    !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && !v.bytes().any(|b| b == b'\r' || b == b'\n')
}

/// Write a complete response.
pub fn write_response(
    w: &mut impl Write,
    status: u16,
    content_type: &str,
    body: &[u8],
    extra: &[(String, String)],
    keep_alive: bool,
) -> io::Result<()> {
    let mut out = response_head(status, content_type, body.len(), extra, keep_alive);
    out.extend_from_slice(body);
    w.write_all(&out)?;
    w.flush()
}

/// Writer for a `Transfer-Encoding: chunked` body.
pub struct Chunked<'a> {
    pub stream: &'a mut TcpStream,
}

impl Chunked<'_> {
    pub fn start<'s>(
        stream: &'s mut TcpStream,
        status: u16,
        content_type: &str,
        keep_alive: bool,
    ) -> io::Result<Chunked<'s>> {
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nServer: sysward-scripted-model\r\nConnection: {}\r\n\r\n",
            reason(status),
            if keep_alive { "keep-alive" } else { "close" }
        );
        stream.write_all(head.as_bytes())?;
        stream.flush()?;
        Ok(Chunked { stream })
    }

    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.stream.write_all(&out)?;
        self.stream.flush()
    }

    pub fn finish(self) -> io::Result<()> {
        self.stream.write_all(b"0\r\n\r\n")?;
        self.stream.flush()
    }
}

/// Convenience for the connection loop.
pub fn buffered(stream: TcpStream) -> BufReader<TcpStream> {
    BufReader::with_capacity(16 * 1024, stream)
}
