//! Secrets on the broker's side of every boundary: the store the operator
//! fills (`secrets`), the one-shot files an approved action reads a secret
//! from (`secret_files`), and the redaction that takes every secret value,
//! and anything shaped like a credential, out of what reaches the agent, the
//! model, the audit log and a terminal (`redact`).
//!
//! The agent never holds a secret: it names one (`{{secret:name}}`) and the
//! broker substitutes it here, after approval, into the executor's input.

pub mod redact;
pub mod secret_files;
pub mod secrets;
