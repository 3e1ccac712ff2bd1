//! Secrets held by the broker. The agent (and so the model) never holds a
//! value: it writes the placeholder `{{secret:NAME}}`, and the broker puts the
//! value in right before it builds the executor's spec — only where an argv
//! element, an environment value, the stdin or a written file's content **is
//! exactly** the placeholder, only for the programs and deliveries the secret's
//! scope grants (seed 003). Every byte the broker passes on is redacted back to
//! the placeholder (`crate::redact`).
//!
//! # Where secrets come from
//!
//! * **The secrets directory** (`Layout::secrets_dir`: `/etc/sysward/secrets/`,
//!   or `DIR/secrets/` with `--root DIR`): one file per secret, named after it.
//!   The directory must be a real directory (not a symlink) owned by root with
//!   mode 0700 (no group/other bits), its parent not writable by group or
//!   others; every file in it a regular file owned by root with no group/other
//!   bits (0600 or 0400). Anything else refuses to start with an error naming
//!   the file and the fix. A missing directory means no stored secrets.
//!   Files whose name starts with `.` are ignored (with a warning).
//! * **systemd credentials**: when `$CREDENTIALS_DIRECTORY` is set
//!   (`LoadCredential=`/`SetCredentialEncrypted=`), each file there is a secret
//!   too, read-only, with the same checks (directory not writable by
//!   group/others). A name may not exist in both places.
//! * **Session secrets**: `ask_secret` in the CLI. The model names the secret
//!   and where it should go (one program and one delivery); the operator sees
//!   that scope in the prompt and types the value without echo, which is the
//!   consent to exactly that scope. The value lives in the broker's memory for
//!   the session only. Nothing else can widen it.
//!
//! A value is UTF-8 text of 4 bytes to 64 KiB without NUL; one trailing newline
//! (`\n` or `\r\n`) is removed, so `echo pw > file` works.
//!
//! # Scope: `NAME.scope`
//!
//! Beside each secret `NAME`, a file `NAME.scope` (same ownership and mode
//! rules) lists where it may go, one grant per line; `#` starts a comment:
//!
//! ```text
//! arg   /usr/bin/psql               # a whole argv element of /usr/bin/psql
//! env   /usr/bin/psql PGPASSWORD    # the value of PGPASSWORD in its environment
//! stdin /usr/bin/psql               # its whole standard input
//! file  /etc/myapp/db.password      # the whole content write_file writes there
//! ```
//!
//! Programs are absolute paths compared exactly as the broker resolves the
//! request's program (the fixed PATH lookup, or the absolute path given); no
//! symlink resolution, so `/usr/bin/psql` does not also grant whatever else
//! points at the same binary. Paths are absolute and normalized, without
//! spaces. Environment names are `[A-Za-z_][A-Za-z0-9_]*`, not `PATH`,
//! `BASH_ENV`, `ENV` or `LD_*`. **No scope file, or an empty one: the secret
//! can go nowhere** (it is still redacted). A credential's scope is
//! `NAME.scope` in `$CREDENTIALS_DIRECTORY`, else in the secrets directory.
//! Granting a shell, an interpreter or a generic wrapper (`bash`, `python3`,
//! `env`, `xargs`, …) lets that program hand the value to anything: it is
//! accepted, with a warning at start and in `sysward secrets list`.

use crate::redact::{self, RedactEntry, Redactor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use sysward_ipc::exec::{ExecSpec, FileOp};

/// The placeholder is `{{secret:NAME}}`.
pub const PLACEHOLDER_OPEN: &str = "{{secret:";
pub const PLACEHOLDER_CLOSE: &str = "}}";
pub const MIN_SECRET_BYTES: usize = 4;
pub const MAX_SECRET_BYTES: usize = 64 << 10;
pub const MAX_NAME_LEN: usize = 64;
/// At most this many stored secrets (directory plus credentials).
pub const MAX_SECRETS: usize = 256;
/// At most this many bytes of stored secret values in all (each value is
/// searched for in ~15 encodings in every output).
pub const MAX_TOTAL_BYTES: usize = 1 << 20;
/// At most this many secrets typed in one session.
pub const MAX_SESSION_SECRETS: usize = 16;
const MAX_SCOPE_FILE: u64 = 16 << 10;
const MAX_GRANTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("insecure secret store: {path}: {problem}")]
    Insecure { path: PathBuf, problem: String },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {problem}")]
    Invalid { path: PathBuf, problem: String },
    #[error("{path}:{line}: {problem}")]
    BadScope {
        path: String,
        line: usize,
        problem: String,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error(
        "{field} contains a secret placeholder that is not the whole value. A secret is substituted only where an argument, an environment value, the stdin or a written file's content is exactly `{{{{secret:NAME}}}}` — never inside a longer string (`--password={{{{secret:NAME}}}}`, `x{{{{secret:NAME}}}}`), split across words, or in a path. Pass it as a separate argument (e.g. `--password` then `{{{{secret:NAME}}}}`) or in an environment variable or stdin, as the secret's scope allows"
    )]
    Embedded { field: String },
    #[error(
        "a shell script cannot receive a secret: the shell could rewrite or print it. Use exec with the placeholder `{{{{secret:NAME}}}}` as a whole argument, environment value or stdin of the program that needs it"
    )]
    InShell,
    #[error("the program itself cannot be a secret placeholder")]
    ProgramPlaceholder,
    #[error("unknown secret {name:?}; known secrets: {}", if known.is_empty() { "none".to_string() } else { known.join(", ") })]
    Unknown { name: String, known: Vec<String> },
    #[error("denied: secret {name:?} may not go to {wanted}; its scope allows {}", if allowed.is_empty() { "nothing (no scope declared: it can go nowhere)".to_string() } else { allowed.join("; ") })]
    OutOfScope {
        name: String,
        wanted: String,
        allowed: Vec<String>,
    },
}

