//! Starting sysward's child processes: the agent, the model gateway and the
//! executor, each with its channel on fd 3, an empty environment and nothing
//! else inherited.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use sysward_ipc::exec::EXEC_CHANNEL_FD;

/// Why a sysward binary or account cannot be used, or a child not started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnSetupError {
    #[error("cannot find the broker's own binary")]
    CurrentExe(#[source] std::io::Error),
    #[error("the broker binary has no directory")]
    NoBinaryDir,
    #[error("{} is missing: install all sysward binaries side by side", .path.display())]
    Missing {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is writable by group or others: chmod go-w {}", .0.display(), .0.display())]
    Writable(PathBuf),
    #[error("{} is not owned by root: chown root {}", .0.display(), .0.display())]
    NotRootOwned(PathBuf),
    #[error("cannot look up user {name}")]
    LookUp {
        name: String,
        #[source]
        source: nix::errno::Errno,
    },
    #[error(
        "user {0} does not exist: create it with `useradd --system --no-create-home --shell /usr/sbin/nologin {0}` (or run `sysward doctor`)"
    )]
    NoUser(String),
    #[error("user {0} has uid 0; the agent and the gateway must not run as root")]
    RootUser(String),
    #[error("cannot start {}", .path.display())]
    Start {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, SpawnSetupError>;

/// The directory holding sysward's binaries: the one the broker runs from.
pub fn binary_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().map_err(SpawnSetupError::CurrentExe)?;
    Ok(exe
        .parent()
        .ok_or(SpawnSetupError::NoBinaryDir)?
        .to_path_buf())
}

/// Where the internal helpers (`sysward-agent`, `-gateway`, `-exec`) are
/// installed by the package: nobody types their names.
pub const LIBEXEC_DIR: &str = "/usr/libexec/sysward";

/// The directory of the helpers: beside this binary (a build tree,
/// `install.sh`), else the package's [`LIBEXEC_DIR`].
pub fn helper_dir() -> Result<PathBuf> {
    let here = binary_dir()?;
    if here.join("sysward-exec").exists() || !Path::new(LIBEXEC_DIR).is_dir() {
        return Ok(here);
    }
    Ok(PathBuf::from(LIBEXEC_DIR))
}

/// Path of a helper binary, checked to exist and to be root-owned and not
/// writable by others (the broker execs it as root).
pub fn sibling(name: &str) -> Result<PathBuf> {
    checked(&helper_dir()?, name)
}

/// `dir/name`, checked like [`sibling`].
pub fn checked(dir: &Path, name: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    check_binary(&path)?;
    Ok(path)
}

pub fn check_binary(path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|source| SpawnSetupError::Missing {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.mode() & 0o022 != 0 {
        return Err(SpawnSetupError::Writable(path.to_path_buf()));
    }
    if nix::unistd::geteuid().is_root() && meta.uid() != 0 {
        return Err(SpawnSetupError::NotRootOwned(path.to_path_buf()));
    }
    Ok(())
}

/// A user account resolved by name.
#[derive(Debug, Clone)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

pub fn account(name: &str) -> Result<Account> {
    let user = nix::unistd::User::from_name(name)
        .map_err(|source| SpawnSetupError::LookUp {
            name: name.to_string(),
            source,
        })?
        .ok_or_else(|| SpawnSetupError::NoUser(name.to_string()))?;
    if user.uid.is_root() {
        return Err(SpawnSetupError::RootUser(name.to_string()));
    }
    Ok(Account {
        name: name.to_string(),
        uid: user.uid.as_raw(),
        gid: user.gid.as_raw(),
    })
}

/// Spawns `program args…` with `channel` as fd 3, an empty environment,
/// stdin from /dev/null and the given stdout/stderr, nothing else inherited.
pub fn spawn_with_channel(
    program: &Path,
    args: &[String],
    channel: OwnedFd,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<Child> {
    spawn_with_channel_and_file(program, args, channel, None, stdout, stderr)
}

/// [`spawn_with_channel`], with `file` (when given) as fd 4 as well: the one
/// file a confined network executor writes, which it never opens itself.
pub fn spawn_with_channel_and_file(
    program: &Path,
    args: &[String],
    channel: OwnedFd,
    file: Option<OwnedFd>,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<Child> {
    // Prepared here: no allocation after fork.
    let channel_fd = channel.as_raw_fd();
    let file_fd = file.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .current_dir("/")
        // Its own process group: the terminal's Ctrl+C (SIGINT to the
        // foreground group) reaches the broker, which cancels the turn, and
        // never the agent, the gateway or an executor directly.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    // SAFETY: the closure runs between fork and exec in the child and calls only
    // async-signal-safe functions (fcntl, dup2, raw rt_sigaction and
    // rt_sigprocmask) on fds it owns, with no allocation. The channel (and the
    // file) are first copied above 10 (close-on-exec), so that each is right
    // even when one already sits on fd 3 or 4; dup2 onto 3 (and 4) clears
    // close-on-exec on the copies the program keeps.
    unsafe {
        cmd.pre_exec(move || {
            // std keeps the signal mask across exec: the broker blocks SIGINT
            // and SIGTERM (its signal thread waits for them), and a child —
            // or a validate command the executor starts — must not inherit
            // that, nor anything ignored.
            sysward_sandbox::sys::reset_signals()?;
            let copy = libc::fcntl(channel_fd, libc::F_DUPFD_CLOEXEC, 10);
            let file_copy = if file_fd >= 0 {
                libc::fcntl(file_fd, libc::F_DUPFD_CLOEXEC, 10)
            } else {
                0
            };
            if copy < 0 || file_copy < 0 || libc::dup2(copy, EXEC_CHANNEL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if file_fd >= 0 && libc::dup2(file_copy, sysward_ipc::net::NET_DOWNLOAD_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|source| SpawnSetupError::Start {
        path: program.to_path_buf(),
        source,
    })?;
    drop(channel);
    drop(file);
    Ok(child)
}
