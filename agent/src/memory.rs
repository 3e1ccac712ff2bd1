//! memoria.md: durable knowledge, edited by `remember` and `forget`.
//!
//! Only the lines a call touches change: hand-written text, other sections and
//! code blocks stay verbatim. `Label: value` facts update the line with the same
//! label; identical facts are not repeated; credential-looking facts are
//! refused unless `sensitive=true`.

use crate::redact::looks_secret;

fn fences(lines: &[String]) -> Vec<bool> {
    let mut inside = false;
    lines
        .iter()
        .map(|l| {
            let fence = l.trim_start().starts_with("```") || l.trim_start().starts_with("~~~");
            let was = inside;
            if fence {
                inside = !inside;
            }
            was || fence
        })
        .collect()
}

fn heading_level(l: &str) -> Option<(usize, &str)> {
    let hashes = l.bytes().take_while(|&b| b == b'#').count();
    if hashes == 0 || hashes > 6 {
        return None;
    }
    let rest = &l[hashes..];
    if !rest.starts_with(' ') {
        return None;
    }
    Some((hashes, rest.trim()))
}

fn find_heading(
    lines: &[String],
    fence: &[bool],
    level: usize,
    name: &str,
    from: usize,
    to: usize,
) -> Option<usize> {
    (from..to).find(|&i| {
        !fence[i]
            && heading_level(&lines[i])
                .is_some_and(|(lv, t)| lv == level && t.eq_ignore_ascii_case(name.trim()))
    })
}

/// End (exclusive) of the block opened by the heading at `start` of `level`.
fn block_end(lines: &[String], fence: &[bool], start: usize, level: usize) -> usize {
    (start + 1..lines.len())
        .find(|&i| !fence[i] && heading_level(&lines[i]).is_some_and(|(lv, _)| lv <= level))
        .unwrap_or(lines.len())
}

fn fact_text(l: &str) -> Option<&str> {
    let t = l.trim_start();
    t.strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .map(str::trim)
}

fn label(fact: &str) -> Option<String> {
    let (l, v) = fact.split_once(':')?;
    let l = l.trim();
    if l.is_empty() || l.len() > 60 || v.trim().is_empty() || l.contains("//") {
        return None;
    }
    Some(l.to_ascii_lowercase())
}

/// A value that points to where a credential lives instead of holding it.
fn is_reference(value: &str) -> bool {
    let v = value.trim();
    let first = v.split_whitespace().next().unwrap_or("");
    v.starts_with("{{secret:")
        || v.starts_with('/')
        || v.starts_with("~/")
        || matches!(
            first,
            "secret-tool"
                | "pass"
                | "gopass"
                | "vault"
                | "op"
                | "bw"
                | "keyring"
                | "see"
                | "in"
                | "stored"
                | "kept"
        )
}