fn invalid(path: &Path, problem: impl Into<String>) -> SecretError {
    SecretError::Invalid {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

fn insecure(path: &Path, problem: impl Into<String>) -> SecretError {
    SecretError::Insecure {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

// ---- names and placeholders -----------------------------------------------

/// A secret name: 1–64 of `[A-Za-z0-9_.-]`, starting with a letter or digit.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        && !name.ends_with(".scope")
}

pub fn placeholder(name: &str) -> String {
    format!("{PLACEHOLDER_OPEN}{name}{PLACEHOLDER_CLOSE}")
}

/// The name when `text` is exactly one well-formed placeholder.
pub fn exact_placeholder(text: &str) -> Option<&str> {
    let name = text
        .strip_prefix(PLACEHOLDER_OPEN)?
        .strip_suffix(PLACEHOLDER_CLOSE)?;
    valid_name(name).then_some(name)
}

/// True when `text` contains anything that looks like the start of a secret
/// placeholder (`{{secret:`, any case, spaces allowed after `{{` and around
/// `secret`), whether or not it is well formed.
pub fn contains_placeholder(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] == b'{' && b[i + 1] == b'{' {
            let mut j = i + 2;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            if b.len() >= j + 6 && b[j..j + 6].eq_ignore_ascii_case(b"secret") {
                let mut k = j + 6;
                while k < b.len() && (b[k] == b' ' || b[k] == b'\t') {
                    k += 1;
                }
                if k < b.len() && b[k] == b':' {
                    return true;
                }
            }
        }
        i += 1;
    }
    false
}

// ---- scope ----------------------------------------------------------------

/// One way a secret may be delivered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "delivery", rename_all = "snake_case")]
pub enum Grant {
    /// A whole argv element (not argv[0]) of `program`.
    Arg { program: PathBuf },
    /// The value of environment variable `var` of `program`.
    Env { program: PathBuf, var: String },
    /// The whole stdin of `program`.
    Stdin { program: PathBuf },
    /// The whole content `write_file` writes to `path`: a persistent file
    /// that stays after the action (and that later actions may read).
    File { path: PathBuf },
    /// A whole argv element (not argv[0]) of `program` becomes the path of a
    /// one-shot file holding the value: written by the broker for that one
    /// action, readable by no other, removed when the action ends.
    TmpFile { program: PathBuf },
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Arg { program } => write!(f, "arg {}", program.display()),
            Grant::Env { program, var } => write!(f, "env {} {var}", program.display()),
            Grant::Stdin { program } => write!(f, "stdin {}", program.display()),
            Grant::File { path } => write!(f, "file {}", path.display()),
            Grant::TmpFile { program } => write!(f, "tmpfile {}", program.display()),
        }
    }
}

impl Grant {
    /// Human description: "argument of /usr/bin/psql".
    pub fn describe(&self) -> String {
        match self {
            Grant::Arg { program } => format!("a whole argument of {}", program.display()),
            Grant::Env { program, var } => {
                format!("environment variable {var} of {}", program.display())
            }
            Grant::Stdin { program } => format!("the stdin of {}", program.display()),
            Grant::File { path } => format!("the content of file {}", path.display()),
            Grant::TmpFile { program } => format!(
                "a whole argument of {} as the path of a one-shot file",
                program.display()
            ),
        }
    }

    pub fn program(&self) -> Option<&Path> {
        match self {
            Grant::Arg { program }
            | Grant::Env { program, .. }
            | Grant::Stdin { program }
            | Grant::TmpFile { program } => Some(program),
            Grant::File { .. } => None,
        }
    }
}

/// Where one secret may go. Empty: nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    pub grants: Vec<Grant>,
}

/// Programs that can pass a value on to anything (shells, interpreters,
/// wrappers, printers): granting one is accepted with a warning.
const GENERIC_PROGRAMS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "fish",
    "csh",
    "tcsh",
    "busybox",
    "env",
    "sudo",
    "su",
    "doas",
    "runuser",
    "setpriv",
    "xargs",
    "timeout",
    "nice",
    "nohup",
    "setsid",
    "stdbuf",
    "strace",
    "ltrace",
    "gdb",
    "python",
    "python2",
    "python3",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "tclsh",
    "awk",
    "gawk",
    "mawk",
    "sed",
    "tee",
    "cat",
    "echo",
    "printf",
    "dd",
    "socat",
    "nc",
    "ncat",
    "netcat",
    "logger",
    "find",
    "make",
    "systemd-run",
    "nsenter",
    "unshare",
    "chroot",
    "watch",
    "script",
    "expect",
];

/// Environment variables a secret may not be delivered in.
fn forbidden_var(var: &str) -> bool {
    matches!(
        var,
        "PATH" | "BASH_ENV" | "ENV" | "IFS" | "SHELLOPTS" | "BASHOPTS" | "PS4"
    ) || var.starts_with("LD_")
        || var.starts_with("BASH_FUNC_")
}

fn valid_var(var: &str) -> bool {
    !var.is_empty()
        && var.len() <= 128
        && (var.as_bytes()[0].is_ascii_alphabetic() || var.as_bytes()[0] == b'_')
        && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// An absolute, normalized path: no `.`/`..`, no empty component, no trailing
/// slash, no whitespace or control character.
fn normalized_absolute(text: &str) -> Result<PathBuf, String> {
    if !text.starts_with('/') || text.len() < 2 {
        return Err(format!("{text:?} is not an absolute path"));
    }
    if text.ends_with('/') || text.contains("//") {
        return Err(format!("{text:?} is not normalized"));
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{text:?} contains whitespace or a control character"
        ));
    }
    let p = PathBuf::from(text);
    if p.components()
        .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
    {
        return Err(format!("{text:?} contains . or .."));
    }
    Ok(p)
}

impl Scope {
    pub fn nowhere() -> Scope {
        Scope::default()
    }

