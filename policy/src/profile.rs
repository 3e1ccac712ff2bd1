//! The confinement profile a decision carries to the executor.

use crate::block::{ExecutionMode, PolicyBlock};
use crate::classify::{Effect, WriteKind};
use crate::decide::{inside_workspace, PathSets};
use crate::facts::{HostFacts, PathFacts};
use crate::paths::Target;
use crate::types::Category;
use std::path::{Path, PathBuf};
use sysward_ipc::profile::{ConfinementProfile, ResourceLimits};

/// Capabilities a write profile keeps (atomic replace keeping the owner,
/// editing a file of another user).
const WRITE_CAPS: &[&str] = &["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER"];

/// Every action reads what root reads (another user's 0700 `~/.ssh`):
/// Landlock and the mount namespace, not file modes, keep sysward's secrets
/// out.
const READ_CAPS: &[&str] = &["CAP_DAC_READ_SEARCH"];

fn s(p: &Path) -> String {
    p.to_string_lossy().to_string()
}

/// The closest ancestor the broker can resolve (lexically the path itself).
/// A directory that does not exist yet stays named as it is, so that a
/// request's profile (and the approval bound to it) does not change when an
/// earlier step creates it; the sandbox places the rule on its deepest
/// existing ancestor when the action starts.
fn existing_dir(p: &Path, facts: &dyn PathFacts) -> PathBuf {
    let mut cur = p.to_path_buf();
    for _ in 0..64 {
        if facts.real_path(&cur).is_some() {
            return cur;
        }
        match cur.parent() {
            Some(parent) if parent != cur => cur = parent.to_path_buf(),
            _ => break,
        }
    }
    p.to_path_buf()
}

/// The directory a write target is granted by: the file's directory (an
/// editor's temporary file, a backup or a lock file is created beside it), or
/// the tree itself. Landlock grants it whole; sysward's own paths inside it
/// are protected by the action's mount namespace.
fn write_root(t: &Target, k: WriteKind, facts: &dyn PathFacts) -> Option<PathBuf> {
    match t {
        Target::Unresolved => None,
        Target::Beneath(p) => Some(existing_dir(p, facts)),
        Target::Glob { prefix, .. } => Some(existing_dir(prefix, facts)),
        Target::Path(p) => match k {
            WriteKind::File | WriteKind::Create | WriteKind::Move => {
                Some(existing_dir(p.parent().unwrap_or(p), facts))
            }
            WriteKind::Tree => Some(existing_dir(p, facts)),
        },
    }
}

