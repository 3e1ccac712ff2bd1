//! Turning what a server sent into text a model can read: HTML reduced to
//! text (scripts and styles dropped, links as numbered references), other
//! text as is, control characters removed, everything bounded.

use serde::Deserialize;
use std::fmt::Write as _;

/// Most characters of rendered text handed back.
pub const MAX_TEXT_CHARS: usize = 200_000;

/// `s` on one line, control characters dropped, at most `max` characters.
pub fn clean_line(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

/// Text with terminal escapes and other control characters removed (tabs
/// and newlines kept), cut at [`MAX_TEXT_CHARS`].
pub fn clean_text(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len().min(MAX_TEXT_CHARS));
    let mut count = 0usize;
    for c in s.chars() {
        if count == MAX_TEXT_CHARS {
            return (out, true);
        }
        if c == '\n' || c == '\t' || !c.is_control() {
            out.push(c);
            count += 1;
        }
    }
    (out, false)
}

/// What kind of body a Content-Type announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Html,
    Text,
    Binary,
}

pub fn body_kind(content_type: Option<&str>) -> BodyKind {
    let Some(ct) = content_type else {
        return BodyKind::Text;
    };
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "text/html" || mime == "application/xhtml+xml" {
        return BodyKind::Html;
    }
    let texty = mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || matches!(
            mime.as_str(),
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-sh"
                | "application/toml"
                | "application/yaml"
                | "application/x-yaml"
                | ""
        );
    if texty {
        BodyKind::Text
    } else {
        BodyKind::Binary
    }
}

/// The body as text: HTML converted, other text decoded; binary (by type,
/// or by a NUL byte or invalid UTF-8 in a text type) refused.
pub fn body_text(body: &[u8], kind: BodyKind, content_type: &str) -> Result<String, String> {
    let refuse = || {
        format!(
            "binary content ({content_type}, {} bytes) is not shown; web_fetch returns text only",
            body.len()
        )
    };
    match kind {
        BodyKind::Binary => Err(refuse()),
        BodyKind::Html => html2text::config::plain()
            .string_from_read(body, 100)
            .map_err(|e| format!("cannot read the HTML: {e}")),
        BodyKind::Text => {
            if body.contains(&0) {
                return Err(refuse());
            }
            std::str::from_utf8(body)
                .map(str::to_string)
                .map_err(|_| refuse())
        }
    }
}

/// A SearXNG answer (`format=json`): only the fields shown; the rest of
/// its many fields are ignored.
#[derive(Debug, Deserialize)]
struct SearchAnswer {
    #[serde(default)]
    results: Vec<SearchHit>,
}

#[derive(Debug, Deserialize)]
struct SearchHit {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    content: Option<String>,
}

/// The search results as a numbered list of title, URL and snippet.
pub fn search_results(body: &[u8], max: u32, endpoint: &str) -> Result<String, String> {
    let answer: SearchAnswer = serde_json::from_slice(body).map_err(|e| {
        format!("the search service at {endpoint} did not answer SearXNG JSON ({e}); check SEARCH_URL and that the service enables format=json")
    })?;
    let mut out = String::new();
    let hits: Vec<&SearchHit> = answer
        .results
        .iter()
        .filter(|h| {
            h.url
                .as_deref()
                .is_some_and(|u| u.starts_with("http://") || u.starts_with("https://"))
        })
        .take(max as usize)
        .collect();
    if hits.is_empty() {
        out.push_str("no results\n");
    }
    for (i, h) in hits.iter().enumerate() {
        let _ = writeln!(
            out,
            "{}. {}\n   {}\n   {}",
            i + 1,
            clean_line(h.title.as_deref().unwrap_or("(no title)"), 200),
            clean_line(h.url.as_deref().unwrap_or(""), 2048),
            clean_line(h.content.as_deref().unwrap_or(""), 500)
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_loses_scripts_and_styles_and_keeps_links_as_references() {
        let page = br#"<html><head><style>body{color:red}</style><script>alert("x")</script></head>
<body><h1>Release notes</h1><p>Fixed in <a href="https://example.org/1.2">1.2</a>.</p></body></html>"#;
        let text = body_text(page, BodyKind::Html, "text/html").unwrap_or_default();
        assert!(
            text.contains("Release notes") && text.contains("1.2"),
            "{text}"
        );
        assert!(text.contains("https://example.org/1.2"), "{text}");
        assert!(
            !text.contains("alert") && !text.contains("color:red"),
            "{text}"
        );
    }

    #[test]
    fn binary_is_refused_whatever_it_claims() {
        assert!(body_text(b"\x7fELF\0\0", BodyKind::Text, "text/plain").is_err());
        assert!(body_text(b"abc", BodyKind::Binary, "application/octet-stream").is_err());
        assert!(body_text(&[0xff, 0xfe, 0x41], BodyKind::Text, "text/plain").is_err());
        assert_eq!(body_kind(Some("image/png")), BodyKind::Binary);
        assert_eq!(body_kind(Some("text/html; charset=utf-8")), BodyKind::Html);
        assert_eq!(body_kind(Some("application/json")), BodyKind::Text);
    }

    #[test]
    fn control_characters_never_reach_the_model() {
        let (t, cut) = clean_text("a\x1b[31mred\x07\nb\tc");
        assert_eq!(t, "a[31mred\nb\tc");
        assert!(!cut);
    }

    #[test]
    fn search_answers_render_capped_and_only_http_links() {
        let body = br#"{"query":"x","number_of_results":3,"results":[
            {"title":"One","url":"https://one.example/","content":"first","engine":"e"},
            {"title":"Bad","url":"javascript:alert(1)","content":"no"},
            {"title":"Two","url":"http://two.example/","content":"second"}],"answers":[],"suggestions":[]}"#;
        let out = search_results(body, 1, "s").unwrap_or_default();
        assert!(
            out.contains("1. One") && !out.contains("Two") && !out.contains("javascript"),
            "{out}"
        );
        assert!(search_results(b"<html>", 5, "s").is_err());
    }
}
