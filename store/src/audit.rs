//! The audit trail: append-only JSON lines, 0600 root, each record carrying a
//! sequence number, RFC 3339 time, the previous record's SHA-256 and its own.
//! The chain is verified on open; a broken chain refuses new sessions.

use crate::project::sha256_hex;
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read as _, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Hash of "no previous record".
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";
/// One audit line is at most this long; the chain verifier refuses longer ones.
const MAX_LINE: usize = 64 << 20;

/// Longest string kept whole in a record; a longer one keeps its head, its
/// length and its SHA-256. A model reply can carry 40 MiB, which shell
/// quoting and JSON escaping would grow past MAX_LINE; bounded here, no record
/// can lock later sessions out or fill the disk.
pub const FIELD_MAX: usize = 64 << 10;
/// The cap when a record with many long fields is still over RECORD_MAX.
const FIELD_MAX_TIGHT: usize = 4 << 10;
/// Largest record before the tight cap applies (well under MAX_LINE).
pub const RECORD_MAX: usize = 4 << 20;

/// Replaces, in place, every string of `value` longer than `max` bytes by its
/// head and `… [cut by the audit: N bytes in all, sha256 H]`. In place: a
/// record with nothing to cut (nearly all) is walked, not rebuilt.
pub fn bound_strings(value: &mut Value, max: usize) {
    match value {
        Value::String(s) if s.len() > max => {
            let mut end = max.min(s.len()) / 2;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            *s = format!(
                "{}… [cut by the audit: {} bytes in all, sha256 {}]",
                &s[..end],
                s.len(),
                sha256_hex(s.as_bytes())
            );
        }
        Value::Array(a) => a.iter_mut().for_each(|v| bound_strings(v, max)),
        Value::Object(o) => o.values_mut().for_each(|v| bound_strings(v, max)),
        _ => {}
    }
}

#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    head_path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    file: File,
    seq: u64,
    last_hash: String,
    /// Length of the log after our last write: a different length means
    /// another process (e.g. `sysward approve` beside the daemon) appended.
    len: u64,
    /// A record was written without fdatasync (see [`Audit::record_lazy`]).
    unsynced: bool,
    /// The session whose `session_end` is not in the log yet.
    open_session: Option<(String, u64)>,
    /// Why the last append failed, until a session start reports it.
    last_failure: Option<String>,
    /// Forward-secure sealing, once set up (see [`crate::seal`]).
    sealer: Option<crate::seal::Sealer>,
}

/// Why the audit log cannot be read, verified or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("cannot lock the audit log")]
    Lock(#[source] std::io::Error),
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the audit anchor {}", .path.display())]
    OpenAnchor {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the audit anchor {} is not a regular file", .0.display())]
    AnchorNotAFile(PathBuf),
    #[error("the audit head anchor {} is unreadable", .0.display())]
    AnchorUnreadable(PathBuf),
    #[error(
        "the audit log {} is broken at record {line}: {problem}. New sessions are refused until an operator inspects it with `sysward audit verify` and acknowledges the break with `sysward audit verify --acknowledge`",
        .path.display()
    )]
    Broken {
        path: PathBuf,
        line: u64,
        problem: String,
    },
    #[error("cannot open the audit log {}", .path.display())]
    OpenLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the audit log {} is readable or writable by others: chmod 600 it", .0.display())]
    OpenToOthers(PathBuf),
    #[error("audit state poisoned")]
    Poisoned,
    #[error("cannot move the audit seal to its next epoch")]
    SealAdvance(#[source] crate::seal::SealError),
    #[error("the audit log changed under this process and is broken at record {line}: {problem}")]
    ChangedBroken { line: u64, problem: String },
    #[error(
        "cannot append to the audit log {} (the log was cut back to its last complete record)",
        .path.display()
    )]
    Append {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the audit writer")]
    Writer(#[source] std::io::Error),
    #[error("cannot move {} aside", .path.display())]
    MoveAside {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Seal(#[from] crate::seal::SealError),
    #[error(transparent)]
    Mirror(#[from] crate::audit_mirror::MirrorError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T, E = AuditError> = std::result::Result<T, E>;

/// Holds an exclusive flock on the log for one read-modify-append, so several
/// processes can append to one chain.
/// It holds the descriptor's number, not a borrow: the log's file lives in
/// the state the caller holds locked, beside the records it appends.
struct LogLock(std::os::fd::RawFd);

impl LogLock {
    fn take(file: &File) -> Result<LogLock> {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on an fd we own; no memory is passed.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(LogLock(file.as_raw_fd()));
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(AuditError::Lock(err));
            }
        }
    }
}

impl Drop for LogLock {
    fn drop(&mut self) {
        // SAFETY: unlocking the log's fd, which outlives this guard (the
        // state that owns it stays locked meanwhile).
        unsafe {
            libc::flock(self.0, libc::LOCK_UN);
        }
    }
}

/// Where verification stopped and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    pub line: u64,
    pub problem: String,
}

/// Result of walking the whole chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub records: u64,
    pub last_hash: String,
    pub first_break: Option<ChainBreak>,
    /// The last session that started and has no `session_end` (a crash, a
    /// kill or a full disk cut its record short), with the sequence of its
    /// last record.
    pub unfinished: Option<(String, u64)>,
}

/// A session's start or end, as a record says.
enum SessionMark {
    Start(String),
    End(String),
}

fn session_mark(record: &Map<String, Value>) -> Option<SessionMark> {
    let event = record.get("event")?;
    let id = event.get("session")?.as_str()?.to_string();
    match event.get("event")?.as_str()? {
        "session_start" => Some(SessionMark::Start(id)),
        "session_end" => Some(SessionMark::End(id)),
        _ => None,
    }
}

/// Follows the open session through one record.
fn track(open: &mut Option<(String, u64)>, mark: Option<SessionMark>, seq: u64) {
    match mark {
        Some(SessionMark::Start(id)) => *open = Some((id, seq)),
        Some(SessionMark::End(id)) if open.as_ref().is_some_and(|(o, _)| *o == id) => *open = None,
        _ => {
            if let Some((_, last)) = open {
                *last = seq;
            }
        }
    }
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_string())
}

