//! A private tmux server for driving the operator's terminal as a person
//! would (keys typed into a real pane, the screen read back).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A private tmux server (its own socket) with one 200x50 pane running bash;
/// None when tmux is not installed.
pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    pub fn start(tag: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            return None;
        }
        let socket = PathBuf::from(format!("/tmp/sysward-tmux-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let t = Tmux { socket };
        let ok = t
            .cmd(&[
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
                "-s",
                "t",
                "env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TERM=xterm-256color PS1='$ ' bash --norc --noprofile",
            ])
            .status()
            .unwrap()
            .success();
        assert!(ok, "tmux new-session failed");
        Some(t)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket).args(args);
        c.stdin(Stdio::null()).stderr(Stdio::inherit());
        c
    }

    /// Types literal text (no Enter).
    pub fn type_text(&self, text: &str) {
        assert!(self
            .cmd(&["send-keys", "-t", "t", "-l", text])
            .status()
            .unwrap()
            .success());
    }

    /// Sends named keys (`Enter`, `Up`, `C-c`, `C-d`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status().unwrap().success());
    }

    pub fn line(&self, text: &str) {
        self.type_text(text);
        self.keys(&["Enter"]);
    }

    /// The pane's text, with the scrollback.
    pub fn capture(&self) -> String {
        let out = self
            .cmd(&["capture-pane", "-p", "-J", "-t", "t", "-S", "-2000"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn wait_for(&self, what: &str, timeout: Duration, f: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let text = self.capture();
            if f(&text) {
                return text;
            }
            if start.elapsed() > timeout {
                panic!("timed out waiting for {what}; the pane shows:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the text `needle` has appeared `n` times in the pane.
    pub fn wait_count(&self, needle: &str, n: usize, timeout: Duration) -> String {
        self.wait_for(&format!("{n}× {needle:?}"), timeout, |t| {
            t.matches(needle).count() >= n
        })
    }

    /// Waits for an `agent> ` prompt as the last line, `n`-th time overall.
    pub fn wait_prompt(&self, n: usize) {
        self.wait_for(
            &format!("agent prompt #{n}"),
            Duration::from_secs(60),
            |t| {
                t.matches("agent> ").count() >= n
                    && t.lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .is_some_and(|l| l.trim_end() == "agent>")
            },
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).status();
        let _ = std::fs::remove_file(&self.socket);
    }
}
