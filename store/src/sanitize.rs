//! Text from the agent or the model on its way to a person's terminal: C0/C1
//! controls (but newline and tab), bidi overrides and isolates, zero-width
//! characters, the BOM and Unicode tag characters are removed, so a model can
//! neither forge a prompt with escape sequences nor hide text (seed 001).

/// Sanitizes `text` and cuts it to at most `max_chars` characters, marking a cut
/// with `…`.
pub fn for_terminal(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(4)));
    let mut count = 0usize;
    for c in text.chars() {
        if !is_shown(c) {
            continue;
        }
        if count == max_chars {
            out.push('…');
            return out;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// One line (newlines and tabs become spaces), for prompts and summaries.
pub fn one_line(text: &str, max_chars: usize) -> String {
    for_terminal(&text.replace(['\n', '\t', '\r'], " "), max_chars)
}

fn is_shown(c: char) -> bool {
    let u = c as u32;
    match u {
        0x09 | 0x0A => true,
        0x00..=0x1F | 0x7F..=0x9F => false,
        // bidi embeddings, overrides and isolates; LRM/RLM/ALM
        0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C => false,
        // zero-width space/joiners, word joiner, invisible operators, BOM
        0x200B..=0x200D | 0x2060..=0x2064 | 0xFEFF | 0x180E => false,
        // tag characters
        0xE0000..=0xE007F => false,
        // interlinear annotation, object replacement hiding
        0xFFF9..=0xFFFB => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_bidi_zero_width_and_tags_are_removed() {
        let evil = "ok\x1b[2J\x1b]0;title\x07 \u{202E}gnp.exe\u{202C} a\u{200B}b\u{FEFF}\u{E0041}\u{9B}31m\r\n\tend";
        assert_eq!(
            for_terminal(evil, 1000),
            "ok[2J]0;title gnp.exe ab31m\n\tend"
        );
    }

    #[test]
    fn cut_on_a_character_boundary() {
        assert_eq!(for_terminal("ééééé", 3), "ééé…");
        assert_eq!(for_terminal("abc", 3), "abc");
        assert_eq!(one_line("a\nb\tc", 10), "a b c");
    }
}