/// A line is the JSON object of the record without its hash, exactly as it was
/// hashed, with `,"hash":"<64 hex>"` spliced in before the closing brace. The
/// hash covers those exact bytes, so verification never depends on how a JSON
/// parser re-serializes numbers or strings.
const HASH_SUFFIX_LEN: usize = ",\"hash\":\"\"}".len() + 64;

/// Sends the head anchor to the system log (journald reads /dev/log too), so a
/// truncated or rewritten tail can be told from the log's own copy. Best effort:
/// a host without syslog still has the anchor file.
/// Splits a line (without its newline) into the hashed bytes and the hash.
fn split_hashed(line: &[u8]) -> Option<(Vec<u8>, &str)> {
    if line.len() < HASH_SUFFIX_LEN + 2 {
        return None;
    }
    let (body, suffix) = line.split_at(line.len() - HASH_SUFFIX_LEN);
    let suffix = std::str::from_utf8(suffix).ok()?;
    let hash = suffix.strip_prefix(",\"hash\":\"")?.strip_suffix("\"}")?;
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut hashed = body.to_vec();
    hashed.push(b'}');
    Some((hashed, hash))
}

/// Walks the log and the head anchor. Reports the first bad record.
///
/// The anchor (`audit.head`: a sequence and the hash of that record, written
/// with every durable record and at session end) must name a record of the
/// log, and that record must have that hash: a log cut back, or rewritten
/// and re-chained up to or past the anchor, is a break. So is a log without
/// an anchor, or an anchor that cannot be read. Records after the anchor are
/// fine as long as they chain (a session that died before its next durable
/// record). Recovery from any break: inspect, then `sysward audit verify
/// --acknowledge` (the log is moved aside and a new chain starts).
pub fn verify(path: &Path, head_path: &Path) -> Result<Verified> {
    let head = read_head(head_path);
    let anchored_seq = match &head {
        Ok(Some((seq, _))) => Some(*seq),
        _ => None,
    };
    let (mut v, hash_at_anchor) = verify_log_at(path, anchored_seq)?;
    if v.first_break.is_none() {
        let problem = match head {
            Ok(Some((seq, hash))) if seq > v.records => Some(format!(
                "the head anchor records {seq} records ending in {hash}, the log has {}: records were removed",
                v.records
            )),
            Ok(Some((seq, hash))) if seq > 0 && hash_at_anchor.as_deref() != Some(hash.as_str()) => {
                Some(format!(
                    "record {seq} does not have the hash the head anchor recorded ({hash}): records up to it were rewritten"
                ))
            }
            Ok(Some(_)) => None,
            Ok(None) if v.records > 0 => Some(format!(
                "the head anchor {} is missing while the log has {} records: it was removed",
                head_path.display(),
                v.records
            )),
            Ok(None) => None,
            Err(e) => Some(crate::error::chain(&e)),
        };
        if let Some(problem) = problem {
            v.first_break = Some(ChainBreak {
                line: v.records + 1,
                problem,
            });
        }
    }
    Ok(v)
}

/// Walks the log alone.
fn verify_log(path: &Path) -> Result<Verified> {
    verify_log_at(path, None).map(|(v, _)| v)
}

/// Walks the log alone, also returning the hash of record `want`.
fn verify_log_at(path: &Path, want: Option<u64>) -> Result<(Verified, Option<String>)> {
    walk_log(path, want, |_, _, _| {})
}

/// Walks the log, checking the chain, and shows `each` every intact record
/// (its sequence and the record without its hash). Also returns the hash of
/// record `want`.
fn walk_log(
    path: &Path,
    want: Option<u64>,
    mut each: impl FnMut(u64, &str, &Map<String, Value>),
) -> Result<(Verified, Option<String>)> {
    let mut hash_at_want = None;
    let mut records = 0u64;
    let mut prev = GENESIS.to_string();
    let mut first_break = None;
    let mut unfinished = None;
    if path.exists() {
        let file = crate::project::open_regular(path).map_err(|source| AuditError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut reader = BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut reader)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            let lineno = records + 1;
            let problem = check_line(&line, lineno, &prev);
            match problem {
                Ok((hash, record)) => {
                    prev = hash;
                    records += 1;
                    track(&mut unfinished, session_mark(&record), records);
                    each(records, &prev, &record);
                    if want == Some(records) {
                        hash_at_want = Some(prev.clone());
                    }
                }
                Err(problem) => {
                    first_break = Some(ChainBreak {
                        line: lineno,
                        problem,
                    });
                    break;
                }
            }
        }
    }
    Ok((
        Verified {
            records,
            last_hash: prev,
            first_break,
            unfinished,
        },
        hash_at_want,
    ))
}

