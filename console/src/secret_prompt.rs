//! The no-echo prompt for a secret the model asked for (`ask_secret`): the
//! broker sends what to show, the console reads the value with the
//! terminal's echo off and sends it back. Nothing typed here is echoed,
//! kept in a history or left in memory longer than the answer needs.

use std::io::{Read, Write};
use sysward_broker::redact::wipe;
use sysward_broker::secrets::MAX_SECRET_BYTES;

#[derive(Debug, thiserror::Error)]
pub enum SecretPromptError {
    #[error("cancelled (Ctrl+C)")]
    Interrupted,
    #[error("end of input before a value was typed")]
    Eof,
    #[error("refusing to read a secret: the terminal's echo could not be turned off")]
    EchoNotDisabled,
    #[error("the value is longer than {MAX_SECRET_BYTES} bytes")]
    TooLong,
    #[error("the value is not UTF-8 text")]
    NotUtf8,
    #[error("terminal error: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads a secret from the operator: on a terminal without echo (Ctrl+C
/// cancels and restores the terminal; a terminal whose echo cannot be turned
/// off is refused); from a pipe or file, one line as is. The prompt goes to
/// stderr.
pub fn read_secret_no_echo(prompt: &str) -> Result<String, SecretPromptError> {
    let stdin = std::io::stdin();
    let mut err = std::io::stderr();
    read_secret_from(libc::STDIN_FILENO, &mut stdin.lock(), &mut err, prompt)
}

/// The same on explicit descriptors (for tests and for the control client):
/// `fd` is checked for a terminal; `plain` is used to read when it is not.
pub fn read_secret_from(
    fd: i32,
    plain: &mut dyn std::io::BufRead,
    out: &mut dyn Write,
    prompt: &str,
) -> Result<String, SecretPromptError> {
    // SAFETY: isatty only inspects the descriptor.
    let tty = unsafe { libc::isatty(fd) } == 1;
    write!(out, "{prompt}")?;
    out.flush()?;
    if !tty {
        let mut line = Vec::new();
        let mut limited = Read::take(&mut *plain, MAX_SECRET_BYTES as u64 + 3);
        let n = std::io::BufRead::read_until(&mut limited, b'\n', &mut line)?;
        if n == 0 {
            return Err(SecretPromptError::Eof);
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        if line.len() > MAX_SECRET_BYTES {
            wipe(&mut line);
            return Err(SecretPromptError::TooLong);
        }
        return String::from_utf8(line).map_err(|e| {
            let mut b = e.into_bytes();
            wipe(&mut b);
            SecretPromptError::NotUtf8
        });
    }
    let original = tcgetattr(fd)?;
    let mut raw = original;
    // No echo, no line editing by the kernel, no signals: Ctrl+C arrives as a
    // byte and is handled here, so the terminal is always restored.
    raw.c_lflag &= !(libc::ECHO
        | libc::ECHOE
        | libc::ECHOK
        | libc::ECHONL
        | libc::ICANON
        | libc::ISIG
        | libc::IEXTEN);
    raw.c_cc[libc::VMIN] = 1;
    raw.c_cc[libc::VTIME] = 0;
    if fd == libc::STDIN_FILENO {
        // The console's one terminal guard puts the mode back if the process
        // exits while the value is typed (a second Ctrl+C, a SIGTERM).
        crate::terminal::guard_terminal();
    }
    let result = (|| {
        tcsetattr(fd, &raw)?;
        let now = tcgetattr(fd)?;
        if now.c_lflag & libc::ECHO != 0 {
            return Err(SecretPromptError::EchoNotDisabled);
        }
        read_raw(fd)
    })();
    let restored = tcsetattr(fd, &original);
    let _ = writeln!(out);
    let _ = out.flush();
    restored?;
    result
}

fn tcgetattr(fd: i32) -> std::io::Result<libc::termios> {
    // SAFETY: termios is plain data; zeroed is a valid value to be overwritten.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `t` is a valid, writable termios.
    if unsafe { libc::tcgetattr(fd, &mut t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(t)
}

fn tcsetattr(fd: i32, t: &libc::termios) -> std::io::Result<()> {
    // SAFETY: `t` is a valid termios; the call only reads it.
    if unsafe { libc::tcsetattr(fd, libc::TCSAFLUSH, t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Reads bytes until Enter: Ctrl+C cancels, Ctrl+D on an empty line is end of
/// input, Backspace and Ctrl+U edit.
fn read_raw(fd: i32) -> Result<String, SecretPromptError> {
    let mut buf: Vec<u8> = Vec::new();
    let fail = |buf: &mut Vec<u8>, e: SecretPromptError| {
        wipe(buf);
        Err(e)
    };
    loop {
        let mut b = [0u8; 1];
        // SAFETY: reads at most one byte into a valid one-byte buffer.
        let n = unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return fail(&mut buf, e.into());
        }
        if n == 0 {
            return fail(&mut buf, SecretPromptError::Eof);
        }
        match b[0] {
            b'\r' | b'\n' => break,
            0x03 => return fail(&mut buf, SecretPromptError::Interrupted),
            0x04 if buf.is_empty() => return fail(&mut buf, SecretPromptError::Eof),
            0x7f | 0x08 => {
                // Remove one whole UTF-8 character.
                while let Some(last) = buf.pop() {
                    if last & 0xC0 != 0x80 {
                        break;
                    }
                }
            }
            0x15 => wipe(&mut buf),
            c if c < 0x20 => {}
            c => {
                if buf.len() >= MAX_SECRET_BYTES {
                    return fail(&mut buf, SecretPromptError::TooLong);
                }
                buf.push(c);
            }
        }
    }
    String::from_utf8(buf).map_err(|e| {
        let mut b = e.into_bytes();
        wipe(&mut b);
        SecretPromptError::NotUtf8
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_non_terminal_is_read_plainly() {
        let mut input = std::io::Cursor::new(b"from-a-pipe\nnext line\n".to_vec());
        let mut out = Vec::new();
        let fd = std::fs::File::open("/dev/null").unwrap();
        let v = read_secret_from(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &mut input,
            &mut out,
            "secret db: ",
        )
        .unwrap();
        assert_eq!(v, "from-a-pipe");
        assert_eq!(out, b"secret db: ");
        let mut empty = std::io::Cursor::new(Vec::new());
        assert!(matches!(
            read_secret_from(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                &mut empty,
                &mut out,
                ""
            ),
            Err(SecretPromptError::Eof)
        ));
    }

    /// Runs the prompt on a pseudo-terminal fed with `typed`; returns the result,
    /// what the terminal echoed, and whether echo is back on afterwards.
    fn on_pty(typed: &'static [u8]) -> (Result<String, SecretPromptError>, Vec<u8>, bool) {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        let pty = nix::pty::openpty(None, None).unwrap();
        let slave = pty.slave;
        let mut master = std::fs::File::from(pty.master);
        let mut writer = master.try_clone().unwrap();
        let feeder = std::thread::spawn(move || {
            // Type only once the prompt has turned echo off (TCSAFLUSH would
            // discard anything typed before); the master reports the slave's modes.
            for _ in 0..500 {
                let t = nix::sys::termios::tcgetattr(&writer).unwrap();
                if !t.local_flags.contains(nix::sys::termios::LocalFlags::ECHO) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            writer.write_all(typed).unwrap();
        });
        let mut out = Vec::new();
        let mut dummy = std::io::Cursor::new(Vec::new());
        let result = read_secret_from(slave.as_raw_fd(), &mut dummy, &mut out, "secret: ");
        feeder.join().unwrap();
        let t = nix::sys::termios::tcgetattr(&slave).unwrap();
        let echo_back = t.local_flags.contains(nix::sys::termios::LocalFlags::ECHO);
        // what the terminal echoed to the master side
        let flags = nix::fcntl::fcntl(&master, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        nix::fcntl::fcntl(
            &master,
            nix::fcntl::FcntlArg::F_SETFL(
                nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK,
            ),
        )
        .unwrap();
        let mut echoed = vec![0u8; 4096];
        let n = master.read(&mut echoed).unwrap_or(0);
        echoed.truncate(n);
        (result, echoed, echo_back)
    }

    #[test]
    fn a_terminal_is_read_without_echo_and_restored() {
        let (r, echoed, echo_back) = on_pty(b"s3cx\x7fret-v\xc3\xa9\x7falue\r");
        assert_eq!(r.unwrap(), "s3cret-value");
        assert!(
            !String::from_utf8_lossy(&echoed).contains("s3c"),
            "echoed: {echoed:?}"
        );
        assert!(echo_back, "echo restored");
    }

    #[test]
    fn ctrl_c_cancels_and_restores_the_terminal() {
        let (r, echoed, echo_back) = on_pty(b"half-typed\x03");
        assert!(matches!(r, Err(SecretPromptError::Interrupted)), "{r:?}");
        assert!(!String::from_utf8_lossy(&echoed).contains("half"));
        assert!(echo_back, "echo restored after Ctrl+C");
    }
}
