//! Shell words → argument values. brush-parser hands words over as raw source
//! text; we re-parse each one into pieces and build the value ourselves
//! (its `unquote_str` is naive). Anything whose value depends on run-time
//! state (parameters, substitutions, `~`, brace expansion, ANSI-C escapes we
//! do not decode) is marked non-literal; the substitutions found are returned
//! so the walker analyses them as scripts of their own.

use brush_parser::word::{ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::ParserOptions;

/// One argument as far as static analysis can tell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Arg {
    /// The value when `literal`; otherwise a best-effort rendering of the source.
    pub text: String,
    /// No expansion at run time changes the value (globbing aside).
    pub literal: bool,
    /// Has unquoted glob characters: the value is a pattern.
    pub glob: bool,
    /// Stands for some path beneath this directory (`find DIR -exec … {}`).
    pub under: Option<String>,
}

impl Arg {
    pub fn lit(s: &str) -> Arg {
        Arg {
            text: s.to_string(),
            literal: true,
            glob: false,
            under: None,
        }
    }

    /// A literal, non-pattern value.
    pub fn plain(&self) -> Option<&str> {
        (self.literal && !self.glob).then_some(self.text.as_str())
    }
}

/// Something inside a word that runs code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nested {
    /// `$(…)` or `` `…` ``: a script to analyse.
    Script(String),
    /// A construct that runs code we do not analyse (arithmetic with
    /// substitutions or array subscripts, unparsable word).
    Opaque(String),
}

/// bash -lc runs without extglob, and so do we: `!(…)`, `@(…)` are syntax
/// errors there, not patterns.
pub fn options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        ..ParserOptions::default()
    }
}

/// Parses one raw word. Substitutions are appended to `nested`.
/// Whether the word parser may be given `text` (see limits).
pub fn word_hazard(text: &str) -> Option<String> {
    if let Some(why) = super::limits::known_parser_panic(text) {
        return Some(why.to_string());
    }
    if text.contains(['$', '`']) {
        let parens = text.bytes().filter(|b| *b == b'(').count();
        if parens > super::limits::MAX_PARENS {
            return Some(format!(
                "{parens} parentheses in one word with substitutions (at most {})",
                super::limits::MAX_PARENS
            ));
        }
    }
    let n = super::limits::substitutions(text);
    if n > super::limits::MAX_WORD_SUBSTITUTIONS {
        return Some(format!(
            "{n} substitutions in one word (at most {})",
            super::limits::MAX_WORD_SUBSTITUTIONS
        ));
    }
    None
}

pub fn arg_of(raw: &str, nested: &mut Vec<Nested>) -> Arg {
    if let Some(why) = word_hazard(raw) {
        nested.push(Nested::Opaque(why));
        return Arg {
            text: raw.to_string(),
            literal: false,
            glob: false,
            under: None,
        };
    }
    let opts = options();
    let pieces = match std::panic::catch_unwind(|| brush_parser::word::parse(raw, &opts)) {
        Ok(Ok(p)) => p,
        _ => {
            nested.push(Nested::Opaque(format!("unparsable word {}", clip(raw))));
            return Arg {
                text: raw.to_string(),
                literal: false,
                glob: false,
                under: None,
            };
        }
    };
    if raw.contains("${") && raw.contains('[') && (raw.contains("$(") || raw.contains('`')) {
        nested.push(Nested::Opaque(format!(
            "array subscript with a substitution {}",
            clip(raw)
        )));
    }
    let mut arg = Arg {
        text: String::new(),
        literal: true,
        glob: false,
        under: None,
    };
    pieces_into(&pieces, false, &mut arg, nested, 0);
    if !arg.literal {
        arg.text = raw.to_string();
    }
    arg
}

/// A heredoc body that undergoes expansion: its substitutions are code.
pub fn heredoc_nested(body: &str, nested: &mut Vec<Nested>) -> bool {
    if let Some(why) = word_hazard(body) {
        nested.push(Nested::Opaque(why));
        return false;
    }
    let opts = options();
    match std::panic::catch_unwind(|| brush_parser::word::parse_heredoc(body, &opts)) {
        Ok(Ok(pieces)) => {
            let mut arg = Arg {
                literal: true,
                ..Arg::default()
            };
            pieces_into(&pieces, true, &mut arg, nested, 0);
            arg.literal
        }
        _ => {
            nested.push(Nested::Opaque("unparsable heredoc".to_string()));
            false
        }
    }
}

pub fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out.replace(['\n', '\r'], " ")
}

fn has_glob(text: &str) -> bool {
    text.contains(['*', '?']) || text.find('[').is_some_and(|i| text[i + 1..].contains(']'))
}

/// Unquoted `{a,b}` / `{1..3}` expand to several words.
fn has_brace_expansion(text: &str) -> bool {
    match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if a < b => {
            let inner = &text[a + 1..b];
            inner.contains(',') || inner.contains("..")
        }
        _ => false,
    }
}

