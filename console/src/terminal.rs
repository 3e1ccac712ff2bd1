//! The operator's terminal: line editing and history (rustyline), a spinner
//! with the elapsed time and the step count while the model works, each
//! action as it starts and ends in its risk colour, and the approval panel.
//!
//! Shared by the standalone operator (`sysward run|cli --root DIR`, in
//! `operator.rs`) and the daemon client (`client.rs`). Everything shown here
//! that came from the agent or the model passes through `sanitize` first.
//!
//! Colours are plain ANSI SGR sequences, off when `NO_COLOR` is set (and not
//! empty), `TERM=dumb`, or stdout is not a terminal. The spinner runs only
//! when stdout is a terminal and JSON output is off. The terminal mode found
//! at start is put back at exit whatever the way out (an `atexit` hook: the
//! signal thread ends the process with `exit(130)` on a second Ctrl+C).

use crate::render::MAX_SHOWN;
use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, Read as _, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use sysward_broker::sanitize;
use sysward_ipc::agent::{AgentEvent, ToolStatus};
use sysward_ipc::operator::{ApprovalDecision, ApprovalPrompt, SessionSummary};

/// History entries kept in memory and in the file.
pub const HISTORY_MAX: usize = 1000;
/// The history file is rewritten to its last `HISTORY_MAX` entries when it
/// has grown past this many lines.
const HISTORY_REWRITE_AT: usize = 2 * HISTORY_MAX;
/// Only this much of a history file is read.
const HISTORY_FILE_MAX: u64 = 4 << 20;
/// Longest line kept in the history.
const HISTORY_LINE_MAX: usize = 4096;
/// The daemon client's history, under the operator's own home.
pub const CLIENT_HISTORY_NAME: &str = ".sysward_history";
/// The standalone history, in the project directory (seed: `.context-history`).
pub const PROJECT_HISTORY_NAME: &str = ".context-history";

// ---- what the output can do ------------------------------------------------------

fn isatty(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor number.
    unsafe { libc::isatty(fd) == 1 }
}

fn dumb_terminal() -> bool {
    std::env::var_os("TERM").is_some_and(|t| t == "dumb")
}

/// True when colours may be used on stdout: a terminal, no `NO_COLOR`.
pub fn colours_wanted() -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && !dumb_terminal() && isatty(libc::STDOUT_FILENO)
}

