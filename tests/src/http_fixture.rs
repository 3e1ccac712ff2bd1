//! The small HTTP/1.1 server side the network tests share: read one request,
//! note its path, answer it whole or as an endless-looking stream. Each test
//! keeps its own routes and replies; only the wire work lives here.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Duration;

/// Reads one request's line and headers and returns its path, also pushed
/// onto `seen`; None when the client sent nothing readable.
pub fn read_request(conn: &TcpStream, seen: &Mutex<Vec<String>>) -> Option<String> {
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let mut reader = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
            break;
        }
    }
    if let Ok(mut seen) = seen.lock() {
        seen.push(path.clone());
    }
    Some(path)
}

/// A whole answer with its Content-Length and `headers`.
pub fn respond(conn: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]) {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = conn.write_all(head.as_bytes());
    let _ = conn.write_all(body);
}

/// At least `size` bytes of `a` after `prefix`, without a length, until the
/// client stops reading.
pub fn stream_body(conn: &mut TcpStream, prefix: &[u8], size: usize) {
    if conn.write_all(prefix).is_err() {
        return;
    }
    let chunk = vec![b'a'; 64 << 10];
    let mut sent = 0;
    while sent < size {
        if conn.write_all(&chunk).is_err() {
            return;
        }
        sent += chunk.len();
    }
}
