//! The API key never appears in a message, a log line or a `Debug` output.

/// Shows a secret as `sk-2f1...8a9`: the first six and last three characters of
/// a long key, nothing at all of a short one.
pub fn mask(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    if chars.is_empty() {
        return "(empty)".to_string();
    }
    if chars.len() < 16 {
        return "***".to_string();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 3..].iter().collect();
    format!("{head}...{tail}")
}

/// Replaces every occurrence of `secret` in `text` by its mask. Applied to every
/// message the gateway sends or prints, as a second layer: no message is built
/// from the key in the first place.
pub fn scrub(text: &str, secret: &str) -> String {
    if secret.is_empty() || !text.contains(secret) {
        return text.to_string();
    }
    text.replace(secret, &mask(secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_long_keys_partially_and_short_keys_fully() {
        assert_eq!(mask("sk-2f1abcdefghijklmnop8a9"), "sk-2f1...8a9");
        assert_eq!(mask("short"), "***");
        assert_eq!(mask(""), "(empty)");
    }

    #[test]
    fn scrub_replaces_every_occurrence() {
        let key = "sk-secret-0123456789abcdef";
        let text = format!("a {key} b {key}");
        let out = scrub(&text, key);
        assert!(!out.contains(key));
        assert_eq!(out, "a sk-sec...def b sk-sec...def");
        assert_eq!(scrub("nothing", ""), "nothing");
    }
}
