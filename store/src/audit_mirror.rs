//! The audit anchor mirrored off the log: to the journal (its native
//! protocol, structured fields) or, where there is no journal, to syslog.
//! The journal is written by journald, not by the broker's files, so a
//! rewrite of `audit.log` and `audit.head` together still disagrees with the
//! anchors journald kept (`sysward audit verify --journal`), unless the
//! attacker also rewrites the journal (journald's own sealing, `journalctl
//! --setup-keys`, covers that).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// What `audit verify --journal` found.
pub struct Comparison {
    pub anchors: usize,
    pub problems: Vec<String>,
}

/// One journal field in the native protocol's simple form (no newline in
/// the value: the path and the hex hash have none, others are cleaned).
fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    out.extend(value.bytes().map(|b| if b == b'\n' { b' ' } else { b }));
    out.push(b'\n');
}

/// Mirrors the anchor of `log` (record `seq`, hash `hash`). Says once on
/// stderr when it can go nowhere.
pub fn send(log: &Path, seq: u64, hash: &str) {
    let message = format!("audit head {}: seq {seq} sha256 {hash}", log.display());
    if send_journal(log, seq, hash, &message) || send_syslog(&message) {
        return;
    }
    static TOLD: AtomicBool = AtomicBool::new(false);
    if !TOLD.swap(true, Ordering::SeqCst) {
        eprintln!("sysward: the audit anchor cannot be mirrored: neither {JOURNAL_SOCKET} nor /dev/log exists here");
    }
}

fn send_journal(log: &Path, seq: u64, hash: &str, message: &str) -> bool {
    if !Path::new(JOURNAL_SOCKET).exists() {
        return false;
    }
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return false;
    };
    let mut datagram = Vec::new();
    field(&mut datagram, "MESSAGE", message);
    field(&mut datagram, "PRIORITY", "6");
    field(&mut datagram, "SYSLOG_IDENTIFIER", "sysward");
    field(
        &mut datagram,
        "SYSWARD_AUDIT_LOG",
        &log.display().to_string(),
    );
    field(&mut datagram, "SYSWARD_AUDIT_SEQ", &seq.to_string());
    field(&mut datagram, "SYSWARD_AUDIT_HASH", hash);
    sock.send_to(&datagram, JOURNAL_SOCKET).is_ok()
}

fn send_syslog(message: &str) -> bool {
    if !Path::new("/dev/log").exists() {
        return false;
    }
    let Ok(msg) = std::ffi::CString::new(message.replace('\0', "")) else {
        return false;
    };
    // SAFETY: openlog keeps the ident pointer, so it is a static C string;
    // syslog gets a constant "%s" format and a valid NUL-terminated argument.
    unsafe {
        libc::openlog(c"sysward".as_ptr(), libc::LOG_PID, libc::LOG_AUTHPRIV);
        libc::syslog(libc::LOG_INFO, c"%s".as_ptr(), msg.as_ptr());
    }
    true
}

/// Why the journal's anchors cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("cannot run journalctl (is this host's journal available?)")]
    Run(#[source] std::io::Error),
    #[error("journalctl failed: {0}")]
    Failed(String),
}

/// The anchors the journal holds for `log`: (sequence, hash), oldest first.
pub fn read(log: &Path) -> Result<Vec<(u64, String)>, MirrorError> {
    let out = std::process::Command::new("journalctl")
        .args([
            "--no-pager",
            "-o",
            "json",
            "--output-fields=SYSWARD_AUDIT_SEQ,SYSWARD_AUDIT_HASH",
        ])
        .arg(format!("SYSWARD_AUDIT_LOG={}", log.display()))
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(MirrorError::Run)?;
    if !out.status.success() {
        return Err(MirrorError::Failed(crate::sanitize::one_line(
            &String::from_utf8_lossy(&out.stderr),
            500,
        )));
    }
    let mut anchors = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let seq = entry["SYSWARD_AUDIT_SEQ"]
            .as_str()
            .and_then(|s| s.parse().ok());
        let hash = entry["SYSWARD_AUDIT_HASH"].as_str();
        if let (Some(seq), Some(hash)) = (seq, hash) {
            if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                anchors.push((seq, hash.to_string()));
            }
        }
    }
    Ok(anchors)
}
