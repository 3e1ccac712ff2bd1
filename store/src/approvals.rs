//! Pending approvals for unattended runs (issue 6 §7). When a decision is ask
//! and no operator is attached, the broker stores a pending approval with the
//! same details the interactive prompt shows, and the task ends BLOCKED. A
//! person decides later with `sysward approve ID` / `sysward deny ID`; the
//! next run that makes the **identical** request (same tool, normalized
//! command, working directory and confinement profile: [`request_key`])
//! consumes the approval exactly once. Approvals expire (24 h by default).
//!
//! Storage: one JSON file per approval, `<id>.json`, in
//! `Layout::approvals_dir()` (`<state>/.agent/approvals/`), a root-owned 0700
//! directory; files 0600, written atomically (temporary file, fsync, rename,
//! fsync of the directory). Every read-modify-write holds an exclusive `flock`
//! on `.lock` in that directory, so a broker taking an approval and an operator
//! deciding one never race, and an approval is consumed at most once even by
//! concurrent sessions. Decided and used approvals are kept 7 days past their
//! expiry for `sysward approvals`, then pruned.
//!
//! Only a person decides: the CLI handlers refuse to run as anything but root,
//! from inside a sysward process tree (an agent, gateway, executor or anything
//! they started), or from inside an action's cgroup. The actions' Landlock
//! rules also keep the approvals directory unwritable.

use crate::audit::Audit;
use crate::project::Layout;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Approvals expire after this long by default.
pub const DEFAULT_TTL_SECS: i64 = 24 * 3600;
/// Stored pending approvals one session may create.
pub const MAX_PENDING_PER_SESSION: usize = 10;
/// Stored pending approvals in all (bounds disk use whatever sessions do).
pub const MAX_PENDING_TOTAL: usize = 500;
/// The `tool` of an approval that is not consumed by use: a project tool's
/// (its manifest and script, by their hash), which stays approved this long
/// after a person approved it ([`LASTING_TTL_SECS`]).
pub const LASTING_TOOL: &str = "project_tool";
pub const LASTING_TTL_SECS: i64 = 366 * 24 * 3600;
/// Decided, used and expired approvals are removed this long after expiry.
pub const KEEP_AFTER_EXPIRY_SECS: i64 = 7 * 24 * 3600;
/// An approval holds its whole command (at most 1 MiB, as a script) and
/// its simple commands shortened.
const MAX_FILE: u64 = 4 << 20;
const FIELD_MAX: usize = 4000;
const COMMAND_MAX: usize = 1 << 20;

/// The key of an identical request: what must match for a granted approval to
/// be consumed.
pub fn request_key(tool: &str, normalized: &str, cwd: &Path, profile: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        tool.as_bytes(),
        normalized.as_bytes(),
        cwd.as_os_str().as_encoded_bytes(),
        profile.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    crate::project::hex(&h.finalize())
}

/// What the broker knows when it turns an ask into a pending approval (the
/// fields of the interactive prompt).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub session: String,
    /// [`request_key`] of the request.
    pub key: String,
    pub tool: String,
    /// The full command after unwrapping, or the tool and its targets; secrets
    /// as placeholders.
    pub command: String,
    pub cwd: String,
    pub category: String,
    pub risk: String,
    /// The confinement profile in one line.
    pub profile: String,
    /// The model's stated reason.
    pub reason: String,
    /// The locked execution mode of the session.
    pub mode: String,
    pub host: String,
    pub task: Option<String>,
    /// Every simple command with its category and risk (see
    /// [`crate::approval_view::prompt_parts`]).
    #[serde(default)]
    pub parts: Vec<sysward_ipc::operator::PromptPart>,
    #[serde(default)]
    pub parts_total: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Approved,
    Denied,
    /// Approved, then consumed by a run.
    Used,
    /// Shown only: pending or approved past its expiry.
    Expired,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Approved => "approved",
            Status::Denied => "denied",
            Status::Used => "used",
            Status::Expired => "expired",
        }
    }
}

