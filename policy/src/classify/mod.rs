//! Simple commands → effects: wrappers unwrapped, programs looked up in the
//! catalog, redirections and environment applied.

mod args;
mod catalog;
mod containers;
mod files;
mod git;
mod net;
mod packages;
mod storage;
mod system;
mod wrappers;

use crate::facts::PathFacts;
use crate::paths::{self, Target};
use crate::shell::{Analyzer, Arg, Cmd, Item, Redir, Stdin};
use crate::types::{Category, Risk};
use std::path::PathBuf;

/// How a command writes a path (decides the profile's write set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Writes the file in place (created in its parent when missing).
    File,
    /// Creates or renames an entry in the parent directory.
    Create,
    /// Writes anything beneath the path.
    Tree,
    /// Moves the entry itself away (its parent is written; moving a protected
    /// directory or an ancestor of one is refused).
    Move,
}

/// What one simple command does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub category: Category,
    pub risk: Risk,
    pub reads: Vec<Target>,
    /// Files whose current content a file tool reads to change them (an
    /// edit, an append): the never-readable paths apply to them, the
    /// outside-project read flag does not (they are judged as writes).
    pub edits: Vec<Target>,
    pub writes: Vec<(Target, WriteKind)>,
    pub deletes: Vec<Target>,
    /// Deletes or changes recursively.
    pub recursive: bool,
    pub network: bool,
    /// Capabilities the action keeps.
    pub caps: Vec<&'static str>,
    /// Needs to signal processes outside the action (kill).
    pub signals: bool,
    pub mount: bool,
    /// Writes system-wide (package managers, user admin): everything except
    /// the protected set.
    pub wide_write: bool,
    pub reason: String,
    /// The unwrapped argv (operator rules match it).
    pub argv: Vec<String>,
    /// One-line rendering.
    pub text: String,
    /// Could not be analysed safely: denied whatever the policy says.
    pub unanalysable: bool,
    /// Made by a file tool (argv[0] is its name): the write rules apply.
    pub file_tool: bool,
    /// Exactly a netfilter listing ([`crate::netfilter`]): it keeps
    /// CAP_NET_ADMIN when it is the whole request.
    pub netfilter_list: bool,
    /// Reads the web for the model (`web_fetch`, `web_search`): needs
    /// ALLOW_WEB_RESEARCH on top of ALLOW_NETWORK.
    pub web_research: bool,
}

impl Effect {
    pub fn new(category: Category, risk: Risk, reason: impl Into<String>) -> Effect {
        Effect {
            category,
            risk,
            reads: Vec::new(),
            edits: Vec::new(),
            writes: Vec::new(),
            deletes: Vec::new(),
            recursive: false,
            network: false,
            caps: Vec::new(),
            signals: false,
            mount: false,
            wide_write: false,
            reason: reason.into(),
            argv: Vec::new(),
            text: String::new(),
            unanalysable: false,
            file_tool: false,
            netfilter_list: false,
            web_research: false,
        }
    }

    pub fn ro(reason: impl Into<String>) -> Effect {
        Effect::new(Category::ReadOnly, Risk::Safe, reason)
    }

    /// An unanalysed program (not in the catalog, an interpreter): medium.
    pub fn unknown(reason: impl Into<String>) -> Effect {
        Effect::new(Category::Unknown, Risk::Medium, reason)
    }

    /// A construct that hides what runs (`$(…)` as a command, eval, a shell
    /// reading its input): high.
    pub fn evasive(reason: impl Into<String>) -> Effect {
        Effect::new(Category::Unknown, Risk::High, reason)
    }

    pub fn critical(category: Category, reason: impl Into<String>) -> Effect {
        Effect::new(category, Risk::Critical, reason)
    }