fn check_line(
    line: &[u8],
    lineno: u64,
    prev: &str,
) -> std::result::Result<(String, Map<String, Value>), String> {
    if line.len() > MAX_LINE {
        return Err("record longer than the limit".to_string());
    }
    let Some(line) = line.strip_suffix(b"\n") else {
        return Err("record is truncated (no newline)".to_string());
    };
    let Some((hashed, stated)) = split_hashed(line) else {
        return Err("record has no hash where it belongs: altered or truncated".to_string());
    };
    let value: Value = serde_json::from_slice(&hashed).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(record) = value else {
        return Err("not a JSON object".to_string());
    };
    let seq = record.get("seq").and_then(Value::as_u64);
    if seq != Some(lineno) {
        return Err(format!(
            "sequence {seq:?} where {lineno} was expected: reordered or deleted records"
        ));
    }
    let record_prev = record.get("prev").and_then(Value::as_str).unwrap_or("");
    if record_prev != prev {
        return Err(
            "previous-hash link broken: a record before it was changed or removed".to_string(),
        );
    }
    let actual = sha256_hex(&hashed);
    if stated != actual {
        return Err("content does not match its hash: the record was altered".to_string());
    }
    Ok((actual, record))
}

/// The sealing state beside the anchor.
fn seal_path(head_path: &Path) -> PathBuf {
    head_path.with_file_name("audit.seal")
}

/// `sysward audit setup-keys`: creates the sealing state and records the
/// set-up in the log; returns the verification key (shown once).
pub fn setup_keys(path: &Path, head_path: &Path) -> Result<String> {
    let audit = Audit::open(path, head_path)?;
    let k0 = crate::seal::Sealer::create(&seal_path(head_path))?;
    audit.record(json!({"event": "seal_setup", "epoch": 0}))?;
    audit.anchor()?;
    Ok(crate::seal::format_key(&k0))
}

/// What the seals say, checked with the operator's key.
pub struct SealReport {
    pub seals: u64,
    /// Records after the last seal: not protected by a seal yet.
    pub unsealed: u64,
    pub problem: Option<String>,
}

/// Checks the seals of the log with the verification key `k0`, and that the
/// sealing state on the host is where the seals end.
pub fn verify_seals(path: &Path, head_path: &Path, k0: [u8; 32]) -> Result<SealReport> {
    let mut check = crate::seal::SealCheck::new(k0);
    let (verified, _) = walk_log(path, None, |seq, _, record| {
        let prev = record.get("prev").and_then(Value::as_str).unwrap_or("");
        if let Some(event) = record.get("event") {
            check.record(seq, event, prev);
        }
    })?;
    let mut problem = check.problem.take();
    if problem.is_none() {
        if let Some(b) = &verified.first_break {
            problem = Some(format!(
                "the chain breaks at record {}: {}",
                b.line, b.problem
            ));
        }
    }
    if problem.is_none() {
        problem = match (check.next_epoch(), crate::seal::read_state(&seal_path(head_path))) {
            (None, _) => Some(
                "the log has no sealing set-up record: sealing was never set up for this log, or the log was rewritten from its start".to_string(),
            ),
            (Some(_), Err(e)) => Some(crate::error::chain(&e)),
            (Some(next), Ok(None)) => Some(format!(
                "the sealing state is gone (the seals end before epoch {next}): sealing was stopped on the host"
            )),
            (Some(next), Ok(Some((epoch, _)))) if epoch != next => Some(format!(
                "the sealing state is at epoch {epoch} but the log's seals end before epoch {next}: sealed records were removed, or the state was replaced"
            )),
            _ => None,
        };
    }
    Ok(SealReport {
        seals: check.seals,
        unsealed: check.unsealed,
        problem,
    })
}

/// Compares the anchors the journal holds for this log with the log: each
/// must name a record the log still has, with that hash.
pub fn verify_journal(path: &Path) -> Result<crate::audit_mirror::Comparison> {
    let seen = crate::audit_mirror::read(path)?;
    let wanted: std::collections::HashMap<u64, &str> = seen
        .iter()
        .map(|(seq, hash)| (*seq, hash.as_str()))
        .collect();
    let mut problems = Vec::new();
    let (verified, _) = walk_log(path, None, |seq, hash, _| {
        if let Some(h) = wanted.get(&seq) {
            if *h != hash {
                problems.push(format!(
                    "record {seq} has hash {hash}, but the journal recorded {h} for it: the log was rewritten from there"
                ));
            }
        }
    })?;
    if let Some(max) = seen.iter().map(|(seq, _)| *seq).max() {
        if max > verified.records {
            problems.push(format!(
                "the journal recorded an anchor at record {max}, but the log has {} intact records: records were removed",
                verified.records
            ));
        }
    }
    Ok(crate::audit_mirror::Comparison {
        anchors: seen.len(),
        problems,
    })
}

/// Writes the anchor in place, one fixed-size write (a zero-padded sequence
/// and the hash: 86 bytes). In place, not by rename: a write-capable action
/// sees `audit.head` through a read-only bind of its inode, and a rename
/// would put a new, uncovered file at the path while the action runs; it
/// also needs no lock that such an action holds.
fn write_head(head_path: &Path, seq: u64, hash: &str, sync: bool) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let text = format!("{seq:020} {hash}\n");
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(head_path)
        .map_err(|source| AuditError::OpenAnchor {
            path: head_path.to_path_buf(),
            source,
        })?;
    if !file.metadata()?.is_file() {
        return Err(AuditError::AnchorNotAFile(head_path.to_path_buf()));
    }
    file.write_all_at(text.as_bytes(), 0)?;
    if file.metadata()?.len() != text.len() as u64 {
        file.set_len(text.len() as u64)?;
    }
    if sync {
        file.sync_data()?;
    }
    Ok(())
}