/// One stored approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub version: u32,
    pub id: String,
    #[serde(flatten)]
    pub request: ApprovalRequest,
    /// Unix seconds.
    pub created: i64,
    /// Sub-second part of the creation time, for a stable order.
    #[serde(default)]
    pub created_nanos: u32,
    pub expires: i64,
    pub status: Status,
    pub decided_by: Option<String>,
    pub decided_at: Option<i64>,
    pub note: Option<String>,
    pub used_at: Option<i64>,
    pub used_by_session: Option<String>,
}

impl Approval {
    /// The status as of `now` (pending/approved past expiry → expired).
    pub fn status_at(&self, now: i64) -> Status {
        match self.status {
            Status::Pending | Status::Approved if now >= self.expires => Status::Expired,
            s => s,
        }
    }

    /// What the model is told when the request waits for a person: the task
    /// should end BLOCKED with this.
    pub fn blocked_message(&self) -> String {
        format!(
            "approval required: {} — no operator is attached; it waits as approval {} (`sysward approve {}`), after which the next run that makes this exact request proceeds once. End the task as BLOCKED and say so.",
            crate::sanitize::one_line(&self.request.command, 2000),
            self.id,
            self.id
        )
    }

    /// What the model is told when a person denied this request.
    pub fn denied_message(&self) -> String {
        match &self.note {
            Some(n) => format!(
                "denied by the operator (approval {}): {}",
                self.id,
                crate::sanitize::one_line(n, 500)
            ),
            None => format!("denied by the operator (approval {})", self.id),
        }
    }

