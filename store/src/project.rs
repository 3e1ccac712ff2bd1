//! The project: where `init.conf`, `agent.md` and the task files live, where the
//! state goes, and the checks the seed makes before anything starts.

use crate::config::{self, InitConf};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use sysward_ipc::agent::TaskSpec;

/// Why a project cannot be used, or a broker file not read or written.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(
        "cannot read {} as uid {uid}: permission denied (the project's files are root's: run this as root)",
        .path.display()
    )]
    Unreadable {
        path: PathBuf,
        uid: nix::unistd::Uid,
    },
    #[error("project directory {} does not exist", .0.display())]
    NoProjectDir(PathBuf),
    #[error("{} is a symlink; refusing to use it", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not owned by root; fix it with `chown root:root {}`", .0.display(), .0.display())]
    NotRootOwned(PathBuf),
    #[error("{} exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("cannot create {}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "init.conf not found in PROJECT_ROOT ({}): copy an example init.conf there and set API_URL and MODEL",
        .0.display()
    )]
    NoInitConf(PathBuf),
    #[error("cannot use {}", .path.display())]
    Config {
        path: PathBuf,
        #[source]
        source: config::ConfigError,
    },
    #[error("{}: {error}", .path.display())]
    Policy {
        path: PathBuf,
        error: sysward_policy::PolicyError,
    },
    #[error("cannot list {}", .path.display())]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The cause is part of the message (as the seed says it).
    #[error("cannot list {}: {error}", .path.display())]
    ListDir {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("cannot stat {}: {error}", .path.display())]
    Stat {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "insecure project: {} is a shared directory like /tmp; use a private directory",
        .0.display()
    )]
    SharedDirectory(PathBuf),
    #[error(transparent)]
    Insecure(#[from] Insecure),
    #[error(
        "ERROR: agent.md not found in PROJECT_ROOT ({}): create agent.md with the agent's rules and a ```policy block",
        .0.display()
    )]
    NoAgentMd(PathBuf),
    #[error("several agent.md variants ({0}): keep one")]
    AgentMdVariants(String),
    #[error("cannot open {} (symlinks, FIFOs and devices are refused)", .path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is larger than {max} bytes", .path.display())]
    TooLarge { path: PathBuf, max: u64 },
    #[error("{} is not UTF-8 text", .path.display())]
    NotUtf8 {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open lock {}", .path.display())]
    OpenLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "another sysward session is running on this project (pid {0}); wait for it or stop it. The lock frees itself when that process dies"
    )]
    Locked(String),
    #[error("cannot read /dev/urandom")]
    Urandom(#[source] std::io::Error),
    #[error("path has no parent")]
    NoParent,
    #[error("path has no file name")]
    NoFileName,
    #[error("cannot open the directory {}", .path.display())]
    OpenDirectory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create {}", .path.display())]
    CreateAt {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("cannot replace {}", .path.display())]
    Replace {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("cannot sync {}", .path.display())]
    Sync {
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

type Result<T> = std::result::Result<T, ProjectError>;

/// agent.md and each task are at most 1 MiB (seed).
pub const MAX_INSTRUCTION_FILE: u64 = 1 << 20;

/// Where everything of one installation or one `--root DIR` project lives.
#[derive(Debug, Clone)]
pub struct Layout {
    /// init.conf, agent.md, task files.
    pub config_dir: PathBuf,
    /// memoria.md, contexto.mem, audit log, approvals, `.agent/`.
    pub state_dir: PathBuf,
    pub secrets_dir: PathBuf,
    /// True for `--root DIR` (one directory holds everything, as the seed's
    /// PROJECT_ROOT does).
    pub standalone: bool,
}

impl Layout {
    pub fn standalone(root: &Path) -> Result<Layout> {
        let root = fs::canonicalize(root).map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => unreadable(root),
            _ => ProjectError::NoProjectDir(root.to_path_buf()),
        })?;
        Ok(Layout {
            config_dir: root.clone(),
            state_dir: root.clone(),
            secrets_dir: root.join("secrets"),
            standalone: true,
        })
    }

    pub fn installed() -> Layout {
        Layout {
            config_dir: PathBuf::from("/etc/sysward"),
            state_dir: PathBuf::from("/var/lib/sysward"),
            secrets_dir: PathBuf::from("/etc/sysward/secrets"),
            standalone: false,
        }
    }

    pub fn agent_dir(&self) -> PathBuf {
        self.state_dir.join(".agent")
    }
    pub fn tmp_dir(&self) -> PathBuf {
        self.agent_dir().join("tmp")
    }
    pub fn audit_log(&self) -> PathBuf {
        self.state_dir.join("audit.log")
    }
    pub fn audit_head(&self) -> PathBuf {
        self.agent_dir().join("audit.head")
    }
    pub fn approvals_dir(&self) -> PathBuf {
        self.agent_dir().join("approvals")
    }
    pub fn lock_file(&self) -> PathBuf {
        self.agent_dir().join("lock")
    }
    pub fn init_conf(&self) -> PathBuf {
        self.config_dir.join("init.conf")
    }
    /// Where project tools live: a `--root DIR` project's `tools/`, which
    /// actions write; in the installed layout a directory only the broker
    /// writes (`/etc/sysward` is no action's to write or run from, and
    /// `/var/lib/sysward` no action's to read).
    pub fn tools_dir(&self) -> PathBuf {
        if self.standalone {
            self.config_dir.join("tools")
        } else {
            PathBuf::from(INSTALLED_TOOLS_DIR)
        }
    }
}

