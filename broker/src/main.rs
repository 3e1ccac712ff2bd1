//! `sysward-broker`: the root broker. As the daemon it serves operators on
//! the control socket; with `--standalone DIR` it serves one session of the
//! `sysward` console that started it, over the socketpair on fd 3. It holds
//! no terminal, no line editor and no renderer: the console is the `sysward`
//! command people type.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::sync::Arc;
use sysward_broker::{context, control, project, session, signals, spawn, standalone};

const USAGE: &str = "\
usage: sysward-broker [--root DIR] [--socket PATH]
         the daemon: serve operators on the control socket (default /run/sysward/control.sock)
       sysward-broker --standalone DIR
         one session for the `sysward` console that started it (sysward run|cli --root DIR)
       sysward-broker --version";

/// What the command line asks for.
enum Mode {
    Daemon {
        root: Option<PathBuf>,
        socket: PathBuf,
    },
    Standalone {
        root: PathBuf,
    },
    Version,
}

/// Parses the few options there are; anything else is refused with the usage.
fn parse_args(args: impl Iterator<Item = std::ffi::OsString>) -> Result<Mode> {
    let mut root = None;
    let mut socket = None;
    let mut standalone = None;
    let mut args = args;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .map(PathBuf::from)
                .with_context(|| format!("{name} needs a value\n{USAGE}"))
        };
        match arg.to_str() {
            Some("--root") => root = Some(value("--root")?),
            Some("--socket") => socket = Some(value("--socket")?),
            Some("--standalone") => standalone = Some(value("--standalone")?),
            Some("--version") => return Ok(Mode::Version),
            Some("--help") | Some("-h") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => bail!("unexpected argument {:?}\n{USAGE}", arg),
        }
    }
    match (standalone, root, socket) {
        (Some(root), None, None) => Ok(Mode::Standalone { root }),
        (Some(_), _, _) => bail!("--standalone takes no other option\n{USAGE}"),
        (None, root, socket) => Ok(Mode::Daemon {
            root,
            socket: socket.unwrap_or_else(|| PathBuf::from(control::SOCKET_PATH)),
        }),
    }
}

fn layout_for(root: &Option<PathBuf>) -> Result<project::Layout> {
    match root {
        Some(r) => Ok(project::Layout::standalone(r)?),
        None => Ok(project::Layout::installed()),
    }
}

/// Restarts the broker with an almost empty environment. On current kernels a
/// root action can read `/proc/<broker pid>/environ` even though the broker is
/// not dumpable, so whatever the operator's shell exported (tokens, agent
/// sockets) must not stay there. Returns only when nothing needed scrubbing.
fn scrub_environment() -> Result<()> {
    use std::os::unix::process::CommandExt;
    const KEEP: [&str; 5] = [
        "NOTIFY_SOCKET",
        "CREDENTIALS_DIRECTORY",
        "NO_COLOR",
        "TERM",
        "COLUMNS",
    ];
    let kept: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(k, _)| KEEP.iter().any(|keep| k == keep))
        .collect();
    if std::env::vars_os().count() == kept.len() {
        return Ok(());
    }
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_else(|| "sysward-broker".into());
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(argv0)
        .args(args)
        .env_clear()
        .envs(kept)
        .exec();
    Err(err).context("cannot restart the broker with a clean environment")
}

fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{what} must run as root: the broker starts every other process with fewer privileges. Use `sudo`, or connect to the daemon with `sysward` as a member of the `sysward` group");
    }
    Ok(())
}

fn run_standalone(root: PathBuf) -> Result<i32> {
    require_root("sysward-broker --standalone")?;
    // The console starts this broker with a clean environment already; the
    // check is kept so that no other start leaves one here. The operator
    // channel on fd 3 survives the restart (it is taken only below).
    scrub_environment()?;
    // First, before any descriptor of this process could take a free fd 3.
    let channel = match standalone::take_console_channel() {
        Ok(channel) => channel,
        Err(e) => {
            record_refusal(&root, &sysward_broker::error::chain(&e));
            return Err(e.into());
        }
    };
    // Before any thread starts, so that every thread blocks the signals:
    // SIGTERM stops the session cleanly (the console passes its own on).
    // The console relays Ctrl+C over the channel; this token goes unused.
    drop(signals::Signals::install()?);
    Ok(standalone::run(&root, channel)?)
}

/// Records a refused standalone start in the project's audit log, when the
/// log opens (an intact chain); the refusal stands either way.
fn record_refusal(root: &std::path::Path, reason: &str) {
    let Ok(layout) = project::Layout::standalone(root) else {
        return;
    };
    if let Ok(audit) = sysward_broker::audit::Audit::open(&layout.audit_log(), &layout.audit_head())
    {
        let _ = audit.record(serde_json::json!({
            "event": "operator_refused", "mode": "standalone", "reason": reason,
        }));
        let _ = audit.anchor();
    }
}