    /// JSON for `sysward approvals --json`, with the status as of `now`.
    pub fn to_json(&self, now: i64) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        v["status"] = serde_json::json!(self.status_at(now).as_str());
        v["created_rfc3339"] = serde_json::json!(rfc3339(self.created));
        v["expires_rfc3339"] = serde_json::json!(rfc3339(self.expires));
        v
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApprovalError {
    #[error("denied: this session already has {cap} approvals waiting for a person; finish what does not need approval and report the blocker")]
    SessionCap { cap: usize },
    #[error("denied: {cap} approvals are already waiting for a person on this host; an operator must review them (`sysward approvals`)")]
    TotalCap { cap: usize },
    #[error("no approval {0:?} (see `sysward approvals`)")]
    NotFound(String),
    #[error("approval {id} is {status}, not pending: it cannot be decided again")]
    NotPending { id: String, status: &'static str },
    #[error("{0:?} is not an approval id (12 hex digits)")]
    BadId(String),
    #[error(transparent)]
    Other(#[from] ApprovalsError),
}

/// Why the approvals directory or one of its files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ApprovalsError {
    #[error("cannot create {}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot stat {}", .path.display())]
    Stat {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a real directory; refusing to keep approvals there", .0.display())]
    NotARealDirectory(PathBuf),
    #[error("{} is owned by uid {uid}, not {euid}: chown root:root {}", .path.display(), .path.display())]
    WrongOwner { path: PathBuf, uid: u32, euid: u32 },
    #[error("{} has mode {mode:o}: chmod 700 {}", .path.display(), .path.display())]
    OpenToOthers { path: PathBuf, mode: u32 },
    /// The cause is part of the message.
    #[error("cannot lock {}: {error}", .path.display())]
    Lock {
        path: PathBuf,
        error: nix::errno::Errno,
    },
    #[error("cannot open {}", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a private regular file of this user: ignored", .0.display())]
    NotPrivate(PathBuf),
    #[error("{} is too large: ignored", .0.display())]
    TooLarge(PathBuf),
    #[error("{} is not an approval", .path.display())]
    NotAnApproval {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: its id does not match its file name: ignored", .0.display())]
    IdMismatch(PathBuf),
    #[error("cannot list {}", .path.display())]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Project(#[from] crate::project::ProjectError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T, E = ApprovalsError> = std::result::Result<T, E>;

/// What `create` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    New(Approval),
    /// An identical request was already pending: no new one.
    Existing(Approval),
}

impl Created {
    pub fn approval(&self) -> &Approval {
        match self {
            Created::New(a) | Created::Existing(a) => a,
        }
    }
}

/// The approvals directory.
#[derive(Debug, Clone)]
pub struct Approvals {
    dir: PathBuf,
    ttl: i64,
    per_session_cap: usize,
}

pub fn now_unix() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

pub fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn valid_id(id: &str) -> bool {
    id.len() == 12 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn random_id() -> Result<String> {
    Ok(crate::project::random_hex(6)?)
}

/// Holds the directory's exclusive lock.
struct DirLock {
    _lock: nix::fcntl::Flock<File>,
}

impl Approvals {
    /// The approvals of a layout, creating the directory (0700) if needed.
    pub fn open(layout: &Layout) -> Result<Approvals> {
        crate::project::ensure_private_dir(&layout.agent_dir())?;
        Approvals::open_dir(&layout.approvals_dir())
    }

    /// An approvals directory: created 0700 if missing; refused if it is a
    /// symlink, not a directory, not owned by the effective user (root), or
    /// open to group or others.
    pub fn open_dir(dir: &Path) -> Result<Approvals> {
        match fs::symlink_metadata(dir) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir(dir).map_err(|source| ApprovalsError::Create {
                    path: dir.to_path_buf(),
                    source,
                })?;
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            }
            Err(source) => {
                return Err(ApprovalsError::Stat {
                    path: dir.to_path_buf(),
                    source,
                })
            }
        }
        let meta = fs::symlink_metadata(dir)?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(ApprovalsError::NotARealDirectory(dir.to_path_buf()));
        }
        let euid = nix::unistd::geteuid().as_raw();
        if meta.uid() != euid {
            return Err(ApprovalsError::WrongOwner {
                path: dir.to_path_buf(),
                uid: meta.uid(),
                euid,
            });
        }
        if meta.mode() & 0o077 != 0 {
            return Err(ApprovalsError::OpenToOthers {
                path: dir.to_path_buf(),
                mode: meta.mode() & 0o7777,
            });
        }
        Ok(Approvals {
            dir: dir.to_path_buf(),
            ttl: DEFAULT_TTL_SECS,
            per_session_cap: MAX_PENDING_PER_SESSION,
        })
    }

    /// Another expiry (seconds).
    pub fn with_ttl(mut self, secs: i64) -> Approvals {
        self.ttl = secs.max(1);
        self
    }

    pub fn with_session_cap(mut self, cap: usize) -> Approvals {
        self.per_session_cap = cap;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> Result<DirLock> {
        let path = self.dir.join(".lock");
        let file = crate::project::open_lock_file(&path)?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).map_err(
            |(_, error)| ApprovalsError::Lock {
                path: path.clone(),
                error,
            },
        )?;
        Ok(DirLock { _lock: lock })
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    fn read_one(&self, path: &Path) -> Result<Approval> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| ApprovalsError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let meta = file.metadata()?;
        if !meta.is_file()
            || meta.uid() != nix::unistd::geteuid().as_raw()
            || meta.mode() & 0o077 != 0
        {
            return Err(ApprovalsError::NotPrivate(path.to_path_buf()));
        }
        let mut text = String::new();
        file.take(MAX_FILE + 1).read_to_string(&mut text)?;
        if text.len() as u64 > MAX_FILE {
            return Err(ApprovalsError::TooLarge(path.to_path_buf()));
        }
        let a: Approval =
            serde_json::from_str(&text).map_err(|source| ApprovalsError::NotAnApproval {
                path: path.to_path_buf(),
                source,
            })?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if a.id != stem || !valid_id(&a.id) {
            return Err(ApprovalsError::IdMismatch(path.to_path_buf()));
        }
        Ok(a)
    }

    /// Writes atomically (see [`crate::project::write_atomic`]).
    fn write(&self, a: &Approval) -> Result<()> {
        Ok(crate::project::write_atomic(
            &self.path_of(&a.id),
            &serde_json::to_vec_pretty(a)?,
        )?)
    }

    /// Every readable approval, oldest first, and the problems with unreadable
    /// files (never fatal; an unreadable file never grants anything).
    pub fn list_with_problems(&self) -> Result<(Vec<Approval>, Vec<String>)> {
        let mut list = Vec::new();
        let mut problems = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(|source| ApprovalsError::List {
            path: self.dir.clone(),
            source,
        })? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            match self.read_one(&entry.path()) {
                Ok(a) => list.push(a),
                Err(e) => problems.push(crate::error::chain(&e)),
            }
        }
        list.sort_by(|a, b| {
            (a.created, a.created_nanos, &a.id).cmp(&(b.created, b.created_nanos, &b.id))
        });
        Ok((list, problems))
    }

    pub fn list(&self) -> Result<Vec<Approval>> {
        Ok(self.list_with_problems()?.0)
    }

    pub fn get(&self, id: &str) -> Result<Approval, ApprovalError> {
        if !valid_id(id) {
            return Err(ApprovalError::BadId(crate::sanitize::one_line(id, 40)));
        }
        let path = self.path_of(id);
        if fs::symlink_metadata(&path).is_err() {
            return Err(ApprovalError::NotFound(id.to_string()));
        }
        Ok(self.read_one(&path)?)
    }

    /// Stores a pending approval for `req`, or returns the identical one
    /// already pending. Refused beyond the per-session and total caps.
    pub fn create(&self, req: ApprovalRequest) -> Result<Created, ApprovalError> {
        self.create_at(req, now_unix())
    }

    /// `create` at a given time (tests).
    pub fn create_at(&self, mut req: ApprovalRequest, now: i64) -> Result<Created, ApprovalError> {
        let _lock = self.lock()?;
        let mut list = self.list()?;
        // Old decided, used and expired approvals go here, so nobody has to
        // remember to prune.
        list.retain(|a| {
            let stale = now >= a.expires + KEEP_AFTER_EXPIRY_SECS;
            if stale {
                let _ = fs::remove_file(self.path_of(&a.id));
            }
            !stale
        });
        let pending: Vec<&Approval> = list
            .iter()
            .filter(|a| a.status_at(now) == Status::Pending)
            .collect();
        if let Some(same) = pending.iter().find(|a| a.request.key == req.key) {
            return Ok(Created::Existing((*same).clone()));
        }
        if pending
            .iter()
            .filter(|a| a.request.session == req.session)
            .count()
            >= self.per_session_cap
        {
            return Err(ApprovalError::SessionCap {
                cap: self.per_session_cap,
            });
        }
        if pending.len() >= MAX_PENDING_TOTAL {
            return Err(ApprovalError::TotalCap {
                cap: MAX_PENDING_TOTAL,
            });
        }
        req.command = crate::sanitize::one_line(&req.command, COMMAND_MAX);
        req.parts.truncate(crate::approval_view::PARTS_KEPT);
        for p in &mut req.parts {
            for f in [&mut p.text, &mut p.category, &mut p.risk] {
                *f = crate::sanitize::one_line(f, FIELD_MAX);
            }
        }
        for f in [
            &mut req.session,
            &mut req.tool,
            &mut req.cwd,
            &mut req.category,
            &mut req.risk,
            &mut req.profile,
            &mut req.reason,
            &mut req.mode,
            &mut req.host,
        ] {
            *f = crate::sanitize::one_line(f, FIELD_MAX);
        }
        req.task = req.task.map(|t| crate::sanitize::one_line(&t, 300));
        let mut id = random_id()?;
        while self.path_of(&id).exists() {
            id = random_id()?;
        }
        let a = Approval {
            version: 1,
            id,
            request: req,
            created: now,
            created_nanos: time::OffsetDateTime::now_utc().nanosecond(),
            expires: now + self.ttl,
            status: Status::Pending,
            decided_by: None,
            decided_at: None,
            note: None,
            used_at: None,
            used_by_session: None,
        };
        self.write(&a)?;
        Ok(Created::New(a))
    }

    fn decide(
        &self,
        id: &str,
        now: i64,
        f: impl FnOnce(&mut Approval),
    ) -> Result<Approval, ApprovalError> {
        let _lock = self.lock()?;
        let mut a = self.get(id)?;
        let status = a.status_at(now);
        if status != Status::Pending {
            return Err(ApprovalError::NotPending {
                id: a.id,
                status: status.as_str(),
            });
        }
        f(&mut a);
        a.decided_at = Some(now);
        self.write(&a)?;
        Ok(a)
    }

    /// A person allows it: the next identical request proceeds, once.
    pub fn approve(&self, id: &str, who: &str) -> Result<Approval, ApprovalError> {
        self.approve_at(id, who, now_unix())
    }

    pub fn approve_at(&self, id: &str, who: &str, now: i64) -> Result<Approval, ApprovalError> {
        self.decide(id, now, |a| {
            a.status = Status::Approved;
            a.decided_by = Some(crate::sanitize::one_line(who, 200));
            if a.request.tool == LASTING_TOOL {
                a.expires = a.expires.max(now + LASTING_TTL_SECS);
            }
        })
    }

    /// A person refuses it; the note goes back to the model on the next
    /// identical request.
    pub fn deny(&self, id: &str, who: &str, note: &str) -> Result<Approval, ApprovalError> {
        self.deny_at(id, who, note, now_unix())
    }

    pub fn deny_at(
        &self,
        id: &str,
        who: &str,
        note: &str,
        now: i64,
    ) -> Result<Approval, ApprovalError> {
        self.decide(id, now, |a| {
            a.status = Status::Denied;
            a.decided_by = Some(crate::sanitize::one_line(who, 200));
            a.note = (!note.trim().is_empty()).then(|| crate::sanitize::one_line(note, 500));
        })
    }

    /// Consumes an approved, unexpired approval for exactly this request key:
    /// `Some` once, then `None`.
    pub fn take_granted(&self, key: &str, session: &str) -> Result<Option<Approval>> {
        self.take_granted_at(key, session, now_unix())
    }

    pub fn take_granted_at(&self, key: &str, session: &str, now: i64) -> Result<Option<Approval>> {
        let _lock = self.lock()?;
        let found = self
            .list()?
            .into_iter()
            .find(|a| a.request.key == key && a.status_at(now) == Status::Approved);
        let Some(mut a) = found else { return Ok(None) };
        a.status = Status::Used;
        a.used_at = Some(now);
        a.used_by_session = Some(crate::sanitize::one_line(session, 200));
        self.write(&a)?;
        Ok(Some(a))
    }

    /// An approved, unexpired approval for this key, left as it is (a
    /// project tool's approval is not consumed by use).
    pub fn granted(&self, key: &str) -> Result<Option<Approval>> {
        let now = now_unix();
        Ok(self
            .list()?
            .into_iter()
            .find(|a| a.request.key == key && a.status_at(now) == Status::Approved))
    }

    /// A denial of this request key not yet reported to a model: returned once
    /// (with the person's note), so the next identical request is told no
    /// instead of asking again; after that a new ask creates a new approval.
    pub fn take_denied(&self, key: &str, session: &str) -> Result<Option<Approval>> {
        let now = now_unix();
        let _lock = self.lock()?;
        let found = self.list()?.into_iter().find(|a| {
            a.request.key == key
                && a.status == Status::Denied
                && a.used_at.is_none()
                && now < a.expires
        });
        let Some(mut a) = found else { return Ok(None) };
        a.used_at = Some(now);
        a.used_by_session = Some(crate::sanitize::one_line(session, 200));
        self.write(&a)?;
        Ok(Some(a))
    }

    /// The identical request still waiting for a person, if any.
    pub fn pending_for(&self, key: &str) -> Result<Option<Approval>> {
        let now = now_unix();
        Ok(self
            .list()?
            .into_iter()
            .find(|a| a.request.key == key && a.status_at(now) == Status::Pending))
    }

    /// Removes approvals more than 7 days past their expiry. Returns how many.
    pub fn prune(&self) -> Result<usize> {
        self.prune_at(now_unix())
    }

    pub fn prune_at(&self, now: i64) -> Result<usize> {
        let _lock = self.lock()?;
        let mut n = 0;
        for a in self.list()? {
            if now >= a.expires + KEEP_AFTER_EXPIRY_SECS {
                fs::remove_file(self.path_of(&a.id))?;
                n += 1;
            }
        }
        Ok(n)
    }
}

// ---- who may decide ---------------------------------------------------------------

/// Names of sysward's own programs: a decision from a process below one of
/// them is refused.
const SYSWARD_PROGRAMS: &[&str] = &[
    "sysward",
    "sysward-agent",
    "sysward-exec",
    "sysward-gateway",
];

/// Checks that the caller is a person's process: root, not below any sysward
/// process (the broker, an agent, a gateway, an executor, or anything they
/// started), not inside an action's cgroup. Returns who it is, for the audit.
pub fn check_decider() -> Result<String, String> {
    let uid = nix::unistd::getuid().as_raw();
    let euid = nix::unistd::geteuid().as_raw();
    if euid != 0 {
        return Err("approvals are decided as root (sudo sysward approve …)".to_string());
    }
    let me = std::process::id() as i32;
    let chain =
        sysward_ipc::peer::ancestry(me).map_err(|e| format!("cannot check who is asking: {e}"))?;
    for pid in chain.iter().skip(1) {
        if *pid <= 1 {
            continue;
        }
        let exe = fs::read_link(format!("/proc/{pid}/exe"));
        match exe {
            Ok(p) => {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let name = name.trim_end_matches(" (deleted)");
                if SYSWARD_PROGRAMS.contains(&name) {
                    return Err(format!(
                        "refused: this process descends from {} (pid {pid}); only a person outside sysward's process tree decides approvals",
                        p.display()
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot check ancestor pid {pid}: {e}; refusing")),
        }
    }
    let cg = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if cg.lines().any(|l| {
        l.strip_prefix("0::")
            .is_some_and(|p| p == "/sysward" || p.starts_with("/sysward/"))
    }) {
        return Err("refused: this process runs inside a sysward action's cgroup".to_string());
    }
    let name = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| "?".to_string());
    let sudo = std::env::var("SUDO_USER").ok().filter(|s| !s.is_empty());
    Ok(match sudo {
        Some(s) => format!(
            "uid {uid} ({name}, via sudo from {})",
            crate::sanitize::one_line(&s, 64)
        ),
        None => format!("uid {uid} ({name})"),
    })
}

// ---- CLI handlers ------------------------------------------------------------------

/// What `sysward approvals --json` prints: `{"approvals": [...], "problems":
/// [...]}`, each approval with its status as of now.
pub fn list_json(layout: &Layout) -> Result<serde_json::Value> {
    let dir = layout.approvals_dir();
    if fs::symlink_metadata(&dir).is_err() {
        return Ok(serde_json::json!({"approvals": [], "problems": []}));
    }
    let (list, problems) = Approvals::open_dir(&dir)?.list_with_problems()?;
    let now = now_unix();
    Ok(serde_json::json!({
        "approvals": list.iter().map(|a| a.to_json(now)).collect::<Vec<_>>(),
        "problems": problems,
    }))
}

/// `sysward approve ID`: exit 0 when approved, 1 when the id is unknown,
/// already decided or expired.
pub fn cmd_approve(layout: &Layout, audit: &Audit, id: &str) -> Result<i32> {
    decide_cmd(layout, audit, id, None)
}

/// `sysward deny ID [--note TEXT]`: the note goes back to the model.
pub fn cmd_deny(layout: &Layout, audit: &Audit, id: &str, note: Option<&str>) -> Result<i32> {
    decide_cmd(layout, audit, id, Some(note.unwrap_or("")))
}

fn decide_cmd(layout: &Layout, audit: &Audit, id: &str, deny_note: Option<&str>) -> Result<i32> {
    let who = match check_decider() {
        Ok(w) => w,
        Err(why) => {
            let _ = audit.record(serde_json::json!({
                "event": "approval_decision_refused", "id": crate::sanitize::one_line(id, 40), "reason": why,
            }));
            eprintln!("sysward: {why}");
            return Ok(1);
        }
    };
    match decide_as(layout, audit, id, deny_note, &who)? {
        Ok(message) => {
            println!("{message}");
            Ok(0)
        }
        Err(message) => {
            eprintln!("sysward: {message}");
            Ok(1)
        }
    }
}

/// Decides approval `id` on behalf of `who` (already checked: root at the
/// terminal, or an operator connection that passed the daemon's peer checks),
/// records it in the audit log, and returns the message for the person.
pub fn decide_as(
    layout: &Layout,
    audit: &Audit,
    id: &str,
    deny_note: Option<&str>,
    who: &str,
) -> Result<std::result::Result<String, String>> {
    let store = Approvals::open(layout)?;
    let result = match deny_note {
        None => store.approve(id, who),
        Some(note) => store.deny(id, who, note),
    };
    let a = match result {
        Ok(a) => a,
        Err(ApprovalError::Other(e)) => return Err(e),
        Err(e) => return Ok(Err(e.to_string())),
    };
    audit.record(serde_json::json!({
        "event": "approval_decided",
        "id": a.id,
        "decision": a.status.as_str(),
        "by": who,
        "note": a.note,
        "session": a.request.session,
        "tool": a.request.tool,
        "request": a.request.command,
        "category": a.request.category,
        "risk": a.request.risk,
        "profile": a.request.profile,
        "expires": rfc3339(a.expires),
    }))?;
    let _ = audit.anchor();
    Ok(Ok(match a.status {
        Status::Approved if a.request.tool == LASTING_TOOL => format!(
            "approved {}: this project tool, exactly as shown, is offered from the next session until {} or until its manifest or script changes:\n  {}",
            a.id,
            rfc3339(a.expires),
            crate::sanitize::one_line(&a.request.command, 2000)
        ),
        Status::Approved => format!(
            "approved {}: the next run that makes this exact request proceeds once (until {}):\n  {}",
            a.id,
            rfc3339(a.expires),
            crate::sanitize::one_line(&a.request.command, 2000)
        ),
        _ => format!(
            "denied {}: the next identical request is refused{}",
            a.id,
            if a.note.is_some() { " with your note" } else { "" }
        ),
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn key_separates_fields() {
        let a = request_key("exec", "ab", Path::new("/c"), "p");
        assert_ne!(a, request_key("exec", "a", Path::new("b/c"), "p"));
        assert_eq!(a, request_key("exec", "ab", Path::new("/c"), "p"));
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn ids_are_checked() {
        assert!(valid_id("0123456789ab"));
        assert!(!valid_id("../../etc/xx"));
        assert!(!valid_id("0123456789AB"));
        assert!(!valid_id("0123456789a"));
    }

    #[test]
    fn status_expires() {
        let a = Approval {
            version: 1,
            id: "0123456789ab".into(),
            request: ApprovalRequest::default(),
            created: 0,
            created_nanos: 0,
            expires: 10,
            status: Status::Approved,
            decided_by: None,
            decided_at: None,
            note: None,
            used_at: None,
            used_by_session: None,
        };
        assert_eq!(a.status_at(9), Status::Approved);
        assert_eq!(a.status_at(10), Status::Expired);
        assert_eq!(human_duration(3 * 3600 + 61), "3h 01m");
    }
}
