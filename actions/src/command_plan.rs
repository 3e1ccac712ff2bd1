//! The plan of a command request (`exec`, `shell`): the strict decoding of
//! its arguments, the checks of its environment and stdin, the program
//! resolved in the action PATH. Nothing the agent claims about a command is
//! used beyond these checked fields.

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
    /// Extra environment variables (see [`check_request_env`]).
    #[serde(default)]
    pub env: Option<std::collections::BTreeMap<String, String>>,
    /// Text fed to the command's standard input (else it reads /dev/null).
    #[serde(default)]
    pub stdin: Option<String>,
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
    /// `exec`'s extra environment, added after [`action_env`] (checked by
    /// [`check_request_env`]: it never replaces one of those).
    pub env: Vec<(String, String)>,
    /// `exec`'s standard input.
    pub stdin: Option<String>,
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
            None => {
                let mut words: Vec<String> = self
                    .env
                    .iter()
                    .map(|(k, v)| format!("{k}={}", shell_quote(v)))
                    .collect();
                words.extend(self.argv.iter().map(|a| shell_quote(a)));
                if let Some(input) = &self.stdin {
                    words.push(format!("<<< {}", shell_quote(input)));
                }
                words.join(" ")
            }
        }
    }
}

/// At most this many variables in `exec`'s `env`.
pub const MAX_ENV_VARS: usize = 32;
/// At most this many bytes in one variable's name.
pub const MAX_ENV_NAME: usize = 64;
/// At most this many bytes in one variable's value.
pub const MAX_ENV_VALUE: usize = 32 << 10;
/// At most this many bytes of names and values in all.
pub const MAX_ENV_TOTAL: usize = 64 << 10;
/// At most this many bytes of `exec`'s `stdin`.
pub const MAX_STDIN: usize = 1 << 20;

/// Variables a request may not set: every one the broker sets itself
/// ([`action_env`]: the fixed PATH, locale, pager, HOME, TMPDIR), and those
/// that make the dynamic loader, libc or a shell run or load other code.
pub fn reserved_env(name: &str) -> bool {
    action_env(Some("")).iter().any(|(k, _)| k == name)
        || name.starts_with("LD_")
        || name.starts_with("BASH_")
        || name.starts_with("MALLOC_")
        || matches!(
            name,
            "ENV"
                | "IFS"
                | "SHELLOPTS"
                | "BASHOPTS"
                | "PS4"
                | "PROMPT_COMMAND"
                | "CDPATH"
                | "GLOBIGNORE"
                | "GCONV_PATH"
                | "GLIBC_TUNABLES"
                | "LOCPATH"
                | "NLSPATH"
                | "HOSTALIASES"
                | "RESOLV_HOST_CONF"
                | "TZDIR"
        )
}

