//! Bounded capture of a command's stdout or stderr. The model gets all of an
//! output up to 16 KiB, else the first 8 KiB and the last 4 KiB; the full output
//! is saved under `.agent/tmp/` (up to a cap) where `read_file` can reach it.
//! Memory stays bounded whatever the command prints.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

pub const FULL_LIMIT: usize = 16 << 10;
pub const HEAD: usize = 8 << 10;
pub const TAIL: usize = 4 << 10;
/// Saved outputs stop growing here; the rest is counted and discarded.
pub const SAVE_LIMIT: u64 = 256 << 20;

pub struct Capture {
    /// Up to FULL_LIMIT bytes, then only the first HEAD of them are kept.
    head: Vec<u8>,
    /// Ring of the last TAIL bytes once past FULL_LIMIT.
    tail: Vec<u8>,
    total: u64,
    save_path: PathBuf,
    saved: Option<File>,
    save_failed: Option<String>,
}

/// What the model is shown of one stream.
pub struct Captured {
    pub text: String,
    pub total: u64,
    pub saved: Option<PathBuf>,
    pub note: Option<String>,
}

impl Capture {
    pub fn new(save_path: PathBuf) -> Capture {
        Capture {
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
            save_path,
            saved: None,
            save_failed: None,
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        let before = self.total;
        self.total += data.len() as u64;
        if self.total as usize <= FULL_LIMIT && self.saved.is_none() {
            self.head.extend_from_slice(data);
            return;
        }
        if self.saved.is_none() && self.save_failed.is_none() {
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&self.save_path)
            {
                Ok(mut f) => {
                    if let Err(e) = f.write_all(&self.head) {
                        self.save_failed = Some(e.to_string());
                    } else {
                        self.saved = Some(f);
                    }
                }
                Err(e) => self.save_failed = Some(e.to_string()),
            }
            self.head.truncate(HEAD);
        }
        if let Some(f) = &mut self.saved {
            if before < SAVE_LIMIT {
                let room = (SAVE_LIMIT - before).min(data.len() as u64) as usize;
                if let Err(e) = f.write_all(&data[..room]) {
                    self.save_failed = Some(e.to_string());
                    self.saved = None;
                }
            }
        }
        if self.head.len() < HEAD {
            let take = (HEAD - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
        }
        // keep the last TAIL bytes
        if data.len() >= TAIL {
            self.tail.clear();
            self.tail.extend_from_slice(&data[data.len() - TAIL..]);
        } else {
            self.tail.extend_from_slice(data);
            if self.tail.len() > TAIL {
                let cut = self.tail.len() - TAIL;
                self.tail.drain(..cut);
            }
        }
    }

    pub fn finish(self) -> Captured {
        if self.total as usize <= FULL_LIMIT && self.saved.is_none() {
            return Captured {
                text: String::from_utf8_lossy(&self.head).into_owned(),
                total: self.total,
                saved: None,
                note: None,
            };
        }
        let omitted = self.total.saturating_sub((HEAD + TAIL) as u64);
        let saved = self.saved.as_ref().map(|_| self.save_path.clone());
        let mut note = format!(
            "output was {} bytes: showing the first {} and the last {} ({} omitted)",
            self.total, HEAD, TAIL, omitted
        );
        match (&saved, &self.save_failed) {
            (Some(p), _) => {
                note.push_str(&format!("; full output saved in {}", p.display()));
                if self.total > SAVE_LIMIT {
                    note.push_str(&format!(" (first {SAVE_LIMIT} bytes only)"));
                }
            }
            (None, Some(e)) => note.push_str(&format!("; could not save the full output: {e}")),
            (None, None) => {}
        }
        let text = format!(
            "{}\n[… {} bytes omitted …]\n{}",
            String::from_utf8_lossy(&self.head),
            omitted,
            String::from_utf8_lossy(&self.tail)
        );
        Captured {
            text,
            total: self.total,
            saved,
            note: Some(note),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole_and_large_is_cut_and_saved() {
        let dir = std::env::temp_dir().join(format!("sysward-cap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut c = Capture::new(dir.join("small"));
        c.push(b"hello\n");
        let got = c.finish();
        assert_eq!((got.text.as_str(), got.saved), ("hello\n", None));

        let mut c = Capture::new(dir.join("big"));
        let line: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        for _ in 0..2000 {
            c.push(&line);
        }
        c.push(b"THE-END");
        let got = c.finish();
        assert_eq!(got.total, 200_007);
        assert!(got.text.starts_with("abcdef"));
        assert!(got.text.ends_with("THE-END"));
        assert!(got.text.len() < HEAD + TAIL + 100);
        let saved = std::fs::read(got.saved.unwrap()).unwrap();
        assert_eq!(saved.len(), 200_007);
    }
}
