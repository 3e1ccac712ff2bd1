//! Conservative bounds checked before any parser sees a script.
//!
//! brush-parser recurses once or more per nesting level and overflows the stack
//! (an abort that would take the broker down) at about 64–128 levels of `{`,
//! `if`, `case` or `<(` in a debug build on a 2 MiB thread and 256–512 in
//! release; `[[ ! ! … ]]` recurses without any bracket. We cannot rely on
//! modelling bash's quoting to find the real depth (heredocs, comments and case
//! patterns all fool a small scanner), so we count every character and keyword
//! that *could* open a nesting level, ignoring quotes entirely. That count is
//! an upper bound of the depth of every parse of the script and of every script
//! nested in it (`bash -c '…'`, `$(…)`, heredocs fed to a shell), whatever
//! bash's quoting makes of it.

/// Scripts larger than this are denied unparsed.
pub const MAX_SCRIPT_BYTES: usize = 1 << 20;

/// More possible nesting openers than this: denied unparsed.
pub const MAX_OPENERS: usize = 2048;

/// Up to this many openers the parse runs on the caller's thread (which must
/// have 1 MiB of stack free; measured worst case 32 KiB per level, debug).
pub const INLINE_OPENERS: usize = 16;

/// Stack reserved per opener on the parse thread (2x the worst case measured
/// in a debug build, 8x release).
pub const STACK_PER_OPENER: usize = 64 << 10;

/// Stack of the parse thread on top of the per-opener reserve.
pub const STACK_BASE: usize = 2 << 20;

/// Total bytes all parses of one request may consume (nested substitutions
/// are re-parsed once per level; this keeps that from turning quadratic).
pub const MAX_PARSE_WORK: usize = 4 << 20;

/// Nested scripts (`sh -c`, `$(…)`, heredocs, wrappers) deeper than this are
/// not analysed: unknown.
pub const MAX_NESTING: usize = 48;

/// More possible command separators (`;`, `&`, `|`, newlines, quotes
/// ignored) than this: denied unparsed. A megabyte of `ls;` takes brush-parser
/// 2 s and 360 MB in release; 8,192 separators keep a request well under
/// 0.2 s. Scripts that long belong in a file written with write_file.
pub const MAX_SEPARATORS: usize = 8192;

/// Counts bytes that may separate commands, quotes ignored.
pub fn separators(script: &str) -> usize {
    script
        .bytes()
        .filter(|b| matches!(b, b';' | b'&' | b'|' | b'\n'))
        .count()
}

/// Counts everything that may open a nesting level in brush-parser's grammar,
/// quotes ignored: `(`, `{`, `[`, `` ` ``, `"`, `!`, and the reserved words that
/// open compound commands.
pub fn openers(script: &str) -> usize {
    let bytes = script.as_bytes();
    let mut count = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'(' | b'{' | b'[' | b'`' | b'"' | b'!' => {
                count += 1;
                i += 1;
            }
            b'a'..=b'z' => {
                let start = i;
                while i < bytes.len() && bytes[i].is_ascii_lowercase() {
                    i += 1;
                }
                if is_opening_keyword(&bytes[start..i]) {
                    count += 1;
                }
            }
            _ => i += 1,
        }
    }
    count
}

/// At most this many `(` operator tokens per parse (subshells, function
/// definitions, arithmetic commands). brush-parser backtracks exponentially
/// over unclosed ones: ~2 s for 27 in release, ~10 ms for 16 (found by
/// cargo-fuzz with inputs of 71 and 119 bytes).
pub const MAX_PARENS: usize = 16;

/// At most this many substitution openers (`$(`, `${`, `$[`, backquote) in
/// one word or heredoc body handed to brush-parser's word parser, which
/// backtracks exponentially over unclosed ones (`$(( $( ` six times: 3.7 s in
/// release; `${x[($F` three times with backquotes: 0.3 s; both found by
/// cargo-fuzz in heredocs). 6 keeps the worst known shapes near a
/// millisecond in release.
pub const MAX_WORD_SUBSTITUTIONS: usize = 6;

/// Counts substitution openers in a word, quotes ignored.
pub fn substitutions(word: &str) -> usize {
    let b = word.as_bytes();
    let mut n = 0;
    for i in 0..b.len() {
        if b[i] == b'`' || (b[i] == b'$' && matches!(b.get(i + 1), Some(b'(' | b'{' | b'['))) {
            n += 1;
        }
    }
    n
}

/// Inputs known to make brush-parser 0.4.0 hang, or panic (an `unwrap` on a number
/// that overflows): a file-descriptor number of 10 or more digits before `<`
/// or `>`, or any run of 19 or more digits (tilde and brace indices). The
/// panic would be caught, but we do not feed the parser what we know breaks it.
pub fn known_parser_panic(script: &str) -> Option<&'static str> {
    // brush-parser 0.4.0 loops forever on `<<\r ` and `<<\f ` (found by
    // cargo-fuzz). Bash needs no raw control character but tab and newline
    // (escapes such as $'\x1b' spell them), so none is fed to the parser.
    if script
        .bytes()
        .any(|c| (c < 0x20 && c != b'\t' && c != b'\n') || c == 0x7f)
    {
        return Some("control characters (other than tab and newline) in the script");
    }
    let b = script.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let run = i - start;
            if run >= 19 {
                return Some("a number too long for the bash parser");
            }
            if run >= 10 && i < b.len() && (b[i] == b'<' || b[i] == b'>') {
                return Some("a file descriptor number too large for the bash parser");
            }
        } else {
            i += 1;
        }
    }
    None
}

fn is_opening_keyword(word: &[u8]) -> bool {
    matches!(
        word,
        b"if"
            | b"then"
            | b"elif"
            | b"else"
            | b"while"
            | b"until"
            | b"for"
            | b"do"
            | b"case"
            | b"select"
            | b"function"
            | b"coproc"
            | b"time"
            | b"in"
            | b"esac"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_quoted_openers_too() {
        assert_eq!(openers("ls"), 0);
        assert_eq!(openers("echo '((('"), 3);
        assert_eq!(openers("if true; then ls; fi"), 2);
        assert_eq!(openers("[[ ! -e x ]]"), 3);
        assert_eq!(openers("iffy thenx"), 0);
    }
}
