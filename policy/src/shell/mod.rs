//! Shell scripts → the simple commands they run, via brush-parser.
//!
//! Every construct is walked: lists, pipelines, subshells, brace groups, loops,
//! conditionals, functions (their bodies are analysed as if called),
//! `$(…)`, backticks, `<(…)`/`>(…)`, heredocs, here-strings, assignments and
//! redirections. What cannot be resolved statically becomes an
//! [`Item::Opaque`] (classified unknown); what is too large or too deep to
//! analyse safely becomes [`Item::Unanalysable`] (denied).

pub mod limits;
mod walk;
pub mod words;

use std::path::PathBuf;
pub use words::Arg;

/// Where a command's standard input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdin {
    /// Whatever the script's stdin is (`/dev/null` for actions).
    Inherit,
    /// The previous command of a pipeline.
    Pipe,
    /// A heredoc or here-string: the text, and whether it is literal.
    Here { body: String, literal: bool },
}

/// A redirection to or from a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redir {
    Write(Arg),
    Read(Arg),
}

/// One simple command as the parser saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// `NAME=value` words before the command.
    pub assigns: Vec<(String, Arg)>,
    pub argv: Vec<Arg>,
    pub redirs: Vec<Redir>,
    /// The working directory it runs in, when known (`cd $X` makes it unknown).
    pub cwd: Option<PathBuf>,
    pub stdin: Stdin,
    /// How many scripts this command is nested in (`sh -c`, `$(…)`).
    pub depth: usize,
}

/// What the walker found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    Cmd(Cmd),
    /// Runs code we cannot resolve: unknown.
    Opaque(String),
    /// Too large or too deeply nested to analyse: denied.
    Unanalysable(String),
    /// A shape that is critical whatever runs it (fork bomb).
    Critical(String),
}

/// Parses scripts and collects their commands, within the work budget.
#[derive(Debug, Default)]
pub struct Analyzer {
    pub items: Vec<Item>,
    work: usize,
    /// Functions defined so far: calling one runs its body, which was
    /// analysed where it was defined.
    pub functions: std::collections::HashSet<String>,
}

impl Analyzer {
    pub fn new() -> Analyzer {
        Analyzer::default()
    }

    /// Analyses `text` as a bash script running in `cwd`; `depth` counts the
    /// scripts it is nested in.
    pub fn script(&mut self, text: &str, cwd: Option<PathBuf>, depth: usize) {
        if depth > limits::MAX_NESTING {
            self.items.push(Item::Unanalysable(format!(
                "scripts nested more than {} deep",
                limits::MAX_NESTING
            )));
            return;
        }
        if text.len() > limits::MAX_SCRIPT_BYTES {
            self.items.push(Item::Unanalysable(format!(
                "script larger than {} bytes",
                limits::MAX_SCRIPT_BYTES
            )));
            return;
        }
        self.work = self.work.saturating_add(text.len());
        if self.work > limits::MAX_PARSE_WORK {
            self.items.push(Item::Unanalysable(
                "too much nested text to analyse".to_string(),
            ));
            return;
        }
        if let Some(why) = limits::known_parser_panic(text) {
            self.items.push(Item::Opaque(why.to_string()));
            return;
        }
        let opts = words::options();
        // Tokenize first (linear, and its recursion is bounded by the opener
        // count), then refuse before the parser what makes it backtrack
        // exponentially: more than MAX_PARENS `(` operators (subshells,
        // function definitions, arithmetic commands; quoted parentheses and
        // `$(` are inside word tokens and do not count).
        let tokens = std::panic::catch_unwind(|| {
            brush_parser::uncached_tokenize_str(text, &opts.tokenizer_options())
        });
        let tokens = match tokens {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                self.items
                    .push(Item::Opaque(format!("bash syntax not understood ({e})")));
                return;
            }
            Err(_) => {
                self.items.push(Item::Opaque(
                    "the bash tokenizer failed on this script".to_string(),
                ));
                return;
            }
        };
        let parens = tokens
            .iter()
            .filter(|t| matches!(t, brush_parser::Token::Operator(o, _) if o == "("))
            .count();
        if parens > limits::MAX_PARENS {
            self.items.push(Item::Unanalysable(format!(
                "more than {} parentheses (subshells, function definitions)",
                limits::MAX_PARENS
            )));
            return;
        }
        // The parser itself word-parses some tokens (assignments, array
        // subscripts): the same word limits apply before it sees them.
        for t in &tokens {
            if let brush_parser::Token::Word(w, _) = t {
                if let Some(why) = words::word_hazard(w) {
                    self.items.push(Item::Opaque(why));
                    return;
                }
            }
        }
        let parsed = std::panic::catch_unwind(|| brush_parser::parse_tokens(&tokens, &opts));
        match parsed {
            Ok(Ok(program)) => {
                let mut w = walk::Walker {
                    an: self,
                    text,
                    depth,
                };
                let mut cwd = cwd;
                w.program(&program, &mut cwd);
            }
            Ok(Err(e)) => self
                .items
                .push(Item::Opaque(format!("bash syntax not understood ({e})"))),
            Err(_) => self.items.push(Item::Opaque(
                "the bash parser failed on this script".to_string(),
            )),
        }
    }

    /// Records a substitution or construct found inside a word.
    pub fn nested(&mut self, nested: Vec<words::Nested>, cwd: &Option<PathBuf>, depth: usize) {
        for n in nested {
            match n {
                words::Nested::Script(s) => self.script(&s, cwd.clone(), depth + 1),
                words::Nested::Opaque(what) => self.items.push(Item::Opaque(what)),
            }
        }
    }
}