    pub fn with_caps(mut self, caps: &[&'static str]) -> Effect {
        for c in caps {
            if !self.caps.contains(c) {
                self.caps.push(c);
            }
        }
        self
    }

    /// Marks a netfilter listing (see [`crate::netfilter`]).
    pub fn netfilter_listing(mut self) -> Effect {
        self.netfilter_list = true;
        self
    }

    pub fn net(mut self) -> Effect {
        self.network = true;
        self
    }

    pub fn wide(mut self) -> Effect {
        self.wide_write = true;
        self
    }

    pub fn raise(&mut self, risk: Risk) {
        if risk > self.risk {
            self.risk = risk;
        }
    }

    /// Folds another effect of the same command into this one.
    pub fn merge(&mut self, other: Effect) {
        if other.category.weight() > self.category.weight()
            || (self.category == Category::ReadOnly && other.category != Category::ReadOnly)
        {
            self.category = other.category;
            self.reason = other.reason;
        }
        self.raise(other.risk);
        self.reads.extend(other.reads);
        self.writes.extend(other.writes);
        self.deletes.extend(other.deletes);
        self.recursive |= other.recursive;
        self.network |= other.network;
        for c in other.caps {
            if !self.caps.contains(&c) {
                self.caps.push(c);
            }
        }
        self.signals |= other.signals;
        self.mount |= other.mount;
        self.wide_write |= other.wide_write;
        self.unanalysable |= other.unanalysable;
    }
}

/// Context of one command's classification.
pub struct Cx<'a> {
    pub paths: &'a dyn PathFacts,
    pub an: &'a mut Analyzer,
    pub cwd: Option<PathBuf>,
    pub depth: usize,
    pub stdin: Stdin,
}

impl Cx<'_> {
    pub fn target(&self, arg: &Arg) -> Target {
        paths::resolve(arg, self.cwd.as_deref(), self.paths)
    }

    /// Analyses a nested script (`sh -c`, `su -c`, `watch`, …).
    pub fn script(&mut self, text: &str) {
        self.an.script(text, self.cwd.clone(), self.depth + 1);
    }

    /// Treats the argv as a command of its own, nested one level deeper.
    pub fn nested_argv(&mut self, argv: Vec<Arg>) {
        if argv.is_empty() {
            return;
        }
        self.an.items.push(Item::Cmd(Cmd {
            assigns: Vec::new(),
            argv,
            redirs: Vec::new(),
            cwd: self.cwd.clone(),
            stdin: self.stdin.clone(),
            depth: self.depth + 1,
        }));
    }

    pub fn cwd_target(&self) -> Target {
        match &self.cwd {
            Some(c) => Target::Beneath(paths::real(c, self.paths)),
            None => Target::Unresolved,
        }
    }
}

/// Classifies everything an analyzer collected (and whatever classification
/// adds to it: nested scripts, unwrapped commands).
pub fn classify_items(an: &mut Analyzer, paths: &dyn PathFacts) -> Vec<Effect> {
    let mut out = Vec::new();
    let mut guard = 0usize;
    let mut next = 0usize;
    while next < an.items.len() {
        let item = std::mem::replace(&mut an.items[next], Item::Opaque(String::new()));
        next += 1;
        guard += 1;
        if guard > 100_000 {
            let mut e = Effect::evasive("too many commands to analyse");
            e.unanalysable = true;
            out.push(e);
            break;
        }
        match item {
            Item::Cmd(cmd) => {
                let e = classify_cmd(cmd, an, paths);
                out.push(e);
            }
            Item::Opaque(what) => {
                let mut e = Effect::evasive(format!("{what}: not analysable"));
                e.text = format!("<{what}>");
                out.push(e);
            }
            Item::Unanalysable(what) => {
                let mut e = Effect::evasive(format!("{what}: refused unanalysed"));
                e.unanalysable = true;
                e.text = format!("<{what}>");
                out.push(e);
            }
            Item::Critical(what) => {
                let mut e = Effect::critical(Category::Destructive, what.clone());
                e.text = format!("<{what}>");
                out.push(e);
            }
        }
    }
    out
}

/// Variables safe to set for one command.
fn benign_env(name: &str, value: &Arg) -> bool {
    if name.starts_with("LC_") {
        return true;
    }
    // Exactly a secret placeholder: the broker puts a value there only when
    // the secret's scope, written by the operator, grants this variable of
    // this program; any other use is refused before the decision.
    if !dangerous_var(name) && value.plain().is_some_and(is_secret_placeholder) {
        return true;
    }
    match name {
        "LANG"
        | "LANGUAGE"
        | "TZ"
        | "TERM"
        | "COLUMNS"
        | "LINES"
        | "NO_COLOR"
        | "DEBIAN_FRONTEND"
        | "DEBCONF_NONINTERACTIVE_SEEN"
        | "APT_LISTCHANGES_FRONTEND"
        | "NEEDRESTART_MODE"
        | "NEEDRESTART_SUSPEND"
        | "SYSTEMD_COLORS"
        | "SYSTEMD_LOG_LEVEL"
        | "UCF_FORCE_CONFFOLD"
        | "UCF_FORCE_CONFFNEW"
        | "TIME_STYLE"
        | "GREP_COLORS"
        | "LS_COLORS"
        | "http_proxy"
        | "https_proxy"
        | "no_proxy"
        | "HTTP_PROXY"
        | "HTTPS_PROXY"
        | "NO_PROXY" => true,
        "PAGER" | "SYSTEMD_PAGER" | "GIT_PAGER" | "MANPAGER" => {
            value.plain().is_some_and(|v| v.is_empty() || v == "cat")
        }
        _ => false,
    }
}

