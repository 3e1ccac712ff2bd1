//! `apply_patch`: every hunk of every file checked against the current
//! contents before anything is written (diffy: context and removed lines
//! must match exactly; a hunk may sit at another line, as with `patch`
//! without fuzz), then each file replaced atomically with its backup as
//! `write_file` does; if one write fails, the files already written get
//! their old contents back and their backups are removed, so the patch
//! changes all of its files or none.

use crate::fileops::{
    atomic_write, existing, mode_of, read_existing, replace_content, unlink_at, Ctx, OpResult,
    Replace, Source,
};
use crate::paths::{self, Parent};
use std::path::Path;
use sysward_ipc::exec::{ApplyPatchArgs, FileChange, FILE_WRITE_MAX};
use sysward_ipc::patch;

/// One file, checked and ready to write.
struct Checked {
    parent: Parent,
    st: Option<libc::stat>,
    old: Vec<u8>,
    new: String,
    hunks: usize,
}

fn check(a: &ApplyPatchArgs) -> Result<Vec<Checked>, String> {
    let (_, sections) = patch::sections(&a.patch, Path::new(&a.directory), Some(a.strip))
        .map_err(|e| e.to_string())?;
    let mine: Vec<_> = sections.iter().map(|s| &s.file).collect();
    if mine.len() != a.files.len() || mine.iter().zip(&a.files).any(|(x, y)| *x != y) {
        return Err(
            "the patch names other files than the ones judged before it ran; nothing was changed"
                .to_string(),
        );
    }
    let mut checked = Vec::new();
    for s in sections {
        let parent = paths::parent(&s.file.path)?;
        let st = existing(&parent)?;
        let shown = parent.path.display().to_string();
        match (s.file.create, &st) {
            (true, Some(_)) => {
                return Err(format!(
                    "{shown} already exists, and the patch creates it; nothing was changed"
                ))
            }
            (false, None) => {
                return Err(format!(
                    "{shown} does not exist, and the patch changes it; nothing was changed"
                ))
            }
            _ => {}
        }
        let old = match st {
            Some(_) => read_existing(&parent, FILE_WRITE_MAX)?,
            None => Vec::new(),
        };
        let text = std::str::from_utf8(&old)
            .map_err(|_| format!("{shown} is not UTF-8 text; nothing was changed"))?;
        let new = diffy::apply(text, &s.patch).map_err(|e| {
            format!("{shown}: {e} (its context or removed lines differ from the file); nothing was changed")
        })?;
        checked.push(Checked {
            parent,
            st,
            old,
            new,
            hunks: s.patch.hunks().len(),
        });
    }
    Ok(checked)
}

/// Puts back what `written` changed: the old content (same mode and owner)
/// or, for a file the patch created, no file; and removes the backups.
fn roll_back(checked: &[Checked], written: &[FileChange], ctx: &Ctx) -> Vec<String> {
    let mut failed = Vec::new();
    for (c, change) in checked.iter().zip(written).rev() {
        let restored = match &c.st {
            Some(st) => atomic_write(
                &c.parent,
                Source::Bytes(&c.old),
                mode_of(st),
                Some((st.st_uid, st.st_gid)),
                None,
                ctx,
            ),
            None => unlink_at(c.parent.raw(), &c.parent.name, false)
                .map_err(|e| crate::fileops::io_err(&c.parent.path, e)),
        };
        match restored {
            Ok(()) => {
                if let Some(b) = &change.backup {
                    if let Some(name) = Path::new(b).file_name() {
                        let _ = unlink_at(c.parent.raw(), name, false);
                    }
                }
            }
            Err(e) => failed.push(e),
        }
    }
    failed
}

pub fn apply_patch(a: &ApplyPatchArgs, ctx: &Ctx) -> OpResult {
    let checked = check(a)?;
    let mut written: Vec<FileChange> = Vec::new();
    let mut lines = Vec::new();
    for c in &checked {
        let verb = if c.st.is_some() { "patched" } else { "created" };
        let r = Replace {
            st: c.st.as_ref(),
            old: &c.old,
            new: c.new.as_bytes(),
            mode: None,
            validate: None,
            verb,
        };
        match replace_content(&c.parent, r, ctx) {
            Ok((_, change)) => {
                let change = change.unwrap_or_else(|| FileChange {
                    path: c.parent.path.display().to_string(),
                    diff: String::new(),
                    backup: None,
                    rollback: "unchanged".to_string(),
                });
                lines.push(format!(
                    "{verb} {} ({} hunk{})",
                    c.parent.path.display(),
                    c.hunks,
                    if c.hunks == 1 { "" } else { "s" }
                ));
                written.push(change);
            }
            Err(e) => {
                let failed = roll_back(&checked, &written, ctx);
                return Err(if failed.is_empty() {
                    format!("{e}; the files written before it were restored: nothing is changed")
                } else {
                    format!(
                        "{e}; restoring the files written before it failed too: {}",
                        failed.join("; ")
                    )
                });
            }
        }
    }
    let hunks: usize = checked.iter().map(|c| c.hunks).sum();
    let summary = format!(
        "applied the patch: {} file{}, {hunks} hunk{}\n{}",
        checked.len(),
        if checked.len() == 1 { "" } else { "s" },
        if hunks == 1 { "" } else { "s" },
        lines.join("\n")
    );
    let backups: Vec<String> = written.iter().filter_map(|c| c.backup.clone()).collect();
    let change = FileChange {
        path: written
            .iter()
            .map(|c| c.path.clone())
            .collect::<Vec<_>>()
            .join(", "),
        diff: written
            .iter()
            .map(|c| c.diff.as_str())
            .collect::<Vec<_>>()
            .join(""),
        backup: (!backups.is_empty()).then(|| backups.join(", ")),
        rollback: written
            .iter()
            .map(|c| c.rollback.clone())
            .collect::<Vec<_>>()
            .join(" && "),
    };
    Ok((summary, Some(change)))
}
