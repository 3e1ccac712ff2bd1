//! The value redactor on the forms outputs really take: every encoding
//! `broker/SECRETS.md` lists, %-encoding of every byte, hex dumps as `od`,
//! `hexdump -C` and `xxd` print them (fixtures captured from those tools on
//! Debian 12), and runs of a long value as `cut -c` leaves them. Each case is
//! checked both ways: the value is gone, and unrelated text is left as is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use sysward_broker::redact::{RedactEntry, Redactor};

/// The value the fixtures were made from (`printf %s "$V" | od -tx1` …).
const V: &str = "hunter2-Pa ss/wörd!9";

fn red(value: &str) -> Arc<Redactor> {
    Arc::new(Redactor::new(vec![RedactEntry::secret(
        "db",
        value.as_bytes(),
    )]))
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/encoded")
            .join(name),
    )
    .unwrap()
}

/// True when any 4 consecutive bytes of the value's hex survive, or any 6
/// consecutive bytes of the value itself.
fn leaks(out: &[u8], value: &[u8]) -> Option<String> {
    let hex: Vec<String> = value.iter().map(|b| format!("{b:02x}")).collect();
    let text = String::from_utf8_lossy(out).to_lowercase();
    for w in hex.windows(4) {
        for sep in ["", " "] {
            if text.contains(&w.join(sep)) {
                return Some(format!("hex {}", w.join(sep)));
            }
        }
    }
    for w in value.windows(6) {
        if out.windows(6).any(|o| o == w) {
            return Some(format!("raw {:?}", String::from_utf8_lossy(w)));
        }
    }
    None
}

/// Redacts `data` one-shot and streamed in small chunks; both must agree.
fn both(r: &Arc<Redactor>, data: &[u8]) -> (Vec<u8>, u64) {
    let (whole, counts) = r.redact_bytes(data);
    for chunk in [1, 7, 64] {
        let mut s = r.stream();
        let mut out = Vec::new();
        for c in data.chunks(chunk) {
            out.extend(s.push(c));
        }
        out.extend(s.finish());
        assert_eq!(out, whole, "stream in {chunk}-byte chunks differs");
    }
    (whole, counts.total())
}

fn percent_all(v: &[u8], upper: bool) -> String {
    v.iter()
        .map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

#[test]
fn every_listed_encoding_is_masked() {
    let r = red(V);
    let b = V.as_bytes();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let spaced: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    let json = serde_json::to_string(V).unwrap();
    let forms: Vec<(&str, String)> = vec![
        ("raw", V.to_string()),
        ("hex", hex.clone()),
        ("HEX", hex.to_uppercase()),
        ("spaced hex", spaced.join(" ")),
        ("spaced HEX", spaced.join(" ").to_uppercase()),
        ("%-encoded every byte", percent_all(b, false)),
        ("%-ENCODED every byte", percent_all(b, true)),
        ("url, upper", "hunter2-Pa%20ss%2Fw%C3%B6rd%219".to_string()),
        ("url, lower", "hunter2-Pa%20ss%2fw%c3%b6rd%219".to_string()),
        (
            "url, + for space",
            "hunter2-Pa+ss%2Fw%C3%B6rd%219".to_string(),
        ),
        ("url, lower, +", "hunter2-Pa+ss%2fw%c3%b6rd%219".to_string()),
        ("json", json[1..json.len() - 1].to_string()),
        ("json ascii", "hunter2-Pa ss/w\\u00f6rd!9".to_string()),
        ("json ASCII", "hunter2-Pa ss/w\\u00F6rd!9".to_string()),
        (
            "json, escaped slash",
            "hunter2-Pa ss\\/w\\u00f6rd!9".to_string(),
        ),
    ];
    for (what, form) in forms {
        let text = format!("before {form} after");
        let (out, n) = both(&r, text.as_bytes());
        assert_eq!(
            String::from_utf8_lossy(&out),
            "before {{secret:db}} after",
            "{what}: {form}"
        );
        assert_eq!(n, 1, "{what}");
    }
}

#[test]
fn hex_dumps_of_real_tools_are_masked() {
    let r = red(V);
    for name in [
        "od-tx1.txt",
        "od-tx1-w8.txt",
        "od-An-tx1.txt",
        "od-An-tx1-offset.txt",
        "hexdump-C.txt",
        "hexdump-C-offset.txt",
        "xxd.txt",
        "xxd-offset.txt",
        "xxd-p.txt",
    ] {
        let data = fixture(name);
        let (out, n) = both(&r, &data);
        assert!(
            n >= 1,
            "{name}: nothing masked:\n{}",
            String::from_utf8_lossy(&out)
        );
        if let Some(l) = leaks(&out, V.as_bytes()) {
            panic!("{name}: {l} survives:\n{}", String::from_utf8_lossy(&out));
        }
        assert!(
            String::from_utf8_lossy(&out).contains("{{secret:db}}"),
            "{name}"
        );
    }
    // The offset columns and the data around the value are kept.
    let (out, _) = both(&r, &fixture("hexdump-C-offset.txt"));
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("00000000  70 72 65 66 69 78 3a {{secret:db}}"),
        "{out}"
    );
    assert!(out.contains("\n00000020  66 69 78"), "{out}");
}

#[test]
fn runs_of_a_long_value_are_masked() {
    let r = red(V);
    let data = fixture("cut.txt");
    let (out, n) = both(&r, &data);
    let lines: Vec<String> = String::from_utf8_lossy(&out)
        .lines()
        .map(str::to_string)
        .collect();
    // cut -c1-12, 5-16, 9-21, 3-17: runs of 12 or more bytes.
    for (i, l) in lines.iter().take(4).enumerate() {
        assert_eq!(l, "{{secret:db}}", "line {i}");
    }
    assert_eq!(n, 4);
    // cut -c1-10 is shorter than the 12-byte threshold (by design: short runs
    // are common words).
    assert_eq!(lines[4], "hunter2-Pa");
    // A run inside other text.
    let (out, _) = both(&r, b"log: user=hunter2-Pa ss/w tried");
    assert_eq!(
        String::from_utf8_lossy(&out),
        "log: user={{secret:db}} tried"
    );
    // A short value is masked whole only.
    let short = red("abcdefghijkl");
    assert_eq!(
        short.redact_str("abcdefghijk abcdefghijkl").0,
        "abcdefghijk {{secret:db}}"
    );
}

#[test]
fn ordinary_dumps_and_text_are_left_alone() {
    let r = red(V);
    for text in [
        "00000000  70 72 65 66 69 78 3a 73  75 66 66 69 78 0a        |prefix:suffix.|\n",
        "0000000 68 75 6e 74 65 72 0a\n0000007\n",
        "hunter2 is a classic password; Pa ss/w is not\n",
        "%68%75%6e%74%65%72%32 and 68756e746572\n",
    ] {
        let (out, n) = both(&r, text.as_bytes());
        assert_eq!(n, 0, "{text}");
        assert_eq!(out, text.as_bytes());
    }
}