/// `{{secret:NAME}}` and nothing else.
fn is_secret_placeholder(v: &str) -> bool {
    v.strip_prefix("{{secret:")
        .and_then(|r| r.strip_suffix("}}"))
        .is_some_and(|n| {
            !n.is_empty()
                && n.len() <= 64
                && n.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        })
}

/// Variables whose assignment changes what later commands run.
fn dangerous_var(name: &str) -> bool {
    name.starts_with("LD_")
        || name.starts_with("BASH_")
        || name.starts_with("GIT_")
        || name.starts_with("PYTHON")
        || name.starts_with("PERL")
        || name.starts_with("RUBY")
        || name.starts_with("NODE_")
        || matches!(
            name,
            "PATH"
                | "ENV"
                | "IFS"
                | "PS4"
                | "PROMPT_COMMAND"
                | "SHELLOPTS"
                | "BASHOPTS"
                | "CDPATH"
                | "GLOBIGNORE"
                | "HOME"
                | "PAGER"
                | "SYSTEMD_PAGER"
                | "MANPAGER"
                | "EDITOR"
                | "VISUAL"
                | "LESSOPEN"
                | "LESSCLOSE"
                | "LESSKEY"
                | "SSH_ASKPASS"
                | "SUDO_ASKPASS"
                | "TMPDIR"
                | "SHELL"
                | "XDG_CONFIG_HOME"
        )
}

/// Literal words allowed as program names when given with a directory.
const BIN_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
];

/// The program name a command word stands for, or why it cannot be known.
pub fn program_name(word: &Arg) -> Result<String, Box<Effect>> {
    let Some(t) = word.plain() else {
        return Err(Box::new(Effect::evasive(format!(
            "the command name `{}` is computed at run time",
            crate::shell::words::clip(&word.text)
        ))));
    };
    if t.is_empty() {
        return Err(Box::new(Effect::evasive("an empty command name")));
    }
    if let Some((dir, base)) = t.rsplit_once('/') {
        let dir = if dir.is_empty() { "/" } else { dir };
        let norm = paths::normalize(std::path::Path::new(dir));
        if BIN_DIRS.iter().any(|d| std::path::Path::new(d) == norm) && !base.is_empty() {
            return Ok(base.to_string());
        }
        return Err(Box::new(Effect::unknown(format!(
            "runs the program {t} by path (not a system binary directory)"
        ))));
    }
    Ok(t.to_string())
}

fn render(argv: &[Arg]) -> String {
    let mut out = String::new();
    for (i, a) in argv.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&quote(a));
    }
    out
}

fn quote(a: &Arg) -> String {
    let t = a.text.replace(['\n', '\r'], " ");
    if !a.literal || a.glob {
        return t;
    }
    if t.is_empty() {
        return "''".to_string();
    }
    if t.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%^".contains(&b))
    {
        t
    } else {
        format!("'{}'", t.replace('\'', "'\\''"))
    }
}

fn redirect_effects(cmd: &Cmd, cx: &Cx<'_>, base: &mut Effect, text: &mut String) {
    for r in &cmd.redirs {
        match r {
            Redir::Write(a) => {
                text.push_str(" > ");
                text.push_str(&quote(a));
                if let Some(e) = device_write(a) {
                    base.merge(e);
                    continue;
                }
                let t = cx.target(a);
                base.writes.push((t, WriteKind::File));
            }
            Redir::Read(a) => {
                text.push_str(" < ");
                text.push_str(&quote(a));
                if let Some(p) = a.plain().filter(|p| p.starts_with("/dev/")) {
                    if p.starts_with("/dev/tcp/") || p.starts_with("/dev/udp/") {
                        if let Some(e) = device_write(a) {
                            base.merge(e);
                        }
                    }
                    continue;
                }
                let t = cx.target(a);
                base.reads.push(t);
            }
        }
    }
}