/// The installed layout's project tools: written by the broker alone
/// (`register_tool`), readable and runnable by actions, writable by none.
pub const INSTALLED_TOOLS_DIR: &str = "/var/lib/sysward-tools";

/// Creates the installed layout's tools directory (root's, 0755) when it is
/// missing, refusing a symlink or a file in its place and taking write
/// access from anyone but root.
pub fn ensure_tools_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(ProjectError::Symlink(dir.to_path_buf())),
        Ok(meta) if meta.is_dir() => {
            if meta.uid() != 0 {
                return Err(ProjectError::NotRootOwned(dir.to_path_buf()));
            }
            if meta.permissions().mode() & 0o022 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
            }
            Ok(())
        }
        Ok(_) => Err(ProjectError::NotADirectory(dir.to_path_buf())),
        Err(_) => {
            fs::create_dir(dir).map_err(|source| ProjectError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
            Ok(())
        }
    }
}

/// Everything loaded from a project before a session starts.
#[derive(Debug)]
pub struct Project {
    pub layout: Layout,
    pub conf: InitConf,
    pub agent_md_path: PathBuf,
    pub agent_md: String,
    pub policy: sysward_policy::PolicyBlock,
    pub warnings: Vec<String>,
}

impl Project {
    /// Loads and checks init.conf and agent.md; refuses to start on any error
    /// (seed: missing, world-writable or unparsable → refuse).
    pub fn load(layout: Layout) -> Result<Project> {
        let mut warnings = Vec::new();
        check_directory(&layout.config_dir)?;
        let init_path = layout.init_conf();
        match fs::symlink_metadata(&init_path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(unreadable(&init_path))
            }
            Err(_) => return Err(ProjectError::NoInitConf(layout.config_dir.clone())),
        }
        let init_text = read_checked(&init_path, 64 << 10)?;
        let (conf, conf_warnings) =
            config::parse(&init_text).map_err(|source| ProjectError::Config {
                path: init_path.clone(),
                source,
            })?;
        warnings.extend(conf_warnings);
        if !conf.api_key.is_empty() {
            let mode = fs::metadata(&init_path)?.permissions().mode();
            if mode & 0o004 != 0 {
                warnings.push(format!(
                    "{} holds API_KEY and is readable by other users: chmod 600 {}",
                    init_path.display(),
                    init_path.display()
                ));
            }
        }
        let agent_md_path = find_agent_md(&layout.config_dir, &mut warnings)?;
        let agent_md = read_checked(&agent_md_path, MAX_INSTRUCTION_FILE)?;
        let parsed =
            sysward_policy::parse_agent_md(&agent_md).map_err(|error| ProjectError::Policy {
                path: agent_md_path.clone(),
                error,
            })?;
        warnings.extend(parsed.warnings);
        Ok(Project {
            layout,
            conf,
            agent_md_path,
            agent_md,
            policy: parsed.block,
            warnings,
        })
    }

    /// Only agent.md and its policy block (for `sysward policy`, which needs no
    /// init.conf): the path, the parsed block and the warnings.
    pub fn load_policy(
        layout: &Layout,
    ) -> Result<(PathBuf, sysward_policy::PolicyBlock, Vec<String>)> {
        let mut warnings = Vec::new();
        check_directory(&layout.config_dir)?;
        let path = find_agent_md(&layout.config_dir, &mut warnings)?;
        let text = read_checked(&path, MAX_INSTRUCTION_FILE)?;
        let parsed =
            sysward_policy::parse_agent_md(&text).map_err(|error| ProjectError::Policy {
                path: path.to_path_buf(),
                error,
            })?;
        warnings.extend(parsed.warnings);
        Ok((path, parsed.block, warnings))
    }

    /// [`Project::load_policy`] of one file, wherever it lies (a candidate
    /// agent.md checked before it is installed). Its owner and mode are not
    /// judged: nothing obeys it where it lies (a temporary copy), and once
    /// installed, `run` applies [`strict_modes`] to it.
    pub fn load_policy_file(
        path: &Path,
    ) -> Result<(PathBuf, sysward_policy::PolicyBlock, Vec<String>)> {
        let mut warnings = Vec::new();
        let text = read_bounded(path, MAX_INSTRUCTION_FILE)?;
        let parsed =
            sysward_policy::parse_agent_md(&text).map_err(|error| ProjectError::Policy {
                path: path.to_path_buf(),
                error,
            })?;
        warnings.extend(parsed.warnings);
        Ok((path.to_path_buf(), parsed.block, warnings))
    }

    /// The task files in run order (seed: `*.md` directly in the project except
    /// agent.md, memoria.md, README.md; TASK_ORDER or lexicographic; symlinks out
    /// of the project ignored with a warning).
    pub fn tasks(&self, warnings: &mut Vec<String>) -> Result<Vec<TaskSpec>> {
        let dir = &self.layout.config_dir;
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|source| ProjectError::List {
            path: dir.clone(),
            source,
        })? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let lower = name.to_ascii_lowercase();
            if !lower.ends_with(".md")
                || ["agent.md", "memoria.md", "readme.md"].contains(&lower.as_str())
            {
                continue;
            }
            let path = entry.path();
            let meta = fs::symlink_metadata(&path)?;
            if meta.file_type().is_symlink() {
                match fs::canonicalize(&path) {
                    Ok(real) if real.starts_with(dir) && real.is_file() => {}
                    _ => {
                        warnings.push(format!(
                            "task {name} is a symlink out of the project: ignored"
                        ));
                        continue;
                    }
                }
            } else if !meta.is_file() {
                continue;
            }
            names.push(name);
        }
        names.sort();
        let order = &self.policy.task_order;
        if !order.is_empty() {
            let mut ordered = Vec::new();
            for wanted in order {
                if let Some(pos) = names.iter().position(|n| n == wanted) {
                    ordered.push(names.remove(pos));
                } else {
                    warnings.push(format!(
                        "TASK_ORDER names {wanted}, which is not a task file here"
                    ));
                }
            }
            ordered.extend(names);
            names = ordered;
        }
        let mut tasks = Vec::new();
        for name in names {
            // One unusable task file is skipped, named; the others still run.
            let content = match read_checked(&dir.join(&name), MAX_INSTRUCTION_FILE) {
                Ok(c) if c.trim().is_empty() => {
                    warnings.push(format!("task {name} is empty: skipped"));
                    continue;
                }
                Ok(c) => c,
                // A task anyone but root can rewrite is no reason to skip it
                // quietly: the project is not safe, so nothing runs.
                Err(e @ ProjectError::Insecure(_)) => return Err(e),
                Err(e) => {
                    warnings.push(format!("task {name} skipped: {}", crate::error::chain(&e)));
                    continue;
                }
            };
            let sha256 = sha256_hex(content.as_bytes());
            tasks.push(TaskSpec {
                name,
                content,
                sha256,
            });
        }
        Ok(tasks)
    }
}