/// Columns of the terminal on stdout (80 when unknown).
pub fn columns() -> usize {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` into the struct we pass; on a
    // descriptor that is not a terminal the call fails without writing.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_col > 0 {
        usize::from(ws.ws_col)
    } else {
        80
    }
}

/// ANSI styling, or none.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub colour: bool,
}

impl Style {
    pub fn detect() -> Style {
        Style {
            colour: colours_wanted(),
        }
    }

    pub fn plain() -> Style {
        Style { colour: false }
    }

    pub fn paint(&self, sgr: &str, text: &str) -> String {
        if self.colour && !sgr.is_empty() {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn risk(&self, risk: &str, text: &str) -> String {
        self.paint(risk_sgr(risk), text)
    }

    pub fn status(&self, status: ToolStatus, text: &str) -> String {
        self.paint(status_sgr(status), text)
    }
}

/// SGR of a risk level: green for safe and low, yellow for medium, bold red
/// for high, bold white on red for critical.
pub fn risk_sgr(risk: &str) -> &'static str {
    match risk {
        "safe" | "low" => "32",
        "medium" => "33",
        "high" => "1;31",
        "critical" => "1;37;41",
        _ => "",
    }
}

pub fn status_sgr(status: ToolStatus) -> &'static str {
    match status {
        ToolStatus::Ok => "32",
        ToolStatus::Error | ToolStatus::Timeout => "31",
        ToolStatus::Denied => "1;31",
        ToolStatus::Cancelled | ToolStatus::PendingApproval => "33",
    }
}

fn format_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

fn format_elapsed(d: Duration) -> String {
    if d < Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{:02}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

/// Cuts `text` to `width` characters (cells approximated by characters).
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

// ---- putting the terminal back ----------------------------------------------------

static SAVED_MODE: Mutex<Option<libc::termios>> = Mutex::new(None);
static RESTORE_HOOK: std::sync::Once = std::sync::Once::new();

extern "C" fn restore_terminal_at_exit() {
    restore_terminal();
}

/// Remembers stdin's terminal mode (once) and puts it back at process exit.
pub fn guard_terminal() {
    if !isatty(libc::STDIN_FILENO) {
        return;
    }
    RESTORE_HOOK.call_once(|| {
        if let Ok(mode) = nix::sys::termios::tcgetattr(io::stdin()) {
            if let Ok(mut saved) = SAVED_MODE.lock() {
                *saved = Some(mode.into());
            }
        }
        // SAFETY: registers a plain extern "C" function without arguments.
        unsafe {
            libc::atexit(restore_terminal_at_exit);
        }
    });
}

/// Puts back the mode saved by `guard_terminal`, ends any colour and shows the
/// cursor. Harmless when nothing was saved.
pub fn restore_terminal() {
    let saved = SAVED_MODE.try_lock().ok().and_then(|s| *s);
    if let Some(mode) = saved {
        // SAFETY: `mode` is a termios that tcgetattr filled for stdin;
        // tcsetattr only reads it; a closed descriptor just fails.
        unsafe {
            libc::tcsetattr(libc::STDIN_FILENO, libc::TCSANOW, &mode);
        }
    }
    if isatty(libc::STDOUT_FILENO) {
        let mut out = io::stdout();
        let _ = out.write_all(b"\x1b[0m\x1b[?25h");
        let _ = out.flush();
    }
}

// ---- history ----------------------------------------------------------------------

/// True for a line that must never be written to a history file: it looks
/// like a password, a token, a key or a credential assignment (seed 000).
pub fn looks_like_credential(line: &str) -> bool {
    let lower = line.to_lowercase();
    const WORDS: [&str; 18] = [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "token",
        "api_key",
        "apikey",
        "api-key",
        "private key",
        "bearer ",
        "authorization:",
        "contraseña",
        "clave",
        "credential",
        "-----begin",
        "aws_access_key",
        "aws_secret",
        "pwd=",
    ];
    if WORDS.iter().any(|w| lower.contains(w)) {
        return true;
    }
    // user:password@host in a URL.
    if let Some(at) = lower.find("://") {
        let authority = lower[at + 3..].split(['/', ' ']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if userinfo.contains(':') {
                return true;
            }
        }
    }
    const PREFIXES: [&str; 10] = [
        "sk-",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "akia",
        "eyj",
    ];
    line.split(|c: char| c.is_whitespace() || matches!(c, '=' | '"' | '\'' | ':'))
        .any(|word| {
            let w = word.to_ascii_lowercase();
            (word.len() >= 16 && PREFIXES.iter().any(|p| w.starts_with(p))) || looks_random(word)
        })
}

/// A long word of letters and digits mixed as keys are, not as paths or prose.
fn looks_random(word: &str) -> bool {
    if word.len() < 24 || word.contains('/') || word.contains('.') {
        return false;
    }
    let digits = word.chars().filter(char::is_ascii_digit).count();
    let upper = word.chars().filter(char::is_ascii_uppercase).count();
    let lower = word.chars().filter(char::is_ascii_lowercase).count();
    let other = word.len() - digits - upper - lower;
    let classes = [digits, upper, lower].iter().filter(|n| **n > 0).count();
    other <= word.len() / 8 && digits >= 4 && classes >= 2
}

/// The history file: one entry per line, `YYYY-MM-DDTHH:MM:SSZ<TAB>line`,
/// mode 0600, owned by the user running sysward, never followed through a
/// symlink. Read when the terminal starts; appended to after each line the
/// operator sends to the agent.
#[derive(Debug, Clone)]
pub struct HistoryFile {
    pub path: PathBuf,
}

impl HistoryFile {
    pub fn new(path: PathBuf) -> HistoryFile {
        HistoryFile { path }
    }

    /// `DIR/.context-history` for a standalone project (`--root DIR`).
    pub fn for_project(dir: &Path) -> HistoryFile {
        HistoryFile::new(dir.join(PROJECT_HISTORY_NAME))
    }

    /// `~/.sysward_history` of the user running the daemon client (`$HOME`,
    /// else the passwd entry): that user is not root and cannot (and should
    /// not) write the daemon's state. `None` when no home is known.
    pub fn for_client() -> Option<HistoryFile> {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute())
            .or_else(|| {
                nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            })?;
        // A home that cannot be written is reported at the first append.
        Some(HistoryFile::new(home.join(CLIENT_HISTORY_NAME)))
    }

    /// Opens without following a symlink; refuses anything but a regular file
    /// owned by this user; forces mode 0600.
    fn open(&self, append: bool) -> io::Result<fs::File> {
        let mut opts = OpenOptions::new();
        if append {
            opts.append(true).create(true);
        } else {
            opts.read(true);
        }
        let f = opts
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK)
            .open(&self.path)?;
        let meta = f.metadata()?;
        if !meta.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(io::Error::other(format!(
                "owned by uid {}, not by this user",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            f.set_permissions(fs::Permissions::from_mode(0o600))?;
        }
        Ok(f)
    }

    /// The entries, oldest first (at most `HISTORY_MAX`), and a problem to
    /// show when the file exists but cannot be used.
    pub fn load(&self) -> (Vec<String>, Option<String>) {
        let f = match self.open(false) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (Vec::new(), None),
            Err(e) => return (Vec::new(), Some(self.problem(&e))),
        };
        let mut entries = Vec::new();
        let mut lines = 0usize;
        for line in io::BufReader::new(f.take(HISTORY_FILE_MAX)).lines() {
            let Ok(line) = line else { break };
            lines += 1;
            let text = match line.split_once('\t') {
                Some((stamp, text)) if stamp.len() == 20 && stamp.ends_with('Z') => text,
                _ => line.as_str(),
            };
            if !text.trim().is_empty() {
                entries.push(sanitize::one_line(text, HISTORY_LINE_MAX));
            }
        }
        let entries = entries.split_off(entries.len().saturating_sub(HISTORY_MAX));
        if lines > HISTORY_REWRITE_AT {
            let _ = self.rewrite(&entries);
        }
        (entries, None)
    }

    fn problem(&self, e: &io::Error) -> String {
        format!(
            "history file {p} is not used: {e}. Remove it, or make it yours and private (chown $(id -u) {p}; chmod 600 {p})",
            p = self.path.display()
        )
    }

    fn rewrite(&self, entries: &[String]) -> io::Result<()> {
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let _ = fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let stamp = now_rfc3339();
        for e in entries {
            writeln!(f, "{stamp}\t{e}")?;
        }
        f.sync_all()?;
        fs::rename(&tmp, &self.path)
    }

    /// Appends one entry stamped with the current time. The caller filters
    /// credentials out first (`LineInput::remember`).
    pub fn append(&self, line: &str) -> io::Result<()> {
        let mut f = self.open(true)?;
        let entry = format!("{}\t{}\n", now_rfc3339(), line);
        f.write_all(entry.as_bytes())
    }
}

fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second]Z"
        ))
        .unwrap_or_default()
}

// ---- reading lines -------------------------------------------------------------------

/// What a prompt read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// Ctrl+C at the prompt.
    Interrupted,
    /// Ctrl+D, or the input ended.
    Eof,
}

type Editor = rustyline::Editor<(), rustyline::history::MemHistory>;

/// A line editor with history (arrows, Ctrl+R, Emacs keys) when stdin and
/// stdout are a terminal; plain line reads otherwise (pipes, files, tests).
pub struct LineInput {
    editor: Option<Editor>,
    history: Option<HistoryFile>,
    notices: Vec<String>,
}

impl LineInput {
    pub fn new(history: Option<HistoryFile>) -> LineInput {
        let mut notices = Vec::new();
        let editor =
            if isatty(libc::STDIN_FILENO) && isatty(libc::STDOUT_FILENO) && !dumb_terminal() {
                let config = rustyline::Config::builder()
                    .auto_add_history(false)
                    .history_ignore_space(true)
                    .color_mode(rustyline::ColorMode::Disabled)
                    .build();
                let mut mem = rustyline::history::MemHistory::with_config(&config);
                if let Some(h) = &history {
                    let (entries, problem) = h.load();
                    notices.extend(problem);
                    for e in entries {
                        let _ = rustyline::history::History::add(&mut mem, &e);
                    }
                }
                match Editor::with_history(config, mem) {
                    Ok(e) => Some(e),
                    Err(e) => {
                        notices.push(format!(
                            "line editing is unavailable ({e}); reading plain lines"
                        ));
                        None
                    }
                }
            } else {
                None
            };
        if editor.is_some() {
            guard_terminal();
        }
        LineInput {
            editor,
            history,
            notices,
        }
    }

    /// Problems found while starting (an unusable history file), shown once.
    pub fn take_notices(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notices)
    }

    /// Reads one line. Nothing is added to the history here.
    pub fn read(&mut self, prompt: &str) -> Read {
        match &mut self.editor {
            Some(editor) => match editor.readline(prompt) {
                Ok(line) => Read::Line(line),
                Err(rustyline::error::ReadlineError::Interrupted) => Read::Interrupted,
                Err(_) => Read::Eof,
            },
            None => {
                let mut out = io::stdout();
                let _ = write!(out, "{prompt}");
                let _ = out.flush();
                let mut line = String::new();
                match io::stdin().lock().read_line(&mut line) {
                    Ok(0) | Err(_) => Read::Eof,
                    Ok(_) => Read::Line(line.trim_end_matches(['\n', '\r']).to_string()),
                }
            }
        }
    }

    /// Adds a line the operator sent to the agent to the history (memory and
    /// file) unless it is blank, starts with a space, or looks like a
    /// credential. What a secret prompt reads never comes here: secrets are
    /// read by `secrets::read_secret_no_echo`, not by this editor. Returns a
    /// problem to show when the file could not be written (said once).
    pub fn remember(&mut self, line: &str) -> Option<String> {
        if line.trim().is_empty()
            || line.starts_with(' ')
            || line.len() > HISTORY_LINE_MAX
            || looks_like_credential(line)
        {
            return None;
        }
        let line = sanitize::one_line(line, HISTORY_LINE_MAX);
        if let Some(editor) = &mut self.editor {
            let _ = editor.add_history_entry(line.as_str());
        }
        let h = self.history.as_ref()?;
        match h.append(&line) {
            Ok(()) => None,
            Err(e) => {
                let problem = h.problem(&e);
                self.history = None;
                Some(problem)
            }
        }
    }
}

// ---- the screen: events and the spinner --------------------------------------------

struct Action {
    summary: String,
    started: Instant,
    risk: Option<String>,
    /// What the broker reported the action produced, shown under its end.
    output: Vec<String>,
}

struct ScreenState {
    busy_since: Option<Instant>,
    step: Option<(u32, u32)>,
    actions: HashMap<String, Action>,
    current: Option<String>,
    /// Risk of calls the broker decided before their start event arrived.
    decided: HashMap<String, String>,
    spinner_drawn: bool,
    frame: usize,
}

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const TICK: Duration = Duration::from_millis(120);

/// Where a session's output goes: a terminal (styled lines, a spinner) or
/// JSON lines (`--json`: one object per event and a final summary).
pub struct Screen {
    pub json: bool,
    /// `--verbose`: every action's output is shown, not only failures'.
    verbose: AtomicBool,
    style: Style,
    spinner: bool,
    state: Mutex<ScreenState>,
    stop: AtomicBool,
}

impl Screen {
    /// The spinner thread starts when stdout is a terminal and output is not
    /// JSON; it ends with the screen.
    pub fn new(json: bool) -> Arc<Screen> {
        let screen = Arc::new(Screen {
            json,
            verbose: AtomicBool::new(false),
            style: if json {
                Style::plain()
            } else {
                Style::detect()
            },
            spinner: !json && !dumb_terminal() && isatty(libc::STDOUT_FILENO),
            state: Mutex::new(ScreenState {
                busy_since: None,
                step: None,
                actions: HashMap::new(),
                current: None,
                decided: HashMap::new(),
                spinner_drawn: false,
                frame: 0,
            }),
            stop: AtomicBool::new(false),
        });
        if screen.spinner {
            let weak = Arc::downgrade(&screen);
            let _ = std::thread::Builder::new()
                .name("spinner".to_string())
                .spawn(move || loop {
                    std::thread::sleep(TICK);
                    let Some(s) = weak.upgrade() else { return };
                    if s.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    s.tick();
                });
        }
        screen
    }

    pub fn style(&self) -> Style {
        self.style
    }

    /// Shows every action's output (`--verbose`).
    pub fn set_verbose(&self, verbose: bool) {
        self.verbose.store(verbose, Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ScreenState> {
        match self.state.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn tick(&self) {
        let mut st = self.lock();
        if st.busy_since.is_none() {
            return;
        }
        st.frame = (st.frame + 1) % FRAMES.len();
        let line = spinner_line(&st, self.style);
        let mut out = io::stdout().lock();
        let _ = write!(out, "\r\x1b[2K{line}");
        let _ = out.flush();
        st.spinner_drawn = true;
    }

    /// Prints whole lines; the spinner line is cleared first and comes back
    /// on the next tick.
    pub fn print(&self, text: &str) {
        let mut st = self.lock();
        let mut out = io::stdout().lock();
        if st.spinner_drawn {
            let _ = write!(out, "\r\x1b[2K");
            st.spinner_drawn = false;
        }
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }

    /// The model is working: the spinner shows.
    pub fn busy(&self) {
        let mut st = self.lock();
        if st.busy_since.is_none() {
            st.busy_since = Some(Instant::now());
        }
    }

    /// Waiting for the operator: the spinner goes away.
    pub fn idle(&self) {
        let mut st = self.lock();
        st.busy_since = None;
        st.current = None;
        if st.spinner_drawn {
            let mut out = io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K");
            let _ = out.flush();
            st.spinner_drawn = false;
        }
    }

    /// The broker's decision on a call: its risk colours the action's lines.
    pub fn decided(&self, call_id: &str, risk: &str) {
        let risk = sanitize::one_line(risk, 16);
        let mut st = self.lock();
        match st.actions.get_mut(call_id) {
            Some(a) => a.risk = Some(risk),
            None => {
                if st.decided.len() > 256 {
                    st.decided.clear();
                }
                st.decided.insert(call_id.to_string(), risk);
            }
        }
    }

    pub fn banner(&self, session_id: &str, banner: &str) {
        if self.json {
            self.print(
                &serde_json::json!({"event": "session_start", "session": sanitize::one_line(session_id, 64)})
                    .to_string(),
            );
            return;
        }
        let text = sanitize::for_terminal(banner, 4000);
        let mut lines = text.lines();
        if let Some(first) = lines.next() {
            self.print(&self.style.bold(first));
        }
        for l in lines {
            self.print(&self.style.dim(l));
        }
        self.busy();
    }

    /// A note of the terminal itself (not from the agent).
    pub fn notice(&self, text: &str) {
        if self.json {
            self.print(
                &serde_json::json!({"event": "warning", "text": sanitize::for_terminal(text, 4000)})
                    .to_string(),
            );
        } else {
            self.print(
                &self
                    .style
                    .paint("33", &format!("note: {}", sanitize::one_line(text, 1000))),
            );
        }
    }

    pub fn event(&self, event: &AgentEvent) {
        if self.json {
            self.print(&crate::render::event_json(event).to_string());
            return;
        }
        let st = self.style;
        let l = |t: &str| sanitize::one_line(t, 300);
        match event {
            AgentEvent::Step { step, max, .. } => {
                self.lock().step = Some((*step, *max));
                self.busy();
                if !self.spinner {
                    if let Some(text) = crate::render::render_event(event) {
                        self.print(&text);
                    }
                }
            }
            AgentEvent::ToolStart { call_id, summary } => {
                let summary = l(summary);
                let mut s = self.lock();
                let risk = s.decided.remove(call_id);
                s.current = Some(call_id.clone());
                if s.actions.len() > 256 {
                    s.actions.clear();
                }
                s.actions.insert(
                    call_id.clone(),
                    Action {
                        summary: summary.clone(),
                        started: Instant::now(),
                        risk,
                        output: Vec::new(),
                    },
                );
                drop(s);
                self.busy();
                self.print(&format!("{} {summary}", st.dim("→")));
            }
            AgentEvent::ToolEnd {
                call_id,
                status,
                duration_ms,
            } => {
                let mut s = self.lock();
                let action = s.actions.remove(call_id);
                if s.current.as_deref() == Some(call_id.as_str()) {
                    s.current = None;
                }
                drop(s);
                let dur = format_duration(Duration::from_millis(*duration_ms));
                let output = action
                    .as_ref()
                    .map(|a| a.output.clone())
                    .unwrap_or_default();
                let mark = st.status(*status, &format!("← {}", status.as_str()));
                let what = match &action {
                    Some(Action {
                        summary,
                        risk: Some(r),
                        ..
                    }) => st.risk(r, &format!("{summary} [{r}]")),
                    Some(a) => a.summary.clone(),
                    None => String::new(),
                };
                self.print(&format!("{mark} {what} {}", st.dim(&format!("({dur})"))));
                for line in output {
                    self.print(&st.dim(&line));
                }
            }
            AgentEvent::ToolOutput { call_id, .. } => {
                let lines =
                    crate::render::render_tool_output(event, self.verbose.load(Ordering::SeqCst));
                let mut s = self.lock();
                match s.actions.get_mut(call_id) {
                    Some(a) => a.output = lines,
                    None => {
                        drop(s);
                        for line in lines {
                            self.print(&st.dim(&line));
                        }
                    }
                }
            }
            AgentEvent::Answer(t) => self.print(&sanitize::for_terminal(t, MAX_SHOWN)),
            AgentEvent::Warning(t) => self.print(&st.paint(
                "33",
                &format!("warning: {}", sanitize::for_terminal(t, MAX_SHOWN)),
            )),
            AgentEvent::TaskStart { .. } | AgentEvent::TaskSkipped { .. } => {
                if let Some(text) = crate::render::render_event(event) {
                    self.print(&st.bold(&text));
                }
            }
            other => {
                if let Some(text) = crate::render::render_event(other) {
                    self.print(&text);
                }
            }
        }
    }

    pub fn finished(&self, summary: &SessionSummary) {
        self.idle();
        if self.json {
            self.print(&crate::render::summary_json(summary).to_string());
            return;
        }
        let st = self.style;
        for o in &summary.outcomes {
            let status = o.status.as_str();
            let sgr = match status {
                "DONE" | "SKIPPED" => "1;32",
                "BLOCKED" | "INCOMPLETE" => "1;33",
                _ => "1;31",
            };
            self.print(&format!(
                "{}: {} ({} steps)",
                sanitize::one_line(&o.name, 200),
                st.paint(sgr, status),
                o.steps
            ));
        }
        if let Some(e) = &summary.error {
            self.print(&st.paint(
                "1;31",
                &format!("session ended: {}", sanitize::for_terminal(e, 4000)),
            ));
        }
        self.print(&st.dim(&format!(
            "{} actions, {} denials, {:.1}s — session {}",
            summary.actions,
            summary.denials,
            summary.duration_ms as f64 / 1000.0,
            sanitize::one_line(&summary.session_id, 64)
        )));
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn spinner_line(st: &ScreenState, style: Style) -> String {
    let Some(since) = st.busy_since else {
        return String::new();
    };
    let mut text = format!("{} {}", FRAMES[st.frame], format_elapsed(since.elapsed()));
    if let Some((step, max)) = st.step {
        text.push_str(&format!(" · step {step}/{max}"));
    }
    match st.current.as_ref().and_then(|c| st.actions.get(c)) {
        Some(a) => text.push_str(&format!(
            " · {} ({})",
            a.summary,
            format_elapsed(a.started.elapsed())
        )),
        None => text.push_str(" · thinking"),
    }
    text.push_str(" · Ctrl+C cancels");
    style.paint("36", &fit(&text, columns().saturating_sub(1).max(10)))
}

// ---- the approval panel and the prompt -------------------------------------------------

/// The approval request as a panel, every field sanitized to one line; a
/// long command shown by head and tail (`full`: all of it).
pub fn render_approval_panel(p: &ApprovalPrompt, style: Style) -> String {
    render_approval_panel_with(p, style, false)
}

fn render_approval_panel_with(p: &ApprovalPrompt, style: Style, full: bool) -> String {
    let l = |t: &str, n: usize| sanitize::one_line(t, n);
    let risk = l(&p.risk, 32);
    let rule = "─".repeat(columns().clamp(40, 100).saturating_sub(30));
    let mut out = String::from("\n");
    out.push_str(&style.bold(&format!("┌─ approval needed · {} {rule}", l(&p.id, 64))));
    out.push('\n');
    let mut row = |name: &str, value: String| {
        out.push_str(&format!("│ {} {value}\n", style.dim(&format!("{name:<8}"))));
    };
    row("mode", l(&p.mode, 64));
    row("host", l(&p.host, 200));
    row(
        "action",
        format!(
            "{} · risk {}",
            style.bold(&l(&p.category, 64)),
            style.risk(&risk, &risk.to_uppercase())
        ),
    );
    for (name, value) in crate::approval_view::command_rows(
        &p.command,
        &p.parts,
        p.parts_total,
        full,
        ": [v] shows it all",
    ) {
        row(
            name,
            if name == "command" {
                style.bold(&value)
            } else {
                value
            },
        );
    }
    row("runs as", l(&p.profile, 2000));
    let reason = l(&p.reason, 1000);
    row(
        "reason",
        if reason.trim().is_empty() {
            style.dim("(the model gave none)")
        } else {
            reason
        },
    );
    out.push_str(&format!(
        "└─ {} allow once   {} allow this command for the session   {} deny   {} view all",
        style.bold("[y]"),
        style.bold("[s]"),
        style.bold("[n]"),
        style.bold("[v]")
    ));
    out
}

/// Asks the operator about `p`: y / s (confirmed by typing `yes`) / n (with
/// an optional note for the model). Ctrl+C or the end of input denies. No
/// answer is added to the history.
pub fn ask_approval(
    screen: &Screen,
    input: &mut LineInput,
    p: &ApprovalPrompt,
) -> (ApprovalDecision, String) {
    screen.idle();
    screen.print(&render_approval_panel(p, screen.style()));
    let answer = loop {
        match input.read("answer [y/s/n/v]: ") {
            Read::Line(a) => match a.trim() {
                "v" | "V" => screen.print(&render_approval_panel_with(p, screen.style(), true)),
                "y" | "Y" => break (ApprovalDecision::AllowOnce, String::new()),
                "s" | "S" => match input.read(
                    "allow this exact command for the rest of the session? type 'yes' to confirm: ",
                ) {
                    Read::Line(c) if c.trim() == "yes" => {
                        break (
                            ApprovalDecision::AllowSession { confirmed: true },
                            String::new(),
                        )
                    }
                    Read::Line(_) => screen.print("not confirmed; answer again"),
                    Read::Interrupted | Read::Eof => {
                        break (ApprovalDecision::Deny, "no answer".to_string())
                    }
                },
                "n" | "N" => {
                    let note = match input.read("note for the model (optional): ") {
                        Read::Line(n) => sanitize::one_line(&n, 500),
                        _ => String::new(),
                    };
                    break (ApprovalDecision::Deny, note);
                }
                _ => screen.print("answer y (allow once), s (allow for this session), n (deny) or v (view the whole request)"),
            },
            Read::Interrupted => {
                break (
                    ApprovalDecision::Deny,
                    "the operator pressed Ctrl+C".to_string(),
                )
            }
            Read::Eof => break (ApprovalDecision::Deny, "no answer (input closed)".to_string()),
        }
    };
    let style = screen.style();
    screen.print(&match answer.0 {
        ApprovalDecision::AllowOnce => style.paint("32", "allowed once"),
        ApprovalDecision::AllowSession { .. } => style.paint("33", "allowed for this session"),
        ApprovalDecision::Deny => style.paint("31", "denied"),
    });
    screen.busy();
    answer
}

/// What the `agent> ` prompt decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompted {
    Line(String),
    Exit,
}

/// The `agent> ` prompt. Ctrl+C on the prompt warns once and exits the second
/// time in a row; Ctrl+D, `/quit` and `/exit` exit.
pub fn prompt_line(screen: &Screen, input: &mut LineInput) -> Prompted {
    screen.idle();
    let mut interrupted = false;
    loop {
        match input.read("agent> ") {
            Read::Line(line) => {
                let t = line.trim();
                if t.is_empty() {
                    continue;
                }
                if t == "/quit" || t == "/exit" {
                    return Prompted::Exit;
                }
                if let Some(problem) = input.remember(&line) {
                    screen.notice(&problem);
                }
                screen.busy();
                return Prompted::Line(line);
            }
            Read::Interrupted if interrupted => return Prompted::Exit,
            Read::Interrupted => {
                interrupted = true;
                screen.print(&screen.style().dim("(Ctrl+C again or Ctrl+D to exit)"));
            }
            Read::Eof => return Prompted::Exit,
        }
    }
}

/// One person's terminal for a session: the screen and the line input.
pub struct Console {
    pub screen: Arc<Screen>,
    input: Mutex<LineInput>,
}

impl Console {
    pub fn new(json: bool, history: Option<HistoryFile>) -> Console {
        let screen = Screen::new(json);
        let mut input = LineInput::new(history);
        for n in input.take_notices() {
            screen.notice(&n);
        }
        Console {
            screen,
            input: Mutex::new(input),
        }
    }

    fn input(&self) -> std::sync::MutexGuard<'_, LineInput> {
        match self.input.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub fn prompt(&self) -> Prompted {
        prompt_line(&self.screen, &mut self.input())
    }

    pub fn approve(&self, p: &ApprovalPrompt) -> (ApprovalDecision, String) {
        ask_approval(&self.screen, &mut self.input(), p)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use sysward_testdir::RemoveOnDrop;

    fn scratch(tag: &str) -> RemoveOnDrop {
        RemoveOnDrop::fresh_dir(&format!("sysward-term-{tag}"))
    }

    #[test]
    fn credentials_are_recognised() {
        for l in [
            "the root password is hunter2",
            "export API_KEY=abc",
            "use ghp_0123456789abcdefghijABCDEFGHIJ",
            "curl https://admin:s3cret@example.com/x",
            "key sk-proj-abcdefghijklmnop1234",
            "set it to 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822c",
            "Authorization: Bearer xyz",
            "la contraseña es perro",
        ] {
            assert!(looks_like_credential(l), "{l}");
        }
        for l in [
            "why does nginx not start?",
            "restart the service x and check /var/log/nginx/error.log",
            "show disk usage of /var/lib/docker/overlay2/3f2a9c1b7d4e5f60718293a4b5c6d7e8f9",
            "list the users with uid over 1000",
            "git clone https://github.com/org/repo.git",
        ] {
            assert!(!looks_like_credential(l), "{l}");
        }
    }

    #[test]
    fn history_round_trip_is_0600_with_timestamps_and_refuses_symlinks() {
        let dir = scratch("hist");
        let h = HistoryFile::for_project(&dir);
        h.append("first").unwrap();
        h.append("second line").unwrap();
        assert_eq!(fs::metadata(&h.path).unwrap().mode() & 0o777, 0o600);
        let text = fs::read_to_string(&h.path).unwrap();
        let (stamp, rest) = text.lines().next().unwrap().split_once('\t').unwrap();
        assert!(stamp.ends_with('Z') && stamp.len() == 20, "{stamp}");
        assert_eq!(rest, "first");
        let (entries, problem) = h.load();
        assert!(problem.is_none());
        assert_eq!(entries, ["first", "second line"]);
        let link = dir.join("link");
        std::os::unix::fs::symlink(&h.path, &link).unwrap();
        assert!(HistoryFile::new(link.clone()).append("x").is_err());
        assert!(HistoryFile::new(link).load().1.is_some());
        fs::set_permissions(&h.path, fs::Permissions::from_mode(0o644)).unwrap();
        h.append("third").unwrap();
        assert_eq!(fs::metadata(&h.path).unwrap().mode() & 0o777, 0o600);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn history_is_cut_to_its_last_entries() {
        let dir = scratch("cut");
        let h = HistoryFile::for_project(&dir);
        let text: String = (0..HISTORY_REWRITE_AT + 5)
            .map(|i| format!("2026-01-01T00:00:00Z\tline {i}\n"))
            .collect();
        fs::write(&h.path, text).unwrap();
        let (entries, _) = h.load();
        assert_eq!(entries.len(), HISTORY_MAX);
        assert_eq!(
            entries.last().unwrap(),
            &format!("line {}", HISTORY_REWRITE_AT + 4)
        );
        assert_eq!(
            fs::read_to_string(&h.path).unwrap().lines().count(),
            HISTORY_MAX
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn remember_skips_credentials_and_a_leading_space() {
        let dir = scratch("remember");
        let h = HistoryFile::for_project(&dir);
        let mut input = LineInput {
            editor: None,
            history: Some(h.clone()),
            notices: Vec::new(),
        };
        input.remember("check the disks");
        input.remember("my password is hunter2");
        input.remember(" private note");
        input.remember("evil \x1b[2J text");
        assert_eq!(h.load().0, ["check the disks", "evil [2J text"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_panel_is_sanitized_and_plain_without_colour() {
        let p = ApprovalPrompt {
            id: "abc-1".into(),
            mode: "privileged".into(),
            host: "web1".into(),
            category: "service".into(),
            risk: "high".into(),
            command: "systemctl restart x\x1b[2J\n[y] fake".into(),
            profile: "uid 0, caps all".into(),
            reason: "restart \u{202E}it".into(),
            parts: Vec::new(),
            parts_total: 1,
        };
        let text = render_approval_panel(&p, Style::plain());
        assert!(!text.contains('\x1b') && !text.contains('\u{202E}'));
        assert!(text.contains("systemctl restart x[2J [y] fake"));
        assert!(text.contains("risk HIGH"));
        let coloured = render_approval_panel(&p, Style { colour: true });
        assert!(coloured.contains("\x1b[1;31mHIGH\x1b[0m"));
    }
}