fn pieces_into(
    pieces: &[WordPieceWithSource],
    quoted: bool,
    arg: &mut Arg,
    nested: &mut Vec<Nested>,
    depth: usize,
) {
    if depth > 16 {
        arg.literal = false;
        nested.push(Nested::Opaque("word nested too deeply".to_string()));
        return;
    }
    for p in pieces {
        match &p.piece {
            WordPiece::Text(t) => {
                if !quoted {
                    if has_glob(t) {
                        arg.glob = true;
                    }
                    if has_brace_expansion(t) {
                        arg.literal = false;
                    }
                }
                arg.text.push_str(t);
            }
            WordPiece::SingleQuotedText(t) => arg.text.push_str(t),
            WordPiece::AnsiCQuotedText(t) => {
                if t.contains('\\') {
                    arg.literal = false;
                }
                arg.text.push_str(t);
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                pieces_into(inner, true, arg, nested, depth + 1);
            }
            WordPiece::TildeExpansion(_) => arg.literal = false,
            WordPiece::ParameterExpansion(expr) => {
                arg.literal = false;
                param_nested(expr, nested, depth);
            }
            WordPiece::CommandSubstitution(s) => {
                arg.literal = false;
                nested.push(Nested::Script(s.clone()));
            }
            WordPiece::BackquotedCommandSubstitution(s) => {
                arg.literal = false;
                nested.push(Nested::Script(unescape_backquoted(s)));
            }
            WordPiece::EscapeSequence(s) => {
                let body = s.strip_prefix('\\').unwrap_or(s);
                if quoted {
                    // Inside double quotes only \$ \` \" \\ and newline escape.
                    match body {
                        "$" | "`" | "\"" | "\\" => arg.text.push_str(body),
                        "\n" => {}
                        _ => arg.text.push_str(s),
                    }
                } else if body != "\n" {
                    arg.text.push_str(body);
                }
            }
            WordPiece::ArithmeticExpression(expr) => {
                arg.literal = false;
                arith_nested(&expr.value, nested);
            }
        }
    }
}

/// Arithmetic evaluates `$(…)`, backticks and array subscripts (`a[$(cmd)]`):
/// only plain arithmetic is left alone.
pub fn arith_nested(expr: &str, nested: &mut Vec<Nested>) {
    if expr.contains("$(") || expr.contains('`') || expr.contains('[') {
        nested.push(Nested::Opaque(format!(
            "arithmetic with substitutions or subscripts {}",
            clip(expr)
        )));
    }
}

fn param_nested(expr: &ParameterExpr, nested: &mut Vec<Nested>, depth: usize) {
    let words: Vec<&str> = match expr {
        ParameterExpr::UseDefaultValues { default_value, .. }
        | ParameterExpr::AssignDefaultValues { default_value, .. } => {
            default_value.iter().map(String::as_str).collect()
        }
        ParameterExpr::IndicateErrorIfNullOrUnset { error_message, .. } => {
            error_message.iter().map(String::as_str).collect()
        }
        ParameterExpr::UseAlternativeValue {
            alternative_value, ..
        } => alternative_value.iter().map(String::as_str).collect(),
        ParameterExpr::RemoveSmallestSuffixPattern { pattern, .. }
        | ParameterExpr::RemoveLargestSuffixPattern { pattern, .. }
        | ParameterExpr::RemoveSmallestPrefixPattern { pattern, .. }
        | ParameterExpr::RemoveLargestPrefixPattern { pattern, .. }
        | ParameterExpr::UppercaseFirstChar { pattern, .. }
        | ParameterExpr::UppercasePattern { pattern, .. }
        | ParameterExpr::LowercaseFirstChar { pattern, .. }
        | ParameterExpr::LowercasePattern { pattern, .. } => {
            pattern.iter().map(String::as_str).collect()
        }
        ParameterExpr::ReplaceSubstring {
            pattern,
            replacement,
            ..
        } => {
            let mut v = vec![pattern.as_str()];
            v.extend(replacement.iter().map(String::as_str));
            v
        }
        ParameterExpr::Substring { offset, length, .. } => {
            arith_nested(&offset.value, nested);
            if let Some(l) = length {
                arith_nested(&l.value, nested);
            }
            Vec::new()
        }
        ParameterExpr::Parameter { parameter, .. }
        | ParameterExpr::ParameterLength { parameter, .. }
        | ParameterExpr::Transform { parameter, .. } => {
            if let brush_parser::word::Parameter::NamedWithIndex { index, .. } = parameter {
                arith_nested(index, nested);
            }
            Vec::new()
        }
        ParameterExpr::VariableNames { .. } | ParameterExpr::MemberKeys { .. } => Vec::new(),
    };
    for w in words {
        if let Some(why) = word_hazard(w) {
            nested.push(Nested::Opaque(why));
            continue;
        }
        if w.contains('$') || w.contains('`') {
            let opts = options();
            match std::panic::catch_unwind(|| brush_parser::word::parse(w, &opts)) {
                Ok(Ok(pieces)) => {
                    let mut inner = Arg::default();
                    pieces_into(&pieces, false, &mut inner, nested, depth + 1);
                }
                _ => nested.push(Nested::Opaque(format!(
                    "unparsable parameter expansion {}",
                    clip(w)
                ))),
            }
        }
    }
}

/// Inside backquotes, `\`` `\\` and `\$` stand for the character itself.
fn unescape_backquoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some(&n) if n == '`' || n == '\\' || n == '$' => {
                    out.push(n);
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}
