//! The confinement profile a decision carries to the executor.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Resource limits applied with setrlimit before anything else.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceLimits {
    /// RLIMIT_NPROC for the action's uid (None: unchanged).
    pub max_processes: Option<u64>,
    /// RLIMIT_NOFILE.
    pub max_open_files: Option<u64>,
    /// RLIMIT_FSIZE in bytes.
    pub max_file_size: Option<u64>,
    /// RLIMIT_AS in bytes.
    pub max_address_space: Option<u64>,
    /// RLIMIT_CPU in seconds.
    pub max_cpu_seconds: Option<u64>,
    /// RLIMIT_CORE: 0 keeps secrets out of core files.
    pub max_core: Option<u64>,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        ResourceLimits {
            max_processes: Some(4096),
            max_open_files: Some(4096),
            max_file_size: None,
            max_address_space: None,
            max_cpu_seconds: None,
            max_core: Some(0),
        }
    }
}

/// How the executor confines one action. Built by the policy engine, shown to the
/// operator in approval prompts, applied in full by `sysward-exec` or not at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfinementProfile {
    /// Short name: `read-only`, `write`, `network`, `package`, `admin`, …
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups (usually empty).
    pub groups: Vec<u32>,
    /// Capability names kept (e.g. `CAP_NET_ADMIN`); everything else is dropped
    /// from every set, bounding included.
    pub capabilities: Vec<String>,
    /// Landlock: paths readable (and executable) beneath.
    pub read_paths: Vec<String>,
    /// Everything except these is readable (the secrets, `/etc/sysward`, …):
    /// the executor turns it into an allow-list by walking from `/`.
    pub read_all_except: Option<Vec<String>>,
    /// Landlock: whole subtrees writable (files and directories).
    pub write_paths: Vec<String>,
    /// Landlock grants writes beneath `/` (package and admin profiles).
    pub write_everywhere: bool,
    /// sysward's own paths. An action that can write runs in a private mount
    /// namespace where each existing one is a read-only bind mount of itself
    /// and every directory above it is pinned by a bind onto itself (renaming
    /// or removing it fails with EBUSY).
    pub protected_paths: Vec<String>,
    /// What no action may read (secrets, `init.conf` with the API key):
    /// covered there by an empty read-only tmpfs (a directory) or a `nodev`
    /// bind of `/dev/null` (a file, which then cannot be opened at all).
    pub hidden_paths: Vec<String>,
    /// Network allowed. Every action runs in the host's network namespace
    /// (diagnostics see the host, approved changes reach it); without network
    /// seccomp refuses every socket family but AF_UNIX and AF_NETLINK and
    /// Landlock refuses TCP bind and connect.
    pub network: bool,
    /// Landlock signal scope: no signal can reach a process outside the action.
    pub scope_signals: bool,
    /// The action may mount (admin only); otherwise seccomp denies it.
    pub allow_mount: bool,
    pub timeout_secs: u32,
    pub limits: ResourceLimits,
    /// A private scratch directory the action may write (its TMPDIR).
    pub scratch_dir: Option<String>,
}

impl ConfinementProfile {
    /// True when `other` needs the same Landlock ruleset: every field but the
    /// time and resource limits (applied per action) is equal. Written as an
    /// exhaustive destructuring so that a field added to the profile joins the
    /// comparison, or the build fails: a ruleset cached for one profile must
    /// never confine another.
    pub fn same_rules_as(&self, other: &ConfinementProfile) -> bool {
        let ConfinementProfile {
            name,
            uid,
            gid,
            groups,
            capabilities,
            read_paths,
            read_all_except,
            write_paths,
            write_everywhere,
            protected_paths,
            hidden_paths,
            network,
            scope_signals,
            allow_mount,
            timeout_secs: _,
            limits: _,
            scratch_dir,
        } = self;
        *name == other.name
            && *uid == other.uid
            && *gid == other.gid
            && *groups == other.groups
            && *capabilities == other.capabilities
            && *read_paths == other.read_paths
            && *read_all_except == other.read_all_except
            && *write_paths == other.write_paths
            && *write_everywhere == other.write_everywhere
            && *protected_paths == other.protected_paths
            && *hidden_paths == other.hidden_paths
            && *network == other.network
            && *scope_signals == other.scope_signals
            && *allow_mount == other.allow_mount
            && *scratch_dir == other.scratch_dir
    }