fn read_head(head_path: &Path) -> Result<Option<(u64, String)>> {
    let read = crate::project::open_regular(head_path).and_then(|f| {
        let mut text = String::new();
        std::io::Read::take(f, 4096).read_to_string(&mut text)?;
        Ok(text)
    });
    match read {
        Ok(text) => {
            let mut parts = text.split_whitespace();
            let seq = parts.next().and_then(|s| s.parse().ok());
            let hash = parts.next().map(str::to_string);
            match (seq, hash) {
                (Some(seq), Some(hash)) => Ok(Some((seq, hash))),
                _ => Err(AuditError::AnchorUnreadable(head_path.to_path_buf())),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(AuditError::Read {
            path: head_path.to_path_buf(),
            source,
        }),
    }
}

impl Audit {
    /// Opens the log for appending after verifying the whole chain. A broken
    /// chain is an error: no session starts until an operator runs
    /// `sysward audit verify --acknowledge`.
    pub fn open(path: &Path, head_path: &Path) -> Result<Audit> {
        let verified = verify(path, head_path)?;
        if let Some(b) = &verified.first_break {
            return Err(AuditError::Broken {
                path: path.to_path_buf(),
                line: b.line,
                problem: b.problem.clone(),
            });
        }
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| AuditError::OpenLog {
                path: path.to_path_buf(),
                source,
            })?;
        let meta = file.metadata()?;
        if meta.mode() & 0o077 != 0 {
            return Err(AuditError::OpenToOthers(path.to_path_buf()));
        }
        Ok(Audit {
            path: path.to_path_buf(),
            head_path: head_path.to_path_buf(),
            state: Mutex::new(State {
                len: file.metadata()?.len(),
                file,
                seq: verified.records,
                last_hash: verified.last_hash,
                unsynced: false,
                open_session: verified.unfinished,
                last_failure: None,
                sealer: crate::seal::Sealer::open(&seal_path(head_path))?,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the next session must record about the one before it, read
    /// before its own `session_start`: a session whose records stop short of
    /// its `session_end` (the broker was killed, crashed, or the disk was
    /// full), and why the last append failed if this process saw it.
    pub fn gap_note(&self) -> Option<Value> {
        let mut state = self.state.lock().ok()?;
        let failure = state.last_failure.take();
        match (&state.open_session, failure) {
            (Some((id, last)), failure) => Some(json!({
                "event": "previous_session_unfinished",
                "previous_session": id,
                "last_record": last,
                "failure": failure,
                "note": format!("the records of session {id} end at record {last}, before its session_end: the broker was killed or crashed, or the log could not be written (a full disk); what happened after that record is not recorded"),
            })),
            (None, Some(failure)) => Some(json!({
                "event": "audit_write_failed",
                "failure": failure,
            })),
            (None, None) => None,
        }
    }

    /// Appends one event (an object with at least `"event"`), durably.
    pub fn record(&self, event: Value) -> Result<u64> {
        self.append(event, true)
    }

    /// Appends one event without waiting for the disk: for the outcome of an
    /// action whose start is already on disk. The next [`Audit::record`],
    /// [`Audit::anchor`] or drop makes it durable.
    pub fn record_lazy(&self, event: Value) -> Result<u64> {
        self.append(event, false)
    }

    /// Makes every record written so far durable, and the anchor follow.
    pub fn sync(&self) -> Result<()> {
        let mut state = self.state.lock().map_err(|_| AuditError::Poisoned)?;
        let state = &mut *state;
        if !state.unsynced {
            return Ok(());
        }
        let _lock = LogLock::take(&state.file)?;
        state.file.sync_data()?;
        state.unsynced = false;
        write_head(&self.head_path, state.seq, &state.last_hash, false)?;
        Ok(())
    }

    fn append(&self, event: Value, sync: bool) -> Result<u64> {
        let mut state = self.state.lock().map_err(|_| AuditError::Poisoned)?;
        let state = &mut *state;
        let _lock = LogLock::take(&state.file)?;
        let seq = self.append_locked(state, event, sync)?;
        if sync && state.sealer.as_ref().is_some_and(crate::seal::Sealer::due) {
            self.seal_locked(state)?;
        }
        Ok(seq)
    }

    /// Appends and seals the epoch (see [`crate::seal`]), with the log lock
    /// held: a no-op until sealing is set up.
    fn seal_locked(&self, state: &mut State) -> Result<()> {
        let Some(sealer) = state.sealer.as_ref() else {
            return Ok(());
        };
        let event =
            json!({"event": "seal", "epoch": sealer.epoch, "tag": sealer.seal(&state.last_hash)});
        self.append_locked(state, event, true)?;
        if let Some(sealer) = state.sealer.as_mut() {
            sealer.advance().map_err(AuditError::SealAdvance)?;
        }
        Ok(())
    }

    fn append_locked(&self, state: &mut State, mut event: Value, sync: bool) -> Result<u64> {
        let len = state.file.metadata()?.len();
        if len != state.len {
            // Someone else appended: continue their chain, after checking it.
            let v = verify_log(&self.path)?;
            if let Some(b) = v.first_break {
                return Err(AuditError::ChangedBroken {
                    line: b.line,
                    problem: b.problem,
                });
            }
            state.seq = v.records;
            state.last_hash = v.last_hash;
            state.open_session = v.unfinished;
        }
        let seq = state.seq + 1;
        let mut record = Map::new();
        record.insert("seq".into(), json!(seq));
        record.insert("time".into(), json!(now_rfc3339()));
        record.insert("prev".into(), json!(state.last_hash));
        bound_strings(&mut event, FIELD_MAX);
        record.insert("event".into(), event);
        let mut line = serde_json::to_vec(&record)?;
        if line.len() > RECORD_MAX {
            // Many long fields: cut them all shorter.
            if let Some(event) = record.get_mut("event") {
                bound_strings(event, FIELD_MAX_TIGHT);
            }
            line = serde_json::to_vec(&record)?;
        }
        let mark = session_mark(&record);
        let hash = sha256_hex(&line);
        line.pop(); // the closing brace
        line.extend_from_slice(format!(",\"hash\":\"{hash}\"}}\n").as_bytes());
        if let Err(e) = (&state.file).write_all(&line) {
            // A full disk leaves part of the record: cut the log back to its
            // last complete record, so the chain stays intact for the next
            // writer, and fail this append (the action that needed it does
            // not run).
            let _ = state.file.set_len(len);
            let _ = state.file.sync_data();
            state.last_failure = Some(format!("record {seq}: {e}"));
            return Err(AuditError::Append {
                path: self.path.clone(),
                source: e,
            });
        }
        if sync {
            state.file.sync_data()?;
            state.unsynced = false;
        } else {
            state.unsynced = true;
        }
        state.seq = seq;
        state.last_hash = hash;
        state.len = len + line.len() as u64;
        track(&mut state.open_session, mark, seq);
        if sync {
            // The anchor follows every durable record, so cutting the log
            // back after a crash is seen.
            // Not synced: the log is, so after a power loss the anchor is at
            // worst behind the log (fine), never ahead; anyone who reads it
            // sees it at once. anchor() syncs it at session end.
            write_head(&self.head_path, state.seq, &state.last_hash, false)?;
        }
        Ok(seq)
    }

    /// Writes the head anchor (last sequence and hash) apart from the log.
    pub fn anchor(&self) -> Result<(u64, String)> {
        let mut state = self.state.lock().map_err(|_| AuditError::Poisoned)?;
        let state = &mut *state;
        let _lock = LogLock::take(&state.file)?;
        if state.unsynced {
            state.file.sync_data()?;
            state.unsynced = false;
        }
        if state.file.metadata()?.len() != state.len {
            // Another writer appended after our last record: it anchors its own.
            return Ok((state.seq, state.last_hash.clone()));
        }
        if state.sealer.is_none() {
            // Set up since this process opened the log (`audit setup-keys`).
            state.sealer = crate::seal::Sealer::open(&seal_path(&self.head_path))?;
        }
        self.seal_locked(state)?;
        write_head(&self.head_path, state.seq, &state.last_hash, true)?;
        crate::audit_mirror::send(&self.path, state.seq, &state.last_hash);
        Ok((state.seq, state.last_hash.clone()))
    }
}

/// Writes records on its own thread: an action's confinement steps run while
/// its start record goes to disk, and a gate (see `sysward_sandbox::jail::gate`)
/// lets the command execve only once the record is there.
pub struct Writer {
    jobs: std::sync::mpsc::Sender<WriterJob>,
    /// The writer thread's id, once it has started (0 before).
    tid: std::sync::Arc<std::sync::atomic::AtomicI32>,
    /// Keeps it on the CPU of the session that hands it a record: woken
    /// there, it writes while the session sleeps in the child's clone (or
    /// yields to it), instead of costing an idle CPU's return from halt.
    cpu: sysward_sandbox::sys::CpuFollower,
}

/// When the writer opens an action's gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenGate {
    /// Once the start record is on disk: for anything that can change the
    /// host or send data.
    WhenDurable,
    /// Once the start record is in the log file (a crash of the broker keeps
    /// it; only a crash of the host within the sync can lose it), the sync
    /// following while the action runs: for an action that can change
    /// nothing and send nothing. Its result is released only once the sync
    /// is done.
    WhenWritten,
}

/// Why an action's start record is not on disk.
#[derive(Debug, thiserror::Error)]
pub enum StartRecordError {
    /// Not written: the gate stayed shut and nothing ran.
    #[error(
        "the audit log cannot be written, so nothing ran: {}",
        crate::error::chain(.0)
    )]
    NotWritten(AuditError),
    /// Written, the gate opened, then the sync failed: the action (one that
    /// changes nothing) may have run; its output must be withheld.
    #[error(
        "the action ran (it changes nothing), but its audit record could not be made durable, so its output is withheld: {}",
        crate::error::chain(.0)
    )]
    NotDurable(AuditError),
    #[error("the audit writer stopped, so nothing ran")]
    WriterGone,
}

impl StartRecordError {
    /// True when the action may have run.
    pub fn may_have_run(&self) -> bool {
        matches!(self, StartRecordError::NotDurable(_))
    }
}

struct WriterJob {
    event: Value,
    open: OpenGate,
    then_open: sysward_sandbox::jail::GateOpener,
    done: std::sync::mpsc::SyncSender<Result<u64, StartRecordError>>,
}

impl Writer {
    pub fn start(audit: std::sync::Arc<Audit>) -> Result<Writer> {
        let (jobs, rx) = std::sync::mpsc::channel::<WriterJob>();
        let tid = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        let its_tid = std::sync::Arc::clone(&tid);
        std::thread::Builder::new()
            .name("audit-writer".to_string())
            .spawn(move || {
                // SAFETY: gettid has no arguments and cannot fail.
                its_tid.store(
                    unsafe { libc::gettid() },
                    std::sync::atomic::Ordering::Release,
                );
                for job in rx {
                    let _ = job
                        .done
                        .send(write_job(&audit, job.event, job.open, job.then_open));
                }
            })
            .map_err(AuditError::Writer)?;
        Ok(Writer {
            jobs,
            tid,
            cpu: sysward_sandbox::sys::CpuFollower::default(),
        })
    }

    /// Records `event`, opens `gate` when `open` says, and makes the record
    /// durable. The answer arrives on the returned channel once the record is
    /// on disk (an error if it could not be, or the writer is gone).
    pub fn record_then_open(
        &self,
        event: Value,
        open: OpenGate,
        gate: sysward_sandbox::jail::GateOpener,
    ) -> std::sync::mpsc::Receiver<Result<u64, StartRecordError>> {
        let (done, answer) = std::sync::mpsc::sync_channel(1);
        // Not started yet (0): it is left where it starts.
        self.cpu
            .follow(self.tid.load(std::sync::atomic::Ordering::Acquire));
        let _ = self.jobs.send(WriterJob {
            event,
            open,
            then_open: gate,
            done,
        });
        answer
    }
}

/// One start record. Not written: the opener is dropped unopened and the
/// child exits without running anything. The child may already be gone (it
/// failed before the gate): nothing to open then.
fn write_job(
    audit: &Audit,
    event: Value,
    open: OpenGate,
    gate: sysward_sandbox::jail::GateOpener,
) -> Result<u64, StartRecordError> {
    match open {
        OpenGate::WhenDurable => {
            let seq = audit.record(event).map_err(StartRecordError::NotWritten)?;
            let _ = gate.open();
            Ok(seq)
        }
        OpenGate::WhenWritten => {
            let seq = audit
                .record_lazy(event)
                .map_err(StartRecordError::NotWritten)?;
            let _ = gate.open();
            audit.sync().map_err(StartRecordError::NotDurable)?;
            Ok(seq)
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        if let Ok(state) = self.state.lock() {
            if state.unsynced {
                let _ = state.file.sync_data();
            }
        }
    }
}

/// After an operator saw a break: the damaged log is kept aside (never
/// deleted) and a new chain starts with a record of the acknowledgement.
pub fn acknowledge_break(layout: &crate::project::Layout, brk: &ChainBreak) -> Result<()> {
    let log = layout.audit_log();
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let aside = log.with_file_name(format!("audit.log.broken-{stamp}"));
    if log.exists() {
        std::fs::rename(&log, &aside).map_err(|source| AuditError::MoveAside {
            path: log.clone(),
            source,
        })?;
    }
    let head = layout.audit_head();
    let old_head = std::fs::read_to_string(&head).unwrap_or_default();
    let _ = std::fs::remove_file(&head);
    // The seals belong to the broken log (its key still verifies it); the
    // new chain is sealed again once new keys are set up.
    let seal = seal_path(&head);
    let seal_aside = seal.with_file_name(format!("audit.seal.broken-{stamp}"));
    let sealed = seal.exists();
    if sealed {
        std::fs::rename(&seal, &seal_aside).map_err(|source| AuditError::MoveAside {
            path: seal.clone(),
            source,
        })?;
    }
    let audit = Audit::open(&log, &head)?;
    audit.record(json!({
        "event": "audit_break_acknowledged",
        "operator_uid": nix::unistd::getuid().as_raw(),
        "broken_log": aside.display().to_string(),
        "break_at_record": brk.line,
        "problem": brk.problem,
        "previous_head": old_head.trim(),
        "sealing_state_moved_to": sealed.then(|| seal_aside.display().to_string()),
    }))?;
    audit.anchor()?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use sysward_testdir::RemoveOnDrop;

    fn temp_dir(tag: &str) -> RemoveOnDrop {
        RemoveOnDrop::fresh_dir(&format!("sysward-audit-{tag}"))
    }

    /// The writer thread runs where the thread handing it a start record
    /// runs, and follows it when it moves; the records are written either way.
    #[test]
    fn the_writer_runs_on_the_cpu_of_the_thread_that_hands_it_a_record() {
        let d = temp_dir("writer-cpu");
        let a =
            std::sync::Arc::new(Audit::open(&d.join("audit.log"), &d.join("audit.head")).unwrap());
        let tour = sysward_testdir::cpu_tour();
        std::thread::scope(|s| {
            s.spawn(|| {
                let writer = Writer::start(std::sync::Arc::clone(&a)).unwrap();
                let started = std::time::Instant::now();
                while writer.tid.load(std::sync::atomic::Ordering::Acquire) == 0 {
                    assert!(started.elapsed().as_secs() < 10, "the writer never started");
                    std::thread::yield_now();
                }
                let tid = writer.tid.load(std::sync::atomic::Ordering::Acquire);
                for (n, &cpu) in tour.iter().enumerate() {
                    sysward_testdir::pin_this_thread(cpu);
                    let (opener, _wait) = sysward_sandbox::jail::gate().unwrap();
                    let answer = writer.record_then_open(
                        json!({"event": "action_start", "n": n}),
                        OpenGate::WhenWritten,
                        opener,
                    );
                    assert!(answer.recv().unwrap().is_ok());
                    assert_eq!(
                        sysward_testdir::allowed_cpus(tid),
                        Some(cpu.to_string()),
                        "record {n}"
                    );
                }
            });
        });
        assert_eq!(verify_log(a.path()).unwrap().records, tour.len() as u64);
    }

    #[test]
    fn a_start_record_is_on_disk_when_the_writer_answers_whichever_way_the_gate_opens() {
        let d = temp_dir("gate-open");
        let log = d.join("audit.log");
        let head = d.join("audit.head");
        let a = Audit::open(&log, &head).unwrap();
        for (n, open) in [OpenGate::WhenWritten, OpenGate::WhenDurable]
            .into_iter()
            .enumerate()
        {
            let (opener, _wait) = sysward_sandbox::jail::gate().unwrap();
            let seq =
                write_job(&a, json!({"event": "action_start", "n": n}), open, opener).unwrap();
            assert!(!a.state.lock().unwrap().unsynced, "{open:?}: not synced");
            let anchor = std::fs::read_to_string(&head).unwrap();
            assert!(
                anchor.starts_with(&format!("{seq:020}")),
                "{open:?}: the anchor does not follow: {anchor}"
            );
        }
        assert_eq!(broken(&log, &head), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_huge_field_is_bounded_and_the_chain_still_verifies() {
        let d = temp_dir("bounded");
        let log = d.join("audit.log");
        let head = d.join("audit.head");
        let a = Audit::open(&log, &head).unwrap();
        // 14 MiB of quotes and 200 fields of 64 KiB + 1 of backslashes.
        let quotes = "'".repeat(14 << 20);
        a.record(json!({"event": "tool", "request": quotes.clone()}))
            .unwrap();
        let mut many = Map::new();
        for i in 0..200 {
            many.insert(format!("f{i}"), json!("\\".repeat((FIELD_MAX / 2) + 1)));
        }
        many.insert("event".into(), json!("tool"));
        a.record(Value::Object(many)).unwrap();
        a.record(json!({"event": "tool", "request": "df -h"}))
            .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(
            lines.iter().all(|l| l.len() < RECORD_MAX),
            "{:?}",
            lines.iter().map(|l| l.len()).collect::<Vec<_>>()
        );
        let first: Value = serde_json::from_str(lines[0]).unwrap();
        let req = first["event"]["request"].as_str().unwrap();
        assert!(req.contains(&format!(
            "{} bytes in all, sha256 {}",
            quotes.len(),
            sha256_hex(quotes.as_bytes())
        )));
        // Short fields are kept as they are.
        let third: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(third["event"]["request"], "df -h");
        let v = verify(&log, &head).unwrap();
        assert!(v.first_break.is_none(), "{:?}", v.first_break);
        assert_eq!(v.records, 3);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// Writes `events` as a log whose chain is valid: what a forger with
    /// write access to the log (but not to the anchor) would produce.
    fn forge(log: &Path, events: &[Value]) {
        let mut prev = GENESIS.to_string();
        let mut out = Vec::new();
        for (i, e) in events.iter().enumerate() {
            let mut r = Map::new();
            r.insert("seq".into(), json!(i as u64 + 1));
            r.insert("time".into(), json!("2026-01-01T00:00:00Z"));
            r.insert("prev".into(), json!(prev));
            r.insert("event".into(), e.clone());
            let mut line = serde_json::to_vec(&Value::Object(r)).unwrap();
            let hash = sha256_hex(&line);
            line.pop();
            line.extend_from_slice(format!(",\"hash\":\"{hash}\"}}\n").as_bytes());
            out.extend_from_slice(&line);
            prev = hash;
        }
        std::fs::write(log, out).unwrap();
    }

    fn broken(log: &Path, head: &Path) -> Option<String> {
        verify(log, head).unwrap().first_break.map(|b| b.problem)
    }

    #[test]
    fn the_anchor_catches_rewritten_cut_and_unanchored_logs() {
        let d = temp_dir("tamper");
        let (log, head) = (d.join("audit.log"), d.join("audit.head"));
        let a = Audit::open(&log, &head).unwrap();
        for cmd in ["uname -r", "rm -rf /srv/data", "df -h"] {
            a.record(json!({"event": "tool", "request": cmd})).unwrap();
        }
        drop(a);
        // The legitimate state: intact, and so are records after the anchor.
        assert_eq!(broken(&log, &head), None);
        let a = Audit::open(&log, &head).unwrap();
        a.record_lazy(json!({"event": "tool", "request": "ls"}))
            .unwrap();
        drop(a);
        assert_eq!(broken(&log, &head), None);
        let saved = std::fs::read(&log).unwrap();
        let saved_head = std::fs::read(&head).unwrap();
        // 1. Rewritten and re-chained, one record added, anchor untouched.
        forge(
            &log,
            &[
                json!({"event": "tool", "request": "uname -r"}),
                json!({"event": "tool", "request": "true"}),
                json!({"event": "tool", "request": "df -h"}),
                json!({"event": "tool", "request": "ls"}),
                json!({"event": "tool", "request": "ls -l"}),
            ],
        );
        let p = broken(&log, &head).expect("a rewrite up to the anchor is a break");
        assert!(p.contains("were rewritten"), "{p}");
        // 2. Cut back before the anchor (the records of commands that ran).
        std::fs::write(&log, &saved).unwrap();
        let text = String::from_utf8(saved.clone()).unwrap();
        let first_two: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        std::fs::write(&log, first_two).unwrap();
        let p = broken(&log, &head).expect("a cut log is a break");
        assert!(p.contains("were removed"), "{p}");
        // 3. The anchor deleted.
        std::fs::write(&log, &saved).unwrap();
        std::fs::remove_file(&head).unwrap();
        let p = broken(&log, &head).expect("a missing anchor is a break");
        assert!(p.contains("is missing"), "{p}");
        // 4. Garbage in the anchor: a break, not an error, and acknowledging works.
        std::fs::write(&head, "garbage\n").unwrap();
        let p = broken(&log, &head).expect("an unreadable anchor is a break");
        assert!(p.contains("unreadable"), "{p}");
        std::fs::write(&head, &saved_head).unwrap();
        assert_eq!(broken(&log, &head), None);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_full_disk_leaves_no_partial_record() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!(
                "SKIPPED a_full_disk_leaves_no_partial_record: needs root (mounts a small tmpfs)"
            );
            return;
        }
        let d = temp_dir("enospc");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
            .arg(&*d)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mount tmpfs");
        let result = std::panic::catch_unwind(|| {
            let log = d.join("audit.log");
            let head = d.join("audit.head");
            let a = Audit::open(&log, &head).unwrap();
            a.record(json!({"event": "session_start"})).unwrap();
            // Fill the filesystem, leaving a few bytes.
            let filler = d.join("filler");
            let mut f = std::fs::File::create(&filler).unwrap();
            let chunk = vec![b'x'; 1024];
            while f.write_all(&chunk).is_ok() {}
            let _ = f.sync_all();
            let e = a
                .record(json!({"event": "tool", "request": "x".repeat(8 << 10)}))
                .unwrap_err();
            assert!(
                format!("{e:#}").contains("cut back to its last complete record"),
                "{e:#}"
            );
            // No partial line: the chain verifies as it was.
            let v = verify(&log, &head).unwrap();
            assert!(v.first_break.is_none(), "{:?}", v.first_break);
            assert_eq!(v.records, 1);
            // Space freed: the next record continues the chain.
            drop(f);
            std::fs::remove_file(&filler).unwrap();
            a.record(json!({"event": "tool", "request": "df -h"}))
                .unwrap();
            let v = verify(&log, &head).unwrap();
            assert!(v.first_break.is_none(), "{:?}", v.first_break);
            assert_eq!(v.records, 2);
        });
        let _ = std::process::Command::new("umount").arg(&*d).status();
        let _ = std::fs::remove_dir_all(&d);
        if let Err(p) = result {
            std::panic::resume_unwind(p);
        }
    }

    #[test]
    fn lazy_records_join_the_chain_and_the_anchor_syncs_them() {
        let d = temp_dir("lazy");
        let (log, head) = (d.join("audit.log"), d.join("audit.head"));
        let a = Audit::open(&log, &head).unwrap();
        a.record(json!({"event": "action_start", "n": 1})).unwrap();
        a.record_lazy(json!({"event": "tool", "n": 1})).unwrap();
        assert!(a.state.lock().unwrap().unsynced);
        // The next durable record carries the lazy one with it.
        a.record(json!({"event": "action_start", "n": 2})).unwrap();
        assert!(!a.state.lock().unwrap().unsynced);
        a.record_lazy(json!({"event": "tool", "n": 2})).unwrap();
        let (seq, _) = a.anchor().unwrap();
        assert_eq!(seq, 4);
        assert!(!a.state.lock().unwrap().unsynced);
        let v = verify_log(&log).unwrap();
        assert_eq!(v.records, 4);
        assert!(v.first_break.is_none());
        let _ = std::fs::remove_dir_all(&d);
    }

    fn write_three(dir: &Path) -> (PathBuf, PathBuf) {
        let (log, head) = (dir.join("audit.log"), dir.join("audit.head"));
        let a = Audit::open(&log, &head).unwrap();
        for i in 0..3 {
            a.record(json!({"event": "test", "i": i})).unwrap();
        }
        a.anchor().unwrap();
        (log, head)
    }

    #[test]
    fn chain_verifies_and_reopens_at_the_right_sequence() {
        let dir = temp_dir("ok");
        let (log, head) = write_three(&dir);
        let v = verify(&log, &head).unwrap();
        assert_eq!((v.records, v.first_break), (3, None));
        let a = Audit::open(&log, &head).unwrap();
        assert_eq!(a.record(json!({"event": "more"})).unwrap(), 4);
    }

    #[test]
    fn records_with_any_floats_and_strings_verify() {
        // serde_json's default float parser does not always round-trip; the
        // hash covers the written bytes, so verification must not re-serialize.
        let dir = temp_dir("floats");
        let (log, head) = (dir.join("audit.log"), dir.join("audit.head"));
        let a = Audit::open(&log, &head).unwrap();
        let mut x = 0.1f64;
        for i in 0..500 {
            x = x * 1.000_123_456_789 + 1e-7 * f64::from(i);
            a.record(json!({"event": "t", "x": x, "y": x / 3.0, "s": "é\u{202e}\"\\\n"}))
                .unwrap();
        }
        a.anchor().unwrap();
        let v = verify(&log, &head).unwrap();
        assert_eq!((v.records, v.first_break), (500, None));
    }

    #[test]
    fn two_writers_extend_one_chain() {
        let dir = temp_dir("two");
        let (log, head) = (dir.join("audit.log"), dir.join("audit.head"));
        let a = Audit::open(&log, &head).unwrap();
        let b = Audit::open(&log, &head).unwrap();
        for i in 0..10 {
            a.record(json!({"event": "a", "i": i})).unwrap();
            b.record(json!({"event": "b", "i": i})).unwrap();
        }
        a.anchor().unwrap();
        b.anchor().unwrap();
        let v = verify(&log, &head).unwrap();
        assert_eq!((v.records, v.first_break), (20, None));
    }

    #[test]
    fn tampering_is_detected() {
        let dir = temp_dir("tamper-bytes");
        let (log, head) = write_three(&dir);
        let original = std::fs::read(&log).unwrap();
        let lines: Vec<&[u8]> = original.split_inclusive(|b| *b == b'\n').collect();

        // flipped byte inside record 2
        let mut flipped = original.clone();
        let pos = lines[0].len() + lines[1].len() / 2;
        flipped[pos] ^= 0x01;
        std::fs::write(&log, &flipped).unwrap();
        let b = verify(&log, &head).unwrap().first_break.unwrap();
        assert_eq!(b.line, 2, "{b:?}");

        // deleted record 2
        std::fs::write(&log, [lines[0], lines[2]].concat()).unwrap();
        assert_eq!(verify(&log, &head).unwrap().first_break.unwrap().line, 2);

        // reordered
        std::fs::write(&log, [lines[0], lines[2], lines[1]].concat()).unwrap();
        assert!(verify(&log, &head).unwrap().first_break.is_some());

        // truncated tail: caught by the head anchor
        std::fs::write(&log, [lines[0], lines[1]].concat()).unwrap();
        let b = verify(&log, &head).unwrap().first_break.unwrap();
        assert!(b.problem.contains("head anchor"), "{b:?}");
        assert!(Audit::open(&log, &head).is_err());
    }
}
