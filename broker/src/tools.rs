//! The broker's own tool catalog: what each tool the model may name does, and
//! the strict decoding of its arguments. Nothing the agent claims about a tool
//! is used; an unknown tool is refused.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The fixed PATH of every action (nothing is inherited from the broker).
pub const ACTION_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// Commands may run at most 2 h (seed).
pub const MAX_TIMEOUT_SECS: u64 = 7200;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecArgs {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    pub command: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A command about to be decided and run.
#[derive(Debug, Clone)]
pub struct CommandPlan {
    /// argv as the model gave it (argv[0] possibly a bare name).
    pub argv: Vec<String>,
    /// The script for `shell` (then argv is `bash -c script`).
    pub script: Option<String>,
    pub cwd: PathBuf,
    pub timeout_secs: Option<u64>,
    pub reason: String,
}

impl CommandPlan {
    pub fn display(&self) -> String {
        match &self.script {
            Some(s) => s.clone(),
            None => self
                .argv
                .iter()
                .map(|a| shell_quote(a))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// The environment every command gets, and nothing else.
pub fn action_env(tmp: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), ACTION_PATH.to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        ("LC_ALL".to_string(), "C.UTF-8".to_string()),
        ("DEBIAN_FRONTEND".to_string(), "noninteractive".to_string()),
        ("PAGER".to_string(), "cat".to_string()),
        ("SYSTEMD_PAGER".to_string(), "cat".to_string()),
        ("GIT_PAGER".to_string(), "cat".to_string()),
        ("SYSTEMD_COLORS".to_string(), "0".to_string()),
        ("TERM".to_string(), "dumb".to_string()),
        ("HOME".to_string(), "/root".to_string()),
    ];
    if let Some(t) = tmp {
        env.push(("TMPDIR".to_string(), t.to_string()));
    }
    env
}

/// Decodes `exec` / `shell` arguments strictly (unknown field or bad JSON is an
/// error the model sees).
pub fn command_plan(
    tool: &str,
    arguments: &str,
    default_cwd: &Path,
) -> Result<CommandPlan, String> {
    let (argv, script, cwd, timeout, reason) = match tool {
        "exec" => {
            let a: ExecArgs = serde_json::from_str(arguments)
                .map_err(|e| format!("invalid arguments for exec: {e}"))?;
            if a.command.is_empty() {
                return Err("exec needs a command".to_string());
            }
            let mut argv = vec![a.command];
            argv.extend(a.args);
            (argv, None, a.cwd, a.timeout_seconds, a.reason)
        }
        "shell" => {
            let a: ShellArgs = serde_json::from_str(arguments)
                .map_err(|e| format!("invalid arguments for shell: {e}"))?;
            if a.command.trim().is_empty() {
                return Err("shell needs a command".to_string());
            }
            (
                vec!["bash".to_string(), "-c".to_string(), a.command.clone()],
                Some(a.command),
                a.cwd,
                a.timeout_seconds,
                a.reason,
            )
        }
        other => return Err(format!("{other} is not a command tool")),
    };
    if argv.iter().any(|a| a.contains('\0')) {
        return Err("arguments must not contain NUL bytes".to_string());
    }
    let cwd = match cwd {
        Some(c) if Path::new(&c).is_absolute() => PathBuf::from(c),
        Some(c) => default_cwd.join(c),
        None => default_cwd.to_path_buf(),
    };
    if let Some(t) = timeout {
        if t == 0 || t > MAX_TIMEOUT_SECS {
            return Err(format!(
                "timeout_seconds must be between 1 and {MAX_TIMEOUT_SECS}"
            ));
        }
    }
    Ok(CommandPlan {
        argv,
        script,
        cwd,
        timeout_secs: timeout,
        reason: reason.unwrap_or_default(),
    })
}

/// Resolves argv[0] against the fixed PATH. A path with a slash must be
/// absolute.
pub fn resolve_program(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        if !p.is_absolute() {
            return Err(format!(
                "{name}: give an absolute path or a bare program name"
            ));
        }
        return Ok(p);
    }
    for dir in ACTION_PATH.split(':') {
        let candidate = Path::new(dir).join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    Err(format!(
        "{name}: command not found in {ACTION_PATH}; use find_program to see what is installed"
    ))
}

/// Quotes an argument for display when it needs it.
pub fn shell_quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn strict_decoding() {
        let p = command_plan(
            "exec",
            r#"{"command":"ls","args":["-l","/"]}"#,
            Path::new("/p"),
        )
        .unwrap();
        assert_eq!(p.argv, ["ls", "-l", "/"]);
        assert_eq!(p.cwd, Path::new("/p"));
        assert!(command_plan("exec", r#"{"command":"ls","bogus":1}"#, Path::new("/")).is_err());
        assert!(command_plan("exec", r#"{"command":"ls""#, Path::new("/")).is_err());
        assert!(command_plan(
            "exec",
            r#"{"command":"ls","timeout_seconds":9999}"#,
            Path::new("/")
        )
        .is_err());
        let s = command_plan(
            "shell",
            r#"{"command":"echo hi | wc -c","cwd":"sub"}"#,
            Path::new("/p"),
        )
        .unwrap();
        assert_eq!(s.script.as_deref(), Some("echo hi | wc -c"));
        assert_eq!(s.cwd, Path::new("/p/sub"));
    }

    #[test]
    fn quoting_for_display() {
        assert_eq!(shell_quote("ab-c"), "ab-c");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