/// Whether a fact looks like it holds a credential.
pub fn looks_credential(fact: &str) -> bool {
    if let Some((l, v)) = fact.split_once(':') {
        let low = l.to_ascii_lowercase();
        let sensitive_label = [
            "password",
            "passwd",
            "secret",
            "token",
            "api key",
            "api_key",
            "apikey",
            "private key",
            "passphrase",
            "credential",
        ]
        .iter()
        .any(|w| low.contains(w))
            || low.trim() == "pass";
        if sensitive_label && !v.trim().is_empty() {
            return !is_reference(v);
        }
        if is_reference(v) {
            return false;
        }
    }
    looks_secret(fact)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn split_lines(text: &str) -> Vec<String> {
    text.lines().map(str::to_string).collect()
}

fn join_lines(lines: &[String]) -> String {
    let mut s = lines.join("\n");
    s.push('\n');
    s
}

/// Body range of the target: (first body line, end exclusive).
fn target_range(
    lines: &[String],
    fence: &[bool],
    s: usize,
    se: usize,
    entry_at: Option<usize>,
) -> (usize, usize) {
    match entry_at {
        Some(e) => (e + 1, block_end(lines, fence, e, 3).min(se)),
        None => {
            let first_entry = (s + 1..se)
                .find(|&i| !fence[i] && heading_level(&lines[i]).is_some_and(|(lv, _)| lv == 3))
                .unwrap_or(se);
            (s + 1, first_entry)
        }
    }
}

/// Adds or updates facts. Returns the new text and a one-line report.
pub fn remember(
    text: &str,
    section: &str,
    entry: Option<&str>,
    facts: &[String],
    replace: bool,
    sensitive: bool,
) -> Result<(String, String), String> {
    let section = one_line(section);
    let entry = entry.map(one_line).filter(|e| !e.is_empty());
    if section.is_empty() {
        return Err("section must not be empty".into());
    }
    let facts: Vec<String> = facts
        .iter()
        .map(|f| one_line(f))
        .filter(|f| !f.is_empty())
        .collect();
    if facts.is_empty() {
        return Err("facts must hold at least one non-empty fact".into());
    }
    if !sensitive {
        if let Some(f) = facts.iter().find(|f| looks_credential(f)) {
            return Err(format!(
                "refused: {:?} looks like a credential. Store a reference instead (e.g. \"Password: secret-tool lookup service NAME\" or {{{{secret:NAME}}}}), or set sensitive=true if the operator asked for it",
                f.split(':').next().unwrap_or("fact")
            ));
        }
    }
    let mut lines = split_lines(text);
    let mut fence = fences(&lines);
    let s = match find_heading(&lines, &fence, 2, &section, 0, lines.len()) {
        Some(s) => s,
        None => {
            while lines.last().is_some_and(|l| l.trim().is_empty()) {
                lines.pop();
            }
            if !lines.is_empty() {
                lines.push(String::new());
            }
            lines.push(format!("## {section}"));
            fence = fences(&lines);
            lines.len() - 1
        }
    };
    let mut se = block_end(&lines, &fence, s, 2);
    let entry_at = match &entry {
        None => None,
        Some(e) => match find_heading(&lines, &fence, 3, e, s + 1, se) {
            Some(i) => Some(i),
            None => {
                let mut at = se;
                while at > s + 1 && lines[at - 1].trim().is_empty() {
                    at -= 1;
                }
                lines.insert(at, format!("### {e}"));
                let heading_at = if at > s + 1 {
                    lines.insert(at, String::new());
                    at + 1
                } else {
                    at
                };
                fence = fences(&lines);
                se = block_end(&lines, &fence, s, 2);
                Some(heading_at)
            }
        },
    };
    let (b0, mut b1) = target_range(&lines, &fence, s, se, entry_at);
    if replace {
        let mut i = b0;
        while i < b1 {
            if !fence[i] && fact_text(&lines[i]).is_some() {
                lines.remove(i);
                fence.remove(i);
                b1 -= 1;
            } else {
                i += 1;
            }
        }
    }
    let (mut added, mut updated, mut same) = (0, 0, 0);
    for f in &facts {
        let lab = label(f);
        let mut done = false;
        for i in b0..b1 {
            if fence[i] {
                continue;
            }
            let Some(existing) = fact_text(&lines[i]) else {
                continue;
            };
            if existing == f {
                same += 1;
                done = true;
                break;
            }
            if lab.is_some() && label(existing) == lab {
                lines[i] = format!("- {f}");
                updated += 1;
                done = true;
                break;
            }
        }
        if !done {
            let mut at = b1;
            while at > b0 && lines[at - 1].trim().is_empty() {
                at -= 1;
            }
            lines.insert(at, format!("- {f}"));
            fence.insert(at, false);
            b1 += 1;
            added += 1;
        }
    }
    let place = match &entry {
        Some(e) => format!("{section} / {e}"),
        None => section.clone(),
    };
    Ok((
        join_lines(&lines),
        format!("memoria.md ({place}): {added} added, {updated} updated, {same} already known"),
    ))
}

/// Removes a fact (by label or exact text), an entry, or a whole section.
pub fn forget(
    text: &str,
    section: &str,
    entry: Option<&str>,
    fact: Option<&str>,
) -> Result<(String, String), String> {
    let mut lines = split_lines(text);
    let fence = fences(&lines);
    let s = find_heading(&lines, &fence, 2, section, 0, lines.len())
        .ok_or_else(|| format!("memoria.md has no section {section:?}"))?;
    let se = block_end(&lines, &fence, s, 2);
    let entry = entry.map(str::trim).filter(|e| !e.is_empty());
    let entry_at = match entry {
        None => None,
        Some(e) => Some(
            find_heading(&lines, &fence, 3, e, s + 1, se)
                .ok_or_else(|| format!("section {section:?} has no entry {e:?}"))?,
        ),
    };
    match fact.map(str::trim).filter(|f| !f.is_empty()) {
        Some(f) => {
            let (b0, b1) = target_range(&lines, &fence, s, se, entry_at);
            let flab = label(f).unwrap_or_else(|| f.to_ascii_lowercase());
            let keep: Vec<bool> = (0..lines.len())
                .map(|i| {
                    if i < b0 || i >= b1 || fence[i] {
                        return true;
                    }
                    match fact_text(&lines[i]) {
                        Some(t) => !(t == f || label(t).is_some_and(|l| l == flab)),
                        None => true,
                    }
                })
                .collect();
            let removed = keep.iter().filter(|k| !**k).count();
            if removed == 0 {
                return Err(format!("no fact {f:?} in {section:?}"));
            }
            let mut it = keep.iter();
            lines.retain(|_| *it.next().unwrap_or(&true));
            Ok((
                join_lines(&lines),
                format!("memoria.md: {removed} fact(s) removed"),
            ))
        }
        None => {
            let (start, end, what) = match entry_at {
                Some(e) => (e, block_end(&lines, &fence, e, 3).min(se), "entry"),
                None => (s, se, "section"),
            };
            lines.drain(start..end);
            Ok((join_lines(&lines), format!("memoria.md: {what} removed")))
        }
    }
}
