//! Typed errors of the policy block parser.

use thiserror::Error;

/// Why an `agent.md` policy block was refused. Every variant names the line
/// (1-based, in agent.md) so the operator can fix it; the broker refuses to start.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PolicyError {
    #[error("agent.md is too large ({size} bytes, at most {max})")]
    TooLarge { size: usize, max: usize },
    #[error("multiple policy blocks (line {first} and line {second}): keep a single ```policy block in agent.md")]
    MultiplePolicyBlocks { first: usize, second: usize },
    #[error("line {line}: unterminated policy block")]
    Unterminated { line: usize },
    #[error("line {line}: expected KEY=VALUE in the policy block, found {text:?}")]
    Syntax { line: usize, text: String },
    #[error("line {line}: duplicate directive {key} (first set at line {first})")]
    Duplicate {
        line: usize,
        key: String,
        first: usize,
    },
    #[error("line {line}: invalid value for {key}: {value:?} ({expected})")]
    InvalidValue {
        line: usize,
        key: String,
        value: String,
        expected: String,
    },
}

impl PolicyError {
    /// The agent.md line the error is about (0 when it concerns the whole file).
    pub fn line(&self) -> usize {
        match self {
            PolicyError::TooLarge { .. } => 0,
            PolicyError::MultiplePolicyBlocks { second, .. } => *second,
            PolicyError::Unterminated { line }
            | PolicyError::Syntax { line, .. }
            | PolicyError::Duplicate { line, .. }
            | PolicyError::InvalidValue { line, .. } => *line,
        }
    }
}