pub fn hex(bytes: &[u8]) -> String {
    // Two table lookups a byte: a `format!` a byte cost a few microseconds
    // per audit record's hash.
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The SHA-256 of `bytes` in lowercase hex (task files, audit records, file
/// changes).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A configuration path that breaks [`strict_modes`]: `run` refuses the
/// whole project for it (a task file included), never just skips it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Insecure(pub String);

/// Where a path sits in a project, for [`strict_modes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A directory above the project (or above /etc/sysward).
    Ancestor,
    /// The project directory itself (or /etc/sysward).
    ProjectDir,
    /// init.conf, agent.md or a task file.
    File,
}

/// The StrictModes rule, as sshd and sudo apply it to their own files: what
/// the root broker obeys must be owned by root and writable by nobody else,
/// and so must every directory above it (whoever may rename a directory on
/// the way can put another project in its place). A root-owned sticky
/// directory above the project (/tmp, /var/tmp) is safe: nobody but root
/// can rename or remove root's entries in it. The packaged layout
/// (/etc/sysward 0700, its files 0600, all root:root) passes. `run` (through
/// [`Project::load`] and [`Project::tasks`]) and `doctor` both decide with
/// this function alone.
pub fn strict_modes(
    path: &Path,
    meta: &fs::Metadata,
    place: Place,
) -> std::result::Result<(), Insecure> {
    let fix = format!("chown root:root {0}; chmod go-w {0}", path.display());
    if meta.uid() != 0 {
        let owner = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(meta.uid()))
            .ok()
            .flatten()
            .map(|u| format!("uid {} ({})", meta.uid(), u.name))
            .unwrap_or_else(|| format!("uid {}", meta.uid()));
        return Err(Insecure(format!(
            "insecure project: {} is owned by {owner}, not root, so that user could change what the root broker does: {fix}",
            path.display()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if place == Place::ProjectDir && mode & 0o1000 != 0 {
        return Err(Insecure(format!(
            "insecure project: {} is a shared directory like /tmp; use a private directory",
            path.display()
        )));
    }
    let open_to = match mode & 0o022 {
        0 => return Ok(()),
        _ if place == Place::Ancestor && mode & 0o1000 != 0 => return Ok(()),
        0o020 => "its group",
        0o002 => "any user",
        _ => "its group and any user",
    };
    Err(Insecure(format!(
        "insecure project: {} is writable by {open_to} (mode {mode:04o}): {fix}",
        path.display()
    )))
}

/// "cannot read PATH as uid N": the path exists, or may, but this process
/// may not look (a project is root's; `doctor` run as another user says so
/// rather than "not found").
pub fn unreadable(path: &Path) -> ProjectError {
    ProjectError::Unreadable {
        path: path.to_path_buf(),
        uid: nix::unistd::geteuid(),
    }
}

/// Every violation of [`strict_modes`] in the project: the directories above
/// it, the directory, init.conf, agent.md (any case) and the task files
/// (`doctor` lists them all; [`Project::load`] stops at the first).
pub fn strict_mode_problems(layout: &Layout) -> Vec<String> {
    let mut problems = Vec::new();
    let dir = match fs::canonicalize(&layout.config_dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return vec![format!("{:#}", unreadable(&layout.config_dir))]
        }
        Err(e) => return vec![format!("cannot check {}: {e}", layout.config_dir.display())],
    };
    if let Err(e) = check_tree(&dir) {
        problems.push(e.to_string());
    }
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            problems.push(format!("{:#}", unreadable(&dir)));
            return problems;
        }
        Err(e) => {
            problems.push(format!("cannot list {}: {e}", dir.display()));
            return problems;
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            let lower = n.to_ascii_lowercase();
            lower == "init.conf"
                || (lower.ends_with(".md")
                    && !["memoria.md", "readme.md"].contains(&lower.as_str()))
        })
        .collect();
    names.sort();
    for name in names {
        let path = dir.join(&name);
        // Not followed, as the broker's reads do not follow it.
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {
                if let Err(e) = strict_modes(&path, &m, Place::File) {
                    problems.push(e.to_string());
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                problems.push(format!("{:#}", unreadable(&path)))
            }
            Err(e) => problems.push(format!("cannot check {}: {e}", path.display())),
        }
    }
    problems
}

/// The project directory and every directory above it under
/// [`strict_modes`] (`dir` is canonical: no symlink on the way).
fn check_tree(dir: &Path) -> std::result::Result<(), Insecure> {
    for (i, p) in dir.ancestors().enumerate() {
        let meta = fs::symlink_metadata(p).map_err(|e| {
            Insecure(if e.kind() == std::io::ErrorKind::PermissionDenied {
                format!("{:#}", unreadable(p))
            } else {
                format!("cannot stat {}: {e}", p.display())
            })
        })?;
        let place = if i == 0 {
            Place::ProjectDir
        } else {
            Place::Ancestor
        };
        strict_modes(p, &meta, place)?;
    }
    Ok(())
}

/// The project directory: a private, root-owned directory on a root-owned
/// path (see [`strict_modes`]); never a shared one like /tmp.
fn check_directory(dir: &Path) -> Result<()> {
    let real = fs::canonicalize(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => unreadable(dir),
        _ => ProjectError::Stat {
            path: dir.to_path_buf(),
            error: e,
        },
    })?;
    if real == Path::new("/tmp") || real == Path::new("/var/tmp") {
        return Err(ProjectError::SharedDirectory(dir.to_path_buf()));
    }
    check_tree(&real)?;
    Ok(())
}

