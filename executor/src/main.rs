//! `sysward-exec`: the one-shot confined executor of file operations.
//!
//! Contract with the broker: exec'd with no arguments, an empty environment,
//! stdin `/dev/null`, stdout/stderr pipes, and fd 3 a SEQPACKET socket carrying
//! exactly one [`ExecSpec::File`]. The executor applies the spec's profile in
//! full — or reports `ConfinementFailed` and exits 126 — then performs the
//! file operation and reports `FileDone` / `FileFailed`. Commands are not
//! run here: the broker starts them itself with the same steps in a forked
//! child (`sysward_sandbox::jail`), which saves this program's exec.

mod confine;
mod fileops;
mod patch;
mod paths;
mod review;

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;
use sysward_ipc::exec::{ExecReport, ExecSpec, FileOp, EXEC_CHANNEL_FD};
use sysward_ipc::profile::ConfinementProfile;
use sysward_ipc::Channel;
use sysward_sandbox::profile_rules as rules;

/// Exit status when nothing ran (confinement failed, spec refused).
const EXIT_NOT_RUN: i32 = 126;

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn send(chan: &Channel, report: &ExecReport) {
    if let Err(e) = chan.send(report) {
        eprintln!("sysward-exec: cannot report to the broker: {e}");
    }
}

fn refuse(chan: &Channel, error: String) -> ! {
    send(chan, &ExecReport::Refused { error });
    std::process::exit(EXIT_NOT_RUN);
}

fn confinement_failed(chan: &Channel, e: confine::StepError) -> ! {
    send(
        chan,
        &ExecReport::ConfinementFailed {
            step: e.step,
            error: e.error,
        },
    );
    std::process::exit(EXIT_NOT_RUN);
}

fn main() {
    // SAFETY: F_GETFD only queries the descriptor table.
    if unsafe { libc::fcntl(EXEC_CHANNEL_FD, libc::F_GETFD) } < 0 {
        eprintln!("sysward-exec: fd {EXEC_CHANNEL_FD} is not open; this program is started by the sysward broker");
        std::process::exit(EXIT_NOT_RUN);
    }
    // SAFETY: fd 3 is open (checked) and nothing else in this fresh process
    // owns it.
    let mut chan = Channel::new(unsafe { OwnedFd::from_raw_fd(EXEC_CHANNEL_FD) });
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        refuse(
            &chan,
            "sysward-exec must be started by the root broker".into(),
        );
    }
    let spec = match chan.recv::<ExecSpec>() {
        Ok(s) => s,
        Err(e) => refuse(&chan, format!("cannot read the spec: {e}")),
    };
    match spec {
        ExecSpec::Command { .. } => refuse(
            &chan,
            "sysward-exec performs file operations only; the broker starts commands itself (sysward_sandbox::jail)".into(),
        ),
        ExecSpec::File {
            profile,
            op,
            backup,
            env,
            ..
        } => run_file(&chan, &profile, &op, backup, env),
    }
}

/// `YYYYMMDD-HHMMSS` in local time (the timezone is read before confinement).
fn stamp() -> String {
    // glibc's localtime_r loads /etc/localtime on first use: this runs
    // before confinement, so later calls (list_dir, stat) reuse it.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as libc::time_t)
        .unwrap_or(0);
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    // SAFETY: `now` and `tm` are live locals; localtime_r writes only `tm`.
    if unsafe { libc::localtime_r(&now, tm.as_mut_ptr()) }.is_null() {
        return "00000000-000000".into();
    }
    // SAFETY: localtime_r succeeded and filled `tm`.
    let tm = unsafe { tm.assume_init() };
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn id_map(file: &str) -> Vec<(u32, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let _ = f.next()?;
            let id = f.next()?.parse().ok()?;
            Some((id, name.to_string()))
        })
        .collect()
}

fn resolve_id(
    spec: Option<&String>,
    map: &[(u32, String)],
    what: &str,
) -> Result<Option<u32>, String> {
    match spec {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => {
            if let Ok(n) = s.parse::<u32>() {
                return Ok(Some(n));
            }
            map.iter()
                .find(|(_, n)| n == s)
                .map(|(i, _)| Some(*i))
                .ok_or_else(|| format!("unknown {what} {s:?}"))
        }
    }
}

/// A validate program: absolute, or found in the spec's PATH.
fn find_program(cmd: &str, env: &[(String, String)]) -> Option<PathBuf> {
    let executable = |p: &Path| {
        let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
            return false;
        };
        // SAFETY: `c` is NUL-terminated.
        p.is_file() && unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0
    };
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return (p.is_absolute() && executable(&p)).then_some(p);
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or(DEFAULT_PATH);
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|d| Path::new(d).join(cmd))
        .find(|p| executable(p))
}

fn run_file(
    chan: &Channel,
    profile: &ConfinementProfile,
    op: &FileOp,
    backup: bool,
    env: Vec<(String, String)>,
) -> ! {
    let validate = match op {
        FileOp::WriteFile(a) => a.validate.as_ref(),
        FileOp::EditFile(a) => a.validate.as_ref(),
        _ => None,
    };
    let needs_names = matches!(op, FileOp::ListDir(_) | FileOp::Stat(_) | FileOp::Chown(_));
    let (users, groups) = if needs_names {
        (id_map("/etc/passwd"), id_map("/etc/group"))
    } else {
        (Vec::new(), Vec::new())
    };
    let chown_ids = match op {
        FileOp::Chown(a) => {
            let u = resolve_id(a.owner.as_ref(), &users, "user");
            let g = resolve_id(a.group.as_ref(), &groups, "group");
            match (u, g) {
                (Ok(u), Ok(g)) => (u, g),
                (Err(e), _) | (_, Err(e)) => {
                    send(chan, &ExecReport::FileFailed { error: e });
                    std::process::exit(1);
                }
            }
        }
        _ => (None, None),
    };
    let validate_program = validate.and_then(|v| find_program(&v.command, &env));
    if let (Some(v), None) = (validate, &validate_program) {
        send(
            chan,
            &ExecReport::FileFailed {
                error: format!(
                    "validate program {:?} not found; nothing was changed",
                    v.command
                ),
            },
        );
        std::process::exit(1);
    }
    let timeout = Duration::from_secs(match profile.timeout_secs {
        0 => 60,
        n => u64::from(n),
    });
    let ctx = fileops::Ctx {
        backup,
        env,
        validate_program,
        chown_ids,
        users,
        groups,
        timeout,
        stamp: stamp(),
    };
    if let Err(e) = confine::prepare(profile, &[0, 1, 2, EXEC_CHANNEL_FD]) {
        confinement_failed(chan, e);
    }
    let prepared = confine::build(profile, &rules::Extra::default(), None)
        .unwrap_or_else(|e| confinement_failed(chan, e));
    // SAFETY: umask takes an integer and cannot fail.
    unsafe { libc::umask(0o022) };
    if let Err(e) = confine::apply(profile, prepared) {
        confinement_failed(chan, e);
    }
    match fileops::perform(op, &ctx) {
        Ok((output, change)) => {
            send(chan, &ExecReport::FileDone { output, change });
            std::process::exit(0);
        }
        Err(error) => {
            send(chan, &ExecReport::FileFailed { error });
            std::process::exit(1);
        }
    }
}