/// Writes to device files: the harmless ones are ignored, block devices and
/// kernel memory are critical, the rest is admin.
pub fn device_write(a: &Arg) -> Option<Effect> {
    let t = a.plain()?;
    let p = paths::normalize(std::path::Path::new(t));
    let s = p.to_string_lossy();
    if !t.starts_with('/') {
        return None;
    }
    if matches!(
        s.as_ref(),
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "/dev/zero" | "/dev/full"
    ) || s.starts_with("/dev/fd/")
        || s.starts_with("/proc/self/fd/")
        || s.starts_with("/dev/pts/")
    {
        return Some(Effect::ro("writes to a standard stream"));
    }
    if is_block_device(&s) {
        return Some(Effect::critical(
            Category::Destructive,
            format!("writes straight onto the block device {s}"),
        ));
    }
    if s.starts_with("/dev/tcp/") || s.starts_with("/dev/udp/") {
        return Some(
            Effect::new(
                Category::Network,
                Risk::Medium,
                format!("opens a network connection through {s}"),
            )
            .net(),
        );
    }
    if s == "/proc/sysrq-trigger" {
        return Some(Effect::critical(
            Category::Reboot,
            "writes to /proc/sysrq-trigger (crash, reboot)",
        ));
    }
    if s.starts_with("/dev/") {
        return Some(
            Effect::new(
                Category::Admin,
                Risk::High,
                format!("writes to the device {s}"),
            )
            .with_caps(&["CAP_DAC_OVERRIDE"]),
        );
    }
    if s.starts_with("/proc/sys/") || s.starts_with("/sys/") {
        let mut e = Effect::new(
            Category::Admin,
            Risk::High,
            format!("changes a kernel setting ({s})"),
        )
        .with_caps(&["CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_DAC_OVERRIDE"]);
        e.writes.push((Target::Path(p), WriteKind::File));
        return Some(e);
    }
    None
}

pub fn is_block_device(s: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "/dev/sd",
        "/dev/hd",
        "/dev/vd",
        "/dev/xvd",
        "/dev/nvme",
        "/dev/mmcblk",
        "/dev/dm-",
        "/dev/md",
        "/dev/loop",
        "/dev/mapper/",
        "/dev/disk/",
        "/dev/sr",
        "/dev/nbd",
        "/dev/rbd",
        "/dev/zd",
        "/dev/bcache",
        "/dev/mtd",
        "/dev/ubi",
        "/dev/root",
    ];
    PREFIXES.iter().any(|p| s.starts_with(p)) || matches!(s, "/dev/mem" | "/dev/kmem" | "/dev/port")
}

fn classify_cmd(cmd: Cmd, an: &mut Analyzer, paths: &dyn PathFacts) -> Effect {
    let mut cx = Cx {
        paths,
        an,
        cwd: cmd.cwd.clone(),
        depth: cmd.depth,
        stdin: cmd.stdin.clone(),
    };
    let mut base = Effect::ro("reads only");
    let mut redir_text = String::new();
    redirect_effects(&cmd, &cx, &mut base, &mut redir_text);
    if !base.writes.is_empty() && base.category == Category::ReadOnly {
        base.category = Category::Write;
        base.reason = "redirects output into a file".to_string();
        base.raise(Risk::Low);
    }
    let mut assigns_text = String::new();
    for (name, value) in &cmd.assigns {
        assigns_text.push_str(&format!("{name}={} ", quote(value)));
    }
    if cmd.argv.is_empty() {
        for (name, _) in &cmd.assigns {
            if dangerous_var(name) {
                base.merge(Effect::evasive(format!(
                    "sets {name}, which changes what later commands run"
                )));
            }
        }
        base.text = format!("{}{}", assigns_text.trim_end(), redir_text);
        if base.text.is_empty() {
            base.text = ":".to_string();
        }
        return base;
    }
    for (name, value) in &cmd.assigns {
        if !benign_env(name, value) {
            base.merge(Effect::evasive(format!(
                "runs with {name}={} in its environment",
                crate::shell::words::clip(&value.text)
            )));
        }
    }
    let words = cmd.argv.len();
    let (mut effect, argv) = wrappers::unwrap_and_classify(cmd.argv, &mut cx);
    // A listing keeps its capability only as the command itself: not run
    // through a wrapper (`sudo`, `env`, `timeout`), not with variables.
    if argv.len() != words || !cmd.assigns.is_empty() {
        effect.netfilter_list = false;
    }
    effect.merge(base);
    effect.argv = argv.iter().map(|a| a.text.clone()).collect();
    // Operator rules see the program name without its directory.
    if let (Some(first), Some(a0)) = (effect.argv.first_mut(), argv.first()) {
        if let Ok(name) = program_name(a0) {
            *first = name;
        }
    }
    effect.text = format!("{assigns_text}{}{redir_text}", render(&argv));
    effect
}