/// Everything no action may write: sysward's own paths, the secrets, the
/// project's protected files.
pub fn write_except(facts: &HostFacts, sets: &PathSets) -> Vec<String> {
    let mut v: Vec<String> = sets.write_protected.iter().map(|p| s(p)).collect();
    for name in [
        "agent.md",
        "init.conf",
        "agent.log",
        "contexto.mem",
        ".context-history",
    ] {
        let p = s(&facts.project_root.join(name));
        if !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

/// Builds the profile for effects that were allowed or need approval.
/// Returns Err with a reason when the profile would break an invariant
/// (defence in depth: the path rules should already have denied).
pub fn build(
    effects: &[&Effect],
    headline: Category,
    block: &PolicyBlock,
    facts: &HostFacts,
    sets: &PathSets,
    paths_facts: &dyn PathFacts,
) -> Result<ConfinementProfile, String> {
    let mut caps: Vec<String> = READ_CAPS.iter().map(|c| c.to_string()).collect();
    let mut writes: Vec<PathBuf> = Vec::new();
    let mut wide = false;
    let mut network = false;
    let mut signals = false;
    let mut mount = false;
    let mut download = false;
    // A netfilter listing keeps CAP_NET_ADMIN only when it is the whole
    // request: every process of the action holds the profile's capabilities,
    // so a pipeline or a second command would hold it too.
    let listing = match effects {
        [e] => {
            e.netfilter_list
                && e.writes.is_empty()
                && e.deletes.is_empty()
                && !e.network
                && !e.wide_write
                && !e.mount
                && !e.signals
                && e.category == Category::ReadOnly
        }
        _ => false,
    };
    if listing {
        caps.push(crate::netfilter::LIST_CAP.to_string());
    }
    for e in effects {
        for c in &e.caps {
            if !caps.iter().any(|x| x == c) {
                caps.push((*c).to_string());
            }
        }
        // A write or a removal outside the project keeps the DAC
        // capabilities root needs there: replacing or removing a file in a
        // directory another user owns (0700, or sticky as /tmp is).
        let changes_files =
            (e.category == Category::Write && !e.writes.is_empty()) || !e.deletes.is_empty();
        if changes_files {
            let outside = e.writes.iter().any(|(t, _)| !inside_workspace(t, facts))
                || e.deletes.iter().any(|t| !inside_workspace(t, facts));
            if outside {
                for c in WRITE_CAPS {
                    if !caps.iter().any(|x| x == c) {
                        caps.push((*c).to_string());
                    }
                }
            }
        }
        network |= e.network;
        signals |= e.signals;
        mount |= e.mount;
        download |= e.category == Category::Download;
        if e.wide_write {
            wide = true;
        }
        let mut all: Vec<(&Target, WriteKind)> = e.writes.iter().map(|(t, k)| (t, *k)).collect();
        // Removing an entry is a right on the directory that holds it (the
        // last rmdir of `rm -rf DIR` is one in DIR's parent), and that grant
        // covers DIR's subtree too.
        let parents: Vec<Target> = e
            .deletes
            .iter()
            .map(|d| match d {
                Target::Beneath(p) => Target::Path(p.clone()),
                other => other.clone(),
            })
            .collect();
        for d in &parents {
            all.push((d, WriteKind::Move));
        }
        for (t, k) in all {
            match write_root(t, k, paths_facts) {
                Some(p) => {
                    if !writes.contains(&p) {
                        writes.push(p);
                    }
                }
                None => wide = true,
            }
        }
        if e.category == Category::Unknown
            && block.execution_mode == ExecutionMode::Unrestricted
            && block.allow_outside_project_write
        {
            wide = true;
        }
    }
    let except = write_except(facts, sets);
    if wide && !block.allow_outside_project_write {
        return Err(
            "the action would write system-wide (ALLOW_OUTSIDE_PROJECT_WRITE=false)".into(),
        );
    }
    if !wide {
        for w in &writes {
            let t = Target::Path(w.clone());
            if !block.allow_outside_project_write && !inside_workspace(&t, facts) {
                return Err(format!(
                    "the profile would write {} outside the project",
                    w.display()
                ));
            }
        }
    }
    // A grant inside another one adds nothing (Landlock grants subtrees).
    let nested: Vec<PathBuf> = writes
        .iter()
        .filter(|w| writes.iter().any(|o| o != *w && w.starts_with(o)))
        .cloned()
        .collect();
    writes.retain(|w| !nested.contains(w));
    let mut read_except: Vec<String> = sets.read_protected.iter().map(|p| s(p)).collect();
    read_except.dedup();
    let mut limits = ResourceLimits::default();
    if download {
        limits.max_file_size = Some(block.max_download_size);
    }
    let name = match headline {
        Category::ReadOnly if listing => "netfilter-list",
        Category::ReadOnly if writes.is_empty() && !wide => "read-only",
        other => other.as_str(),
    };
    Ok(ConfinementProfile {
        name: name.to_string(),
        uid: facts.action_uid,
        gid: facts.action_gid,
        groups: Vec::new(),
        capabilities: caps,
        // A listing writes nothing, not even scratch files.
        read_paths: if listing {
            Vec::new()
        } else {
            vec![s(&facts.scratch_dir)]
        },
        read_all_except: Some(read_except),
        write_paths: if wide {
            Vec::new()
        } else {
            writes.iter().map(|p| s(p)).collect()
        },
        write_everywhere: wide,
        protected_paths: except,
        hidden_paths: sets.read_protected.iter().map(|p| s(p)).collect(),
        network: network && block.allow_network,
        scope_signals: !signals,
        allow_mount: mount,
        timeout_secs: block.default_command_timeout,
        limits,
        scratch_dir: (!listing).then(|| s(&facts.scratch_dir)),
    })
}