    /// True when the profile may write anywhere beyond its scratch directory
    /// (and so runs with sysward's own paths protected by mounts).
    pub fn can_write(&self) -> bool {
        self.write_everywhere || !self.write_paths.is_empty()
    }

    /// True when the kernel lets an action under this profile change no file
    /// and send nothing over the network: no write grant (its private scratch
    /// directory aside), no network, no mount, its signals scoped to itself
    /// and no capability but reading past file permissions (a read-only
    /// diagnosis).
    pub fn changes_nothing(&self) -> bool {
        !self.can_write()
            && !self.network
            && !self.allow_mount
            && self.scope_signals
            && self.capabilities.iter().all(|c| c == "CAP_DAC_READ_SEARCH")
    }

    /// What the kernel will let it write, in the words of the approval panel,
    /// `policy explain` and the audit record: "beneath /etc (sysward's own
    /// paths read-only)".
    pub fn writes_description(&self) -> String {
        let beneath = if self.write_everywhere {
            "everywhere".to_string()
        } else if self.write_paths.is_empty() {
            return "nowhere".to_string();
        } else {
            format!("beneath {}", self.write_paths.join(", "))
        };
        if self.protected_paths.is_empty() && self.hidden_paths.is_empty() {
            beneath
        } else {
            format!("{beneath} (sysward's own paths read-only)")
        }
    }
}

impl fmt::Display for ConfinementProfile {
    /// One line, for approval prompts and `sysward policy explain`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let writes = self.writes_description();
        let caps = if self.capabilities.is_empty() {
            "none".to_string()
        } else {
            self.capabilities.join(",")
        };
        write!(
            f,
            "{}: uid {} gid {}, caps {}, writes {}{}, network {}, timeout {}s",
            self.name,
            self.uid,
            self.gid,
            caps,
            writes,
            match &self.scratch_dir {
                Some(s) => format!(" (+scratch {s})"),
                None => String::new(),
            },
            if self.network {
                "on"
            } else {
                "off (host namespace, no inet sockets)"
            },
            self.timeout_secs
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_only() -> ConfinementProfile {
        ConfinementProfile {
            name: "read-only".into(),
            uid: 0,
            gid: 0,
            groups: Vec::new(),
            capabilities: vec!["CAP_DAC_READ_SEARCH".into()],
            read_paths: vec!["/".into()],
            read_all_except: None,
            write_paths: Vec::new(),
            write_everywhere: false,
            protected_paths: Vec::new(),
            hidden_paths: Vec::new(),
            network: false,
            scope_signals: true,
            allow_mount: false,
            timeout_secs: 30,
            limits: ResourceLimits::default(),
            scratch_dir: Some("/tmp/scratch".into()),
        }
    }

    #[test]
    fn only_limits_and_time_leave_the_rules_the_same() {
        let a = read_only();
        let mut b = read_only();
        b.timeout_secs = 5;
        b.limits.max_processes = Some(3);
        assert!(a.same_rules_as(&b));
        let changes: [fn(&mut ConfinementProfile); 6] = [
            |p| p.write_paths.push("/etc".into()),
            |p| p.hidden_paths.push("/etc/sysward/secrets".into()),
            |p| p.network = true,
            |p| p.uid = 1000,
            |p| p.scratch_dir = None,
            |p| p.read_all_except = Some(vec!["/etc/sysward".into()]),
        ];
        for change in changes {
            let mut c = read_only();
            change(&mut c);
            assert!(!a.same_rules_as(&c), "{c:?}");
        }
    }

    #[test]
    fn changes_nothing_only_without_writes_network_mounts_or_powers() {
        assert!(read_only().changes_nothing());
        let changes: [fn(&mut ConfinementProfile); 6] = [
            |p| p.write_paths.push("/etc".into()),
            |p| p.write_everywhere = true,
            |p| p.network = true,
            |p| p.allow_mount = true,
            |p| p.scope_signals = false,
            |p| p.capabilities.push("CAP_NET_ADMIN".into()),
        ];
        for change in changes {
            let mut c = read_only();
            change(&mut c);
            assert!(!c.changes_nothing(), "{c:?}");
        }
    }
}