    /// Parses a scope file (see the module documentation). `origin` names the
    /// file in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Scope, SecretError> {
        let mut grants = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |problem: String| SecretError::BadScope {
                path: origin.to_string(),
                line: n + 1,
                problem,
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            let grant = match words.as_slice() {
                ["arg", program] => Grant::Arg { program: normalized_absolute(program).map_err(bad)? },
                ["stdin", program] => Grant::Stdin { program: normalized_absolute(program).map_err(bad)? },
                ["env", program, var] => {
                    if !valid_var(var) {
                        return Err(bad(format!("{var:?} is not an environment variable name")));
                    }
                    if forbidden_var(var) {
                        return Err(bad(format!("a secret may not be delivered in {var}")));
                    }
                    Grant::Env { program: normalized_absolute(program).map_err(bad)?, var: var.to_string() }
                }
                ["file", path] => Grant::File { path: normalized_absolute(path).map_err(bad)? },
                ["tmpfile", program] => Grant::TmpFile { program: normalized_absolute(program).map_err(bad)? },
                [kw, ..] if ["arg", "stdin", "env", "file", "tmpfile"].contains(kw) => {
                    return Err(bad(format!(
                        "wrong number of words for {kw}: use `arg PROGRAM`, `stdin PROGRAM`, `env PROGRAM VAR`, `tmpfile PROGRAM` or `file PATH` (paths without spaces)"
                    )))
                }
                _ => {
                    return Err(bad(
                        "unknown grant: use `arg PROGRAM`, `stdin PROGRAM`, `env PROGRAM VAR`, `tmpfile PROGRAM` or `file PATH`".to_string(),
                    ))
                }
            };
            // A whole argument is either the value or the path of a file
            // holding it: both for one program would leave the choice to
            // whoever writes the request.
            let clash = match &grant {
                Grant::Arg { program } => Some(Grant::TmpFile {
                    program: program.clone(),
                }),
                Grant::TmpFile { program } => Some(Grant::Arg {
                    program: program.clone(),
                }),
                _ => None,
            };
            if clash.is_some_and(|c| grants.contains(&c)) {
                return Err(bad(format!(
                    "`arg` and `tmpfile` for the same program: choose one ({grant})"
                )));
            }
            if !grants.contains(&grant) {
                grants.push(grant);
            }
            if grants.len() > MAX_GRANTS {
                return Err(bad(format!("more than {MAX_GRANTS} grants")));
            }
        }
        Ok(Scope { grants })
    }

    pub fn allows(&self, grant: &Grant) -> bool {
        self.grants.contains(grant)
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// Warnings about grants that let the value go further than it seems.
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let mut w = Vec::new();
        for g in &self.grants {
            if let Some(p) = g.program() {
                let base = p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let generic = GENERIC_PROGRAMS.iter().any(|g| {
                    base == *g
                        || (base.starts_with(g)
                            && base[g.len()..]
                                .chars()
                                .all(|c| c.is_ascii_digit() || c == '.'))
                });
                if generic {
                    w.push(format!(
                        "secret {name}: scope grants {} — a shell, interpreter or wrapper can hand the value to any program",
                        p.display()
                    ));
                }
            }
            if let Grant::File { path } = g {
                if ["/tmp", "/var/tmp", "/dev/shm", "/run/user"]
                    .iter()
                    .any(|d| path.starts_with(d))
                {
                    w.push(format!(
                        "secret {name}: scope writes it to {}, a directory other users share",
                        path.display()
                    ));
                }
            }
        }
        w
    }

    /// One line per grant, as in a scope file.
    pub fn lines(&self) -> Vec<String> {
        self.grants.iter().map(|g| g.to_string()).collect()
    }
}

// ---- values -----------------------------------------------------------------

/// A secret value, wiped from memory when dropped, never printed.
struct SecretValue(String);

impl Drop for SecretValue {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        redact::wipe(&mut bytes);
    }
}

/// Where a secret was loaded from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "path", rename_all = "snake_case")]
pub enum Origin {
    /// A file in the secrets directory.
    Store(PathBuf),
    /// A systemd credential.
    Credential(PathBuf),
    /// Typed by the operator in this session (`ask_secret`).
    Session,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Store(p) => write!(f, "file {}", p.display()),
            Origin::Credential(p) => write!(f, "systemd credential {}", p.display()),
            Origin::Session => write!(f, "typed in this session"),
        }
    }
}

struct Secret {
    value: SecretValue,
    scope: Scope,
    origin: Origin,
}

/// What `list` shows of a secret: never the value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretInfo {
    pub name: String,
    pub origin: Origin,
    /// Grants as scope-file lines.
    pub scope: Vec<String>,
    pub bytes: usize,
}

impl SecretInfo {
    /// `db  (set, 12 bytes)  file /etc/sysward/secrets/db  scope: env /usr/bin/psql PGPASSWORD`
    pub fn line(&self) -> String {
        let scope = if self.scope.is_empty() {
            "scope: none (can go nowhere)".to_string()
        } else {
            format!("scope: {}", self.scope.join("; "))
        };
        format!(
            "{}  (set, {} bytes)  {}  {}",
            self.name, self.bytes, self.origin, scope
        )
    }
}

/// Checks and cleans a value; the error never contains it.
fn clean_value(mut bytes: Vec<u8>, what: &Path) -> Result<String, SecretError> {
    if bytes.ends_with(b"\r\n") {
        bytes.truncate(bytes.len() - 2);
    } else if bytes.ends_with(b"\n") {
        bytes.truncate(bytes.len() - 1);
    }
    let problem = if bytes.len() > MAX_SECRET_BYTES {
        Some(format!("a secret is at most {MAX_SECRET_BYTES} bytes"))
    } else if bytes.len() < MIN_SECRET_BYTES {
        Some(format!("a secret is at least {MIN_SECRET_BYTES} bytes (shorter values cannot be redacted reliably)"))
    } else if bytes.contains(&0) {
        Some("a secret may not contain a NUL byte".to_string())
    } else {
        None
    };
    if let Some(p) = problem {
        redact::wipe(&mut bytes);
        return Err(invalid(what, p));
    }
    match String::from_utf8(bytes) {
        Ok(s) => Ok(s),
        Err(e) => {
            let mut b = e.into_bytes();
            redact::wipe(&mut b);
            Err(invalid(
                what,
                "a secret must be UTF-8 text (store binary secrets base64-encoded)",
            ))
        }
    }
}

// ---- the store ----------------------------------------------------------------

/// The broker's stored secrets (directory and credentials), loaded once at
/// start and shared by every session.
#[derive(Default)]
pub struct SecretStore {
    secrets: BTreeMap<String, Secret>,
    warnings: Vec<String>,
}

impl fmt::Debug for SecretStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretStore({:?})",
            self.secrets.keys().collect::<Vec<_>>()
        )
    }
}

/// Checks a directory's own metadata: a real directory owned by root, without
/// the given mode bits.
fn check_dir(dir: &Path, forbidden_bits: u32, fix: &str) -> Result<bool, SecretError> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(SecretError::Io {
                path: dir.to_path_buf(),
                source: e,
            })
        }
    };
    if meta.file_type().is_symlink() {
        return Err(insecure(dir, "is a symlink; use a real directory"));
    }
    if !meta.is_dir() {
        return Err(insecure(dir, "is not a directory"));
    }
    if meta.uid() != 0 {
        return Err(insecure(
            dir,
            format!(
                "is owned by uid {}, not root: chown root:root {}",
                meta.uid(),
                dir.display()
            ),
        ));
    }
    if meta.mode() & forbidden_bits != 0 {
        return Err(insecure(
            dir,
            format!(
                "has mode {:o}: {fix} {}",
                meta.mode() & 0o7777,
                dir.display()
            ),
        ));
    }
    Ok(true)
}