/// agent.md, or a single variant differing only in case (with a warning).
fn find_agent_md(dir: &Path, warnings: &mut Vec<String>) -> Result<PathBuf> {
    let exact = dir.join("agent.md");
    match fs::symlink_metadata(&exact) {
        Ok(_) => return Ok(exact),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(unreadable(&exact))
        }
        Err(_) => {}
    }
    let mut variants = Vec::new();
    let entries = fs::read_dir(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => unreadable(dir),
        _ => ProjectError::ListDir {
            path: dir.to_path_buf(),
            error: e,
        },
    })?;
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.eq_ignore_ascii_case("agent.md") {
            variants.push(name);
        }
    }
    match variants.as_slice() {
        [one] => {
            warnings.push(format!("using {one} as agent.md"));
            Ok(dir.join(one))
        }
        [] => Err(ProjectError::NoAgentMd(dir.to_path_buf())),
        many => Err(ProjectError::AgentMdVariants(many.join(", "))),
    }
}

/// Opens a project file for reading without following a symlink and without
/// blocking: a FIFO or a device put where a file belongs would otherwise hang
/// the root broker in `open()` (and, through the daemon, keep the project
/// locked). Anything but a regular file is refused, naming it.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Reads a configuration file as root without following a symlink, refusing
/// one that breaks [`strict_modes`] (an [`Insecure`] error) or is oversized.
pub fn read_checked(path: &Path, max: u64) -> Result<String> {
    let file = open_config(path)?;
    // The descriptor's own metadata: the file that is read is the one checked.
    strict_modes(path, &file.metadata()?, Place::File)?;
    read_open(path, file, max)
}

