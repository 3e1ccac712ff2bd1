//! One cgroup (v2) per action, so every descendant — setsid'd or double-forked —
//! can be killed with `cgroup.kill`. The v2 hierarchy is found in mountinfo:
//! Debian mounts it at /sys/fs/cgroup, hybrid hosts at /sys/fs/cgroup/unified.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the cgroup v2 hierarchy is mounted, from mountinfo.
pub fn v2_mount() -> Option<PathBuf> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        (fstype == "cgroup2").then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// The directory under which per-action cgroups are created, if cgroup v2 with
/// `cgroup.kill` is available.
pub fn actions_root() -> Option<PathBuf> {
    let root = v2_mount()?.join("sysward");
    if !root.exists() && fs::create_dir(&root).is_err() {
        return None;
    }
    // cgroup.kill exists on kernels ≥ 5.14 in every non-root cgroup.
    root.join("cgroup.kill").exists().then_some(root)
}

/// This process's start time (field 22 of /proc/<pid>/stat), which tells a
/// live broker from a later process that reuses its pid.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The inode of this process's PID namespace: a pid names a process only
/// within its namespace, so brokers in containers sharing the cgroup tree
/// must not judge each other's directories by pid.
fn pid_namespace() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self/ns/pid").ok().map(|m| m.ino())
}

/// This broker's own directory under `top` (`b<pidns>-<pid>-<start time>`),
/// where its action cgroups go, removed when the last context of this process
/// that uses it is dropped (the broker's normal exit), so that a later broker
/// finds only what a dead one left. Contexts of one process (tests, benches)
/// share it: the name is the process's.
pub struct BrokerDir {
    shared: std::sync::Arc<OwnedDir>,
}

struct OwnedDir {
    path: PathBuf,
}

impl BrokerDir {
    pub fn path(&self) -> &Path {
        &self.shared.path
    }
}

/// The directories this process's contexts hold.
static SHARED: std::sync::Mutex<Vec<std::sync::Weak<OwnedDir>>> = std::sync::Mutex::new(Vec::new());

impl Drop for OwnedDir {
    fn drop(&mut self) {
        let shared = SHARED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // A context made while this one was being dropped holds it anew.
        if shared
            .iter()
            .any(|w| w.upgrade().is_some_and(|d| d.path == self.path))
        {
            return;
        }
        // Action cgroups remove themselves; an empty leftover goes too.
        let _ = remove_tree(&self.path);
    }
}

/// Creates (or joins, within this process) this broker's directory under
/// `top`.
pub fn broker_root(top: &Path) -> Option<BrokerDir> {
    let pid = std::process::id();
    let dir = top.join(format!("b{}-{pid}-{}", pid_namespace()?, start_time(pid)?));
    let mut shared = SHARED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    shared.retain(|w| w.strong_count() > 0);
    if let Some(live) = shared
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|d| d.path == dir)
    {
        return Some(BrokerDir { shared: live });
    }
    match fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let owned = std::sync::Arc::new(OwnedDir { path: dir });
    shared.push(std::sync::Arc::downgrade(&owned));
    Some(BrokerDir { shared: owned })
}

/// Who left a directory under `top`, from its name.
enum Owner {
    /// A broker of this PID namespace: its pid and start time can be checked.
    Here { pid: u32, start: u64 },
    /// A broker of another PID namespace, or of an older version that did
    /// not record one: its pid means nothing here.
    Elsewhere,
}

fn owner_of(name: &str) -> Option<Owner> {
    let rest = name.strip_prefix('b')?;
    let parts: Vec<&str> = rest.split('-').collect();
    match parts.as_slice() {
        [ns, pid, start] => {
            let ns: u64 = ns.parse().ok()?;
            let pid: u32 = pid.parse().ok()?;
            let start: u64 = start.parse().ok()?;
            Some(if Some(ns) == pid_namespace() {
                Owner::Here { pid, start }
            } else {
                Owner::Elsewhere
            })
        }
        [pid, start] if pid.parse::<u32>().is_ok() && start.parse::<u64>().is_ok() => {
            Some(Owner::Elsewhere)
        }
        _ => None,
    }
}

fn populated(dir: &Path) -> bool {
    fs::read_to_string(dir.join("cgroup.events")).is_ok_and(|e| says_populated(&e))
}

/// Removes `dir`'s empty child cgroups, then `dir`; whether it is gone.
pub fn remove_tree(dir: &Path) -> bool {
    if let Ok(children) = fs::read_dir(dir) {
        for child in children.flatten() {
            if child.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = fs::remove_dir(child.path());
            }
        }
    }
    fs::remove_dir(dir).is_ok()
}

