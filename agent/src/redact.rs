//! Masks what looks like a credential before text reaches the model, and counts
//! what it masked. A second layer under the broker's exact redaction of the
//! secrets it knows: this one catches credentials it was never told about
//! (passwords in `key=value` and URLs, bearer tokens, Authorization headers,
//! AWS keys, provider tokens, private key blocks, crypt(3) password hashes
//! as `/etc/shadow` holds them).
//!
//! It must not corrupt the diagnostics an administrator needs: a secret
//! placeholder `{{secret:NAME}}` is never touched; a `passwd.1234:` in a
//! path is not a key; `passwd: You may not …` (a program's message, the
//! value followed by more words on the line) is prose, not `key: value`;
//! `pam_unix(passwd:chauthtok)` names a PAM service and type.

pub const MASK: &str = "[REDACTED]";
const KEY_MASK: &str = "[REDACTED PRIVATE KEY]";

/// Text with credentials masked, and how many were masked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    pub text: String,
    pub count: u32,
}

pub fn redact(input: &str) -> Redacted {
    let (text, keys) = private_keys(input);
    let (text, rest) = scan(&text);
    Redacted {
        text,
        count: keys + rest,
    }
}

/// True when `s` contains something the redactor would mask.
pub fn looks_secret(s: &str) -> bool {
    redact(s).count > 0
}

