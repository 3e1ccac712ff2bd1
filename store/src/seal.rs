//! Forward-secure sealing of the audit log, in the manner of journald's FSS.
//!
//! The hash chain alone shows a change to one record, but whoever can write
//! the log (root) can rewrite a whole tail of it and chain it again. Sealing
//! adds a key only the past had. `sysward audit setup-keys` makes a random
//! key K0 and shows it once: the operator keeps it off the host. The broker
//! keeps only the key of the current epoch. At each seal (the end of every
//! session, and every [`SEAL_INTERVAL`] within a long one) it appends a
//! `seal` record — an HMAC-SHA256 under the epoch's key of the hash of the
//! record before it — then replaces the key with the next one,
//! `K(n+1) = SHA-256(label ‖ K(n))`, and overwrites the old key on disk.
//!
//! `sysward audit verify --key K0` derives every epoch's key and checks every
//! seal. A root attacker who takes the host in epoch n holds only K(n): they
//! cannot derive an earlier key (SHA-256 is one-way), so they cannot rewrite
//! any record before the last seal without the seal failing, nor remove
//! sealed records (the seals' epochs must be 0, 1, 2, … and end where the
//! key file is). What the seals cannot protect: the records after the last
//! seal (the current epoch, until it is sealed), and a sealing state deleted
//! as a whole (verify then reports sealing stopped).
//!
//! The key file is written in place (fixed size), so that its inode, which
//! actions see covered, never changes. An overwritten key may survive in a
//! filesystem journal or on flash until those blocks are reused; journald's
//! FSS has the same limit.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a key or a sealing state cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("a verification key starts with {KEY_PREFIX}")]
    KeyPrefix,
    #[error("the verification key is not 64 hex digits after its prefix")]
    KeyDigits,
    #[error("cannot read {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not text", .path.display())]
    NotText {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the sealing state {} is damaged: the log can still be verified with the key (`sysward audit verify --key`); set up new keys only after that",
        .0.display()
    )]
    Damaged(PathBuf),
    #[error("cannot open {}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read /dev/urandom")]
    Urandom(#[source] std::io::Error),
    #[error(
        "cannot create {} (sealing is already set up if it exists: its key was shown then)",
        .path.display()
    )]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Writing the state.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T> = std::result::Result<T, SealError>;

/// A long session is sealed at least this often.
pub const SEAL_INTERVAL: Duration = Duration::from_secs(15 * 60);

const EVOLVE_LABEL: &[u8] = b"sysward audit seal: next epoch key";
const TAG_LABEL: &[u8] = b"sysward audit seal v1";
/// How the operator's verification key is written.
const KEY_PREFIX: &str = "sysward-seal-v1:";
/// `<epoch, 20 digits> <key, 64 hex>\n`
const STATE_LEN: usize = 20 + 1 + 64 + 1;

/// The next epoch's key.
pub fn evolve(key: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(EVOLVE_LABEL);
    h.update(key);
    h.finalize().into()
}

/// The seal of epoch `epoch` over the record whose hash is `prev_hash`.
pub fn tag(key: &[u8; 32], epoch: u64, prev_hash: &str) -> String {
    // A 32-byte key is always a valid HMAC key.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(m) => m,
        Err(_) => return String::new(),
    };
    mac.update(TAG_LABEL);
    mac.update(&epoch.to_be_bytes());
    mac.update(prev_hash.as_bytes());
    crate::project::hex(&mac.finalize().into_bytes())
}

/// Parses the operator's verification key.
pub fn parse_key(text: &str) -> Result<[u8; 32]> {
    let hex = text
        .trim()
        .strip_prefix(KEY_PREFIX)
        .ok_or(SealError::KeyPrefix)?;
    parse_hex32(hex).ok_or(SealError::KeyDigits)
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// The operator's form of a key.
pub fn format_key(key: &[u8; 32]) -> String {
    format!("{KEY_PREFIX}{}", crate::project::hex(key))
}

/// The broker's current epoch and key, in the state file.
pub struct Sealer {
    file: File,
    pub epoch: u64,
    key: [u8; 32],
    /// When the epoch began in this process.
    since: Instant,
}

impl std::fmt::Debug for Sealer {
    // Never the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("epoch", &self.epoch)
            .finish()
    }
}