/// Reads a file as [`read_checked`] does (no symlink, FIFO or device, at most
/// `max` bytes of UTF-8) without judging its owner and mode.
pub fn read_bounded(path: &Path, max: u64) -> Result<String> {
    read_open(path, open_config(path)?, max)
}

/// [`open_regular`], its errors said for a person: "cannot read X as uid N"
/// when permission is denied.
fn open_config(path: &Path) -> Result<File> {
    match open_regular(path) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(unreadable(path)),
        Err(source) => Err(ProjectError::Open {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_open(path: &Path, file: File, max: u64) -> Result<String> {
    let meta = file.metadata()?;
    if meta.len() > max {
        return Err(ProjectError::TooLarge {
            path: path.to_path_buf(),
            max,
        });
    }
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|source| ProjectError::NotUtf8 {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(text)
}

/// The per-project lock: two sessions never run on one project. Released when
/// dropped (or when the process dies).
pub struct ProjectLock {
    _lock: nix::fcntl::Flock<File>,
}

/// Opens (creating 0600, never through a symlink) a file used for flock.
pub fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|source| ProjectError::OpenLock {
            path: path.to_path_buf(),
            source,
        })
}

/// Takes an exclusive flock on `path` without waiting and writes this
/// process's pid into it. `Ok(Err(pid))` when another process holds it: the
/// pid it wrote, for the message.
pub fn take_pid_lock(path: &Path) -> Result<std::result::Result<nix::fcntl::Flock<File>, String>> {
    let file = open_lock_file(path)?;
    let mut lock = match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
    {
        Ok(lock) => lock,
        Err((mut file, _)) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Ok(Err(holder.trim().to_string()));
        }
    };
    lock.set_len(0)?;
    write!(lock, "{}", std::process::id())?;
    Ok(Ok(lock))
}

impl ProjectLock {
    pub fn acquire(layout: &Layout) -> Result<ProjectLock> {
        ensure_private_dir(&layout.agent_dir())?;
        match take_pid_lock(&layout.lock_file())? {
            Ok(lock) => Ok(ProjectLock { _lock: lock }),
            Err(holder) => Err(ProjectError::Locked(holder)),
        }
    }
}

/// Creates a root-only directory (0700), refusing a symlink in its place.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => Err(ProjectError::Symlink(dir.to_path_buf())),
        Ok(meta) if meta.is_dir() => {
            if meta.permissions().mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            }
            Ok(())
        }
        Ok(_) => Err(ProjectError::NotADirectory(dir.to_path_buf())),
        Err(_) => {
            fs::create_dir_all(dir).map_err(|source| ProjectError::Create {
                path: dir.to_path_buf(),
                source,
            })?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            Ok(())
        }
    }
}

