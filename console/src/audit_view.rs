//! The audit trail for the operator: `audit verify` (the chain, the seals,
//! the journal's anchors) and `audit show`, read from the root-only files by
//! the console itself (they need no broker state), with the same checks the
//! broker makes at its start.

use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;
use sysward_broker::{audit, project, sanitize, seal};

/// One record as a readable timeline line.
pub fn render_record(v: &Value) -> String {
    let e = &v["event"];
    let time = v["time"].as_str().unwrap_or("?");
    let kind = e["event"].as_str().unwrap_or("?");
    let s = |k: &str| {
        e[k].as_str()
            .map(|x| sanitize::one_line(x, 200))
            .unwrap_or_default()
    };
    let detail = match kind {
        "tool" => format!(
            "{} `{}` — {} {} ({}, by {}) status {} exit {} {} ms",
            s("tool"),
            s("request"),
            s("category"),
            s("risk"),
            s("decision"),
            if e["approved_by"].is_string() {
                s("approved_by")
            } else {
                s("source")
            },
            s("status"),
            e["exit_code"],
            e["duration_ms"]
        ),
        "action_start" => format!(
            "{} `{}` — {} {} ({}, by {}) starting; profile {}",
            s("tool"),
            s("request"),
            s("category"),
            s("risk"),
            s("decision"),
            s("approved_by"),
            s("profile")
        ),
        "session_start" => format!(
            "session {} by {} ({})",
            s("session"),
            s("operator"),
            s("mode")
        ),
        "session_end" => format!(
            "session {} ended, exit {}, {} actions, {} denials",
            s("session"),
            e["exit_code"],
            e["actions"],
            e["denials"]
        ),
        "task_end" => format!(
            "task {} {} after {} steps",
            s("task"),
            s("status"),
            e["steps"]
        ),
        _ => sanitize::one_line(&e.to_string(), 300),
    };
    format!("{} #{} {:<14} {}", time, v["seq"], kind, detail)
}

pub fn verify(layout: &project::Layout, acknowledge: bool) -> Result<i32> {
    let v = audit::verify(&layout.audit_log(), &layout.audit_head())?;
    match &v.first_break {
        None => {
            println!(
                "audit chain intact: {} records, last hash {}",
                v.records, v.last_hash
            );
            Ok(0)
        }
        Some(b) => {
            // Acknowledged before anything is printed: a reader that goes
            // away (SIGPIPE) must not leave it half done.
            if acknowledge {
                audit::acknowledge_break(layout, b)?;
            }
            println!("audit chain BROKEN at record {}: {}", b.line, b.problem);
            println!("{} records verified before the break", v.records);
            if acknowledge {
                println!("break acknowledged: the damaged log was moved aside and a new chain starts with a record of this acknowledgement");
                if layout.agent_dir().read_dir().is_ok_and(|mut d| {
                    d.any(|e| {
                        e.is_ok_and(|e| {
                            e.file_name()
                                .to_string_lossy()
                                .starts_with("audit.seal.broken-")
                        })
                    })
                }) {
                    println!("sealing: the old seals stay with the damaged log (its key still verifies it); set up new keys for the new chain with `sysward audit setup-keys`");
                }
                Ok(0)
            } else {
                println!("sessions are refused until an operator runs `sysward audit verify --acknowledge`");
                Ok(1)
            }
        }
    }
}

pub fn verify_journal(layout: &project::Layout) -> Result<i32> {
    let c = audit::verify_journal(&layout.audit_log())?;
    if c.anchors == 0 {
        println!("journal: no anchors of {} in the journal (journald was not running, or the journal was cleared)", layout.audit_log().display());
        return Ok(1);
    }
    if c.problems.is_empty() {
        println!(
            "journal: the log agrees with the {} anchor(s) the journal holds",
            c.anchors
        );
        return Ok(0);
    }
    for p in &c.problems {
        println!("journal: MISMATCH: {p}");
    }
    Ok(1)
}

pub fn verify_seals(layout: &project::Layout, key_file: &Path) -> Result<i32> {
    let mut text = String::new();
    let read = if key_file == Path::new("-") {
        std::io::Read::read_to_string(&mut std::io::Read::take(std::io::stdin(), 4096), &mut text)
    } else {
        std::fs::File::open(key_file).and_then(|f| {
            std::io::Read::read_to_string(&mut std::io::Read::take(f, 4096), &mut text)
        })
    };
    read.with_context(|| {
        format!(
            "cannot read the verification key from {}",
            key_file.display()
        )
    })?;
    let k0 = seal::parse_key(&text)?;
    let report = audit::verify_seals(&layout.audit_log(), &layout.audit_head(), k0)?;
    match report.problem {
        None => {
            println!(
                "seals intact: {} epoch(s) sealed and verified with the key; {} record(s) after the last seal are not sealed yet (the next session end seals them)",
                report.seals, report.unsealed
            );
            Ok(0)
        }
        Some(problem) => {
            println!("seals BROKEN: {problem}");
            println!("{} epoch(s) verified before that", report.seals);
            Ok(1)
        }
    }
}

pub fn show(layout: &project::Layout, session: Option<&str>, json: bool) -> Result<i32> {
    let text = std::fs::read_to_string(layout.audit_log())
        .with_context(|| format!("cannot read {}", layout.audit_log().display()))?;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) ends the listing quietly.
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            if writeln!(out, "(unreadable record)").is_err() {
                return Ok(0);
            }
            continue;
        };
        let event = &v["event"];
        if let Some(want) = session {
            if event["session"].as_str() != Some(want) {
                continue;
            }
        }
        let shown = if json {
            writeln!(out, "{line}")
        } else {
            writeln!(out, "{}", render_record(&v))
        };
        if shown.is_err() {
            return Ok(0);
        }
    }
    Ok(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_action_start_renders_as_one_line() {
        let v = json!({"seq": 4, "time": "t", "event": {"event": "action_start", "tool": "exec",
            "request": "df -h", "category": "read-only", "risk": "safe", "decision": "allow",
            "approved_by": "policy", "profile": "read-only: uid 0"}});
        assert_eq!(
            render_record(&v),
            "t #4 action_start   exec `df -h` — read-only safe (allow, by policy) starting; profile read-only: uid 0"
        );
    }
}
