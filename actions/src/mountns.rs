//! Mount namespaces the broker prepares once per protected set, so that an
//! action that can write enters one (setns, almost free) instead of building
//! its covers (`sysward_sandbox::shield`) itself.
//!
//! A prepared namespace goes stale two ways, and each is watched with a
//! poll of a `mountinfo` descriptor (the kernel flags it when the namespace's
//! mount table changes):
//! - the host mounts or unmounts something: the namespace was made private,
//!   so it would not see it (the broker's own `mountinfo`);
//! - a cover in the namespace goes away: renaming a file over a protected
//!   file on the host (an operator's editor, the broker's own atomic writes)
//!   detaches every mount on the replaced file in every namespace (the
//!   namespace's own `mountinfo`).
//!
//! Either way the namespace is dropped and the next action builds a fresh
//! one. Plans (which stat and canonicalise every protected path) are cached
//! under the same rule and at most [`TTL`] long.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sysward_ipc::profile::ConfinementProfile;
use sysward_sandbox::jail::PreparedMounts;
use sysward_sandbox::profile_rules::{self, Extra};
use sysward_sandbox::shield::ShieldPlan;

/// A prepared namespace or plan is rebuilt after this long at the latest
/// (paths created since are covered then).
const TTL: Duration = Duration::from_secs(60);
const CACHE_MAX: usize = 32;

struct Prepared {
    /// [`MountNamespaces::host_generation`] when it was made.
    generation: u64,
    plan: Arc<ShieldPlan>,
    /// None when it could not be made here: each action builds its own.
    namespace: Option<(Arc<OwnedFd>, File)>,
    made: Instant,
}

/// The broker's prepared mount namespaces.
pub struct MountNamespaces {
    /// The broker's own mount table, to notice host mounts, and how many
    /// changes of it were seen.
    host: Mutex<(Option<File>, u64)>,
    cache: Mutex<HashMap<String, Prepared>>,
}

impl Default for MountNamespaces {
    fn default() -> Self {
        MountNamespaces {
            host: Mutex::new((File::open("/proc/self/mountinfo").ok(), 0)),
            cache: Mutex::new(HashMap::new()),
        }
    }
}

/// True when the kernel flagged `mountinfo` (its mount table changed since
/// it was opened), or it cannot be polled.
fn changed(mountinfo: &File) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(mountinfo.as_fd(), PollFlags::POLLPRI)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => false,
        Ok(_) => true,
        Err(_) => true,
    }
}

/// What a profile's namespace depends on.
fn key(profile: &ConfinementProfile) -> String {
    format!(
        "{}|{}|{:?}|{:?}|{:?}",
        profile.can_write(),
        sysward_sandbox::buses::hides_system_buses(profile),
        profile.protected_paths,
        profile.hidden_paths,
        profile.scratch_dir
    )
}

/// Makes the namespace on a short-lived thread (unshare of the mount
/// namespace affects only the calling thread) and returns descriptors of it
/// and of its mount table.
fn make(plan: Arc<ShieldPlan>) -> Result<(Arc<OwnedFd>, File), String> {
    std::thread::Builder::new()
        .name("mntns".to_string())
        .spawn(move || -> Result<(Arc<OwnedFd>, File), String> {
            plan.enter_new_namespace().map_err(|(what, errno)| {
                format!("{what}: {}", std::io::Error::from_raw_os_error(errno))
            })?;
            let ns = File::open("/proc/thread-self/ns/mnt")
                .map_err(|e| format!("cannot open the new mount namespace: {e}"))?;
            let table = File::open("/proc/thread-self/mountinfo")
                .map_err(|e| format!("cannot open its mount table: {e}"))?;
            Ok((Arc::new(OwnedFd::from(ns)), table))
        })
        .map_err(|e| format!("cannot start the namespace thread: {e}"))?
        .join()
        .map_err(|_| "the namespace thread panicked".to_string())?
}

impl MountNamespaces {
    /// Counts the changes of the host's mount table seen so far (polls it
    /// now). Whatever was prepared from an older count may name mount points
    /// that moved: a prepared namespace misses a later mount, and a Landlock
    /// rule on a directory that something was mounted over no longer applies
    /// beneath it (Landlock ignores hidden mount points).
    pub fn host_generation(&self) -> u64 {
        let Ok(mut host) = self.host.lock() else {
            return u64::MAX;
        };
        if host.0.as_ref().is_none_or(changed) {
            host.1 += 1;
            host.0 = File::open("/proc/self/mountinfo").ok();
        }
        host.1
    }

    /// The mount namespace an action of `profile` runs in: None for the
    /// host's (a profile that cannot write and need not hide the buses).
    pub fn for_profile(
        &self,
        profile: &ConfinementProfile,
        extra: &Extra,
    ) -> Result<Option<PreparedMounts>, String> {
        let fail = |e: sysward_sandbox::SandboxError| {
            format!("confinement failed at mount namespace (sysward's own paths): {e}; nothing ran")
        };
        if !profile_rules::needs_mount_namespace(profile) {
            return Ok(None);
        }
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| "the mount namespace cache is poisoned".to_string())?;
        let generation = self.host_generation();
        let key = key(profile);
        let fresh = cache.get(&key).is_some_and(|p| {
            p.generation == generation
                && p.made.elapsed() < TTL
                && p.namespace.as_ref().is_none_or(|(_, t)| !changed(t))
        });
        if !fresh {
            // Only now: the input reads this program's own path and the plan
            // resolves every protected path.
            let input = profile_rules::shield_input(profile, extra)
                .ok_or_else(|| "the profile needs no mount namespace after all".to_string())?;
            let plan = Arc::new(ShieldPlan::new(&input).map_err(fail)?);
            // Where the namespace cannot be made here, each action makes its
            // own from the plan (and reports the step that fails).
            let namespace = make(Arc::clone(&plan)).ok();
            if cache.len() >= CACHE_MAX {
                cache.clear();
            }
            cache.insert(
                key.clone(),
                Prepared {
                    generation,
                    plan,
                    namespace,
                    made: Instant::now(),
                },
            );
        }
        let prepared = cache
            .get(&key)
            .ok_or_else(|| "the mount namespace cache lost an entry".to_string())?;
        Ok(Some(match &prepared.namespace {
            Some((ns, _)) => PreparedMounts::Namespace(Arc::clone(ns)),
            None => PreparedMounts::Plan(Arc::clone(&prepared.plan)),
        }))
    }
}
