//! A model endpoint for a host with its own network namespace
//! (`network=private` scenarios: firewall and sysctl changes stay in the
//! host). A listener made inside the host's namespace, on the loopback
//! address and port of the endpoint, forwards every connection to the
//! endpoint as this machine reaches it: the host sees the same URL (a host
//! name is mapped to 127.0.0.1 in its /etc/hosts), so TLS names still match.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A running forwarder; dropping it stops accepting.
pub struct Forwarder {
    stop: Arc<AtomicBool>,
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Host and port of an `http(s)://host[:port]/…` URL.
pub fn host_port(url: &str) -> Result<(String, u16)> {
    let (scheme, rest) = url.split_once("://").context("API_URL has no scheme")?;
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        other => bail!("API_URL scheme {other:?}"),
    };
    let authority = rest.split('/').next().unwrap_or("");
    if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6.split_once(']').context("API_URL: bad IPv6 address")?;
        let port = p.strip_prefix(':').map(str::parse).transpose()?;
        return Ok((h.to_string(), port.unwrap_or(default)));
    }
    match authority.rsplit_once(':') {
        Some((h, p)) => Ok((h.to_string(), p.parse().context("API_URL port")?)),
        None => Ok((authority.to_string(), default)),
    }
}

/// A listener bound to 127.0.0.1:`port` inside the network namespace of
/// process `pid`.
fn listen_in(pid: u32, port: u16) -> Result<TcpListener> {
    let ns = File::open(format!("/proc/{pid}/ns/net")).context("the host's network namespace")?;
    // A thread of its own enters the namespace, binds and ends: the socket
    // stays in that namespace, this process's other threads stay in theirs.
    std::thread::spawn(move || -> Result<TcpListener> {
        // SAFETY: setns on a valid namespace descriptor; it changes only the
        // calling thread, which ends right after.
        let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
        if rc != 0 {
            bail!("setns: {}", std::io::Error::last_os_error());
        }
        TcpListener::bind(("127.0.0.1", port))
            .with_context(|| format!("bind 127.0.0.1:{port} in the host"))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the namespace thread panicked"))?
}

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

/// Forwards 127.0.0.1:`port` inside the host (pid 1 = `pid`) to
/// `target:port` as this machine reaches it.
pub fn forward(pid: u32, target: &str, port: u16) -> Result<Forwarder> {
    let listener = listen_in(pid, port)?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let target = target.to_string();
    std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((inside, _)) => {
                    let target = target.clone();
                    std::thread::spawn(move || {
                        let _ = inside.set_nonblocking(false);
                        let Ok(outside) = TcpStream::connect((target.as_str(), port)) else {
                            return;
                        };
                        let (Ok(i2), Ok(o2)) = (inside.try_clone(), outside.try_clone()) else {
                            return;
                        };
                        let up = std::thread::spawn(move || pump(i2, o2));
                        pump(outside, inside);
                        let _ = up.join();
                    });
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    });
    Ok(Forwarder { stop })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::host_port;

    #[test]
    fn urls() {
        assert_eq!(
            host_port("http://127.0.0.1:8080/v1").unwrap(),
            ("127.0.0.1".into(), 8080)
        );
        assert_eq!(
            host_port("https://api.example.com/v1").unwrap(),
            ("api.example.com".into(), 443)
        );
        assert_eq!(host_port("http://[::1]:9/v1").unwrap(), ("::1".into(), 9));
    }
}