/// Kills and removes what brokers of this PID namespace that are gone
/// (crashed, killed with -9) left under `top`: a setsid'd descendant of an
/// action outlives its broker. A directory of another namespace (or an older
/// broker) is only removed when nothing runs in it: its owner may be alive.
/// Empty leftovers go silently; returns one line per cgroup whose processes
/// were killed.
pub fn clean_stale(top: &Path) -> Vec<String> {
    let mut cleaned = Vec::new();
    let Ok(entries) = fs::read_dir(top) else {
        return cleaned;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let dir = entry.path();
        match owner_of(&name) {
            None => {
                // An action cgroup of a broker from before per-broker
                // directories: removed when empty.
                if name.starts_with('a') && !populated(&dir) {
                    let _ = fs::remove_dir(&dir);
                }
            }
            Some(Owner::Elsewhere) => {
                if !populated(&dir) {
                    let _ = remove_tree(&dir);
                }
            }
            Some(Owner::Here { pid, start }) => {
                if start_time(pid) == Some(start) {
                    continue; // its broker still runs
                }
                if !populated(&dir) {
                    let _ = remove_tree(&dir);
                    continue;
                }
                // cgroup.kill on a cgroup kills its whole subtree.
                let killed = fs::write(dir.join("cgroup.kill"), "1").is_ok();
                let deadline = Instant::now() + Duration::from_secs(2);
                while Instant::now() < deadline && populated(&dir) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                let removed = remove_tree(&dir);
                cleaned.push(format!(
                    "{} (broker {pid} is gone, processes were still running): {}{}",
                    dir.display(),
                    if killed { "killed" } else { "not killed" },
                    if removed {
                        ", removed"
                    } else {
                        ", could not be removed"
                    }
                ));
            }
        }
    }
    cleaned
}

/// Whether a `cgroup.events` text says processes remain.
fn says_populated(events: &str) -> bool {
    events.lines().any(|l| l == "populated 1")
}

/// A per-action cgroup, killed and removed on drop.
pub struct ActionCgroup {
    dir: PathBuf,
    /// `cgroup.kill` was written: never reused (a child created inside a
    /// killed cgroup with clone3's CLONE_INTO_CGROUP is killed at birth on
    /// this kernel — measured: every action after the first died).
    killed: std::sync::atomic::AtomicBool,
    /// Opened once: every action of a reused cgroup gets copies.
    handles: sysward_sandbox::jail::JailCgroup,
    events: fs::File,
}

impl ActionCgroup {
    pub fn create(root: &Path, id: &str) -> std::io::Result<ActionCgroup> {
        let dir = root.join(id);
        fs::create_dir(&dir)?;
        let opened = sysward_sandbox::jail::JailCgroup::open(&dir)
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|h| Ok((h, fs::File::open(dir.join("cgroup.events"))?)));
        let (handles, events) = match opened {
            Ok(o) => o,
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                return Err(e);
            }
        };
        Ok(ActionCgroup {
            dir,
            killed: Default::default(),
            handles,
            events,
        })
    }

    /// Copies of its descriptors for one confined command.
    pub fn jail_handles(&self) -> std::io::Result<sysward_sandbox::jail::JailCgroup> {
        Ok(sysward_sandbox::jail::JailCgroup {
            dir: self.handles.dir.try_clone()?,
            procs: self.handles.procs.try_clone()?,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Kills every process in the cgroup.
    pub fn kill(&self) {
        self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = fs::write(self.dir.join("cgroup.kill"), "1");
    }

    /// Kills every process in the cgroup, if there is any. An empty cgroup
    /// has none that could start another.
    pub fn kill_if_populated(&self) {
        if self.populated() {
            self.kill();
        }
    }

    /// Whether it can serve the next action as if new: empty, never killed.
    /// What is left in it is killed.
    pub fn reusable(&self) -> bool {
        if self.populated() {
            self.kill();
            return false;
        }
        !self.killed.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn populated(&self) -> bool {
        use std::os::unix::fs::FileExt;
        // cgroup.events is regenerated on each read from offset 0.
        let mut buf = [0u8; 256];
        match self.events.read_at(&mut buf, 0) {
            Ok(n) => says_populated(&String::from_utf8_lossy(&buf[..n])),
            Err(_) => false,
        }
    }
}

impl Drop for ActionCgroup {
    fn drop(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.populated() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_killed_cgroup_is_never_reused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("!!! SKIPPED a_killed_cgroup_is_never_reused: needs root");
            return;
        }
        let Some(root) = actions_root() else {
            eprintln!("!!! SKIPPED a_killed_cgroup_is_never_reused: no cgroup v2 with cgroup.kill");
            return;
        };
        let id = format!("unit-{}", std::process::id());
        let fresh = ActionCgroup::create(&root, &format!("{id}-a")).unwrap();
        assert!(fresh.reusable(), "an empty, never killed cgroup");
        fresh.kill_if_populated();
        assert!(fresh.reusable(), "nothing to kill: still reusable");
        let killed = ActionCgroup::create(&root, &format!("{id}-b")).unwrap();
        killed.kill();
        assert!(!killed.reusable(), "killed once, even empty: not reusable");
    }
}
