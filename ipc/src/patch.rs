//! Which files a unified diff changes: read the same way (diffy's parser)
//! by the broker, which judges those files, and by the executor, which
//! applies the patch only when its reading names exactly the files the
//! broker judged.

use crate::exec::PatchFile;
use diffy::patch_set::{FileOperation, ParseOptions, PatchKind, PatchSet};
use std::path::{Component, Path, PathBuf};

/// Largest patch accepted, in bytes.
pub const PATCH_MAX: usize = 4 << 20;
/// Most files one patch may change.
pub const PATCH_MAX_FILES: usize = 64;

/// Why a patch cannot be applied; the message says what to do instead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("the patch is larger than {} MiB", PATCH_MAX >> 20)]
    TooLarge,
    #[error("the patch is not a unified diff: {0}")]
    Parse(String),
    #[error("the patch changes more than {PATCH_MAX_FILES} files; split it")]
    TooManyFiles,
    #[error("the patch deletes {0}; apply_patch does not delete files, use remove_file")]
    Deletes(String),
    #[error("the patch renames or copies {0}; apply_patch does not, use move_file or copy_file and then a patch")]
    Renames(String),
    #[error("the patch changes {0} as binary data; apply_patch applies text only")]
    Binary(String),
    #[error("the patch names {0:?}, which is not a usable file name (empty, `..`, or NUL) after stripping {1} leading component(s)")]
    BadName(String, u64),
    #[error("the patch changes {0} twice; give each file one section")]
    Twice(String),
}

/// One file's section of a patch, as applied.
pub struct FileSection<'a> {
    pub file: PatchFile,
    pub patch: diffy::Patch<'a, str>,
}

/// The strip level used when none is given: 1 when every name carries git's
/// `a/` or `b/` prefix, else 0.
fn default_strip(names: &[&str]) -> u64 {
    let git = !names.is_empty()
        && names
            .iter()
            .all(|n| n.starts_with("a/") || n.starts_with("b/"));
    u64::from(git)
}

fn strip_name(name: &str, strip: u64, directory: &Path) -> Result<PathBuf, PatchError> {
    let bad = || PatchError::BadName(name.to_string(), strip);
    if name.is_empty() || name.contains('\0') {
        return Err(bad());
    }
    let mut rest = name;
    for _ in 0..strip {
        rest = match rest.trim_start_matches('/').split_once('/') {
            Some((_, tail)) => tail,
            None => return Err(bad()),
        };
    }
    let path = Path::new(rest);
    if rest.is_empty()
        || path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(bad());
    }
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        directory.join(path)
    })
}

/// Parses `patch` into its file sections: absolute paths (relative names
/// taken from `directory` after stripping `strip` leading components, or the
/// default strip level), in the patch's order.
pub fn sections<'a>(
    patch: &'a str,
    directory: &Path,
    strip: Option<u64>,
) -> Result<(u64, Vec<FileSection<'a>>), PatchError> {
    if patch.len() > PATCH_MAX {
        return Err(PatchError::TooLarge);
    }
    let mut parsed = Vec::new();
    for fp in PatchSet::parse(patch, ParseOptions::unidiff()) {
        let fp = fp.map_err(|e| PatchError::Parse(e.to_string()))?;
        if parsed.len() == PATCH_MAX_FILES {
            return Err(PatchError::TooManyFiles);
        }
        let (name, create) = match fp.operation() {
            FileOperation::Create(n) => (n.to_string(), true),
            FileOperation::Modify { original, modified } => {
                if original != modified && !same_after_git_prefix(original, modified) {
                    return Err(PatchError::Renames(original.to_string()));
                }
                (modified.to_string(), false)
            }
            FileOperation::Delete(n) => return Err(PatchError::Deletes(n.to_string())),
            FileOperation::Rename { from, .. } | FileOperation::Copy { from, .. } => {
                return Err(PatchError::Renames(from.to_string()))
            }
        };
        let text = match fp.into_patch() {
            PatchKind::Text(p) => p,
            PatchKind::Binary(_) => return Err(PatchError::Binary(name)),
        };
        parsed.push((name, create, text));
    }
    let names: Vec<&str> = parsed.iter().map(|(n, _, _)| n.as_str()).collect();
    let strip = strip.unwrap_or_else(|| default_strip(&names));
    let mut out: Vec<FileSection<'a>> = Vec::new();
    for (name, create, patch) in parsed {
        let path = strip_name(&name, strip, directory)?;
        let shown = path.display().to_string();
        if out.iter().any(|s| s.file.path == shown) {
            return Err(PatchError::Twice(shown));
        }
        out.push(FileSection {
            file: PatchFile {
                path: shown,
                create,
            },
            patch,
        });
    }
    Ok((strip, out))
}

/// `a/x` and `b/x` name the same file in git's style.
fn same_after_git_prefix(original: &str, modified: &str) -> bool {
    matches!(
        (original.strip_prefix("a/"), modified.strip_prefix("b/")),
        (Some(a), Some(b)) if a == b
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn files(patch: &str) -> Result<Vec<(String, bool)>, PatchError> {
        sections(patch, Path::new("/srv/p"), None).map(|(_, s)| {
            s.into_iter()
                .map(|s| (s.file.path, s.file.create))
                .collect()
        })
    }

    #[test]
    fn git_style_and_plain_names_resolve_against_the_directory() {
        let git = "diff --git a/etc/x.conf b/etc/x.conf\nindex 1..2 100644\n--- a/etc/x.conf\n+++ b/etc/x.conf\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n";
        assert_eq!(
            files(git).unwrap(),
            vec![
                ("/srv/p/etc/x.conf".to_string(), false),
                ("/srv/p/new.txt".to_string(), true)
            ]
        );
        let abs = "--- /etc/hosts\n+++ /etc/hosts\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(files(abs).unwrap(), vec![("/etc/hosts".to_string(), false)]);
    }

    #[test]
    fn deletes_renames_escapes_and_repeats_are_refused() {
        let del = "--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n";
        assert!(matches!(files(del), Err(PatchError::Deletes(_))));
        let ren = "--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(matches!(files(ren), Err(PatchError::Renames(_))));
        let up = "--- a/../etc/shadow\n+++ b/../etc/shadow\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(matches!(files(up), Err(PatchError::BadName(..))));
        let twice =
            "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/x\n+++ b/x\n@@ -2 +2 @@\n-c\n+d\n";
        assert!(matches!(files(twice), Err(PatchError::Twice(_))));
        assert!(matches!(files("hello\n"), Err(PatchError::Parse(_))));
        let big = "x".repeat(PATCH_MAX + 1);
        assert_eq!(files(&big), Err(PatchError::TooLarge));
    }
}
