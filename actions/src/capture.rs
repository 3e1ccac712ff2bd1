//! Bounded capture of a command's stdout or stderr. The model gets all of an
//! output up to 16 KiB, else the first 8 KiB, the lines of note from the
//! middle (errors, failures, warnings: at most 40, with their line numbers)
//! and the last 4 KiB; the full output is saved under `.agent/tmp/` (up to a
//! cap) where `read_file` can reach it. Memory stays bounded whatever the
//! command prints.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

pub const FULL_LIMIT: usize = 16 << 10;
pub const HEAD: usize = 8 << 10;
pub const TAIL: usize = 4 << 10;
/// Saved outputs stop growing here; the rest is counted and discarded.
pub const SAVE_LIMIT: u64 = 256 << 20;
/// Lines of note kept from the middle of a long output, and their length.
const NOTABLE_MAX: usize = 40;
const NOTABLE_LINE: usize = 300;

/// Words that make a line worth showing from the middle of an output.
const NOTABLE_WORDS: &[&str] = &[
    "error",
    "fail",
    "fatal",
    "panic",
    "denied",
    "refused",
    "warn",
    "critical",
    "segfault",
    "exception",
    "traceback",
    "killed",
    "out of memory",
    "cannot",
    "unable",
];

fn notable(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    NOTABLE_WORDS.iter().any(|w| lower.contains(w))
}

pub struct Capture {
    /// Up to FULL_LIMIT bytes, then only the first HEAD of them are kept.
    head: Vec<u8>,
    /// Ring of the last TAIL bytes once past FULL_LIMIT.
    tail: Vec<u8>,
    total: u64,
    save_path: PathBuf,
    saved: Option<File>,
    save_failed: Option<String>,
    /// The line being read past the head (bounded), its number, and the
    /// lines of note found so far (and how many more there were).
    line: Vec<u8>,
    line_no: u64,
    notable: Vec<(u64, String)>,
    notable_more: u64,
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
            line: Vec::new(),
            line_no: 1,
            notable: Vec::new(),
            notable_more: 0,
        }
    }

    /// Follows lines through `data` and keeps those of note.
    fn scan(&mut self, data: &[u8]) {
        for &b in data {
            if b != b'\n' {
                if self.line.len() < NOTABLE_LINE * 4 {
                    self.line.push(b);
                }
                continue;
            }
            self.take_line();
            self.line_no += 1;
        }
    }

    fn take_line(&mut self) {
        let text = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        if !notable(&text) {
            return;
        }
        if self.notable.len() < NOTABLE_MAX {
            let cut: String = text.chars().take(NOTABLE_LINE).collect();
            self.notable.push((self.line_no, cut));
        } else {
            self.notable_more += 1;
        }
    }

    pub fn push(&mut self, data: &[u8]) {
        self.scan(data);
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

    pub fn finish(mut self) -> Captured {
        if !self.line.is_empty() {
            self.take_line();
        }
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
        let head = String::from_utf8_lossy(&self.head);
        let tail = String::from_utf8_lossy(&self.tail);
        // Lines of note from the omitted middle (those in the head or the
        // tail are shown there already).
        let middle: Vec<String> = self
            .notable
            .iter()
            .filter(|(_, l)| !head.contains(l.as_str()) && !tail.contains(l.as_str()))
            .map(|(n, l)| format!("line {n}: {l}"))
            .collect();
        let text = if middle.is_empty() {
            format!("{head}\n[… {omitted} bytes omitted …]\n{tail}")
        } else {
            let more = if self.notable_more > 0 {
                format!(" (and {} more)", self.notable_more)
            } else {
                String::new()
            };
            format!(
                "{head}\n[… {omitted} bytes omitted; lines of note among them{more}: …]\n{}\n[…]\n{tail}",
                middle.join("\n")
            )
        };
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

    use sysward_testdir::RemoveOnDrop;

    #[test]
    fn small_output_is_kept_whole_and_large_is_cut_and_saved() {
        let dir = RemoveOnDrop::fresh_dir("sysward-cap");
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
        assert!(!got.text.contains("lines of note"));
        assert!(got.text.starts_with("abcdef"));
        assert!(got.text.ends_with("THE-END"));
        assert!(got.text.len() < HEAD + TAIL + 100);
        let saved = std::fs::read(got.saved.unwrap()).unwrap();
        assert_eq!(saved.len(), 200_007);
    }

    #[test]
    fn an_error_in_the_middle_of_a_long_output_is_shown() {
        let dir = RemoveOnDrop::fresh_dir("sysward-cap-mid");
        let mut c = Capture::new(dir.join("mid"));
        for i in 0..3000 {
            c.push(format!("ok line {i}\n").as_bytes());
            if i == 1500 {
                c.push(b"ERROR: disk /dev/sdb1 failed to mount\n");
            }
        }
        let got = c.finish();
        assert!(
            got.text
                .contains("line 1502: ERROR: disk /dev/sdb1 failed to mount"),
            "{}",
            &got.text[8000..9000.min(got.text.len())]
        );
        assert!(got.text.len() < HEAD + TAIL + 2000);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
