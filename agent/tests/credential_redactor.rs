//! The credential redactor on real outputs: account tool errors (useradd,
//! passwd, chage, chpasswd), `sshd -T`, `/etc/login.defs`, `getent shadow`
//! (fixture hashes made with `openssl passwd` for throwaway passwords),
//! journal lines, and sysward's own hint texts. Each fixture is checked
//! both ways: what must be masked is, and nothing else changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use sysward_agent::redact::{redact, MASK};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/credential")
            .join(name),
    )
    .unwrap()
}

/// Every line unchanged.
fn untouched(name: &str) {
    let text = fixture(name);
    for line in text.lines() {
        let r = redact(line);
        assert_eq!(r.text, line, "{name}: false positive");
        assert_eq!(r.count, 0, "{name}: {line}");
    }
    assert_eq!(redact(&text).text, text, "{name} as a whole");
}

#[test]
fn account_tool_errors_are_not_mangled() {
    untouched("account-errors.txt");
    let r = redact("useradd: /etc/passwd.3901: Permission denied");
    assert_eq!(r.text, "useradd: /etc/passwd.3901: Permission denied");
}

#[test]
fn sshd_config_dump_is_not_mangled() {
    untouched("sshd-T.txt");
}

#[test]
fn login_defs_is_not_mangled() {
    untouched("login.defs");
}

#[test]
fn journal_lines_are_not_mangled() {
    untouched("journal.txt");
}

#[test]
fn placeholders_and_hints_are_not_mangled() {
    untouched("hints.txt");
    for s in [
        "{{secret:db}}",
        "{{secret:prod-db}}",
        "password: {{secret:prod-db}}",
        "\"token\": \"{{secret:api.token}}\"",
        "--password {{secret:mydb}}",
    ] {
        let r = redact(s);
        assert_eq!(r.text, s);
        assert!(!r.text.contains(MASK), "{s}");
    }
}

#[test]
fn shadow_hashes_are_masked_and_the_rest_kept() {
    let text = fixture("getent-shadow.txt");
    let r = redact(&text);
    for line in text.lines() {
        let hash = line.split(':').nth(1).unwrap();
        if hash.starts_with('$') {
            assert!(!r.text.contains(hash), "hash survives: {line}");
        } else {
            assert!(r.text.contains(line), "changed: {line}");
        }
    }
    assert_eq!(r.count, 3, "{}", r.text);
    assert!(
        r.text.contains(&format!("alice:{MASK}:20230:0:99999:7:::")),
        "{}",
        r.text
    );
}

#[test]
fn credentials_in_the_same_outputs_are_still_masked() {
    for (input, secret) in [
        ("password: s3cr3t-value", "s3cr3t-value"),
        ("DB_PASSWORD=hunter2secret", "hunter2secret"),
        ("  password: \"yaml-Secret-9\"", "yaml-Secret-9"),
        ("chpasswd: alice:Plain-Passw0rd", "Plain-Passw0rd"),
        (
            "Nov 29 host app[1]: connecting to postgres://app:Pa55word@db01/app",
            "Pa55word",
        ),
        ("token=abcd1234efgh", "abcd1234efgh"),
    ] {
        let r = redact(input);
        assert!(!r.text.contains(secret), "{input} → {}", r.text);
        assert!(r.count >= 1, "{input}");
    }
}
