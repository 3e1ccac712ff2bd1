//! The project: where `init.conf`, `agent.md` and the task files live, where the
//! state goes, and the checks the seed makes before anything starts.

use crate::config::{self, InitConf};
use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use sysward_ipc::agent::TaskSpec;

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
        let root = fs::canonicalize(root)
            .with_context(|| format!("project directory {} does not exist", root.display()))?;
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
        check_directory(&layout.config_dir, &mut warnings)?;
        let init_path = layout.init_conf();
        if !init_path.exists() {
            bail!(
                "init.conf not found in PROJECT_ROOT ({}): copy an example init.conf there and set API_URL and MODEL",
                layout.config_dir.display()
            );
        }
        let init_text = read_checked(&init_path, 64 << 10, &mut warnings)?;
        let (conf, conf_warnings) = config::parse(&init_text)
            .with_context(|| format!("cannot use {}", init_path.display()))?;
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
        let agent_md = read_checked(&agent_md_path, MAX_INSTRUCTION_FILE, &mut warnings)?;
        let parsed = sysward_policy::parse_agent_md(&agent_md)
            .map_err(|e| anyhow::anyhow!("{}: {e}", agent_md_path.display()))?;
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
        check_directory(&layout.config_dir, &mut warnings)?;
        let path = find_agent_md(&layout.config_dir, &mut warnings)?;
        let text = read_checked(&path, MAX_INSTRUCTION_FILE, &mut warnings)?;
        let parsed = sysward_policy::parse_agent_md(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        warnings.extend(parsed.warnings);
        Ok((path, parsed.block, warnings))
    }

    /// [`Project::load_policy`] of one file, wherever it lies (a candidate
    /// agent.md checked before it is installed).
    pub fn load_policy_file(
        path: &Path,
    ) -> Result<(PathBuf, sysward_policy::PolicyBlock, Vec<String>)> {
        let mut warnings = Vec::new();
        let text = read_checked(path, MAX_INSTRUCTION_FILE, &mut warnings)?;
        let parsed = sysward_policy::parse_agent_md(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        warnings.extend(parsed.warnings);
        Ok((path.to_path_buf(), parsed.block, warnings))
    }

    /// The task files in run order (seed: `*.md` directly in the project except
    /// agent.md, memoria.md, README.md; TASK_ORDER or lexicographic; symlinks out
    /// of the project ignored with a warning).
    pub fn tasks(&self, warnings: &mut Vec<String>) -> Result<Vec<TaskSpec>> {
        let dir = &self.layout.config_dir;
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
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
            let content = match read_checked(&dir.join(&name), MAX_INSTRUCTION_FILE, warnings) {
                Ok(c) if c.trim().is_empty() => {
                    warnings.push(format!("task {name} is empty: skipped"));
                    continue;
                }
                Ok(c) => c,
                Err(e) => {
                    warnings.push(format!("task {name} skipped: {e:#}"));
                    continue;
                }
            };
            let sha256 = hex(&Sha256::digest(content.as_bytes()));
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
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The directory must not be world-writable or a shared sticky directory like
/// /tmp: anyone could dictate what a root agent does.
fn check_directory(dir: &Path, warnings: &mut Vec<String>) -> Result<()> {
    let meta = fs::metadata(dir).with_context(|| format!("cannot stat {}", dir.display()))?;
    let mode = meta.permissions().mode();
    if mode & 0o1000 != 0 || dir == Path::new("/tmp") || dir == Path::new("/var/tmp") {
        bail!(
            "insecure project: {} is a shared directory like /tmp; use a private directory",
            dir.display()
        );
    }
    if mode & 0o002 != 0 {
        bail!(
            "insecure project: {} is writable by any user: chmod o-w {}",
            dir.display(),
            dir.display()
        );
    }
    if mode & 0o020 != 0 {
        warnings.push(format!("{} is group-writable", dir.display()));
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        warnings.push(format!(
            "{} belongs to uid {}, not to the user running sysward",
            dir.display(),
            meta.uid()
        ));
    }
    Ok(())
}

/// agent.md, or a single variant differing only in case (with a warning).
fn find_agent_md(dir: &Path, warnings: &mut Vec<String>) -> Result<PathBuf> {
    let exact = dir.join("agent.md");
    if fs::symlink_metadata(&exact).is_ok() {
        return Ok(exact);
    }
    let mut variants = Vec::new();
    for entry in fs::read_dir(dir)? {
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
        [] => bail!(
            "ERROR: agent.md not found in PROJECT_ROOT ({}): create agent.md with the agent's rules and a ```policy block",
            dir.display()
        ),
        many => bail!("several agent.md variants ({}): keep one", many.join(", ")),
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

/// Reads a configuration file as root without following a symlink, refusing a
/// world-writable or oversized one.
pub fn read_checked(path: &Path, max: u64, warnings: &mut Vec<String>) -> Result<String> {
    let file = open_regular(path).with_context(|| {
        format!(
            "cannot open {} (symlinks, FIFOs and devices are refused)",
            path.display()
        )
    })?;
    let meta = file.metadata()?;
    if meta.permissions().mode() & 0o002 != 0 {
        bail!(
            "insecure project: {} is writable by any user: chmod o-w {}",
            path.display(),
            path.display()
        );
    }
    if meta.permissions().mode() & 0o020 != 0 {
        warnings.push(format!("{} is group-writable", path.display()));
    }
    if meta.len() > max {
        bail!("{} is larger than {} bytes", path.display(), max);
    }
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("{} is not UTF-8 text", path.display()))?;
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
        .with_context(|| format!("cannot open lock {}", path.display()))
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
            Err(holder) => bail!(
                "another sysward session is running on this project (pid {holder}); wait for it or stop it. The lock frees itself when that process dies"
            ),
        }
    }
}

/// Creates a root-only directory (0700), refusing a symlink in its place.
pub fn ensure_private_dir(dir: &Path) -> Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            bail!("{} is a symlink; refusing to use it", dir.display())
        }
        Ok(meta) if meta.is_dir() => {
            if meta.permissions().mode() & 0o077 != 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
            }
            Ok(())
        }
        Ok(_) => bail!("{} exists and is not a directory", dir.display()),
        Err(_) => {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
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
        .context("cannot read /dev/urandom")?;
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
    let dir = path.parent().context("path has no parent")?;
    let name = path.file_name().context("path has no file name")?;
    let dir_file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .with_context(|| format!("cannot open the directory {}", dir.display()))?;
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
        .with_context(|| format!("cannot create {}", shown.join(&tmp).display()))?;
        let mut f = File::from(fd);
        f.write_all(bytes)?;
        f.sync_all()?;
        renameat(dir, tmp.as_str(), dir, name)
            .with_context(|| format!("cannot replace {}", target.display()))?;
        nix::unistd::fsync(dir).with_context(|| format!("cannot sync {}", shown.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
    result
}