/// `n` random bytes from /dev/urandom, as hex.
pub fn random_hex(n: usize) -> Result<String> {
    let mut bytes = vec![0u8; n];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(ProjectError::Urandom)?;
    Ok(hex(&bytes))
}

/// A session needs at least this much free space where its audit log is.
pub const MIN_FREE_BYTES: u64 = 16 << 20;

/// Refuses to start a session when the filesystem of `dir` (where the audit
/// log is) has less than [`MIN_FREE_BYTES`] free: a record that cannot be
/// written stops every action, so say so before anything starts.
pub fn check_free_space(dir: &Path) -> std::result::Result<(), String> {
    let Ok(st) = nix::sys::statvfs::statvfs(dir) else {
        return Ok(()); // not measurable: the appends still fail safely
    };
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    if free >= MIN_FREE_BYTES {
        return Ok(());
    }
    Err(format!(
        "only {} KiB free on the filesystem of {} (the audit log needs at least {} MiB): free some space and run again; nothing ran",
        free >> 10,
        dir.display(),
        MIN_FREE_BYTES >> 20
    ))
}

/// Held shared by every running action that can write; taken exclusively by
/// [`write_atomic`]. Renaming a file over one of sysward's protected files
/// detaches the read-only bind that protects it in every action's mount
/// namespace, so the broker never replaces one while such an action runs.
pub static PROTECTED_REPLACE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Writes `bytes` to `path` atomically with mode 0600, through a descriptor
/// of its directory opened now (see [`write_atomic_in`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().ok_or(ProjectError::NoParent)?;
    let name = path.file_name().ok_or(ProjectError::NoFileName)?;
    let dir_file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(|source| ProjectError::OpenDirectory {
            path: dir.to_path_buf(),
            source,
        })?;
    write_atomic_in(std::os::fd::AsFd::as_fd(&dir_file), dir, name, bytes)
}

/// Writes `bytes` as `name` in the directory `dir` (`shown` names it in
/// errors) atomically with mode 0600: a temporary file unique to this process
/// and call (O_EXCL, never through a symlink), fsync, rename over the target,
/// fsync of the directory; everything relative to `dir`, so a path renamed in
/// the meantime cannot redirect it. The temporary is removed on failure.
/// Waits for running actions that can write (see [`PROTECTED_REPLACE`]).
pub fn write_atomic_in(
    dir: std::os::fd::BorrowedFd<'_>,
    shown: &Path,
    name: &std::ffi::OsStr,
    bytes: &[u8],
) -> Result<()> {
    write_atomic_mode_in(dir, shown, name, bytes, 0o600)
}

