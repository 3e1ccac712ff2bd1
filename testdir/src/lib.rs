//! Test support (a dev-dependency only): a file or directory a test creates,
//! removed when the test ends, passed or failed, so that runs leave nothing
//! behind under `/tmp`.

use std::path::{Path, PathBuf};

/// Removes its path on drop: a file, or a directory with everything in it.
/// Dereferences to the path, so it stands wherever the path did.
#[derive(Debug)]
pub struct RemoveOnDrop(pub PathBuf);

impl RemoveOnDrop {
    /// `<tmp>/<tag>-<pid>`, created empty (whatever an earlier run left there
    /// is removed first).
    ///
    /// # Panics
    /// When the directory cannot be created: a test cannot go on without it.
    pub fn fresh_dir(tag: &str) -> RemoveOnDrop {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            panic!("cannot create the test directory {}: {e}", dir.display());
        }
        RemoveOnDrop(dir)
    }
}

impl std::ops::Deref for RemoveOnDrop {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for RemoveOnDrop {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0).or_else(|_| std::fs::remove_dir_all(&self.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_and_a_file_are_gone_after_the_guard() {
        let dir = RemoveOnDrop::fresh_dir("sysward-testdir-self");
        let path = dir.to_path_buf();
        let file = RemoveOnDrop(dir.join("f"));
        std::fs::write(&*file, "x").ok();
        assert!(file.exists() && path.is_dir());
        drop(file);
        assert!(!path.join("f").exists());
        std::fs::write(path.join("g"), "y").ok();
        drop(dir);
        assert!(!path.exists());
    }
}
