//! `read_journal`: journalctl with options built from checked arguments
//! (run as an argv, never through a shell), and its `-o json` output turned
//! into one readable line per entry.

use serde::Deserialize;

/// At most this many entries.
pub const MAX_ENTRIES: u64 = 2000;
const DEFAULT_ENTRIES: u64 = 200;
/// Longest message shown per entry.
const MAX_MESSAGE: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default)]
    unit: Option<String>,
    #[serde(default)]
    priority: Option<String>,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    grep: Option<String>,
    #[serde(default)]
    lines: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

const PRIORITIES: [&str; 8] = [
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

fn checked<'a>(
    what: &str,
    value: &'a str,
    max: usize,
    ok: impl Fn(usize, char) -> bool,
) -> Result<&'a str, String> {
    if value.is_empty() || value.len() > max || !value.chars().enumerate().all(|(i, c)| ok(i, c)) {
        return Err(format!(
            "read_journal: {what} {:?} is not accepted (at most {max} characters of the usual form)",
            crate::sanitize::one_line(value, 80)
        ));
    }
    Ok(value)
}

/// The journalctl argv for a request.
pub fn argv(arguments: &str) -> Result<Vec<String>, String> {
    let a: Args = serde_json::from_str(arguments)
        .map_err(|e| format!("invalid arguments for read_journal: {e}"))?;
    let _ = &a.reason;
    let n = a.lines.unwrap_or(DEFAULT_ENTRIES);
    if n == 0 || n > MAX_ENTRIES {
        return Err(format!("read_journal: lines must be 1 to {MAX_ENTRIES}"));
    }
    let mut argv: Vec<String> = [
        "journalctl",
        "--no-pager",
        "--quiet",
        "--output=json",
        "--output-fields=MESSAGE,PRIORITY,_SYSTEMD_UNIT,SYSLOG_IDENTIFIER,_PID",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push(format!("--lines={n}"));
    if let Some(u) = &a.unit {
        // Never an option: `--vacuum-size=1` is not a unit.
        let u = checked("unit", u, 256, |i, c| {
            (c.is_ascii_alphanumeric() || "@._:-\\".contains(c)) && (i > 0 || c != '-')
        })?;
        argv.push(format!("--unit={u}"));
    }
    if let Some(p) = &a.priority {
        let level = PRIORITIES
            .iter()
            .position(|x| x == p)
            .or_else(|| p.parse::<usize>().ok().filter(|v| *v < PRIORITIES.len()))
            .ok_or_else(|| {
                format!(
                    "read_journal: priority {:?} is not one of {} or 0-7",
                    crate::sanitize::one_line(p, 20),
                    PRIORITIES.join(", ")
                )
            })?;
        argv.push(format!("--priority={level}"));
    }
    let time_char = |_: usize, c: char| c.is_ascii_alphanumeric() || " :.+-".contains(c);
    if let Some(s) = &a.since {
        argv.push(format!("--since={}", checked("since", s, 64, time_char)?));
    }
    if let Some(g) = &a.grep {
        if g.is_empty() || g.len() > 256 || g.contains('\0') {
            return Err("read_journal: grep must be 1 to 256 bytes".to_string());
        }
        argv.push(format!("--grep={g}"));
    }
    Ok(argv)
}

/// A journal field: a string, or bytes (an array of numbers) for a value
/// that is not UTF-8 or holds control characters.
fn field(entry: &serde_json::Value, name: &str) -> Option<String> {
    match entry.get(name)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(bytes) => {
            let b: Vec<u8> = bytes
                .iter()
                .filter_map(|v| v.as_u64().and_then(|n| u8::try_from(n).ok()))
                .collect();
            Some(String::from_utf8_lossy(&b).into_owned())
        }
        _ => None,
    }
}

fn timestamp(entry: &serde_json::Value) -> String {
    let micros = field(entry, "__REALTIME_TIMESTAMP").and_then(|s| s.parse::<i128>().ok());
    let when = micros.and_then(|m| time::OffsetDateTime::from_unix_timestamp_nanos(m * 1000).ok());
    match when {
        Some(t) => t
            .format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
            ))
            .unwrap_or_else(|_| "?".to_string()),
        None => "?".to_string(),
    }
}

/// One line per entry: `TIME SOURCE[PID] PRIORITY: MESSAGE`. A line that is
/// not a journal entry is kept as it is.
pub fn format(json_lines: &str) -> String {
    let mut out = String::new();
    for line in json_lines.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        if !entry.is_object() {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let source = field(&entry, "_SYSTEMD_UNIT")
            .or_else(|| field(&entry, "SYSLOG_IDENTIFIER"))
            .unwrap_or_else(|| "?".to_string());
        let pid = field(&entry, "_PID")
            .map(|p| format!("[{p}]"))
            .unwrap_or_default();
        let priority = field(&entry, "PRIORITY")
            .and_then(|p| p.parse::<usize>().ok())
            .and_then(|p| PRIORITIES.get(p).copied())
            .unwrap_or("?");
        let message = field(&entry, "MESSAGE").unwrap_or_default();
        let message = crate::sanitize::one_line(&message, MAX_MESSAGE);
        out.push_str(&format!(
            "{} {source}{pid} {priority}: {message}\n",
            timestamp(&entry)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn arguments_become_options_and_hostile_ones_are_refused() {
        let v = argv(r#"{"unit":"ssh.service","priority":"warning","since":"-1h","grep":"Failed password","lines":50}"#).unwrap();
        assert!(v.contains(&"--unit=ssh.service".to_string()));
        assert!(v.contains(&"--priority=4".to_string()));
        assert!(v.contains(&"--since=-1h".to_string()));
        assert!(v.contains(&"--grep=Failed password".to_string()));
        assert!(v.contains(&"--lines=50".to_string()));
        for bad in [
            r#"{"unit":"--vacuum-size=1"}"#,
            r#"{"unit":"a b"}"#,
            r#"{"priority":"loud"}"#,
            r#"{"since":"$(id)"}"#,
            r#"{"lines":0}"#,
            r#"{"lines":100000}"#,
            r#"{"flush":true}"#,
        ] {
            assert!(argv(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entries_become_lines() {
        let json = concat!(
            r#"{"__REALTIME_TIMESTAMP":"1764583200000000","_SYSTEMD_UNIT":"ssh.service","_PID":"42","PRIORITY":"6","MESSAGE":"Accepted publickey"}"#,
            "\n",
            r#"{"__REALTIME_TIMESTAMP":"1764583201000000","SYSLOG_IDENTIFIER":"kernel","PRIORITY":"3","MESSAGE":[104,105,10,27]}"#,
            "\n"
        );
        let text = format(json);
        assert!(
            text.contains("2025-12-01T10:00:00Z ssh.service[42] info: Accepted publickey"),
            "{text}"
        );
        assert!(text.contains("kernel err: hi"), "{text}");
    }
}
