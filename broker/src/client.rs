//! `sysward run|cli` without `--root`: an operator connected to the daemon.

use crate::operator::{self, render_event, render_prompt, summary_json};
use crate::sanitize;
use anyhow::{bail, Context, Result};
use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
use std::io::{BufRead, Write};
use std::path::Path;
use sysward_ipc::agent::SessionMode;
use sysward_ipc::operator::{ApprovalDecision, OperatorAnswer, OperatorRequest, RunOptions};
use sysward_ipc::{Channel, BUILD_VERSION};

pub fn run(socket_path: &Path, mode: SessionMode, dry_run: bool, json: bool) -> Result<i32> {
    let signals = crate::signals::Signals::install()?;
    let fd = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &UnixAddr::new(socket_path)?).with_context(|| {
        format!(
            "cannot connect to the sysward daemon at {}: is `sysward broker` running (systemctl status sysward), and are you root or in the sysward group? For a one-off run use `sudo sysward run --root DIR`",
            socket_path.display()
        )
    })?;
    let writer = Channel::new(fd.try_clone()?);
    let mut reader = Channel::new(fd);
    writer.send(&OperatorRequest::Hello {
        build: BUILD_VERSION.to_string(),
    })?;
    match reader.recv::<OperatorAnswer>()? {
        OperatorAnswer::Welcome { .. } => {}
        OperatorAnswer::Error { message } => bail!(
            "the daemon refused this connection: {}",
            sanitize::one_line(&message, 500)
        ),
        other => bail!("unexpected answer from the daemon: {other:?}"),
    }
    let opts = RunOptions {
        rerun: matches!(mode, SessionMode::Tasks { rerun: true }),
        dry_run,
    };
    writer.send(&match mode {
        SessionMode::Cli => OperatorRequest::Cli(opts),
        SessionMode::Tasks { .. } => OperatorRequest::Run(opts),
    })?;
    // Ctrl+C → Cancel on the socket.
    let cancel_writer = Channel::new(writer.fd().try_clone_to_owned()?);
    let cancel = signals.cancel.clone();
    std::thread::Builder::new()
        .name("cancel-relay".to_string())
        .spawn(move || loop {
            let mut fds = [nix::poll::PollFd::new(
                cancel.fd(),
                nix::poll::PollFlags::POLLIN,
            )];
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::NONE).is_ok()
                && cancel.is_cancelled()
            {
                let _ = cancel_writer.send(&OperatorRequest::Cancel);
                cancel.reset();
            }
        })?;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    loop {
        let answer = match reader.recv::<OperatorAnswer>() {
            Ok(a) => a,
            Err(e) => bail!("the daemon closed the session: {e}"),
        };
        match answer {
            OperatorAnswer::SessionStarted { session_id, banner } => {
                if json {
                    writeln!(
                        out,
                        "{}",
                        serde_json::json!({"event": "session_start", "session": sanitize::one_line(&session_id, 64)})
                    )?;
                } else {
                    writeln!(out, "{}", sanitize::for_terminal(&banner, 4000))?;
                }
            }
            OperatorAnswer::Event(ev) => {
                if json {
                    writeln!(out, "{}", operator::event_json(&ev))?;
                } else if let Some(text) = render_event(&ev) {
                    writeln!(out, "{text}")?;
                }
            }
            OperatorAnswer::InputWanted => {
                write!(out, "agent> ")?;
                out.flush()?;
                signals
                    .at_prompt
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                let mut line = String::new();
                let n = stdin.lock().read_line(&mut line)?;
                signals
                    .at_prompt
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                if n == 0 {
                    writer.send(&OperatorRequest::Detach)?;
                } else {
                    writer.send(&OperatorRequest::Input(
                        line.trim_end_matches(['\n', '\r']).to_string(),
                    ))?;
                }
            }
            OperatorAnswer::ApprovalNeeded(p) => {
                let p = sysward_ipc::operator::ApprovalPrompt {
                    id: sanitize::one_line(&p.id, 64),
                    mode: sanitize::one_line(&p.mode, 64),
                    host: sanitize::one_line(&p.host, 200),
                    category: sanitize::one_line(&p.category, 64),
                    risk: sanitize::one_line(&p.risk, 64),
                    command: sanitize::one_line(&p.command, 4000),
                    profile: sanitize::one_line(&p.profile, 2000),
                    reason: sanitize::one_line(&p.reason, 1000),
                };
                writeln!(out, "{}", render_prompt(&p))?;
                let (decision, note) = ask_approval(&stdin, &mut out)?;
                writer.send(&OperatorRequest::Approval {
                    id: p.id.clone(),
                    decision,
                    note,
                })?;
            }
            OperatorAnswer::Finished(summary) => {
                if json {
                    writeln!(out, "{}", summary_json(&summary))?;
                } else {
                    writeln!(out, "{}", operator::render_summary(&summary))?;
                }
                return Ok(summary.exit_code);
            }
            OperatorAnswer::Error { message } => {
                bail!("{}", sanitize::for_terminal(&message, 4000));
            }
            OperatorAnswer::Welcome { .. } => bail!("the daemon sent a second welcome"),
        }
    }
}

fn ask_approval(
    stdin: &std::io::Stdin,
    out: &mut std::io::Stdout,
) -> Result<(ApprovalDecision, String)> {
    let mut read = |prompt: &str| -> Result<Option<String>> {
        write!(out, "{prompt}")?;
        out.flush()?;
        let mut line = String::new();
        Ok(match stdin.lock().read_line(&mut line)? {
            0 => None,
            _ => Some(line.trim().to_string()),
        })
    };
    loop {
        let Some(answer) = read("answer [y/s/n]: ")? else {
            return Ok((
                ApprovalDecision::Deny,
                "no answer (input closed)".to_string(),
            ));
        };
        match answer.as_str() {
            "y" | "Y" => return Ok((ApprovalDecision::AllowOnce, String::new())),
            "s" | "S" => {
                let confirm = read(
                    "allow this exact command for the rest of the session? type 'yes' to confirm: ",
                )?;
                if confirm.as_deref() == Some("yes") {
                    return Ok((
                        ApprovalDecision::AllowSession { confirmed: true },
                        String::new(),
                    ));
                }
            }
            "n" | "N" => {
                let note = read("note for the model (optional): ")?.unwrap_or_default();
                return Ok((ApprovalDecision::Deny, note));
            }
            _ => {}
        }
    }
}
