//! contexto.mem: the operational history, JSON, kept by the broker for the agent.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MAX_JOURNAL: usize = 400;
pub const MAX_RECENT: usize = 60;
pub const MAX_RECENT_BYTES: usize = 4096;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalEvent {
    pub time: String,
    pub kind: String,
    pub text: String,
    /// Already folded into `summary` by a compaction: dropped first.
    #[serde(default)]
    pub summarized: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentMsg {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub status: String,
    pub sha256: String,
    pub time: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextFile {
    pub version: u32,
    pub summary: String,
    pub compactions: u32,
    pub journal: Vec<JournalEvent>,
    pub recent: Vec<RecentMsg>,
    pub tasks: BTreeMap<String, TaskRecord>,
    /// The bytes of a previous contexto.mem that could not be parsed, kept
    /// verbatim (the agent cannot rename files) until the operator looks at it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_previous: Option<String>,
}

/// RFC 3339 UTC time of now, without external crates.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

impl ContextFile {
    /// Parses what the broker returned. Non-JSON text becomes the summary; JSON
    /// that does not parse is kept verbatim in `corrupt_previous` and reported.
    pub fn load(bytes: Option<&[u8]>) -> (ContextFile, Vec<String>) {
        let mut warnings = Vec::new();
        let Some(bytes) = bytes else {
            return (ContextFile::fresh(), warnings);
        };
        let text = String::from_utf8_lossy(bytes);
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return (ContextFile::fresh(), warnings);
        }
        if !trimmed.starts_with('{') {
            warnings.push("contexto.mem is not JSON: its text was imported as the summary".into());
            let mut c = ContextFile::fresh();
            c.summary = trimmed.to_string();
            return (c, warnings);
        }
        match serde_json::from_str::<ContextFile>(trimmed) {
            Ok(mut c) => {
                c.version = 1;
                c.enforce_limits();
                (c, warnings)
            }
            Err(e) => {
                warnings.push(format!(
                    "contexto.mem could not be parsed ({e}): starting from scratch; its old bytes are kept in the field corrupt_previous of the new contexto.mem — review it and copy the summary by hand if needed"
                ));
                let mut c = ContextFile::fresh();
                c.corrupt_previous = Some(text.into_owned());
                (c, warnings)
            }
        }
    }

    pub fn fresh() -> ContextFile {
        ContextFile {
            version: 1,
            ..ContextFile::default()
        }
    }

    pub fn journal(&mut self, kind: &str, text: &str) {
        self.journal.push(JournalEvent {
            time: now_rfc3339(),
            kind: kind.to_string(),
            text: clip(text, 2000),
            summarized: false,
        });
        self.enforce_limits();
    }

    /// Journal ≤ 400 (summarized events dropped first), recent ≤ 60 × 4 KB.
    pub fn enforce_limits(&mut self) {
        while self.journal.len() > MAX_JOURNAL {
            match self.journal.iter().position(|e| e.summarized) {
                Some(i) => {
                    self.journal.remove(i);
                }
                None => {
                    self.journal.remove(0);
                }
            }
        }
        if self.recent.len() > MAX_RECENT {
            let drop = self.recent.len() - MAX_RECENT;
            self.recent.drain(..drop);
        }
        for m in &mut self.recent {
            if m.content.len() > MAX_RECENT_BYTES {
                m.content = clip(&m.content, MAX_RECENT_BYTES);
            }
        }
    }

    pub fn set_recent(&mut self, msgs: Vec<RecentMsg>) {
        self.recent = msgs;
        self.enforce_limits();
    }

    pub fn record_task(&mut self, name: &str, status: &str, sha256: &str) {
        self.tasks.insert(
            name.to_string(),
            TaskRecord {
                status: status.to_string(),
                sha256: sha256.to_string(),
                time: now_rfc3339(),
            },
        );
    }

    /// DONE with this very content.
    pub fn task_done(&self, name: &str, sha256: &str) -> bool {
        self.tasks
            .get(name)
            .is_some_and(|t| t.status == "DONE" && t.sha256 == sha256)
    }

    /// Actions that succeeded in the last run of this same task (same text)
    /// when that run did not end DONE: a task resumed after an error or a
    /// restart keeps the evidence its earlier run gathered. Counted from the
    /// journal ("tool" events whose outcome is ok after "<task> started"), so
    /// events already pruned are not counted.
    pub fn prior_successes(&self, name: &str, sha256: &str) -> u32 {
        let same_text = self
            .tasks
            .get(name)
            .is_some_and(|t| t.sha256 == sha256 && t.status != "DONE");
        if !same_text {
            return 0;
        }
        let started = format!("{name} started");
        let Some(start) = self
            .journal
            .iter()
            .rposition(|e| e.kind == "task" && e.text == started)
        else {
            return 0;
        };
        let mut n = 0u32;
        for e in &self.journal[start + 1..] {
            if e.kind == "task" && e.text.ends_with(" started") {
                break;
            }
            let outcome = e.text.rsplit(" → ").next().unwrap_or("");
            if e.kind == "tool" && e.text.contains(" → ") && outcome.starts_with("ok") {
                n += 1;
            }
        }
        n
    }

    pub fn unsummarized_journal(&self) -> String {
        self.journal
            .iter()
            .filter(|e| !e.summarized)
            .map(|e| format!("{} {} {}", e.time, e.kind, e.text))
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn mark_journal_summarized(&mut self) {
        for e in &mut self.journal {
            e.summarized = true;
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}