/// Checks `exec`'s `env`: names `[A-Z_][A-Z0-9_]*` of at most
/// [`MAX_ENV_NAME`] bytes, none [`reserved_env`], values without NUL, the
/// count and sizes bounded. The order is the names' (a map has no other).
pub fn check_request_env(
    env: std::collections::BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, String> {
    if env.len() > MAX_ENV_VARS {
        return Err(format!(
            "env has {} variables; at most {MAX_ENV_VARS}",
            env.len()
        ));
    }
    let mut total = 0usize;
    let mut out = Vec::with_capacity(env.len());
    for (k, v) in env {
        let shown = crate::sanitize::one_line(&k, MAX_ENV_NAME);
        let valid = !k.is_empty()
            && k.len() <= MAX_ENV_NAME
            && !k.as_bytes()[0].is_ascii_digit()
            && k.bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
        if !valid {
            return Err(format!(
                "env: {shown:?} is not a variable name (1-{MAX_ENV_NAME} of A-Z, 0-9 and _, not starting with a digit)"
            ));
        }
        if reserved_env(&k) {
            return Err(format!(
                "env: {k} is set by sysward itself or changes what code runs; it cannot be set by a request"
            ));
        }
        if v.len() > MAX_ENV_VALUE {
            return Err(format!(
                "env: the value of {k} is larger than {MAX_ENV_VALUE} bytes"
            ));
        }
        if v.contains('\0') {
            return Err(format!("env: the value of {k} contains a NUL byte"));
        }
        total += k.len() + v.len();
        if total > MAX_ENV_TOTAL {
            return Err(format!("env is larger than {MAX_ENV_TOTAL} bytes in all"));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// Checks `exec`'s `stdin`: at most [`MAX_STDIN`] bytes, no NUL.
pub fn check_request_stdin(stdin: &str) -> Result<(), String> {
    if stdin.len() > MAX_STDIN {
        return Err(format!("stdin is larger than {MAX_STDIN} bytes"));
    }
    if stdin.contains('\0') {
        return Err("stdin contains a NUL byte".to_string());
    }
    Ok(())
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
    let mut env = Vec::new();
    let mut stdin = None;
    let (argv, script, cwd, timeout, reason) = match tool {
        "exec" => {
            let a: ExecArgs = serde_json::from_str(arguments)
                .map_err(|e| format!("invalid arguments for exec: {e}"))?;
            if a.command.is_empty() {
                return Err("exec needs a command".to_string());
            }
            if let Some(e) = a.env {
                env = check_request_env(e)?;
            }
            if let Some(s) = &a.stdin {
                check_request_stdin(s)?;
            }
            stdin = a.stdin;
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
        env,
        stdin,
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
    fn exec_env_and_stdin_are_bounded_and_never_replace_the_fixed_environment() {
        let p = command_plan(
            "exec",
            r#"{"command":"psql","env":{"PGPASSWORD":"{{secret:db}}","A_1":"x"},"stdin":"select 1"}"#,
            Path::new("/p"),
        )
        .unwrap();
        assert_eq!(p.env[0], ("A_1".to_string(), "x".to_string()));
        assert_eq!(p.stdin.as_deref(), Some("select 1"));
        assert_eq!(
            p.display(),
            "A_1=x PGPASSWORD='{{secret:db}}' psql <<< 'select 1'"
        );
        let refused = |args: String| command_plan("exec", &args, Path::new("/")).unwrap_err();
        for name in [
            "PATH",
            "HOME",
            "TMPDIR",
            "LD_PRELOAD",
            "BASH_ENV",
            "IFS",
            "GLIBC_TUNABLES",
            "lower",
            "1X",
            "A-B",
            "",
        ] {
            let e = refused(format!(r#"{{"command":"env","env":{{"{name}":"v"}}}}"#));
            assert!(e.starts_with("env:"), "{name}: {e}");
        }
        let many: Vec<String> = (0..=MAX_ENV_VARS)
            .map(|i| format!(r#""V{i}":"x""#))
            .collect();
        assert!(refused(format!(
            r#"{{"command":"env","env":{{{}}}}}"#,
            many.join(",")
        ))
        .contains("at most"));
        let big = "x".repeat(MAX_ENV_VALUE + 1);
        assert!(
            refused(format!(r#"{{"command":"env","env":{{"V":"{big}"}}}}"#)).contains("larger")
        );
        assert!(refused(r#"{"command":"env","env":{"V":"a\u0000b"}}"#.to_string()).contains("NUL"));
        assert!(
            refused(r#"{"command":"env","env":{"V":1}}"#.to_string()).contains("invalid arguments")
        );
        let big = "x".repeat(MAX_STDIN + 1);
        assert!(refused(format!(r#"{{"command":"cat","stdin":"{big}"}}"#)).contains("larger"));
        assert!(refused(r#"{"command":"cat","stdin":"a\u0000"}"#.to_string()).contains("NUL"));
        // `shell` has neither: its script sets what it needs.
        assert!(command_plan("shell", r#"{"command":"cat","stdin":"x"}"#, Path::new("/")).is_err());
    }

    #[test]
    fn quoting_for_display() {
        assert_eq!(shell_quote("ab-c"), "ab-c");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