fn private_keys(s: &str) -> (String, u32) {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut n = 0;
    while let Some(b) = rest.find("-----BEGIN ") {
        let header_end = rest[b..]
            .find("-----\n")
            .or_else(|| rest[b + 11..].find("-----").map(|x| x + 11));
        let Some(he) = header_end else { break };
        let header = &rest[b..b + he];
        if !header.contains("PRIVATE KEY") {
            out.push_str(&rest[..b + 11]);
            rest = &rest[b + 11..];
            continue;
        }
        out.push_str(&rest[..b]);
        out.push_str(KEY_MASK);
        n += 1;
        let after = &rest[b + he..];
        match after.find("-----END ") {
            Some(e) => {
                let tail = &after[e + 9..];
                let close = tail.find("-----").map(|c| c + 5).unwrap_or(tail.len());
                rest = &tail[close..];
            }
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    (out, n)
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-' || c == b'.'
}

fn sensitive_key(key: &str) -> bool {
    let k = key.trim_start_matches('-').to_ascii_lowercase();
    // `--password-file /etc/x`, `token_path=…`: a location, not the secret.
    if k.is_empty()
        || ["file", "path", "dir", "length", "len", "count", "type"]
            .iter()
            .any(|w| k.ends_with(w))
    {
        return false;
    }
    const WORDS: [&str; 10] = [
        "passw",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "api-key",
        "access_key",
        "accesskey",
        "private_key",
    ];
    // `known secrets: db, api`: a list of names, not a value; `ask_secret:
    // db`, the tool's one-line summary, names a secret.
    if matches!(
        k.as_str(),
        "secrets" | "passwords" | "tokens" | "credentials" | "ask_secret"
    ) {
        return false;
    }
    WORDS.iter().any(|w| k.contains(w))
        || k.contains("credential")
        || k == "pass"
        || k.ends_with("_pass")
        || k.ends_with("-pass")
        || k == "pwd_hash"
}

fn value_exempt(v: &str) -> bool {
    let t = v.trim();
    t.is_empty()
        || t.len() < 3
        || t.bytes().all(|c| c.is_ascii_digit() || c == b'.')
        || t.starts_with("{{secret:")
        || t.starts_with(MASK)
        || t.starts_with('$')
        || t.bytes().all(|c| c == b'*' || c == b'x' || c == b'X')
        || matches!(
            t.to_ascii_lowercase().as_str(),
            "true"
                | "false"
                | "null"
                | "none"
                | "yes"
                | "no"
                | "required"
                | "redacted"
                // PAM management groups: `pam_unix(passwd:chauthtok)`.
                | "auth"
                | "account"
                | "session"
                | "chauthtok"
        )
}

fn value_end(b: &[u8], start: usize) -> usize {
    let mut j = start;
    while j < b.len() {
        let c = b[j];
        if c.is_ascii_whitespace()
            || matches!(
                c,
                b',' | b';' | b'&' | b'"' | b'\'' | b')' | b'}' | b']' | b'<' | b'>'
            )
        {
            break;
        }
        j += 1;
    }
    j
}

fn token_end(b: &[u8], start: usize) -> usize {
    let mut j = start;
    while j < b.len()
        && (b[j].is_ascii_alphanumeric()
            || matches!(b[j], b'_' | b'-' | b'.' | b'~' | b'+' | b'/' | b'='))
    {
        j += 1;
    }
    j
}

fn starts_with_ci(hay: &[u8], at: usize, needle: &str) -> bool {
    let n = needle.as_bytes();
    hay.len() >= at + n.len() && hay[at..at + n.len()].eq_ignore_ascii_case(n)
}

fn word_start(b: &[u8], i: usize) -> bool {
    i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// A span of the input to replace by [`MASK`].
type Span = (usize, usize);

fn try_at(s: &str, i: usize) -> Option<Span> {
    let b = s.as_bytes();
    let c = b[i];
    // user:password@host in a URL.
    if c == b':' && s[i..].starts_with("://") {
        let start = i + 3;
        let mut end = start;
        while end < b.len()
            && !b[end].is_ascii_whitespace()
            && !matches!(b[end], b'/' | b'?' | b'#' | b'"' | b'\'')
        {
            end += 1;
        }
        let auth = &s[start..end];
        if let Some(at) = auth.rfind('@') {
            if let Some(colon) = auth[..at].find(':') {
                let (ps, pe) = (start + colon + 1, start + at);
                if !value_exempt(&s[ps..pe]) {
                    return Some((ps, pe));
                }
            }
        }
        return None;
    }
    // key=value, key: value, "key": "value", --key value
    if c == b'=' || c == b':' || (c == b' ' && i > 2) {
        let mut k_end = i;
        if c != b' ' {
            while k_end > 0 && b[k_end - 1] == b' ' {
                k_end -= 1;
            }
            if k_end > 0 && matches!(b[k_end - 1], b'"' | b'\'') {
                k_end -= 1;
            }
        }
        let mut k_start = k_end;
        while k_start > 0 && is_key_char(b[k_start - 1]) {
            k_start -= 1;
        }
        let key = &s[k_start..k_end];
        if c == b' ' && !key.starts_with("--") {
            return None;
        }
        // `/etc/passwd.3901: Permission denied`: a file name, not a key.
        if k_start > 0 && b[k_start - 1] == b'/' {
            return None;
        }
        let lower = key.to_ascii_lowercase();
        let mut v = i + 1;
        if c == b' ' {
            // flag followed by its value
        } else {
            while v < b.len() && b[v] == b' ' {
                v += 1;
            }
        }
        if c == b':' && (lower == "authorization" || lower == "proxy-authorization") {
            let line_end = s[v..].find('\n').map(|x| v + x).unwrap_or(b.len());
            let line = &s[v..line_end];
            let token_start = match line.find(' ') {
                Some(sp) if sp > 0 => v + sp + 1,
                _ => v,
            };
            let e = value_end(b, token_start);
            if e > token_start && !value_exempt(&s[token_start..e]) {
                return Some((token_start, e));
            }
            return None;
        }
        if !sensitive_key(key) {
            return None;
        }
        if v < b.len() && matches!(b[v], b'"' | b'\'') {
            let q = b[v];
            let vs = v + 1;
            let ve = b[vs..]
                .iter()
                .position(|&x| x == q || x == b'\n')
                .map(|x| vs + x)
                .unwrap_or(b.len());
            if !value_exempt(&s[vs..ve]) {
                return Some((vs, ve));
            }
            return None;
        }
        let e = value_end(b, v);
        if c == b':' && v > i + 1 && !rest_of_line_blank(b, e) {
            // `passwd: password unchanged`, `key: value` followed by more
            // words: a message, not a setting.
            return None;
        }
        if e > v && !value_exempt(&s[v..e]) {
            return Some((v, e));
        }
        return None;
    }
    if !word_start(b, i) {
        return None;
    }
    if c == b'$' {
        if let Some(e) = crypt_hash_end(b, i) {
            return Some((i, e));
        }
        return None;
    }
    if starts_with_ci(b, i, "bearer ") {
        let mut v = i + 7;
        while v < b.len() && b[v] == b' ' {
            v += 1;
        }
        let e = token_end(b, v);
        if e - v >= 8 && !value_exempt(&s[v..e]) {
            return Some((v, e));
        }
        return None;
    }
    // AWS access key id.
    if (s[i..].starts_with("AKIA") || s[i..].starts_with("ASIA")) && b.len() >= i + 20 {
        let ok = b[i + 4..i + 20]
            .iter()
            .all(|x| x.is_ascii_uppercase() || x.is_ascii_digit());
        let bounded = b.len() == i + 20 || !b[i + 20].is_ascii_alphanumeric();
        if ok && bounded {
            return Some((i, i + 20));
        }
    }
    const PREFIXES: [(&str, usize); 11] = [
        ("ghp_", 20),
        ("gho_", 20),
        ("ghu_", 20),
        ("ghs_", 20),
        ("ghr_", 20),
        ("github_pat_", 20),
        ("glpat-", 16),
        ("xoxb-", 10),
        ("xoxp-", 10),
        ("sk-", 20),
        ("AIza", 30),
    ];
    for (p, min) in PREFIXES {
        if s[i..].starts_with(p) {
            let e = token_end(b, i + p.len());
            if e - i - p.len() >= min {
                return Some((i, e));
            }
        }
    }
    // JSON Web Token.
    if s[i..].starts_with("eyJ") {
        let e = token_end(b, i);
        let t = &s[i..e];
        if t.len() >= 30 && t.matches('.').count() == 2 {
            return Some((i, e));
        }
    }
    None
}

/// True when only blanks (or a closing `,;}`) follow `at` on its line.
fn rest_of_line_blank(b: &[u8], at: usize) -> bool {
    b[at..]
        .iter()
        .take_while(|c| **c != b'\n')
        .all(|c| c.is_ascii_whitespace() || matches!(c, b',' | b';' | b'}' | b']'))
}

/// The end of a crypt(3) hash starting at `at` (`$6$salt$hash`, `$y$j9T$salt$hash`,
/// `$2b$12$…`): an id of 1–4 of `[0-9a-z]`, then `$`-separated fields, the
/// last one at least 16 of `[./0-9A-Za-z]`.
fn crypt_hash_end(b: &[u8], at: usize) -> Option<usize> {
    let field = |c: u8| c.is_ascii_alphanumeric() || c == b'.' || c == b'/';
    let mut j = at + 1;
    let id_start = j;
    while j < b.len() && (b[j].is_ascii_lowercase() || b[j].is_ascii_digit()) && j - id_start < 5 {
        j += 1;
    }
    if j == id_start || j - id_start > 4 || b.get(j) != Some(&b'$') {
        return None;
    }
    let mut fields = 0;
    let mut last = 0;
    while b.get(j) == Some(&b'$') {
        j += 1;
        let f = j;
        while j < b.len() && (field(b[j]) || b[j] == b'=' || b[j] == b',') {
            j += 1;
        }
        fields += 1;
        last = j - f;
    }
    let bounded = j == b.len() || !(b[j].is_ascii_alphanumeric() || b[j] == b'_');
    (fields >= 2 && last >= 16 && bounded).then_some(j)
}

/// The end of a secret placeholder starting at `at`, if there is one.
fn placeholder_end(s: &str, at: usize) -> Option<usize> {
    let rest = s[at..].strip_prefix("{{secret:")?;
    let close = rest.find("}}")?;
    let name = &rest[..close];
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
    ok.then_some(at + "{{secret:".len() + close + 2)
}

fn scan(s: &str) -> (String, u32) {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        if !s.is_char_boundary(i) || !b[i].is_ascii() {
            i += 1;
            continue;
        }
        // A placeholder is what the model must see and write back as is.
        if let Some(end) = placeholder_end(s, i) {
            i = end;
            continue;
        }
        if let Some((start, end)) = try_at(s, i) {
            if start >= last && end > start && s.is_char_boundary(start) && s.is_char_boundary(end)
            {
                out.push_str(&s[last..start]);
                out.push_str(MASK);
                last = end;
                i = end;
                n += 1;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&s[last..]);
    (out, n)
}
