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

/// The CPUs a test visits to see a helper follow its thread: the ones this
/// thread may use (at most four), last to first, then the last again (so
/// that every visit but the first is a move).
///
/// # Panics
/// When the thread's CPU set cannot be read.
pub fn cpu_tour() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    let ours = match sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => set,
        Err(e) => panic!("cannot read this thread's CPUs: {e}"),
    };
    let cpus: Vec<usize> = (0..CpuSet::count())
        .filter(|c| ours.is_set(*c).unwrap_or(false))
        .take(4)
        .collect();
    cpus.iter().rev().chain(cpus.last()).copied().collect()
}

/// Restricts the calling thread to `cpu`.
///
/// # Panics
/// When the kernel refuses.
pub fn pin_this_thread(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if let Err(e) = set
        .set(cpu)
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set))
    {
        panic!("cannot move this thread to CPU {cpu}: {e}");
    }
}

/// The CPUs thread or process `id` may run on, as `/proc` lists them.
pub fn allowed_cpus(id: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{id}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string())
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