fn parse_state(text: &str) -> Option<(u64, [u8; 32])> {
    let (epoch, key) = text.trim_end_matches('\n').split_once(' ')?;
    if epoch.len() != 20 {
        return None;
    }
    Some((epoch.parse().ok()?, parse_hex32(key)?))
}

/// Reads a sealing state file: its epoch and key.
pub fn read_state(path: &Path) -> Result<Option<(u64, [u8; 32])>> {
    let file = match crate::project::open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SealError::Read {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    let mut text = String::new();
    file.take(STATE_LEN as u64 + 1)
        .read_to_string(&mut text)
        .map_err(|source| SealError::NotText {
            path: path.to_path_buf(),
            source,
        })?;
    match parse_state(&text) {
        Some(s) => Ok(Some(s)),
        None => Err(SealError::Damaged(path.to_path_buf())),
    }
}

impl Sealer {
    /// The sealer of a state file, if sealing was set up.
    pub fn open(path: &Path) -> Result<Option<Sealer>> {
        let Some((epoch, key)) = read_state(path)? else {
            return Ok(None);
        };
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| SealError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Some(Sealer {
            file,
            epoch,
            key,
            since: Instant::now(),
        }))
    }

    /// Creates the state for a new key K0 (refused when one exists) and
    /// returns K0: shown once, never stored.
    pub fn create(path: &Path) -> Result<[u8; 32]> {
        let mut key = [0u8; 32];
        File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(SealError::Urandom)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|source| SealError::Create {
                path: path.to_path_buf(),
                source,
            })?;
        write_state(&file, 0, &key)?;
        Ok(key)
    }

    /// True when the epoch has lasted long enough to be sealed now.
    pub fn due(&self) -> bool {
        self.since.elapsed() >= SEAL_INTERVAL
    }

    /// The seal of the current epoch over `prev_hash`.
    pub fn seal(&self, prev_hash: &str) -> String {
        tag(&self.key, self.epoch, prev_hash)
    }

    /// Moves to the next epoch: the old key is overwritten on disk.
    pub fn advance(&mut self) -> Result<()> {
        let next = evolve(&self.key);
        write_state(&self.file, self.epoch + 1, &next)?;
        self.key = next;
        self.epoch += 1;
        self.since = Instant::now();
        Ok(())
    }
}

fn write_state(file: &File, epoch: u64, key: &[u8; 32]) -> Result<()> {
    let text = format!("{epoch:020} {}\n", crate::project::hex(key));
    file.write_all_at(text.as_bytes(), 0)?;
    file.set_len(text.len() as u64)?;
    file.sync_data()?;
    Ok(())
}

/// Checks the seals of a log, record by record, with the operator's key.
pub struct SealCheck {
    key: [u8; 32],
    /// The epoch the next seal must have; None before the set-up record.
    expected: Option<u64>,
    /// Records since the last seal (or since the set-up).
    pub unsealed: u64,
    pub seals: u64,
    pub problem: Option<String>,
}

impl SealCheck {
    pub fn new(k0: [u8; 32]) -> SealCheck {
        SealCheck {
            key: k0,
            expected: None,
            unsealed: 0,
            seals: 0,
            problem: None,
        }
    }

