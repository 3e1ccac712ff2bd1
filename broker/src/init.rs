//! `sysward init [DIR]`: a new project (or `/etc/sysward`) from commented
//! templates — init.conf with examples for the usual model servers, agent.md
//! with the policy block at its safe default and a comment per directive, and
//! one read-only example task. It never overwrites a file.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const INIT_CONF: &str = include_str!("../../packaging/etc/init.conf");
const AGENT_MD: &str = include_str!("../../packaging/etc/agent.md");
const EXAMPLE_TASK: &str = include_str!("../templates/01-health-check.md");

/// Why the project directory cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("{} exists and is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("cannot create {}", .path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Creates what is missing in `dir` and says what it did; returns the exit
/// status (0, or 1 when a file could not be written).
pub fn run(dir: &Path, standalone: bool) -> Result<i32, InitError> {
    if fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(InitError::NotADirectory(dir.to_path_buf()));
    }
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(|source| InitError::Create {
            path: dir.to_path_buf(),
            source,
        })?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
        println!("created {} (0700)", dir.display());
    }
    let mut failed = 0;
    for (name, text) in [
        ("init.conf", INIT_CONF),
        ("agent.md", AGENT_MD),
        ("01-health-check.md", EXAMPLE_TASK),
    ] {
        let path = dir.join(name);
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|_| f.sync_all()));
        match created {
            Ok(()) => println!("wrote   {} (0600)", path.display()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                println!("kept    {} (it exists; never overwritten)", path.display())
            }
            Err(e) => {
                eprintln!("sysward: cannot write {}: {e}", path.display());
                failed += 1;
            }
        }
    }
    let root = if standalone {
        format!(" --root {}", dir.display())
    } else {
        String::new()
    };
    println!(
        "\nnext, as root:\n  1. edit {}: API_URL and MODEL of your model server (examples inside)\n  2. sysward doctor{root}      checks the host, the users, the files' owners and modes, the model endpoint\n  3. sysward run{root}         runs the task files (01-health-check.md changes nothing)",
        dir.join("init.conf").display()
    );
    if !nix::unistd::geteuid().is_root() {
        // The broker obeys only what nobody but root can change (see
        // project::strict_modes): say so now, not at the first run.
        println!(
            "\nnote: these files are yours; the broker uses only a project owned by root: chown -R root:root {}",
            dir.display()
        );
    }
    Ok(if failed == 0 { 0 } else { 1 })
}
