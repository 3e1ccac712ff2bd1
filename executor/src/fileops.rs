//! The file tools, performed in-process under the action's confinement, with
//! the seed's semantics: atomic replacement (temporary file in the same
//! directory, fsync, original mode and owner, optional validate command on the
//! temporary file, rename, fsync of the directory), backups
//! `name.sysward.YYYYMMDD-HHMMSS.bak` that keep mode and owner (a hard link to
//! the original inode, or a copy when linking is refused), idempotency, the
//! 32 MiB write limit, a unified diff of every change and a rollback step.

use crate::paths::{self, Parent};
use std::ffi::{CString, OsStr, OsString};
use std::io::{self, BufRead, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use sysward_ipc::exec::{
    AppendFileArgs, ChmodArgs, ChownArgs, CopyFileArgs, EditFileArgs, FileChange, FileOp,
    ListDirArgs, MkdirArgs, MoveFileArgs, ReadFileArgs, RegisterToolArgs, RemoveFileArgs, StatArgs,
    ValidateCommand, WriteFileArgs, FILE_WRITE_MAX,
};

/// Default `limit` of read_file, in lines.
const READ_DEFAULT_LINES: u64 = 2000;
/// read_file output cap.
const READ_MAX_OUTPUT: usize = 1 << 20;
/// Longest line shown by read_file.
const READ_MAX_LINE: usize = 4000;
/// Diffs are computed for files up to this size.
const DIFF_MAX_INPUT: usize = 8 << 20;
/// Diff text cap.
const DIFF_MAX_OUTPUT: usize = 4 << 20;
/// list_dir entry cap.
const LIST_MAX: usize = 5000;
/// Validate output kept for the message.
const VALIDATE_OUTPUT: usize = 8 << 10;

/// Everything a file operation needs that is decided before confinement.
pub struct Ctx {
    pub backup: bool,
    pub env: Vec<(String, String)>,
    /// The validate command's program, resolved before confinement.
    pub validate_program: Option<PathBuf>,
    /// chown's uid/gid, resolved from names before confinement.
    pub chown_ids: (Option<u32>, Option<u32>),
    /// Name maps for list_dir/stat output.
    pub users: Vec<(u32, String)>,
    pub groups: Vec<(u32, String)>,
    pub timeout: Duration,
    /// Local time, `YYYYMMDD-HHMMSS`, for backup names.
    pub stamp: String,
}

pub type OpResult = Result<(String, Option<FileChange>), String>;

pub fn perform(op: &FileOp, ctx: &Ctx) -> OpResult {
    match op {
        FileOp::ReadFile(a) => read_file(a).map(|s| (s, None)),
        FileOp::WriteFile(a) => write_file(a, ctx),
        FileOp::EditFile(a) => edit_file(a, ctx),
        FileOp::AppendFile(a) => append_file(a, ctx),
        FileOp::CopyFile(a) => copy_file(a, ctx),
        FileOp::MoveFile(a) => move_file(a, ctx),
        FileOp::RemoveFile(a) => remove_file(a, ctx),
        FileOp::Mkdir(a) => mkdir(a),
        FileOp::ListDir(a) => list_dir(a, ctx).map(|s| (s, None)),
        FileOp::Stat(a) => stat(a, ctx).map(|s| (s, None)),
        FileOp::Chmod(a) => chmod(a),
        FileOp::Chown(a) => chown(a, ctx),
        FileOp::DiffFiles(a) => crate::review::diff_files(a).map(|s| (s, None)),
        FileOp::TailFile(a) => crate::review::tail_file(a).map(|s| (s, None)),
        FileOp::ApplyPatch(a) => crate::patch::apply_patch(a, ctx),
        FileOp::RegisterTool(a) => register_tool(a, ctx),
    }
}

pub(crate) fn io_err(path: &Path, e: io::Error) -> String {
    paths::explain(path, &e)
}

fn parse_mode(m: &str) -> Result<u32, String> {
    let t = m.trim();
    let digits = t.strip_prefix("0o").unwrap_or(t);
    match u32::from_str_radix(digits, 8) {
        Ok(v) if v <= 0o7777 && !digits.is_empty() => Ok(v),
        _ => Err(format!("mode {m:?} is not an octal mode such as \"0644\"")),
    }
}

pub(crate) fn mode_of(st: &libc::stat) -> u32 {
    st.st_mode & 0o7777
}

pub(crate) fn quote(p: &Path) -> String {
    let s = p.display().to_string();
    if s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%,".contains(&b))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

// ---------------------------------------------------------------- low level

fn read_fd_limited(fd: RawFd, max: usize, path: &Path) -> Result<Vec<u8>, String> {
    // SAFETY: we borrow the fd for the duration of this function only; the
    // ManuallyDrop keeps File from closing it.
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut buf = Vec::new();
    (&mut *f)
        .take(max as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io_err(path, e))?;
    if buf.len() > max {
        return Err(format!(
            "{}: larger than the {} MiB limit",
            path.display(),
            max >> 20
        ));
    }
    Ok(buf)
}

fn write_all_fd(fd: RawFd, data: &[u8], path: &Path) -> Result<(), String> {
    // SAFETY: borrowed fd, not closed (ManuallyDrop).
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    f.write_all(data).map_err(|e| io_err(path, e))
}

fn fsync(fd: RawFd, path: &Path) -> Result<(), String> {
    // SAFETY: integer argument only.
    if unsafe { libc::fsync(fd) } < 0 {
        return Err(io_err(path, io::Error::last_os_error()));
    }
    Ok(())
}

fn fchown(fd: RawFd, uid: u32, gid: u32, path: &Path) -> Result<(), String> {
    // SAFETY: integer arguments only.
    if unsafe { libc::fchown(fd, uid, gid) } < 0 {
        return Err(io_err(path, io::Error::last_os_error()));
    }
    Ok(())
}

fn fchmod(fd: RawFd, mode: u32, path: &Path) -> Result<(), String> {
    // SAFETY: integer arguments only.
    if unsafe { libc::fchmod(fd, mode) } < 0 {
        return Err(io_err(path, io::Error::last_os_error()));
    }
    Ok(())
}

fn cname(name: &OsStr) -> Result<CString, String> {
    CString::new(name.as_bytes()).map_err(|_| "name contains a NUL byte".to_string())
}

pub(crate) fn unlink_at(dirfd: RawFd, name: &OsStr, dir: bool) -> io::Result<()> {
    let c =
        CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: `c` is NUL-terminated and outlives the call.
    if unsafe { libc::unlinkat(dirfd, c.as_ptr(), flags) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn rename_at(
    from_dir: RawFd,
    from: &OsStr,
    to_dir: RawFd,
    to: &OsStr,
    flags: libc::c_uint,
) -> io::Result<()> {
    let a =
        CString::new(from.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let b = CString::new(to.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both names are NUL-terminated and outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            from_dir,
            a.as_ptr(),
            to_dir,
            b.as_ptr(),
            flags,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn link_at(dirfd: RawFd, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let a =
        CString::new(from.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let b = CString::new(to.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: both names are NUL-terminated and outlive the call; flags 0
    // (never follows a symlink).
    if unsafe { libc::linkat(dirfd, a.as_ptr(), dirfd, b.as_ptr(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// fsync of the directory (needs read access to open it; skipped, not failed,
/// when the profile only lets us write there).
fn fsync_dir(parent: &Parent) {
    if let Ok(fd) = paths::open_at(
        parent.raw(),
        OsStr::new("."),
        libc::O_RDONLY | libc::O_DIRECTORY,
        0,
    ) {
        // SAFETY: integer argument only.
        unsafe { libc::fsync(fd.as_raw_fd()) };
    }
}

/// A temporary name next to `name` (same directory, so rename is atomic).
fn temp_name(name: &OsStr, tag: &str, n: u32) -> OsString {
    let bytes = name.as_bytes();
    let keep = &bytes[..bytes.len().min(180)];
    let mut s = OsString::from(".");
    s.push(OsStr::from_bytes(keep));
    s.push(format!(".sysward-{tag}.{}.{n}", std::process::id()));
    s
}

/// Creates a new file next to `parent.name` with O_EXCL, retrying names.
fn create_temp(parent: &Parent, tag: &str) -> Result<(OwnedFd, OsString), String> {
    for n in 0..100 {
        let t = temp_name(&parent.name, tag, n);
        match paths::open_at(
            parent.raw(),
            &t,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
            0o600,
        ) {
            Ok(fd) => return Ok((fd, t)),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(io_err(&parent.sibling(&t), e)),
        }
    }
    Err(format!(
        "{}: cannot create a temporary file",
        parent.dir.display()
    ))
}

/// Removes the temporary file on drop unless disarmed.
struct TempGuard<'a> {
    parent: &'a Parent,
    name: Option<OsString>,
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.name.take() {
            let _ = unlink_at(self.parent.raw(), &n, false);
        }
    }
}

/// Where the new content comes from.
pub(crate) enum Source<'a> {
    Bytes(&'a [u8]),
    Fd(RawFd),
}

/// The atomic replacement: temp → write → owner → mode → fsync → validate →
/// rename → fsync dir. On any failure the original is untouched and the
/// temporary file is removed.
pub(crate) fn atomic_write(
    parent: &Parent,
    src: Source<'_>,
    mode: u32,
    owner: Option<(u32, u32)>,
    validate: Option<&ValidateCommand>,
    ctx: &Ctx,
) -> Result<(), String> {
    let (fd, tmp) = create_temp(parent, "tmp")?;
    let mut guard = TempGuard {
        parent,
        name: Some(tmp.clone()),
    };
    let tmp_path = parent.sibling(&tmp);
    match src {
        Source::Bytes(b) => write_all_fd(fd.as_raw_fd(), b, &tmp_path)?,
        Source::Fd(from) => copy_fd(from, fd.as_raw_fd(), &tmp_path)?,
    }
    if let Some((uid, gid)) = owner {
        fchown(fd.as_raw_fd(), uid, gid, &tmp_path)?;
    }
    // After chown, which clears set-id bits.
    fchmod(fd.as_raw_fd(), mode, &tmp_path)?;
    fsync(fd.as_raw_fd(), &tmp_path)?;
    drop(fd);
    if let Some(v) = validate {
        run_validate(v, &tmp_path, ctx)?;
    }
    rename_at(parent.raw(), &tmp, parent.raw(), &parent.name, 0)
        .map_err(|e| io_err(&parent.path, e))?;
    guard.name = None;
    fsync_dir(parent);
    Ok(())
}

fn copy_fd(from: RawFd, to: RawFd, path: &Path) -> Result<(), String> {
    // SAFETY: both fds are borrowed for this call only (ManuallyDrop).
    let mut r = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(from) });
    // SAFETY: as above.
    let mut w = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(to) });
    io::copy(&mut *r, &mut *w).map_err(|e| io_err(path, e))?;
    Ok(())
}

/// Backs up `parent.name` as `name.sysward.STAMP.bak` in the same directory:
/// a hard link to the original inode (mode, owner, times and content kept
/// exactly, since the original is replaced by rename, never written in
/// place), or a copy with the same mode and owner when linking is refused.
fn backup(parent: &Parent, st: &libc::stat, ctx: &Ctx) -> Result<PathBuf, String> {
    let mut bak = None;
    for n in 0..100 {
        let mut b = parent.name.clone();
        b.push(format!(".sysward.{}.bak", ctx.stamp));
        if n > 0 {
            b.push(format!(".{n}"));
        }
        match paths::lstat_at(parent.raw(), &b) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                bak = Some(b);
                break;
            }
            _ => continue,
        }
    }
    let bak = bak.ok_or_else(|| format!("{}: no free backup name", parent.path.display()))?;
    let bak_path = parent.sibling(&bak);
    if paths::is_reg(st) && link_at(parent.raw(), &parent.name, &bak).is_ok() {
        return Ok(bak_path);
    }
    if !paths::is_reg(st) {
        return Err(format!(
            "{}: only regular files are backed up by copy",
            parent.path.display()
        ));
    }
    let src = paths::open_at(parent.raw(), &parent.name, libc::O_RDONLY, 0)
        .map_err(|e| io_err(&parent.path, e))?;
    let bparent = Parent {
        fd: parent.fd.try_clone().map_err(|e| io_err(&parent.dir, e))?,
        dir: parent.dir.clone(),
        name: bak.clone(),
        path: bak_path.clone(),
    };
    atomic_write(
        &bparent,
        Source::Fd(src.as_raw_fd()),
        mode_of(st),
        Some((st.st_uid, st.st_gid)),
        None,
        ctx,
    )?;
    Ok(bak_path)
}

pub(crate) fn is_text(b: &[u8]) -> bool {
    !b.contains(&0) && std::str::from_utf8(b).is_ok()
}

/// Unified diff old → new of `path`, or "" when not textual or too large.
pub(crate) fn diff(path: &Path, old: &[u8], new: &[u8]) -> String {
    if old.len() > DIFF_MAX_INPUT || new.len() > DIFF_MAX_INPUT {
        return String::new();
    }
    let (Ok(a), Ok(b)) = (std::str::from_utf8(old), std::str::from_utf8(new)) else {
        return String::new();
    };
    if a.contains('\0') || b.contains('\0') {
        return String::new();
    }
    let name = path.display().to_string();
    let d = similar::TextDiff::configure()
        .timeout(Duration::from_secs(5))
        .diff_lines(a, b);
    let mut out = d
        .unified_diff()
        .context_radius(3)
        .header(&format!("a{name}"), &format!("b{name}"))
        .to_string();
    if out.len() > DIFF_MAX_OUTPUT {
        let mut cut = DIFF_MAX_OUTPUT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n[diff truncated]\n");
    }
    out
}

// ---------------------------------------------------------------- validate

fn run_validate(v: &ValidateCommand, tmp: &Path, ctx: &Ctx) -> Result<(), String> {
    let prog = ctx
        .validate_program
        .as_ref()
        .ok_or_else(|| format!("validate command {:?} not found", v.command))?;
    let file = tmp.display().to_string();
    let args: Vec<String> = v
        .args
        .clone()
        .unwrap_or_default()
        .iter()
        .map(|a| a.replace("{file}", &file))
        .collect();
    let shown = format!("{} {}", v.command, args.join(" "));
    let (r, w) = pipe().map_err(|e| format!("validate: pipe: {e}"))?;
    let w2 = w.try_clone().map_err(|e| format!("validate: {e}"))?;
    let mut child = std::process::Command::new(prog)
        .args(&args)
        .env_clear()
        .envs(ctx.env.iter().map(|(k, v)| (k, v)))
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(w))
        .stderr(std::process::Stdio::from(w2))
        .spawn()
        .map_err(|e| format!("validate: cannot run {}: {e}", prog.display()))?;
    let (output, timed_out) = read_with_timeout(r, ctx.timeout);
    if timed_out {
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| format!("validate: {e}"))?;
    let text = String::from_utf8_lossy(&output).to_string();
    if timed_out {
        return Err(format!(
            "validate `{shown}` timed out after {}s; the original file was not changed",
            ctx.timeout.as_secs()
        ));
    }
    if !status.success() {
        return Err(format!(
            "validate `{shown}` failed ({status}); the original file was not changed\n{text}"
        ));
    }
    Ok(())
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a live array of two ints for the kernel to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads until EOF or the deadline, keeping the first VALIDATE_OUTPUT bytes.
fn read_with_timeout(r: OwnedFd, timeout: Duration) -> (Vec<u8>, bool) {
    let deadline = std::time::Instant::now() + timeout;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return (out, true);
        }
        let mut pfd = libc::pollfd {
            fd: r.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) };
        if n < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return (out, false);
        }
        if n == 0 {
            continue;
        }
        // SAFETY: `buf` is a live writable buffer of buf.len() bytes.
        let got = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if got <= 0 {
            return (out, false);
        }
        let got = got as usize;
        let room = VALIDATE_OUTPUT.saturating_sub(out.len());
        out.extend_from_slice(&buf[..got.min(room)]);
    }
}

// ---------------------------------------------------------------- reads

fn read_file(a: &ReadFileArgs) -> Result<String, String> {
    let path = paths::check_path(&a.path)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags_nonblock()
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let st = paths::fstat(f.as_raw_fd()).map_err(|e| io_err(&path, e))?;
    if paths::is_dir(&st) {
        return Err(format!("{} is a directory: use list_dir", path.display()));
    }
    if !paths::is_reg(&st) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let offset = a.offset.unwrap_or(1).max(1);
    let limit = match a.limit {
        Some(0) | None => READ_DEFAULT_LINES,
        Some(n) => n,
    };
    let mut reader = io::BufReader::with_capacity(64 << 10, f);
    {
        let head = reader.fill_buf().map_err(|e| io_err(&path, e))?;
        if head.iter().take(8192).any(|&b| b == 0) {
            return Err(format!(
                "{} is a binary file ({} bytes); use a command such as `file` or `xxd`",
                path.display(),
                st.st_size
            ));
        }
    }
    let mut out = String::new();
    let mut line = Vec::new();
    let mut n: u64 = 0;
    let mut shown = 0u64;
    let mut capped = false;
    loop {
        line.clear();
        let got = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| io_err(&path, e))?;
        if got == 0 {
            break;
        }
        n += 1;
        if n < offset || shown >= limit || capped {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let text = if text.len() > READ_MAX_LINE {
            let mut cut = READ_MAX_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}… [line truncated]", &text[..cut])
        } else {
            text.to_string()
        };
        out.push_str(&format!("{n:>6}\t{text}\n"));
        shown += 1;
        if out.len() > READ_MAX_OUTPUT {
            capped = true;
        }
    }
    if n == 0 {
        return Ok(format!("{} is empty", path.display()));
    }
    if shown == 0 {
        return Ok(format!(
            "{} has {n} lines; offset {offset} is past the end",
            path.display()
        ));
    }
    let last = offset + shown - 1;
    if last < n {
        out.push_str(&format!(
            "[lines {offset}-{last} of {n}; continue with offset={}]\n",
            last + 1
        ));
    }
    Ok(out)
}