/// [`write_atomic_in`] with the file's mode given (a runnable script).
pub fn write_atomic_mode_in(
    dir: std::os::fd::BorrowedFd<'_>,
    shown: &Path,
    name: &std::ffi::OsStr,
    bytes: &[u8],
    mode: u32,
) -> Result<()> {
    use nix::fcntl::{openat, renameat, OFlag};
    use nix::sys::stat::Mode;
    let _no_action_runs = PROTECTED_REPLACE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unique = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = format!(
        ".{}.tmp-{}-{unique}",
        name.to_string_lossy(),
        std::process::id()
    );
    let target = shown.join(name);
    let result = (|| -> Result<()> {
        let fd = openat(
            dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|source| ProjectError::CreateAt {
            path: shown.join(&tmp),
            source,
        })?;
        let mut f = File::from(fd);
        if mode != 0o600 {
            // Set on the descriptor, not through the umask.
            f.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()?;
        renameat(dir, tmp.as_str(), dir, name).map_err(|source| ProjectError::Replace {
            path: target.clone(),
            source,
        })?;
        nix::unistd::fsync(dir).map_err(|source| ProjectError::Sync {
            path: shown.to_path_buf(),
            source,
        })?;
        Ok(())
    })();
    if result.is_err() {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn verdict(path: &Path, place: Place) -> std::result::Result<(), String> {
        strict_modes(path, &fs::symlink_metadata(path).unwrap(), place).map_err(|e| e.0)
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn hex_is_two_lowercase_digits_a_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff, 0x10]), "000fa5ff10");
        assert_eq!(hex(&[]), "");
    }

    /// The one rule `run` and `doctor` share, on real files (the owner
    /// cases need root to chown; without root a file is the tester's own,
    /// which is exactly what the rule refuses).
    #[test]
    fn strict_modes_want_root_owned_paths_nobody_else_may_write() {
        struct Gone(PathBuf);
        impl Drop for Gone {
            fn drop(&mut self) {
                let _ = fs::remove_dir_all(&self.0);
            }
        }
        let dir = std::env::temp_dir().join(format!("sysward-strict-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir(&dir).unwrap();
        let _gone = Gone(dir.clone());
        let file = dir.join("agent.md");
        fs::write(&file, "x").unwrap();
        chmod(&file, 0o600);
        if !nix::unistd::geteuid().is_root() {
            let e = verdict(&file, Place::File).unwrap_err();
            assert!(
                e.contains("not root") && e.contains("chown root:root"),
                "{e}"
            );
            return;
        }
        chmod(&dir, 0o700);
        assert_eq!(verdict(&file, Place::File), Ok(()));
        assert_eq!(verdict(&dir, Place::ProjectDir), Ok(()));
        for (mode, who) in [
            (0o620, "its group (mode 0620)"),
            (0o602, "any user (mode 0602)"),
            (0o666, "its group and any user (mode 0666)"),
        ] {
            chmod(&file, mode);
            let e = verdict(&file, Place::File).unwrap_err();
            assert!(e.contains(&format!("is writable by {who}")), "{e}");
            assert!(
                e.contains(&format!(
                    "chown root:root {0}; chmod go-w {0}",
                    file.display()
                )),
                "{e}"
            );
        }
        chmod(&file, 0o600);
        // A sticky directory like /tmp: safe above a project, never as one.
        chmod(&dir, 0o1777);
        assert_eq!(verdict(&dir, Place::Ancestor), Ok(()));
        let e = verdict(&dir, Place::ProjectDir).unwrap_err();
        assert!(e.contains("shared directory"), "{e}");
        chmod(&dir, 0o777);
        assert!(verdict(&dir, Place::Ancestor).is_err());
        chmod(&dir, 0o700);
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        let e = verdict(&file, Place::File).unwrap_err();
        assert!(e.contains("is owned by uid 65534"), "{e}");
    }
}