    /// Follows one record: `event` its event, `prev` the hash it chains to,
    /// `seq` its sequence.
    pub fn record(&mut self, seq: u64, event: &serde_json::Value, prev: &str) {
        if self.problem.is_some() {
            return;
        }
        match event.get("event").and_then(|e| e.as_str()) {
            Some("seal_setup") => {
                if self.expected.is_some() {
                    self.problem = Some(format!(
                        "record {seq}: a second sealing set-up: the records before it were sealed with another key"
                    ));
                    return;
                }
                self.expected = Some(0);
                self.unsealed = 0;
            }
            Some("seal") => {
                let epoch = event.get("epoch").and_then(|e| e.as_u64());
                let stated = event.get("tag").and_then(|t| t.as_str()).unwrap_or("");
                let Some(expected) = self.expected else {
                    self.problem = Some(format!(
                        "record {seq}: a seal before the sealing set-up record: the start of the log was rewritten"
                    ));
                    return;
                };
                if epoch != Some(expected) {
                    self.problem = Some(format!(
                        "record {seq}: a seal of epoch {} where epoch {expected} was due: sealed records were removed",
                        epoch.map_or("?".to_string(), |e| e.to_string())
                    ));
                    return;
                }
                if tag(&self.key, expected, prev) != stated {
                    self.problem = Some(format!(
                        "record {seq}: the seal of epoch {expected} does not match: a record before it was changed, or this is not the key"
                    ));
                    return;
                }
                self.key = evolve(&self.key);
                self.expected = Some(expected + 1);
                self.seals += 1;
                self.unsealed = 0;
            }
            _ => self.unsealed += 1,
        }
    }

    /// The epoch the next seal must have (None: no set-up record).
    pub fn next_epoch(&self) -> Option<u64> {
        self.expected
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn seals_check_with_the_first_key_and_fail_with_any_change() {
        let k0 = [7u8; 32];
        let k1 = evolve(&k0);
        let mut ok = SealCheck::new(k0);
        ok.record(1, &json!({"event": "seal_setup"}), "h0");
        ok.record(2, &json!({"event": "x"}), "h1");
        ok.record(
            3,
            &json!({"event": "seal", "epoch": 0, "tag": tag(&k0, 0, "h2")}),
            "h2",
        );
        ok.record(
            4,
            &json!({"event": "seal", "epoch": 1, "tag": tag(&k1, 1, "h3")}),
            "h3",
        );
        assert_eq!((ok.problem.clone(), ok.seals), (None, 2));
        // A changed record before a seal: its hash differs.
        let mut changed = SealCheck::new(k0);
        changed.record(1, &json!({"event": "seal_setup"}), "h0");
        changed.record(
            2,
            &json!({"event": "seal", "epoch": 0, "tag": tag(&k0, 0, "h1")}),
            "hX",
        );
        assert!(changed.problem.unwrap().contains("does not match"));
        // An attacker holding K1 cannot make epoch 0's seal.
        let mut forged = SealCheck::new(k0);
        forged.record(1, &json!({"event": "seal_setup"}), "h0");
        forged.record(
            2,
            &json!({"event": "seal", "epoch": 0, "tag": tag(&k1, 0, "h1")}),
            "h1",
        );
        assert!(forged.problem.is_some());
        // A missing epoch.
        let mut gap = SealCheck::new(k0);
        gap.record(1, &json!({"event": "seal_setup"}), "h0");
        gap.record(
            2,
            &json!({"event": "seal", "epoch": 1, "tag": tag(&k1, 1, "h1")}),
            "h1",
        );
        assert!(gap.problem.unwrap().contains("removed"));
    }

    #[test]
    fn keys_round_trip_and_garbage_is_refused() {
        let k = [0xabu8; 32];
        assert_eq!(parse_key(&format_key(&k)).unwrap(), k);
        for bad in ["", "sysward-seal-v1:", "sysward-seal-v1:zz", "abab"] {
            assert!(parse_key(bad).is_err(), "{bad}");
        }
        assert!(parse_state("00000000000000000003 zz\n").is_none());
        let state = format!("{:020} {}\n", 3, crate::project::hex(&k));
        assert_eq!(parse_state(&state), Some((3, k)));
    }
}