/// Reads one file of the store without following a symlink; it must be a
/// regular root-owned file with no group/other bits.
fn read_private_file(path: &Path, max: u64) -> Result<Vec<u8>, SecretError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                insecure(path, "is a symlink; put the secret itself here")
            } else {
                SecretError::Io {
                    path: path.to_path_buf(),
                    source: e,
                }
            }
        })?;
    let meta = file.metadata().map_err(|e| SecretError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    if !meta.is_file() {
        return Err(insecure(path, "is not a regular file"));
    }
    if meta.uid() != 0 {
        return Err(insecure(
            path,
            format!(
                "is owned by uid {}, not root: chown root:root {}",
                meta.uid(),
                path.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(insecure(
            path,
            format!(
                "has mode {:o}: chmod 600 {}",
                meta.mode() & 0o7777,
                path.display()
            ),
        ));
    }
    if meta.len() > max {
        return Err(invalid(path, format!("is larger than {max} bytes")));
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| SecretError::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
    if buf.len() as u64 > max {
        redact::wipe(&mut buf);
        return Err(invalid(path, format!("is larger than {max} bytes")));
    }
    Ok(buf)
}

/// Entries of one directory: (secret names, scope-file names), every entry's
/// type checked.
fn list_dir(
    dir: &Path,
    warnings: &mut Vec<String>,
) -> Result<(Vec<String>, Vec<String>), SecretError> {
    let mut names = Vec::new();
    let mut scopes = Vec::new();
    let rd = fs::read_dir(dir).map_err(|e| SecretError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    for entry in rd {
        let entry = entry.map_err(|e| SecretError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            return Err(invalid(&entry.path(), "file name is not UTF-8"));
        };
        if name.starts_with('.') {
            warnings.push(format!("{}: ignored (hidden file)", entry.path().display()));
            continue;
        }
        if let Some(base) = name.strip_suffix(".scope") {
            if !valid_name(base) {
                return Err(invalid(&entry.path(), "scope for an invalid secret name"));
            }
            scopes.push(base.to_string());
        } else if valid_name(&name) {
            names.push(name);
        } else {
            return Err(invalid(
                &entry.path(),
                "is not a valid secret name (1-64 of letters, digits, _ . -, starting with a letter or digit): rename or remove it",
            ));
        }
    }
    names.sort();
    scopes.sort();
    Ok((names, scopes))
}

fn read_scope(path: &Path) -> Result<Scope, SecretError> {
    let mut bytes = read_private_file(path, MAX_SCOPE_FILE)?;
    let text = String::from_utf8(std::mem::take(&mut bytes))
        .map_err(|_| invalid(path, "is not UTF-8 text"))?;
    Scope::parse(&text, &path.display().to_string())
}

impl SecretStore {
    pub fn empty() -> SecretStore {
        SecretStore::default()
    }

    /// Loads the layout's secrets directory and `$CREDENTIALS_DIRECTORY` (when
    /// set). Any insecure file or directory is an error: refuse to start.
    pub fn load(layout: &sysward_store::project::Layout) -> Result<SecretStore, SecretError> {
        let creds = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
        SecretStore::load_from(&layout.secrets_dir, creds.as_deref())
    }

    /// Loads from an explicit secrets directory and credentials directory.
    pub fn load_from(
        secrets_dir: &Path,
        credentials_dir: Option<&Path>,
    ) -> Result<SecretStore, SecretError> {
        let mut store = SecretStore::default();
        let mut dir_scopes = Vec::new();
        if let Some(parent) = secrets_dir.parent() {
            if let Ok(meta) = fs::metadata(parent) {
                if meta.mode() & 0o022 != 0 {
                    return Err(insecure(
                        parent,
                        format!("holds the secrets directory and is writable by group or others (mode {:o})", meta.mode() & 0o7777),
                    ));
                }
            }
        }
        if check_dir(secrets_dir, 0o077, "chmod 700")? {
            let (names, scopes) = list_dir(secrets_dir, &mut store.warnings)?;
            for s in &scopes {
                // Every file is checked, also the scope of a secret without a value.
                let scope = read_scope(&secrets_dir.join(format!("{s}.scope")))?;
                dir_scopes.push((s.clone(), scope));
            }
            for name in names {
                let path = secrets_dir.join(&name);
                let value = clean_value(
                    read_private_file(&path, MAX_SECRET_BYTES as u64 + 2)?,
                    &path,
                )?;
                let scope = dir_scopes
                    .iter()
                    .find(|(n, _)| n == &name)
                    .map(|(_, s)| s.clone())
                    .unwrap_or_default();
                store.insert(name, value, scope, Origin::Store(path))?;
            }
        }
        if let Some(cdir) = credentials_dir {
            if !check_dir(cdir, 0o022, "chmod go-w")? {
                return Err(invalid(
                    cdir,
                    "CREDENTIALS_DIRECTORY is set but the directory does not exist",
                ));
            }
            let (names, scopes) = list_dir(cdir, &mut store.warnings)?;
            for name in names {
                let path = cdir.join(&name);
                if store.secrets.contains_key(&name) {
                    return Err(invalid(
                        &path,
                        format!(
                            "secret {name} exists both here and in {}: keep one",
                            secrets_dir.display()
                        ),
                    ));
                }
                let value = clean_value(
                    read_private_file(&path, MAX_SECRET_BYTES as u64 + 2)?,
                    &path,
                )?;
                let scope = if scopes.contains(&name) {
                    read_scope(&cdir.join(format!("{name}.scope")))?
                } else {
                    dir_scopes
                        .iter()
                        .find(|(n, _)| n == &name)
                        .map(|(_, s)| s.clone())
                        .unwrap_or_default()
                };
                store.insert(name, value, scope, Origin::Credential(path))?;
            }
            for s in scopes {
                if !store.secrets.contains_key(&s) {
                    store
                        .warnings
                        .push(format!("{}/{s}.scope: no credential {s}", cdir.display()));
                }
            }
        }
        for (s, _) in &dir_scopes {
            if !store.secrets.contains_key(s) {
                store.warnings.push(format!(
                    "{}/{s}.scope: no secret {s}",
                    secrets_dir.display()
                ));
            }
        }
        let mut w = Vec::new();
        for (name, secret) in &store.secrets {
            if secret.scope.is_empty() {
                w.push(format!(
                    "secret {name} has no scope ({name}.scope): it can go nowhere"
                ));
            }
            if secret.value.0.len() < 8 {
                w.push(format!(
                    "secret {name} is only {} bytes: every occurrence of that text in any output will be shown as {}",
                    secret.value.0.len(),
                    placeholder(name)
                ));
            }
            w.extend(secret.scope.warnings(name));
        }
        store.warnings.extend(w);
        Ok(store)
    }

    fn insert(
        &mut self,
        name: String,
        value: String,
        scope: Scope,
        origin: Origin,
    ) -> Result<(), SecretError> {
        if self.secrets.len() >= MAX_SECRETS {
            return Err(SecretError::BadRequest(format!(
                "more than {MAX_SECRETS} secrets"
            )));
        }
        let total: usize = self.secrets.values().map(|s| s.value.0.len()).sum();
        if total + value.len() > MAX_TOTAL_BYTES {
            let mut b = value.into_bytes();
            redact::wipe(&mut b);
            return Err(SecretError::BadRequest(format!(
                "the secrets hold more than {MAX_TOTAL_BYTES} bytes in all: keep large files (certificates, keystores) out of the secret store"
            )));
        }
        self.secrets.insert(
            name,
            Secret {
                value: SecretValue(value),
                scope,
                origin,
            },
        );
        Ok(())
    }

    /// Problems worth telling the operator at start (never fatal).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    pub fn names(&self) -> Vec<String> {
        self.secrets.keys().cloned().collect()
    }

    /// Names, origins, scopes and sizes — never values.
    pub fn list(&self) -> Vec<SecretInfo> {
        info(&self.secrets)
    }

    /// Paths that `file` grants write secrets to: no action but the delivering
    /// write should read them (give them to the policy as read-protected).
    pub fn delivery_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self
            .secrets
            .values()
            .flat_map(|s| s.scope.grants.iter())
            .filter_map(|g| match g {
                Grant::File { path } => Some(path.clone()),
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

fn info(map: &BTreeMap<String, Secret>) -> Vec<SecretInfo> {
    map.iter()
        .map(|(name, s)| SecretInfo {
            name: name.clone(),
            origin: s.origin.clone(),
            scope: s.scope.lines(),
            bytes: s.value.0.len(),
        })
        .collect()
}

// ---- a session's view ------------------------------------------------------------

/// What a substitution did, for the audit (never the value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Substitution {
    pub name: String,
    /// `argv[2]`, `env PGPASSWORD`, `stdin`, `file /etc/app/pw`.
    pub delivery: String,
    pub program: Option<String>,
    /// The file a `file PATH` grant delivered to (`write_file`).
    #[serde(skip)]
    pub file: Option<PathBuf>,
}

/// The secrets one session can use: the broker's store plus what the operator
/// typed in this session, with the redactor over all of them (and any extra
/// value such as the model API key).
pub struct SessionSecrets {
    store: Arc<SecretStore>,
    session: BTreeMap<String, Secret>,
    extra: Vec<(String, String, String)>,
    redactor: Arc<Redactor>,
}

impl fmt::Debug for SessionSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SessionSecrets(store {:?}, session {:?})",
            self.store,
            self.session.keys().collect::<Vec<_>>()
        )
    }
}

impl Drop for SessionSecrets {
    fn drop(&mut self) {
        for (_, v, _) in &mut self.extra {
            let mut b = std::mem::take(v).into_bytes();
            redact::wipe(&mut b);
        }
    }
}

impl SessionSecrets {
    pub fn new(store: Arc<SecretStore>) -> SessionSecrets {
        let mut s = SessionSecrets {
            store,
            session: BTreeMap::new(),
            extra: Vec::new(),
            redactor: Arc::new(Redactor::default()),
        };
        s.rebuild();
        s
    }

    /// Also redacts `value` (not a usable secret) as `replacement`, e.g. the
    /// model API key as its masked form. Empty values are ignored.
    pub fn add_redaction(&mut self, label: &str, value: &str, replacement: &str) {
        if !value.is_empty() {
            self.extra.push((
                label.to_string(),
                value.to_string(),
                replacement.to_string(),
            ));
            self.rebuild();
        }
    }

    fn rebuild(&mut self) {
        let mut entries = Vec::new();
        for (name, s) in self.store.secrets.iter().chain(self.session.iter()) {
            entries.push(RedactEntry::secret(name, s.value.0.as_bytes()));
        }
        for (label, value, replacement) in &self.extra {
            entries.push(RedactEntry::with_replacement(
                label,
                value.as_bytes(),
                replacement,
            ));
        }
        self.redactor = Arc::new(Redactor::new(entries));
    }

    /// The redactor over every value this session knows. Rebuilt (a new
    /// `Arc`) whenever a session secret is added: fetch it per action.
    pub fn redactor(&self) -> Arc<Redactor> {
        Arc::clone(&self.redactor)
    }

    /// Adds a value the operator typed for `ask_secret`, with the scope shown to
    /// them when they typed it.
    pub fn add_session(
        &mut self,
        name: &str,
        value: String,
        scope: Scope,
    ) -> Result<(), SecretError> {
        if !valid_name(name) {
            return Err(SecretError::BadRequest(format!(
                "{:?} is not a valid secret name (1-64 of letters, digits, _ . -)",
                sysward_store::sanitize::one_line(name, 80)
            )));
        }
        if self.store.secrets.contains_key(name) || self.session.contains_key(name) {
            return Err(SecretError::BadRequest(format!(
                "secret {name} already exists; use {}",
                placeholder(name)
            )));
        }
        if self.session.len() >= MAX_SESSION_SECRETS {
            return Err(SecretError::BadRequest(format!(
                "at most {MAX_SESSION_SECRETS} secrets per session"
            )));
        }
        let value = clean_value(value.into_bytes(), Path::new("the typed secret"))?;
        self.session.insert(
            name.to_string(),
            Secret {
                value: SecretValue(value),
                scope,
                origin: Origin::Session,
            },
        );
        self.rebuild();
        Ok(())
    }

    fn get(&self, name: &str) -> Option<&Secret> {
        self.session
            .get(name)
            .or_else(|| self.store.secrets.get(name))
    }

    pub fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .store
            .secrets
            .keys()
            .chain(self.session.keys())
            .cloned()
            .collect();
        v.sort();
        v
    }

    pub fn list(&self) -> Vec<SecretInfo> {
        let mut v = info(&self.store.secrets);
        v.extend(info(&self.session));
        v
    }

    /// What `/secrets` shows: names, origins, scopes, sizes.
    pub fn describe(&self) -> String {
        let list = self.list();
        if list.is_empty() {
            return describe_session_secrets();
        }
        let mut out =
            String::from("secrets (placeholders the model may use; values are never shown):\n");
        for i in list {
            out.push_str(&format!("  {}  {}\n", placeholder(&i.name), i.line()));
        }
        out.trim_end().to_string()
    }

    /// Resolves one exact placeholder for `grant`.
    fn resolve(&self, name: &str, grant: &Grant) -> Result<&str, SecretError> {
        let Some(secret) = self.get(name) else {
            return Err(SecretError::Unknown {
                name: name.to_string(),
                known: self.names(),
            });
        };
        if !secret.scope.allows(grant) {
            return Err(SecretError::OutOfScope {
                name: name.to_string(),
                wanted: grant.describe(),
                allowed: secret.scope.grants.iter().map(Grant::describe).collect(),
            });
        }
        Ok(&secret.value.0)
    }

    /// Substitutes secrets in a command about to run `program` (the absolute
    /// path the executor will exec). `argv[0]` is the program as requested;
    /// `env` holds only variables the request asked for (not the broker's fixed
    /// environment). Everything is checked before anything is replaced: on an
    /// error nothing was changed.
    pub fn substitute_command(
        &self,
        program: &Path,
        argv: &mut [String],
        env: &mut [(String, String)],
        stdin: Option<&mut String>,
    ) -> Result<Vec<Substitution>, SecretError> {
        self.substitute_command_with(program, argv, env, stdin, None)
    }

    /// [`SessionSecrets::substitute_command`], writing a `tmpfile` grant's
    /// value to a one-shot file of `files` (without one, such a grant is an
    /// error and nothing is changed).
    pub fn substitute_command_with(
        &self,
        program: &Path,
        argv: &mut [String],
        env: &mut [(String, String)],
        mut stdin: Option<&mut String>,
        mut files: Option<&mut sysward_store::oneshot::OneShotFiles>,
    ) -> Result<Vec<Substitution>, SecretError> {
        let plan = self.plan_command(program, argv, env, stdin.as_deref().map(String::as_str))?;
        if files.is_none()
            && plan
                .iter()
                .any(|(slot, _, _)| matches!(slot, Slot::ArgFile(_)))
        {
            return Err(SecretError::BadRequest(
                "a one-shot secret file cannot be prepared for this action".to_string(),
            ));
        }
        let mut done = Vec::new();
        for (slot, value, mut record) in plan {
            if let (Slot::ArgFile(i), Some(files)) = (&slot, files.as_deref_mut()) {
                let path = files.write(value.as_bytes()).map_err(|e| {
                    SecretError::BadRequest(format!("cannot write the one-shot secret file: {e}"))
                })?;
                argv[*i] = path.display().to_string();
                record.delivery = format!("{} {}", record.delivery, path.display());
                done.push(record);
                continue;
            }
            let value = value.to_string();
            match slot {
                Slot::ArgFile(_) => {}
                Slot::Arg(i) => argv[i] = value,
                Slot::Env(i) => env[i].1 = value,
                Slot::Stdin => {
                    if let Some(s) = stdin.as_deref_mut() {
                        *s = value;
                    }
                }
            }
            done.push(record);
        }
        Ok(done)
    }

    /// The checks of [`SessionSecrets::substitute_command`] without
    /// substituting: call it before the decision and the approval prompt, so
    /// nobody is asked to approve a request that cannot run.
    pub fn check_command(
        &self,
        program: &Path,
        argv: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<Vec<Substitution>, SecretError> {
        Ok(self
            .plan_command(program, argv, env, stdin)?
            .into_iter()
            .map(|(_, _, record)| record)
            .collect())
    }

    fn plan_command(
        &self,
        program: &Path,
        argv: &[String],
        env: &[(String, String)],
        stdin: Option<&str>,
    ) -> Result<Vec<(Slot, &str, Substitution)>, SecretError> {
        let prog = program.to_path_buf();
        let mut plan = Vec::new();
        if argv.first().is_some_and(|a0| contains_placeholder(a0))
            || contains_placeholder(&program.to_string_lossy())
        {
            return Err(SecretError::ProgramPlaceholder);
        }
        for (i, a) in argv.iter().enumerate().skip(1) {
            let one_shot = Grant::TmpFile {
                program: prog.clone(),
            };
            if let Some(name) = exact_placeholder(a)
                .filter(|n| self.get(n).is_some_and(|s| s.scope.allows(&one_shot)))
            {
                let v = self.resolve(name, &one_shot)?;
                plan.push((
                    Slot::ArgFile(i),
                    v,
                    sub(name, format!("argv[{i}] as a one-shot file"), Some(program)),
                ));
            } else if let Some(name) = exact_placeholder(a) {
                let v = self.resolve(
                    name,
                    &Grant::Arg {
                        program: prog.clone(),
                    },
                )?;
                plan.push((
                    Slot::Arg(i),
                    v,
                    sub(name, format!("argv[{i}]"), Some(program)),
                ));
            } else if contains_placeholder(a) {
                return Err(SecretError::Embedded {
                    field: format!("argument {i}"),
                });
            }
        }
        for (i, (k, v)) in env.iter().enumerate() {
            if contains_placeholder(k) {
                return Err(SecretError::Embedded {
                    field: "an environment variable name".to_string(),
                });
            }
            if let Some(name) = exact_placeholder(v) {
                let grant = Grant::Env {
                    program: prog.clone(),
                    var: k.clone(),
                };
                let value = self.resolve(name, &grant)?;
                plan.push((
                    Slot::Env(i),
                    value,
                    sub(name, format!("env {k}"), Some(program)),
                ));
            } else if contains_placeholder(v) {
                return Err(SecretError::Embedded {
                    field: format!("environment variable {k}"),
                });
            }
        }
        if let Some(s) = stdin {
            if let Some(name) = exact_placeholder(s) {
                let value = self.resolve(
                    name,
                    &Grant::Stdin {
                        program: prog.clone(),
                    },
                )?;
                plan.push((
                    Slot::Stdin,
                    value,
                    sub(name, "stdin".to_string(), Some(program)),
                ));
            } else if contains_placeholder(s) {
                return Err(SecretError::Embedded {
                    field: "stdin".to_string(),
                });
            }
        }
        Ok(plan)
    }

    /// A `shell` script never receives a secret: any placeholder in it is an
    /// error.
    pub fn check_shell(&self, script: &str) -> Result<(), SecretError> {
        if contains_placeholder(script) {
            return Err(SecretError::InShell);
        }
        Ok(())
    }

    /// `write_file`: `content` exactly a placeholder → the value, when the scope
    /// grants `file PATH` for this exact path (absolute and normalized).
    pub fn substitute_file_content(
        &self,
        path: &Path,
        content: &mut String,
    ) -> Result<Vec<Substitution>, SecretError> {
        self.check_text("the file path", &path.to_string_lossy())?;
        if let Some(name) = exact_placeholder(content) {
            let normalized = normalized_absolute(&path.to_string_lossy()).map_err(|e| {
                SecretError::BadRequest(format!(
                    "a secret is written only to an exact, normalized absolute path: {e}"
                ))
            })?;
            let value = self
                .resolve(
                    name,
                    &Grant::File {
                        path: normalized.clone(),
                    },
                )?
                .to_string();
            let mut record = sub(name, format!("file {}", normalized.display()), None);
            record.file = Some(normalized);
            *content = value;
            return Ok(vec![record]);
        }
        if contains_placeholder(content) {
            return Err(SecretError::Embedded {
                field: "the file content".to_string(),
            });
        }
        Ok(Vec::new())
    }

    /// Checks a file operation before the decision: only `write_file`'s
    /// content may be a placeholder (for a path its scope grants); a
    /// placeholder in any other field (paths, `edit_file`/`append_file` text,
    /// a validate command) is refused. `reason` fields are never substituted
    /// and are not checked.
    pub fn check_file_op(&self, op: &FileOp) -> Result<Vec<Substitution>, SecretError> {
        let mut op = op.clone();
        let subs = self.substitute_file_op(&mut op);
        if let FileOp::WriteFile(a) = &mut op {
            let mut b = std::mem::take(&mut a.content).into_bytes();
            redact::wipe(&mut b);
        }
        subs
    }

    /// Substitutes in a file operation (right before it goes to the
    /// executor). A written secret gets mode 0600 unless the request gave a
    /// mode; a mode readable by others is refused.
    pub fn substitute_file_op(&self, op: &mut FileOp) -> Result<Vec<Substitution>, SecretError> {
        let inspect = |e: serde_json::Error| {
            SecretError::BadRequest(format!("cannot inspect the file operation: {e}"))
        };
        let fields = match &*op {
            FileOp::WriteFile(a) => {
                if exact_placeholder(&a.content).is_none() && contains_placeholder(&a.content) {
                    return Err(SecretError::Embedded {
                        field: "the file content".to_string(),
                    });
                }
                // The content is judged here; every other field below.
                let mut v = serde_json::to_value(a).map_err(inspect)?;
                if let Some(o) = v.as_object_mut() {
                    o.remove("content");
                }
                v
            }
            other => serde_json::to_value(other).map_err(inspect)?,
        };
        check_json_strings(self, &fields, "")?;
        let FileOp::WriteFile(a) = op else {
            return Ok(Vec::new());
        };
        if exact_placeholder(&a.content).is_none() {
            return Ok(Vec::new());
        }
        match &a.mode {
            None => a.mode = Some("0600".to_string()),
            Some(m) => {
                let bits = u32::from_str_radix(m.trim_start_matches("0o"), 8)
                    .map_err(|_| SecretError::BadRequest(format!("mode {m:?} is not octal")))?;
                if bits & 0o007 != 0 {
                    return Err(SecretError::BadRequest(format!(
                        "a file holding a secret may not be accessible to other users (mode {m}); use 0600 or 0640"
                    )));
                }
            }
        }
        let path = PathBuf::from(&a.path);
        self.substitute_file_content(&path, &mut a.content)
    }

    /// Substitutes in a whole executor spec: a command's argv (argv[0] is the
    /// resolved program) and environment, or a file operation. Call it on the
    /// spec only — never on the plan, which stays with placeholders for the
    /// audit and the display.
    pub fn substitute_spec(&self, spec: &mut ExecSpec) -> Result<Vec<Substitution>, SecretError> {
        self.substitute_spec_with(spec, None)
    }

    /// [`SessionSecrets::substitute_spec`] with a holder for the action's
    /// one-shot files (`tmpfile` grants).
    pub fn substitute_spec_with(
        &self,
        spec: &mut ExecSpec,
        files: Option<&mut sysward_store::oneshot::OneShotFiles>,
    ) -> Result<Vec<Substitution>, SecretError> {
        match spec {
            ExecSpec::Command { command, .. } => {
                let program = PathBuf::from(command.argv.first().map(String::as_str).unwrap_or(""));
                self.check_text("the working directory", &command.cwd)?;
                // The broker's own variables never hold a placeholder and no
                // scope can name them (`forbidden_var`), so the whole
                // environment is checked as the request's.
                self.substitute_command_with(
                    &program,
                    &mut command.argv,
                    &mut command.env,
                    command.stdin.as_mut(),
                    files,
                )
            }
            ExecSpec::File { op, env, .. } => {
                for (k, v) in env.iter() {
                    self.check_text("the environment", k)?;
                    self.check_text("the environment", v)?;
                }
                self.substitute_file_op(op)
            }
        }
    }

    /// Any other field (a path, cwd, edit_file's strings, append_file's
    /// content): a placeholder there is an error, nothing is substituted.
    pub fn check_text(&self, field: &str, text: &str) -> Result<(), SecretError> {
        if contains_placeholder(text) {
            return Err(SecretError::Embedded {
                field: field.to_string(),
            });
        }
        Ok(())
    }
}

/// Refuses a placeholder in any string of `v` except under a `reason` key.
fn check_json_strings(
    s: &SessionSecrets,
    v: &serde_json::Value,
    key: &str,
) -> Result<(), SecretError> {
    use serde_json::Value;
    match v {
        Value::String(t) if key != "reason" => s.check_text(&format!("the {key} field"), t),
        Value::Array(items) => items.iter().try_for_each(|i| check_json_strings(s, i, key)),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, i)| check_json_strings(s, i, k)),
        _ => Ok(()),
    }
}

enum Slot {
    Arg(usize),
    /// The argument becomes the path of a one-shot file holding the value.
    ArgFile(usize),
    Env(usize),
    Stdin,
}

fn sub(name: &str, delivery: String, program: Option<&Path>) -> Substitution {
    Substitution {
        name: name.to_string(),
        delivery,
        program: program.map(|p| p.display().to_string()),
        file: None,
    }
}

/// What `/secrets` shows when the session has no secret at all.
pub fn describe_session_secrets() -> String {
    "no secrets in this session (the operator can store them in the secrets directory, or type one when the model uses ask_secret in the CLI)".to_string()
}

// ---- ask_secret ---------------------------------------------------------------

/// The arguments of `ask_secret`: the name the model will use, the program
/// (bare name or absolute path, resolved by the broker like exec's) and how it
/// is delivered: `arg`, `stdin`, `env:VAR` or `file:/abs/path`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskSecretArgs {
    pub name: String,
    #[serde(default)]
    pub program: Option<String>,
    pub delivery: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// The scope of a typed secret from `ask_secret`'s arguments. `program` is the
/// resolved absolute path (ignored for `file:`).
pub fn session_scope(program: Option<&Path>, delivery: &str) -> Result<Scope, SecretError> {
    let need_program = || {
        program.map(Path::to_path_buf).ok_or_else(|| {
            SecretError::BadRequest(
                "ask_secret needs `program`: the program that will receive the secret".to_string(),
            )
        })
    };
    let grant = if delivery == "arg" {
        Grant::Arg {
            program: need_program()?,
        }
    } else if delivery == "stdin" {
        Grant::Stdin {
            program: need_program()?,
        }
    } else if let Some(var) = delivery.strip_prefix("env:") {
        if !valid_var(var) || forbidden_var(var) {
            return Err(SecretError::BadRequest(format!(
                "{:?} is not an environment variable a secret may use",
                sysward_store::sanitize::one_line(var, 80)
            )));
        }
        Grant::Env {
            program: need_program()?,
            var: var.to_string(),
        }
    } else if let Some(path) = delivery.strip_prefix("file:") {
        Grant::File {
            path: normalized_absolute(path).map_err(SecretError::BadRequest)?,
        }
    } else {
        return Err(SecretError::BadRequest(
            "delivery must be `arg`, `stdin`, `env:VAR` or `file:/absolute/path`".to_string(),
        ));
    };
    if let Some(p) = grant.program() {
        normalized_absolute(&p.to_string_lossy()).map_err(SecretError::BadRequest)?;
    }
    Ok(Scope {
        grants: vec![grant],
    })
}

/// The operator's prompt for `ask_secret` (sanitized, one field per line).
pub fn render_ask_prompt(name: &str, scope: &Scope, reason: &str) -> String {
    let l = |t: &str| sysward_store::sanitize::one_line(t, 300);
    let mut warn = scope.warnings(name).join("\n│ warning:  ");
    if !warn.is_empty() {
        warn = format!("│ warning:  {warn}\n");
    }
    format!(
        "\n┌─ the model asks for a secret ──────────────\n│ name:     {}\n│ goes to:  {}\n│ reason:   {}\n{warn}└─ type the value (not shown); an empty line refuses\n",
        l(name),
        scope.grants.iter().map(Grant::describe).collect::<Vec<_>>().join("; "),
        l(reason),
    )
}

// ---- `sysward secrets list` ------------------------------------------------------

/// What `sysward secrets list --json` prints (never a value).
pub fn list_json(
    layout: &sysward_store::project::Layout,
    store: &SecretStore,
) -> serde_json::Value {
    serde_json::json!({
        "secrets_dir": layout.secrets_dir.display().to_string(),
        "secrets": store.list(),
        "warnings": store.warnings(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn session_with(name: &str, value: &str, scope: &str) -> SessionSecrets {
        let mut s = SessionSecrets::new(Arc::new(SecretStore::empty()));
        s.add_session(
            name,
            value.to_string(),
            Scope::parse(scope, "test").unwrap(),
        )
        .unwrap();
        s
    }

    #[test]
    fn placeholders_are_recognised() {
        assert_eq!(exact_placeholder("{{secret:db}}"), Some("db"));
        assert_eq!(exact_placeholder("{{secret:db.prod-1}}"), Some("db.prod-1"));
        assert_eq!(exact_placeholder(" {{secret:db}}"), None);
        assert_eq!(exact_placeholder("{{secret:../x}}"), None);
        assert_eq!(exact_placeholder("{{secret:}}"), None);
        for s in [
            "x{{secret:db}}",
            "{{ secret:db}}",
            "{{SECRET : db}}",
            "a {{secret:",
            "{{secret:db",
        ] {
            assert!(contains_placeholder(s), "{s}");
        }
        for s in ["{{secrets}}", "{secret:db}", "secret:db", "{{ other }}"] {
            assert!(!contains_placeholder(s), "{s}");
        }
    }

    #[test]
    fn scope_files_parse_and_refuse() {
        let s = Scope::parse(
            "# db\narg /usr/bin/psql\nenv /usr/bin/psql PGPASSWORD  # comment\nstdin /usr/bin/psql\nfile /etc/app/pw\n\n",
            "t",
        )
        .unwrap();
        assert_eq!(s.grants.len(), 4);
        assert_eq!(s.lines()[1], "env /usr/bin/psql PGPASSWORD");
        for bad in [
            "arg psql",
            "arg /usr/bin/../bin/sh",
            "env /usr/bin/psql LD_PRELOAD",
            "env /usr/bin/psql 1X",
            "file /etc/app/",
            "exec /bin/x",
            "env /usr/bin/psql",
            "arg /usr/bin/psql extra",
        ] {
            let e = Scope::parse(bad, "f.scope").unwrap_err().to_string();
            assert!(e.starts_with("f.scope:1:"), "{bad}: {e}");
        }
        assert!(Scope::parse("", "t").unwrap().is_empty());
        let w = Scope::parse(
            "arg /usr/bin/bash\narg /usr/bin/python3.11\nfile /tmp/x",
            "t",
        )
        .unwrap()
        .warnings("db");
        assert_eq!(w.len(), 3, "{w:?}");
    }

    #[test]
    fn whole_argument_substitution_in_scope() {
        let s = session_with(
            "db",
            "pa ss'word;$(x)",
            "arg /usr/bin/psql\nenv /usr/bin/psql PGPASSWORD\nstdin /usr/bin/psql",
        );
        let mut argv = vec![
            "psql".to_string(),
            "-W".to_string(),
            "{{secret:db}}".to_string(),
        ];
        let mut env = vec![("PGPASSWORD".to_string(), "{{secret:db}}".to_string())];
        let mut stdin = "{{secret:db}}".to_string();
        let subs = s
            .substitute_command(
                Path::new("/usr/bin/psql"),
                &mut argv,
                &mut env,
                Some(&mut stdin),
            )
            .unwrap();
        assert_eq!(argv[2], "pa ss'word;$(x)");
        assert_eq!(env[0].1, "pa ss'word;$(x)");
        assert_eq!(stdin, "pa ss'word;$(x)");
        let d: Vec<&str> = subs.iter().map(|s| s.delivery.as_str()).collect();
        assert_eq!(d, ["argv[2]", "env PGPASSWORD", "stdin"]);
        assert!(!format!("{subs:?}").contains("word"));
    }

    #[test]
    fn errors_change_nothing_and_never_show_the_value() {
        let s = session_with("db", "topsecret", "arg /usr/bin/psql");
        let mut argv = vec![
            "psql".to_string(),
            "{{secret:db}}".to_string(),
            "--x={{secret:db}}".to_string(),
        ];
        let e = s
            .substitute_command(Path::new("/usr/bin/psql"), &mut argv, &mut [], None)
            .unwrap_err();
        assert!(matches!(e, SecretError::Embedded { .. }));
        assert_eq!(argv[1], "{{secret:db}}", "nothing substituted on error");
        let mut env = vec![("PGPASSWORD".to_string(), "{{secret:db}}".to_string())];
        let e = s
            .substitute_command(
                Path::new("/usr/bin/psql"),
                &mut ["psql".to_string()],
                &mut env,
                None,
            )
            .unwrap_err();
        assert!(matches!(e, SecretError::OutOfScope { .. }), "{e}");
        assert!(!e.to_string().contains("topsecret"));
    }
}
