//! `sysward`: the operator's console. It talks the operator protocol to the
//! root broker — the daemon on its control socket, or a standalone
//! `sysward-broker` it starts for `run|cli --root DIR` — and renders what the
//! broker sends; the terminal, the renderers and the command line live here,
//! never in the root broker.

mod approval_view;
mod audit_view;
mod client;
mod doctor;
mod manpages;
mod render;
mod secret_prompt;
mod secrets_list;
mod signals;
mod standalone;
mod status;
mod terminal;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use sysward_broker::{audit, control, planner, project, sanitize};
use sysward_ipc::agent::SessionMode;

#[derive(Parser)]
#[command(
    name = "sysward",
    version,
    about = "A confined AI system-administration agent: the operator's console of the root broker"
)]
struct Cli {
    /// The command (one argument: a shell script; several: an argv).
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the project's task files (standalone with --root, else through the daemon).
    Run {
        /// Project directory (init.conf, agent.md, tasks); runs without a daemon.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Run tasks again even when recorded DONE and unchanged.
        #[arg(long)]
        rerun: bool,
        /// Modifying actions only describe what they would do.
        #[arg(long)]
        dry_run: bool,
        /// One JSON object per event and a final summary.
        #[arg(long)]
        json: bool,
        /// Show every action's output, not only the errors'.
        #[arg(long)]
        verbose: bool,
        /// Control socket of the daemon (without --root).
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
    },
    /// Talk to the agent interactively.
    Cli {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Modifying actions only describe what they would do.
        #[arg(long)]
        dry_run: bool,
        /// Show every action's output, not only the errors'.
        #[arg(long)]
        verbose: bool,
        /// Control socket of the daemon.
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
    },
    /// The daemon: serve operators on the control socket (runs sysward-broker).
    Broker {
        /// Serve this project directory instead of /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Control socket of the daemon.
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
    },
    /// Check every prerequisite and say how to fix what is wrong.
    ///
    /// Like sshd's StrictModes, sysward uses a configuration only when it and
    /// every directory above it are owned by root and writable by nobody
    /// else; doctor lists each path that is not, with the fix, by the same
    /// rule `run` refuses them with. Run as another user, it names the files
    /// that user cannot read.
    Doctor {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Create a project (or fill /etc/sysward) from commented templates;
    /// never overwrites a file.
    Init {
        /// The project directory; default /etc/sysward (as root).
        dir: Option<PathBuf>,
    },
    /// The daemon, the last run of each task, pending approvals and the
    /// audit chain, at a glance.
    Status {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Control socket of the daemon.
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Inspect the policy.
    Policy {
        /// The command (one argument: a shell script; several: an argv).
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Inspect the audit trail.
    Audit {
        /// The command (one argument: a shell script; several: an argv).
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Secrets held by the broker: names and scopes, never values.
    Secrets {
        /// The command (one argument: a shell script; several: an argv).
        #[command(subcommand)]
        command: SecretsCommand,
    },
    /// Pending approvals of unattended runs.
    Approvals {
        /// Control socket of the daemon (used when not root and without --root).
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
        /// Show every request in full (long commands are otherwise shown by
        /// their head and tail, with the count of what lies between).
        #[arg(long)]
        full: bool,
    },
    /// Approve a pending request: the next run making it proceeds once.
    Approve {
        /// Control socket of the daemon (used when not root and without --root).
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
        /// The approval id (from `sysward approvals`).
        #[arg(required_unless_present = "task", conflicts_with = "task")]
        id: Option<String>,
        /// Approve every pending request of this task file at once, after
        /// showing them.
        #[arg(long, value_name = "TASK_FILE")]
        task: Option<String>,
        /// With --task: do not ask for confirmation (needed without a terminal).
        #[arg(long, requires = "task")]
        yes: bool,
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Deny a pending request, with a note the model will see.
    Deny {
        /// Control socket of the daemon (used when not root and without --root).
        #[arg(long, default_value = control::SOCKET_PATH)]
        socket: PathBuf,
        /// The approval id (from `sysward approvals`).
        id: String,
        /// A note for the model, saying why.
        #[arg(long)]
        note: Option<String>,
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Scored ops scenarios in throwaway hosts: runs `sysward-eval ARGS` (beside sysward, or in /usr/libexec/sysward).
    #[command(disable_help_flag = true)]
    Eval {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Write man pages or shell completions (for packaging).
    #[command(hide = true)]
    Generate {
        #[command(subcommand)]
        what: GenerateCommand,
    },
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Names, scopes and sizes (`(set, N bytes)`), never values.
    List {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum GenerateCommand {
    /// sysward(8) and one page per subcommand, into DIR.
    Man { dir: PathBuf },
    /// Completion scripts for bash, zsh and fish, into DIR.
    Completions { dir: PathBuf },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Print the effective policy of agent.md.
    Check {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long, conflicts_with = "file")]
        root: Option<PathBuf>,
        /// Check this file as an agent.md instead (a candidate, before it
        /// replaces the project's: Ansible's `validate:`).
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// Category, risk, decision, reason and profile for a command.
    Explain {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Treat the command as a shell script (default when it has one argument).
        #[arg(long)]
        shell: bool,
        /// The command (one argument: a shell script; several: an argv).
        #[arg(required = true, last = true)]
        command: Vec<String>,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Verify the hash chain; report the first bad record.
    Verify {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Record that an operator saw the break, so sessions may start again.
        #[arg(long)]
        acknowledge: bool,
        /// Also check the forward-secure seals with the verification key
        /// that `audit setup-keys` showed, read from this file (`-`: stdin).
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        /// Also compare the log with the anchors mirrored to the journal.
        #[arg(long)]
        journal: bool,
    },
    /// Set up forward-secure sealing of the audit log: shows the
    /// verification key once; keep it off this host.
    SetupKeys {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
    },
    /// Print the audit log readably.
    Show {
        /// Project directory (standalone, no daemon); default /etc/sysward + /var/lib/sysward.
        #[arg(long)]
        root: Option<PathBuf>,
        /// Only this session id.
        #[arg(long)]
        session: Option<String>,
        /// Machine-readable JSON output.
        #[arg(long)]
        json: bool,
    },
}

fn layout_for(root: &Option<PathBuf>) -> Result<project::Layout> {
    match root {
        Some(r) => Ok(project::Layout::standalone(r)?),
        None => Ok(project::Layout::installed()),
    }
}

fn require_root(what: &str) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        bail!("{what} must run as root: the broker starts every other process with fewer privileges. Use `sudo sysward …`, or without --root connect to the daemon as a member of the `sysward` group");
    }
    Ok(())
}

fn real_main() -> Result<i32> {
    let cli = Cli::parse();
    // A command that only prints ends quietly when its reader goes away
    // (`sysward approve ID | head -1`), as other filters do, instead of
    // panicking on the next write. Sessions keep ignoring SIGPIPE: their
    // output is written without ever failing the session.
    if !matches!(
        cli.command,
        Command::Run { .. } | Command::Cli { .. } | Command::Broker { .. }
    ) {
        // SAFETY: restoring the default disposition of one signal, before
        // any other thread runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Command::Run {
            root: Some(root),
            rerun,
            dry_run,
            json,
            verbose,
            ..
        } => standalone::run(&root, SessionMode::Tasks { rerun }, dry_run, json, verbose),
        Command::Run {
            root: None,
            rerun,
            dry_run,
            json,
            verbose,
            socket,
        } => client::run(
            &socket,
            SessionMode::Tasks { rerun },
            dry_run,
            json,
            verbose,
        ),
        Command::Cli {
            root: Some(root),
            dry_run,
            verbose,
            ..
        } => standalone::run(&root, SessionMode::Cli, dry_run, false, verbose),
        Command::Cli {
            root: None,
            dry_run,
            verbose,
            socket,
        } => client::run(&socket, SessionMode::Cli, dry_run, false, verbose),
        Command::Broker { root, socket } => exec_daemon(root, socket),
        Command::Doctor { root, json } => doctor::run(&layout_for(&root)?, json),
        Command::Init { dir } => match dir {
            Some(d) => Ok(sysward_broker::init::run(&d, true)?),
            None => {
                require_root("sysward init (of /etc/sysward)")?;
                Ok(sysward_broker::init::run(Path::new("/etc/sysward"), false)?)
            }
        },
        Command::Status { root, socket, json } => {
            status::run(&layout_for(&root)?, root.is_some(), &socket, json)
        }
        Command::Policy {
            command: PolicyCommand::Check { root, file },
        } => {
            let (path, policy, warnings) = match file {
                Some(file) => project::Project::load_policy_file(&file)?,
                None => project::Project::load_policy(&layout_for(&root)?)?,
            };
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            println!("# effective policy of {}", path.display());
            print!("{}", policy.render());
            Ok(0)
        }
        Command::Policy {
            command:
                PolicyCommand::Explain {
                    root,
                    shell,
                    command,
                },
        } => {
            let layout = layout_for(&root)?;
            let (path, policy, _) = project::Project::load_policy(&layout)?;
            // The session's classifier, started before the secrets load.
            let classifier =
                sysward_broker::classifier::start_pool(&sysward_broker::spawn::helper_dir()?, 1)?;
            // Secret files are judged as the session judges them; a store
            // that does not load (not root) leaves them out, and says so.
            let secret_files = match sysward_broker::secrets::SecretStore::load(&layout) {
                Ok(store) => store.delivery_files(),
                Err(e) => {
                    eprintln!("warning: the secret store did not load ({e}): files that secrets are delivered to are not considered");
                    Vec::new()
                }
            };
            let engine = planner::engine_for_layout(&layout, &path, &policy, secret_files)?;
            let plan = planner::plan_for_explain(&command, shell, &layout.state_dir);
            let limit = sysward_broker::session::CLASSIFY_LIMIT;
            let decision = planner::decide(&classifier, &engine, &plan, limit).decision;
            println!("{}", sysward_policy::explain(&decision));
            Ok(0)
        }
        Command::Generate { what } => generate(what),
        Command::Eval { args } => {
            use std::os::unix::process::CommandExt;
            // Beside this binary in a build tree, in the package's libexec
            // directory when installed.
            let exe = sysward_broker::spawn::helper_dir()?.join("sysward-eval");
            let err = std::process::Command::new(&exe).args(args).exec();
            bail!("cannot run {}: {err}", exe.display())
        }
        Command::Secrets {
            command: SecretsCommand::List { root, json },
        } => {
            require_root("sysward secrets")?;
            secrets_list::cmd_list(&layout_for(&root)?, json)
        }
        // Without --root and without root, approvals go through the daemon,
        // which checks the peer (root or the sysward group) and records it.
        Command::Approvals {
            root: None,
            json,
            full,
            socket,
        } if !nix::unistd::geteuid().is_root() => {
            let (ok, text) = client::request_once(
                &socket,
                sysward_ipc::operator::OperatorRequest::ListApprovals,
            )?;
            if json || !ok {
                println!("{}", sanitize::for_terminal(&text, 1 << 20));
            } else {
                // The same rendering root gets from the files.
                let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
                let now = sysward_broker::approvals::now_unix();
                let list = v["approvals"].as_array().cloned().unwrap_or_default();
                if list.is_empty() {
                    println!("no approvals");
                }
                for a in list {
                    match serde_json::from_value::<sysward_broker::approvals::Approval>(a) {
                        Ok(a) => println!("{}", approval_view::render_approval(&a, now, full)),
                        Err(e) => println!("(an approval the daemon sent could not be read: {e})"),
                    }
                }
                for p in v["problems"].as_array().into_iter().flatten() {
                    eprintln!(
                        "warning: {}",
                        sanitize::one_line(p.as_str().unwrap_or(""), 500)
                    );
                }
            }
            Ok(if ok { 0 } else { 1 })
        }
        Command::Approvals {
            root, json, full, ..
        } => {
            require_root("sysward approvals --root")?;
            approval_view::cmd_list(&layout_for(&root)?, json, full)
        }
        Command::Approve {
            task: Some(task),
            yes,
            root: None,
            socket,
            ..
        } if !nix::unistd::geteuid().is_root() => approve_task(
            &task,
            yes,
            || {
                let (ok, text) = client::request_once(
                    &socket,
                    sysward_ipc::operator::OperatorRequest::ListApprovals,
                )?;
                if !ok {
                    anyhow::bail!("{}", sanitize::one_line(&text, 2000));
                }
                Ok(serde_json::from_str(&text)?)
            },
            |id| decide_through_daemon(&socket, id.to_string(), None),
        ),
        Command::Approve {
            task: Some(task),
            yes,
            root,
            ..
        } => {
            require_root("sysward approve --root")?;
            let layout = layout_for(&root)?;
            let audit = audit::Audit::open(&layout.audit_log(), &layout.audit_head())?;
            approve_task(
                &task,
                yes,
                || Ok(sysward_broker::approvals::list_json(&layout)?),
                |id| Ok(sysward_broker::approvals::cmd_approve(&layout, &audit, id)?),
            )
        }
        Command::Approve {
            id: Some(id),
            root: None,
            socket,
            ..
        } if !nix::unistd::geteuid().is_root() => decide_through_daemon(&socket, id, None),
        Command::Deny {
            id,
            note,
            root: None,
            socket,
        } if !nix::unistd::geteuid().is_root() => {
            decide_through_daemon(&socket, id, Some(note.unwrap_or_default()))
        }
        Command::Approve { id, root, .. } => {
            require_root("sysward approve --root")?;
            let layout = layout_for(&root)?;
            let audit = audit::Audit::open(&layout.audit_log(), &layout.audit_head())?;
            let id = id.context("an approval id, or --task TASK_FILE")?;
            Ok(sysward_broker::approvals::cmd_approve(
                &layout, &audit, &id,
            )?)
        }
        Command::Deny { id, note, root, .. } => {
            require_root("sysward deny --root")?;
            let layout = layout_for(&root)?;
            let audit = audit::Audit::open(&layout.audit_log(), &layout.audit_head())?;
            Ok(sysward_broker::approvals::cmd_deny(
                &layout,
                &audit,
                &id,
                note.as_deref(),
            )?)
        }
        Command::Audit {
            command:
                AuditCommand::Verify {
                    root,
                    acknowledge,
                    key_file,
                    journal,
                },
        } => {
            let layout = layout_for(&root)?;
            let mut code = audit_view::verify(&layout, acknowledge)?;
            if let (Some(file), 0) = (&key_file, code) {
                code = audit_view::verify_seals(&layout, file)?;
            }
            if journal && code == 0 {
                code = audit_view::verify_journal(&layout)?;
            }
            Ok(code)
        }
        Command::Audit {
            command: AuditCommand::SetupKeys { root },
        } => {
            require_root("sysward audit setup-keys")?;
            let layout = layout_for(&root)?;
            project::ensure_private_dir(&layout.agent_dir())?;
            let key = audit::setup_keys(&layout.audit_log(), &layout.audit_head())?;
            println!("{key}");
            eprintln!("sysward: forward-secure sealing is set up. The line above is the verification key: store it off this host (it is not kept here), and check the log with `sysward audit verify --key-file FILE`. Every session's end seals its records.");
            Ok(0)
        }
        Command::Audit {
            command:
                AuditCommand::Show {
                    root,
                    session,
                    json,
                },
        } => {
            let layout = layout_for(&root)?;
            audit_view::show(&layout, session.as_deref(), json)
        }
    }
}

/// Man pages and completions from the same clap definition the binary uses,
/// written to files (clap_complete panics on a broken stdout pipe).
fn generate(what: GenerateCommand) -> Result<i32> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    match what {
        GenerateCommand::Man { dir } => {
            std::fs::create_dir_all(&dir)?;
            let render = |c: clap::Command, name: &str| -> Result<()> {
                let mut out = Vec::new();
                clap_mangen::Man::new(c).section("8").render(&mut out)?;
                out.extend_from_slice(manpages::extra_sections(name).as_bytes());
                std::fs::write(dir.join(format!("{name}.8")), out)?;
                Ok(())
            };
            render(cmd.clone(), "sysward")?;
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                let name = format!("sysward-{}", sub.get_name());
                render(sub.clone().name(name.clone()), &name)?;
            }
        }
        GenerateCommand::Completions { dir } => {
            std::fs::create_dir_all(&dir)?;
            // Only what a person types: the hidden subcommands are left out.
            let mut visible = clap::Command::new("sysward");
            for a in cmd.get_arguments() {
                visible = visible.arg(a.clone());
            }
            for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                visible = visible.subcommand(sub.clone());
            }
            let mut cmd = visible;
            for (shell, file) in [
                (clap_complete::Shell::Bash, "sysward.bash"),
                (clap_complete::Shell::Zsh, "_sysward"),
                (clap_complete::Shell::Fish, "sysward.fish"),
            ] {
                let mut out = Vec::new();
                clap_complete::generate(shell, &mut cmd, "sysward", &mut out);
                std::fs::write(dir.join(file), out)?;
            }
        }
    }
    Ok(0)
}

/// `sysward approve --task TASK_FILE`: shows every pending request of the
/// task, then (confirmed at a terminal, or `--yes`) approves each.
fn approve_task(
    task: &str,
    yes: bool,
    list: impl FnOnce() -> Result<serde_json::Value>,
    mut approve: impl FnMut(&str) -> Result<i32>,
) -> Result<i32> {
    let now = sysward_broker::approvals::now_unix();
    let all = list()?;
    let pending: Vec<sysward_broker::approvals::Approval> = all["approvals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| serde_json::from_value(a.clone()).ok())
        .filter(|a: &sysward_broker::approvals::Approval| {
            a.request.task.as_deref() == Some(task)
                && a.status_at(now) == sysward_broker::approvals::Status::Pending
        })
        .collect();
    if pending.is_empty() {
        eprintln!(
            "sysward: no pending approvals for task {}",
            sanitize::one_line(task, 200)
        );
        return Ok(1);
    }
    for a in &pending {
        println!("{}", approval_view::render_approval(a, now, false));
    }
    if !yes {
        if !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
            eprintln!("sysward: not a terminal: add --yes to approve these {} request(s) without confirming", pending.len());
            return Ok(1);
        }
        print!(
            "approve all {} request(s) of {}? type 'yes': ",
            pending.len(),
            sanitize::one_line(task, 200)
        );
        std::io::Write::flush(&mut std::io::stdout())?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            println!("nothing approved");
            return Ok(1);
        }
    }
    let mut failed = 0;
    for a in &pending {
        if approve(&a.id)? != 0 {
            failed += 1;
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

fn decide_through_daemon(
    socket: &std::path::Path,
    id: String,
    deny_note: Option<String>,
) -> Result<i32> {
    let (ok, text) = client::request_once(
        socket,
        sysward_ipc::operator::OperatorRequest::Decide { id, deny_note },
    )?;
    if ok {
        println!("{}", sanitize::for_terminal(&text, 8000));
        Ok(0)
    } else {
        eprintln!("sysward: {}", sanitize::for_terminal(&text, 8000));
        Ok(1)
    }
}

/// `sysward broker`: becomes `sysward-broker` (the same pid), so that what a
/// person or a unit started as `sysward broker` is the root broker itself,
/// with none of the console in it.
fn exec_daemon(root: Option<PathBuf>, socket: PathBuf) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    let exe = sysward_broker::spawn::sibling(standalone::BROKER_BINARY)?;
    let mut cmd = std::process::Command::new(&exe);
    if let Some(root) = root {
        cmd.arg("--root").arg(root);
    }
    cmd.arg("--socket").arg(socket);
    let err = cmd.exec();
    bail!("cannot run {}: {err}", exe.display())
}

fn main() {
    match real_main() {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("sysward: {e:#}");
            std::process::exit(1);
        }
    }
}
