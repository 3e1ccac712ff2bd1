//! A unit test's scratch directory under the system's temporary directory.

use std::path::{Path, PathBuf};

/// Created empty (whatever an earlier run left is removed first), removed
/// when the test ends, passed or failed.
pub struct TestDir(PathBuf);

impl TestDir {
    /// `<tmp>/<tag>-<pid>`.
    pub fn new(tag: &str) -> TestDir {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        TestDir(dir)
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