trait NonBlock {
    fn custom_flags_nonblock(&mut self) -> &mut Self;
}

impl NonBlock for std::fs::OpenOptions {
    /// O_NONBLOCK so that opening a FIFO never hangs; O_NOCTTY for ttys.
    fn custom_flags_nonblock(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
    }
}

fn type_char(st: &libc::stat) -> char {
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFREG => '-',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        libc::S_IFIFO => 'p',
        libc::S_IFSOCK => 's',
        _ => '?',
    }
}

fn name_of(map: &[(u32, String)], id: u32) -> String {
    map.iter()
        .find(|(i, _)| *i == id)
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| id.to_string())
}

fn fmt_time(secs: i64) -> String {
    let mut tm = std::mem::MaybeUninit::<libc::tm>::zeroed();
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: `t` and `tm` are live locals; localtime_r only writes `tm`.
    let ok = !unsafe { libc::localtime_r(&t, tm.as_mut_ptr()) }.is_null();
    if !ok {
        return secs.to_string();
    }
    // SAFETY: localtime_r succeeded and filled `tm`.
    let tm = unsafe { tm.assume_init() };
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

fn list_dir(a: &ListDirArgs, ctx: &Ctx) -> Result<String, String> {
    let path = paths::check_path(&a.path)?;
    let dir = std::fs::read_dir(&path).map_err(|e| io_err(&path, e))?;
    let mut entries: Vec<(OsString, libc::stat)> = Vec::new();
    let mut more = false;
    let dfd = std::fs::File::open(&path).map_err(|e| io_err(&path, e))?;
    for e in dir {
        let e = e.map_err(|e| io_err(&path, e))?;
        if entries.len() >= LIST_MAX {
            more = true;
            break;
        }
        let name = e.file_name();
        match paths::lstat_at(dfd.as_raw_fd(), &name) {
            Ok(st) => entries.push((name, st)),
            Err(_) => continue,
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut out = format!("{} ({} entries)\n", path.display(), entries.len());
    for (name, st) in &entries {
        let mut n = name.to_string_lossy().to_string();
        if paths::is_dir(st) {
            n.push('/');
        }
        if paths::is_symlink(st) {
            if let Ok(t) = std::fs::read_link(path.join(name)) {
                n.push_str(&format!(" -> {}", t.display()));
            }
        }
        out.push_str(&format!(
            "{}{:04o} {:>8}:{:<8} {:>10} {} {}\n",
            type_char(st),
            mode_of(st),
            name_of(&ctx.users, st.st_uid),
            name_of(&ctx.groups, st.st_gid),
            st.st_size,
            fmt_time(st.st_mtime),
            n
        ));
    }
    if more {
        out.push_str(&format!("[only the first {LIST_MAX} entries are listed]\n"));
    }
    Ok(out)
}

fn stat(a: &StatArgs, ctx: &Ctx) -> Result<String, String> {
    let path = paths::check_path(&a.path)?;
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| "bad path".to_string())?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: `c` is NUL-terminated; `st` is writable memory of the right size.
    if unsafe { libc::lstat(c.as_ptr(), st.as_mut_ptr()) } < 0 {
        return Err(io_err(&path, io::Error::last_os_error()));
    }
    // SAFETY: lstat succeeded and filled the struct.
    let st = unsafe { st.assume_init() };
    let kind = match type_char(&st) {
        'd' => "directory",
        'l' => "symbolic link",
        '-' => "regular file",
        'c' => "character device",
        'b' => "block device",
        'p' => "fifo",
        's' => "socket",
        _ => "unknown",
    };
    let mut out = format!(
        "path: {}\ntype: {kind}\nsize: {}\nmode: {:04o}\nowner: {} ({})\ngroup: {} ({})\nlinks: {}\ninode: {}\nmodified: {}\nchanged: {}\n",
        path.display(),
        st.st_size,
        mode_of(&st),
        name_of(&ctx.users, st.st_uid),
        st.st_uid,
        name_of(&ctx.groups, st.st_gid),
        st.st_gid,
        st.st_nlink,
        st.st_ino,
        fmt_time(st.st_mtime),
        fmt_time(st.st_ctime),
    );
    if paths::is_symlink(&st) {
        if let Ok(t) = std::fs::read_link(&path) {
            out.push_str(&format!("target: {}\n", t.display()));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- writes

/// The current state of a write target: absent, or a regular file.
pub(crate) fn existing(parent: &Parent) -> Result<Option<libc::stat>, String> {
    match paths::lstat_at(parent.raw(), &parent.name) {
        Ok(st) if paths::is_reg(&st) => Ok(Some(st)),
        Ok(st) if paths::is_symlink(&st) => Err(format!(
            "{} is a symbolic link; sysward does not write through symlinks — use the real path",
            parent.path.display()
        )),
        Ok(_) => Err(format!(
            "{} exists and is not a regular file",
            parent.path.display()
        )),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(io_err(&parent.path, e)),
    }
}

pub(crate) fn read_existing(parent: &Parent, max: usize) -> Result<Vec<u8>, String> {
    let fd = paths::open_at(
        parent.raw(),
        &parent.name,
        libc::O_RDONLY | libc::O_NONBLOCK,
        0,
    )
    .map_err(|e| io_err(&parent.path, e))?;
    read_fd_limited(fd.as_raw_fd(), max, &parent.path)
}

/// Shared tail of write/edit/append: idempotency, backup, atomic write, diff,
/// rollback.
/// A content change to apply with [`replace_content`].
pub(crate) struct Replace<'a> {
    pub(crate) st: Option<&'a libc::stat>,
    pub(crate) old: &'a [u8],
    pub(crate) new: &'a [u8],
    pub(crate) mode: Option<u32>,
    pub(crate) validate: Option<&'a ValidateCommand>,
    pub(crate) verb: &'a str,
}

pub(crate) fn replace_content(
    parent: &Parent,
    r: Replace<'_>,
    ctx: &Ctx,
) -> Result<(String, Option<FileChange>), String> {
    let Replace {
        st,
        old,
        new,
        mode,
        validate,
        verb,
    } = r;
    if new.len() > FILE_WRITE_MAX {
        return Err(format!(
            "{}: the new content is {} bytes, above the 32 MiB write limit",
            parent.path.display(),
            new.len()
        ));
    }
    let old_mode = st.map(mode_of);
    let mode = mode.or(old_mode).unwrap_or(0o644);
    if st.is_some() && old == new && Some(mode) == old_mode {
        return Ok((
            format!(
                "{} already has this content; nothing written",
                parent.path.display()
            ),
            None,
        ));
    }
    let bak = match (st, ctx.backup) {
        (Some(st), true) => Some(backup(parent, st, ctx)?),
        _ => None,
    };
    let owner = st.map(|s| (s.st_uid, s.st_gid));
    if let Err(e) = atomic_write(parent, Source::Bytes(new), mode, owner, validate, ctx) {
        if let Some(b) = &bak {
            // The original is untouched: the backup is not needed.
            let _ = unlink_at(parent.raw(), b.file_name().unwrap_or_default(), false);
        }
        return Err(e);
    }
    let d = diff(&parent.path, old, new);
    let p = quote(&parent.path);
    let rollback = match (&bak, st) {
        (Some(b), _) => format!("cp -p {} {p}", quote(b)),
        (None, None) => format!("rm {p}"),
        (None, Some(_)) if !d.is_empty() => format!("patch -R {p} with the diff above"),
        (None, Some(_)) => {
            "no backup was kept (the previous content is not recoverable)".to_string()
        }
    };
    let mut msg = format!(
        "{verb} {} ({} bytes, mode {:04o})",
        parent.path.display(),
        new.len(),
        mode
    );
    if let Some(b) = &bak {
        msg.push_str(&format!("; backup {}", b.display()));
    }
    if validate.is_some() {
        msg.push_str("; validate passed");
    }
    Ok((
        msg,
        Some(FileChange {
            path: parent.path.display().to_string(),
            diff: d,
            backup: bak.map(|b| b.display().to_string()),
            rollback,
        }),
    ))
}

fn write_file(a: &WriteFileArgs, ctx: &Ctx) -> OpResult {
    let parent = paths::parent(&a.path)?;
    let mode = a.mode.as_deref().map(parse_mode).transpose()?;
    if a.content.len() > FILE_WRITE_MAX {
        return Err("content is above the 32 MiB write limit".into());
    }
    let st = existing(&parent)?;
    let old = match &st {
        Some(_) => read_existing(&parent, DIFF_MAX_INPUT.max(FILE_WRITE_MAX)).unwrap_or_default(),
        None => Vec::new(),
    };
    let verb = if st.is_some() { "replaced" } else { "created" };
    let r = Replace {
        st: st.as_ref(),
        old: &old,
        new: a.content.as_bytes(),
        mode,
        validate: a.validate.as_ref(),
        verb,
    };
    replace_content(&parent, r, ctx)
}

/// `register_tool`: the tool's directory, then its script, then its
/// manifest, each written as write_file writes (atomically, with a diff
/// when it replaces an older version).
fn register_tool(a: &RegisterToolArgs, ctx: &Ctx) -> OpResult {
    let dir = paths::check_path(&a.directory)?;
    let made = mkdir(&MkdirArgs {
        path: a.directory.clone(),
        mode: Some("0755".into()),
        reason: None,
    })?;
    let mut messages = vec![made.0];
    let mut diffs = Vec::new();
    for (name, content, mode) in [
        (RegisterToolArgs::SCRIPT, &a.script, 0o755),
        (RegisterToolArgs::MANIFEST, &a.manifest, 0o644),
    ] {
        let path = dir.join(name).display().to_string();
        let parent = paths::parent(&path)?;
        let st = existing(&parent)?;
        let old = match &st {
            Some(_) => read_existing(&parent, DIFF_MAX_INPUT).unwrap_or_default(),
            None => Vec::new(),
        };
        let r = Replace {
            st: st.as_ref(),
            old: &old,
            new: content.as_bytes(),
            mode: Some(mode),
            validate: None,
            verb: if st.is_some() { "replaced" } else { "created" },
        };
        let (msg, change) = replace_content(&parent, r, ctx)?;
        messages.push(msg);
        if let Some(c) = change {
            diffs.push(c.diff);
        }
    }
    Ok((
        messages.join("; "),
        Some(FileChange {
            path: dir.display().to_string(),
            diff: diffs.join(""),
            backup: None,
            rollback: format!("rm -r {}", quote(&dir)),
        }),
    ))
}

fn edit_file(a: &EditFileArgs, ctx: &Ctx) -> OpResult {
    let parent = paths::parent(&a.path)?;
    let st =
        existing(&parent)?.ok_or_else(|| format!("{} does not exist", parent.path.display()))?;
    let old = read_existing(&parent, FILE_WRITE_MAX)?;
    let text = std::str::from_utf8(&old)
        .map_err(|_| format!("{} is not UTF-8 text", parent.path.display()))?;
    if a.old_text.is_empty() {
        return Err("old_text is empty".into());
    }
    let count = text.matches(a.old_text.as_str()).count();
    if count == 0 {
        if text.contains(a.new_text.as_str()) && !a.new_text.is_empty() {
            return Ok((
                format!(
                    "{}: old_text not found and new_text already present; nothing written",
                    parent.path.display()
                ),
                None,
            ));
        }
        return Err(format!(
            "{}: old_text not found (it must match exactly, whitespace included)",
            parent.path.display()
        ));
    }
    if count > 1 {
        return Err(format!(
            "{}: old_text occurs {count} times; include more surrounding text so it matches once",
            parent.path.display()
        ));
    }
    let new = text.replacen(a.old_text.as_str(), &a.new_text, 1);
    let r = Replace {
        st: Some(&st),
        old: &old,
        new: new.as_bytes(),
        mode: None,
        validate: a.validate.as_ref(),
        verb: "edited",
    };
    replace_content(&parent, r, ctx)
}

fn append_file(a: &AppendFileArgs, ctx: &Ctx) -> OpResult {
    let parent = paths::parent(&a.path)?;
    let st = existing(&parent)?;
    let old = match &st {
        Some(_) => read_existing(&parent, FILE_WRITE_MAX)?,
        None => Vec::new(),
    };
    if a.content.is_empty() && st.is_some() {
        return Ok((
            format!("{}: nothing to append", parent.path.display()),
            None,
        ));
    }
    let mut new = old.clone();
    new.extend_from_slice(a.content.as_bytes());
    let verb = if st.is_some() {
        "appended to"
    } else {
        "created"
    };
    let r = Replace {
        st: st.as_ref(),
        old: &old,
        new: &new,
        mode: None,
        validate: None,
        verb,
    };
    replace_content(&parent, r, ctx)
}

/// Resolves a destination: an existing directory means "inside it".
fn destination(dst: &str, src_name: &OsStr) -> Result<Parent, String> {
    let p = paths::parent(dst)?;
    match paths::lstat_at(p.raw(), &p.name) {
        Ok(st) if paths::is_dir(&st) => {
            let inner = p.path.join(src_name);
            paths::parent(&inner.display().to_string())
        }
        _ => Ok(p),
    }
}

fn same_content(a: RawFd, b: RawFd) -> bool {
    let (Ok(sa), Ok(sb)) = (paths::fstat(a), paths::fstat(b)) else {
        return false;
    };
    if sa.st_size != sb.st_size || sa.st_size as usize > FILE_WRITE_MAX {
        return false;
    }
    let p = Path::new("");
    match (
        read_fd_limited(a, FILE_WRITE_MAX, p),
        read_fd_limited(b, FILE_WRITE_MAX, p),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn rewind(fd: RawFd) {
    // SAFETY: integer arguments only.
    unsafe { libc::lseek(fd, 0, libc::SEEK_SET) };
}

fn copy_file(a: &CopyFileArgs, ctx: &Ctx) -> OpResult {
    let sp = paths::parent(&a.source)?;
    let sst = paths::lstat_at(sp.raw(), &sp.name).map_err(|e| io_err(&sp.path, e))?;
    if !paths::is_reg(&sst) {
        return Err(format!(
            "{} is not a regular file (copy_file copies files)",
            sp.path.display()
        ));
    }
    let src = paths::open_at(sp.raw(), &sp.name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
        .map_err(|e| io_err(&sp.path, e))?;
    let dp = destination(&a.destination, &sp.name)?;
    let dst_st = existing(&dp)?;
    let mut old = Vec::new();
    if dst_st.is_some() {
        let dfd = paths::open_at(dp.raw(), &dp.name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
            .map_err(|e| io_err(&dp.path, e))?;
        if same_content(src.as_raw_fd(), dfd.as_raw_fd()) {
            return Ok((
                format!(
                    "{} already has the content of {}; nothing copied",
                    dp.path.display(),
                    sp.path.display()
                ),
                None,
            ));
        }
        rewind(dfd.as_raw_fd());
        if (dst_st.map(|s| s.st_size).unwrap_or(0) as usize) <= DIFF_MAX_INPUT {
            old = read_fd_limited(dfd.as_raw_fd(), DIFF_MAX_INPUT, &dp.path).unwrap_or_default();
        }
        rewind(src.as_raw_fd());
    }
    let bak = match (&dst_st, ctx.backup) {
        (Some(st), true) => Some(backup(&dp, st, ctx)?),
        _ => None,
    };
    let owner = dst_st.map(|s| (s.st_uid, s.st_gid));
    let mode = mode_of(&sst) & 0o777;
    atomic_write(&dp, Source::Fd(src.as_raw_fd()), mode, owner, None, ctx)?;
    let new = if (sst.st_size as usize) <= DIFF_MAX_INPUT {
        rewind(src.as_raw_fd());
        read_fd_limited(src.as_raw_fd(), DIFF_MAX_INPUT, &sp.path).unwrap_or_default()
    } else {
        Vec::new()
    };
    let d = if dst_st.is_some() || is_text(&new) {
        diff(&dp.path, &old, &new)
    } else {
        String::new()
    };
    let p = quote(&dp.path);
    let rollback = match (&bak, &dst_st) {
        (Some(b), _) => format!("cp -p {} {p}", quote(b)),
        (None, None) => format!("rm {p}"),
        (None, Some(_)) => "no backup was kept (the previous content is not recoverable)".into(),
    };
    Ok((
        format!(
            "copied {} to {} ({} bytes)",
            sp.path.display(),
            dp.path.display(),
            sst.st_size
        ),
        Some(FileChange {
            path: dp.path.display().to_string(),
            diff: d,
            backup: bak.map(|b| b.display().to_string()),
            rollback,
        }),
    ))
}

fn move_file(a: &MoveFileArgs, ctx: &Ctx) -> OpResult {
    let sp = paths::parent(&a.source)?;
    let sst = paths::lstat_at(sp.raw(), &sp.name).map_err(|e| io_err(&sp.path, e))?;
    let dp = destination(&a.destination, &sp.name)?;
    if dp.path == sp.path {
        return Ok((
            format!("{} is already there; nothing moved", sp.path.display()),
            None,
        ));
    }
    let dst_st = match paths::lstat_at(dp.raw(), &dp.name) {
        Ok(st) => Some(st),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
        Err(e) => return Err(io_err(&dp.path, e)),
    };
    if let Some(st) = &dst_st {
        if paths::is_dir(st) || paths::is_symlink(st) {
            return Err(format!(
                "{} exists and is not a regular file",
                dp.path.display()
            ));
        }
    }
    let bak = match (&dst_st, ctx.backup) {
        (Some(st), true) => Some(backup(&dp, st, ctx)?),
        _ => None,
    };
    match rename_at(sp.raw(), &sp.name, dp.raw(), &dp.name, 0) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) && paths::is_reg(&sst) => {
            let src = paths::open_at(sp.raw(), &sp.name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
                .map_err(|e| io_err(&sp.path, e))?;
            atomic_write(
                &dp,
                Source::Fd(src.as_raw_fd()),
                mode_of(&sst),
                Some((sst.st_uid, sst.st_gid)),
                None,
                ctx,
            )?;
            unlink_at(sp.raw(), &sp.name, false).map_err(|e| io_err(&sp.path, e))?;
        }
        Err(e) => return Err(io_err(&dp.path, e)),
    }
    fsync_dir(&sp);
    fsync_dir(&dp);
    let mut rollback = format!("mv {} {}", quote(&dp.path), quote(&sp.path));
    if let Some(b) = &bak {
        rollback.push_str(&format!(" && mv {} {}", quote(b), quote(&dp.path)));
    }
    Ok((
        format!("moved {} to {}", sp.path.display(), dp.path.display()),
        Some(FileChange {
            path: dp.path.display().to_string(),
            diff: String::new(),
            backup: bak.map(|b| b.display().to_string()),
            rollback,
        }),
    ))
}

fn remove_tree(dirfd: RawFd, name: &OsStr, depth: usize, path: &Path) -> Result<u64, String> {
    if depth > 512 {
        return Err(format!("{}: directory tree too deep", path.display()));
    }
    let fd = paths::open_at(dirfd, name, libc::O_RDONLY | libc::O_DIRECTORY, 0)
        .map_err(|e| io_err(path, e))?;
    let mut count = 0u64;
    loop {
        // Re-list after each batch: entries are removed as we go.
        let names = list_names(fd.as_raw_fd()).map_err(|e| io_err(path, e))?;
        if names.is_empty() {
            break;
        }
        for n in names {
            let child = path.join(&n);
            let st = match paths::lstat_at(fd.as_raw_fd(), &n) {
                Ok(st) => st,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => return Err(io_err(&child, e)),
            };
            if paths::is_dir(&st) {
                count += remove_tree(fd.as_raw_fd(), &n, depth + 1, &child)?;
            } else {
                unlink_at(fd.as_raw_fd(), &n, false).map_err(|e| io_err(&child, e))?;
                count += 1;
            }
        }
    }
    unlink_at(dirfd, name, true).map_err(|e| io_err(path, e))?;
    Ok(count + 1)
}

fn list_names(fd: RawFd) -> io::Result<Vec<OsString>> {
    let c = c".";
    // SAFETY: reopening "." of a live directory fd.
    let dfd = unsafe {
        libc::openat(
            fd,
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: dfd was just returned and is ours.
    let dfd = unsafe { OwnedFd::from_raw_fd(dfd) };
    let rd = std::fs::read_dir(format!("/proc/self/fd/{}", dfd.as_raw_fd()))?;
    let mut out = Vec::new();
    for e in rd {
        out.push(e?.file_name());
        if out.len() >= 4096 {
            break;
        }
    }
    Ok(out)
}

fn remove_file(a: &RemoveFileArgs, ctx: &Ctx) -> OpResult {
    let parent = paths::parent(&a.path)?;
    let st = match paths::lstat_at(parent.raw(), &parent.name) {
        Ok(st) => st,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            return Ok((
                format!("{} does not exist; nothing removed", parent.path.display()),
                None,
            ))
        }
        Err(e) => return Err(io_err(&parent.path, e)),
    };
    let recursive = a.recursive.unwrap_or(false);
    let p = quote(&parent.path);
    let old = if paths::is_reg(&st) && (st.st_size as usize) <= DIFF_MAX_INPUT {
        read_existing(&parent, DIFF_MAX_INPUT).unwrap_or_default()
    } else {
        Vec::new()
    };
    let d = diff(&parent.path, &old, b"");
    if ctx.backup && !paths::is_symlink(&st) {
        // Keep it under the backup name instead of deleting it.
        let mut bak = parent.name.clone();
        bak.push(format!(".sysward.{}.bak", ctx.stamp));
        if paths::is_dir(&st) && !recursive {
            unlink_at(parent.raw(), &parent.name, true).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY) => format!(
                    "{} is a non-empty directory: pass recursive=true",
                    parent.path.display()
                ),
                _ => io_err(&parent.path, e),
            })?;
            return Ok((
                format!("removed empty directory {}", parent.path.display()),
                Some(FileChange {
                    path: parent.path.display().to_string(),
                    diff: String::new(),
                    backup: None,
                    rollback: format!("mkdir -m {:04o} {p}", mode_of(&st)),
                }),
            ));
        }
        rename_at(
            parent.raw(),
            &parent.name,
            parent.raw(),
            &bak,
            libc::RENAME_NOREPLACE,
        )
        .map_err(|e| io_err(&parent.path, e))?;
        fsync_dir(&parent);
        let b = parent.sibling(&bak);
        return Ok((
            format!(
                "removed {} (kept as {})",
                parent.path.display(),
                b.display()
            ),
            Some(FileChange {
                path: parent.path.display().to_string(),
                diff: d,
                backup: Some(b.display().to_string()),
                rollback: format!("mv {} {p}", quote(&b)),
            }),
        ));
    }
    let (what, rollback) = if paths::is_dir(&st) {
        if recursive {
            let n = remove_tree(parent.raw(), &parent.name, 0, &parent.path)?;
            (
                format!("removed directory {} ({n} entries)", parent.path.display()),
                "not recoverable (no backup was requested)".to_string(),
            )
        } else {
            unlink_at(parent.raw(), &parent.name, true).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOTEMPTY) => format!(
                    "{} is a non-empty directory: pass recursive=true",
                    parent.path.display()
                ),
                _ => io_err(&parent.path, e),
            })?;
            (
                format!("removed empty directory {}", parent.path.display()),
                format!("mkdir -m {:04o} {p}", mode_of(&st)),
            )
        }
    } else {
        unlink_at(parent.raw(), &parent.name, false).map_err(|e| io_err(&parent.path, e))?;
        let rb = if !d.is_empty() {
            format!("recreate {p} from the diff above (patch -R)")
        } else {
            "not recoverable (no backup was requested)".to_string()
        };
        (format!("removed {}", parent.path.display()), rb)
    };
    fsync_dir(&parent);
    Ok((
        what,
        Some(FileChange {
            path: parent.path.display().to_string(),
            diff: d,
            backup: None,
            rollback,
        }),
    ))
}

fn mkdir(a: &MkdirArgs) -> OpResult {
    let path = paths::check_path(&a.path)?;
    let mode = a
        .mode
        .as_deref()
        .map(parse_mode)
        .transpose()?
        .unwrap_or(0o755);
    let mut fd = paths::openat2_nofollow(
        libc::AT_FDCWD,
        Path::new("/"),
        libc::O_PATH | libc::O_DIRECTORY,
        0,
    )
    .map_err(|e| io_err(Path::new("/"), e))?;
    let mut here = PathBuf::from("/");
    let mut created: Vec<PathBuf> = Vec::new();
    for comp in path.components().skip(1) {
        let name = comp.as_os_str();
        here.push(name);
        let c = cname(name)?;
        // SAFETY: `c` is NUL-terminated and outlives the call.
        let rc = unsafe { libc::mkdirat(fd.as_raw_fd(), c.as_ptr(), mode) };
        let made = if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(io_err(&here, e));
            }
            false
        } else {
            true
        };
        let next = paths::open_at(fd.as_raw_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ENOTDIR) || e.raw_os_error() == Some(libc::ELOOP)
                {
                    format!(
                        "{} exists and is not a directory (symlinks are not followed)",
                        here.display()
                    )
                } else {
                    io_err(&here, e)
                }
            })?;
        if made {
            // mkdirat applied the umask; set the exact mode.
            let proc = format!("/proc/self/fd/{}", next.as_raw_fd());
            std::fs::set_permissions(&proc, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .map_err(|e| io_err(&here, e))?;
            created.push(here.clone());
        }
        fd = next;
    }
    if created.is_empty() {
        return Ok((
            format!("{} already exists; nothing created", path.display()),
            None,
        ));
    }
    let rollback = format!(
        "rmdir {}",
        created
            .iter()
            .rev()
            .map(|p| quote(p))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Ok((
        format!(
            "created {} (mode {:04o})",
            created
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            mode
        ),
        Some(FileChange {
            path: path.display().to_string(),
            diff: String::new(),
            backup: None,
            rollback,
        }),
    ))
}

