//! Persistent secret files (`file PATH` grants). `write_file` puts a secret's
//! value into PATH for the service that reads it there, and no action reads
//! it afterwards: the policy hides every delivery path from every action (its
//! read-protected set, so a reader is refused up front and the kernel profile
//! covers the file). The delivering write is the only exception, and it is
//! the executor's own file operation, never a command: it gets the path back,
//! but no backup copy (a readable `.bak` of the old value), no validate
//! command (a program that would read the value) and no diff in its result.

use crate::secrets::Substitution;
use std::path::PathBuf;
use sysward_ipc::exec::{ExecSpec, FileChange, FileOp};

/// The file this action delivers a secret to, if any.
pub fn delivered_file(substitutions: &[Substitution]) -> Option<PathBuf> {
    substitutions.iter().find_map(|s| s.file.clone())
}

/// Opens `path` to the delivering write only: the one path comes out of the
/// profile's hidden set, and the copy-making parts of the operation go.
pub fn admit_delivery(spec: &mut ExecSpec, path: &std::path::Path) -> Result<(), String> {
    let ExecSpec::File {
        profile,
        op: FileOp::WriteFile(args),
        backup,
        ..
    } = spec
    else {
        return Err("a secret's file is delivered by write_file only".to_string());
    };
    if args.validate.is_some() {
        return Err(format!(
            "write_file of a secret to {} takes no validate command (it would read the value); validate the service's configuration in a separate step",
            path.display()
        ));
    }
    *backup = false;
    let shown = path.display().to_string();
    profile.hidden_paths.retain(|p| *p != shown);
    if let Some(except) = profile.read_all_except.as_mut() {
        except.retain(|p| *p != shown);
    }
    Ok(())
}

/// What the model, the console and the audit see of the delivering write.
pub fn conceal_change(change: &mut FileChange) {
    change.diff.clear();
    change.backup = None;
    change.rollback = "a secret's file: deliver the previous value again from the secret store (no backup is kept)".to_string();
}