fn run_daemon(root: Option<PathBuf>, socket: PathBuf) -> Result<i32> {
    require_root("sysward-broker")?;
    scrub_environment()?;
    // Before any thread starts, so that every thread blocks the signals.
    signals::Signals::install_daemon(socket.clone())?;
    let layout = layout_for(&root)?;
    let gid = control::operator_gid()?;
    let mut ctx = context::broker_context(layout)?;
    ctx.log_to_stderr = true;
    let ctx = Arc::new(ctx);
    let listener = control::listen_control(&socket, gid)?;
    signals::listening();
    if let Some(dir) = ctx.cgroup_dir.as_ref().map(|d| d.path().to_path_buf()) {
        signals::at_stop(move || {
            let _ = sysward_broker::cgroup::remove_tree(&dir);
        });
    }
    // Service users may never act as operators.
    let project = project::Project::load(ctx.layout.clone())?;
    let refused: Vec<u32> = [&project.conf.agent_user, &project.conf.model_user]
        .iter()
        .filter_map(|u| spawn::account(u).ok().map(|a| a.uid))
        .collect();
    // Any sysward action's cgroup, whichever broker started it.
    let actions_cgroup = sysward_broker::cgroup::actions_root();
    let slots = Arc::new(control::ConnectionSlots::default());
    eprintln!(
        "sysward broker {} listening on {}",
        sysward_ipc::BUILD_VERSION,
        socket.display()
    );
    signals::notify_ready();
    loop {
        let conn = match control::accept(&listener) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("accept: {e:#}");
                continue;
            }
        };
        let cred = match sysward_ipc::peer::peer_cred(&conn) {
            Ok(c) => c,
            Err(e) => {
                let _ = ctx.audit.record(
                    serde_json::json!({"event": "operator_refused", "reason": e.to_string()}),
                );
                continue;
            }
        };
        if let Err(reason) = control::check_peer(&cred, gid, &refused, actions_cgroup.as_deref()) {
            let _ = ctx.audit.record(serde_json::json!({"event": "operator_refused", "pid": cred.pid, "uid": cred.uid, "reason": reason.to_string()}));
            let chan = sysward_ipc::Channel::new(conn);
            let _ = chan.send(&sysward_ipc::operator::OperatorAnswer::Error {
                message: format!("refused: {reason}"),
            });
            continue;
        }
        let slot = match control::ConnectionSlots::take(&slots, cred.uid) {
            Ok(s) => s,
            Err(reason) => {
                let _ = ctx.audit.record_lazy(serde_json::json!({"event": "operator_refused", "pid": cred.pid, "uid": cred.uid, "reason": reason.to_string()}));
                let chan = sysward_ipc::Channel::new(conn);
                let _ = chan.send(&sysward_ipc::operator::OperatorAnswer::Error {
                    message: format!("refused: {reason}"),
                });
                continue;
            }
        };
        let ctx = Arc::clone(&ctx);
        let who = sysward_broker::operator::identity(cred.uid, u32::try_from(cred.pid).ok());
        let spawned = std::thread::Builder::new()
            .name("operator".to_string())
            .stack_size(16 << 20)
            .spawn(move || {
                let _slot = slot;
                if let Err(e) = control::serve_connection(ctx, conn, who) {
                    eprintln!("operator connection: {e:#}");
                }
            });
        if let Err(e) = spawned {
            eprintln!("cannot start an operator thread: {e}");
        }
    }
}

fn main() {
    let _ = session::PROCESS_START.set(std::time::Instant::now());
    // The clean-environment restart runs /proc/self/exe, which names the
    // process "exe"; systemctl status and pgrep -x sysward-broker should find it.
    let _ = nix::sys::prctl::set_name(c"sysward-broker");
    let code = match parse_args(std::env::args_os().skip(1)) {
        Ok(Mode::Version) => {
            println!("sysward-broker {}", sysward_ipc::BUILD_VERSION);
            Ok(0)
        }
        Ok(Mode::Daemon { root, socket }) => run_daemon(root, socket),
        Ok(Mode::Standalone { root }) => run_standalone(root),
        Err(e) => Err(e),
    };
    match code {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("sysward-broker: {e:#}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Mode> {
        parse_args(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn the_daemon_is_the_default_and_takes_root_and_socket() {
        let Mode::Daemon { root, socket } = parse(&[]).unwrap() else {
            panic!("not the daemon");
        };
        assert_eq!((root, socket), (None, PathBuf::from(control::SOCKET_PATH)));
        let Mode::Daemon { root, socket } =
            parse(&["--root", "/srv/p", "--socket", "/run/x/c.sock"]).unwrap()
        else {
            panic!("not the daemon");
        };
        assert_eq!(root, Some(PathBuf::from("/srv/p")));
        assert_eq!(socket, PathBuf::from("/run/x/c.sock"));
    }

    #[test]
    fn standalone_takes_a_directory_and_nothing_else() {
        let Mode::Standalone { root } = parse(&["--standalone", "/srv/p"]).unwrap() else {
            panic!("not standalone");
        };
        assert_eq!(root, PathBuf::from("/srv/p"));
        for bad in [
            &["--standalone", "/srv/p", "--socket", "/tmp/s"][..],
            &["--standalone", "/srv/p", "--root", "/srv/q"],
            &["--standalone"],
            &["--root"],
            &["run"],
            &["--standalone=/srv/p"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