/// Opens the last component as O_PATH without following it; refuses symlinks.
fn target_fd(p: &str) -> Result<(Parent, OwnedFd, libc::stat), String> {
    let parent = paths::parent(p)?;
    let fd = paths::open_at(parent.raw(), &parent.name, libc::O_PATH, 0)
        .map_err(|e| io_err(&parent.path, e))?;
    let st = paths::fstat(fd.as_raw_fd()).map_err(|e| io_err(&parent.path, e))?;
    if paths::is_symlink(&st) {
        return Err(format!(
            "{} is a symbolic link; use the real path",
            parent.path.display()
        ));
    }
    Ok((parent, fd, st))
}

fn chmod(a: &ChmodArgs) -> OpResult {
    let mode = parse_mode(&a.mode)?;
    let (parent, fd, st) = target_fd(&a.path)?;
    let old = mode_of(&st);
    if old == mode {
        return Ok((
            format!("{} already has mode {mode:04o}", parent.path.display()),
            None,
        ));
    }
    // chmod through the O_PATH descriptor: the inode we checked, not a path.
    let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
    std::fs::set_permissions(&proc, std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(|e| io_err(&parent.path, e))?;
    Ok((
        format!(
            "mode of {} changed from {old:04o} to {mode:04o}",
            parent.path.display()
        ),
        Some(FileChange {
            path: parent.path.display().to_string(),
            diff: String::new(),
            backup: None,
            rollback: format!("chmod {old:04o} {}", quote(&parent.path)),
        }),
    ))
}

fn chown(a: &ChownArgs, ctx: &Ctx) -> OpResult {
    let (uid, gid) = ctx.chown_ids;
    if uid.is_none() && gid.is_none() {
        return Err("chown needs owner and/or group".into());
    }
    let (parent, fd, st) = target_fd(&a.path)?;
    if uid.is_none_or(|u| u == st.st_uid) && gid.is_none_or(|g| g == st.st_gid) {
        return Ok((
            format!("{} already has that owner and group", parent.path.display()),
            None,
        ));
    }
    let e = c"";
    // SAFETY: AT_EMPTY_PATH on a live O_PATH fd with an empty NUL-terminated
    // name: changes exactly the inode we checked. u32::MAX means "unchanged".
    let rc = unsafe {
        libc::fchownat(
            fd.as_raw_fd(),
            e.as_ptr(),
            uid.unwrap_or(u32::MAX),
            gid.unwrap_or(u32::MAX),
            libc::AT_EMPTY_PATH,
        )
    };
    if rc < 0 {
        return Err(io_err(&parent.path, io::Error::last_os_error()));
    }
    Ok((
        format!(
            "owner of {} changed from {}:{} to {}:{}",
            parent.path.display(),
            st.st_uid,
            st.st_gid,
            uid.unwrap_or(st.st_uid),
            gid.unwrap_or(st.st_gid)
        ),
        Some(FileChange {
            path: parent.path.display().to_string(),
            diff: String::new(),
            backup: None,
            rollback: format!("chown {}:{} {}", st.st_uid, st.st_gid, quote(&parent.path)),
        }),
    ))
}
