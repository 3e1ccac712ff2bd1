//! The read-only review tools: `diff_files` (a unified diff of two files, or
//! of a file and proposed content) and `tail_file` (the last lines of a
//! file, optionally followed for a few seconds).

use crate::fileops::{io_err, is_text};
use crate::paths;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};
use sysward_ipc::exec::{DiffFilesArgs, TailFileArgs};

/// Files compared up to this size.
const DIFF_MAX_INPUT: u64 = 8 << 20;
/// Diff text cap.
const DIFF_MAX_OUTPUT: usize = 1 << 20;
/// tail_file output cap (what the last lines and the followed text may use).
const TAIL_MAX_OUTPUT: usize = 1 << 20;
const TAIL_DEFAULT_LINES: u64 = 100;
/// How often a followed file is looked at.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Opens a regular file for reading (never a FIFO or device: opening one
/// could block or act).
fn open_regular(path: &Path) -> Result<(std::fs::File, u64), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    let st = paths::fstat(f.as_raw_fd()).map_err(|e| io_err(path, e))?;
    if paths::is_dir(&st) {
        return Err(format!("{} is a directory", path.display()));
    }
    if !paths::is_reg(&st) {
        return Err(format!("{} is not a regular file", path.display()));
    }
    Ok((f, u64::try_from(st.st_size).unwrap_or(0)))
}

fn read_text(path: &Path) -> Result<String, String> {
    let (f, size) = open_regular(path)?;
    if size > DIFF_MAX_INPUT {
        return Err(format!(
            "{} is larger than {} MiB; compare parts of it with a command",
            path.display(),
            DIFF_MAX_INPUT >> 20
        ));
    }
    let mut buf = Vec::new();
    f.take(DIFF_MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| io_err(path, e))?;
    if !is_text(&buf) {
        return Err(format!(
            "{} is not UTF-8 text; compare it with `cmp` or `xxd`",
            path.display()
        ));
    }
    String::from_utf8(buf).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

fn cap(mut text: String, max: usize, note: &str) -> String {
    if text.len() > max {
        let mut cut = max;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(note);
    }
    text
}

pub fn diff_files(a: &DiffFilesArgs) -> Result<String, String> {
    let path = paths::check_path(&a.path)?;
    let old = read_text(&path)?;
    let (new, new_name) = match (&a.other, &a.content) {
        (Some(other), None) => {
            let other = paths::check_path(other)?;
            (read_text(&other)?, other.display().to_string())
        }
        (None, Some(content)) => (content.clone(), format!("{} (proposed)", path.display())),
        _ => return Err("diff_files needs exactly one of `other` or `content`".to_string()),
    };
    let d = similar::TextDiff::configure()
        .timeout(Duration::from_secs(5))
        .diff_lines(&old, &new);
    if d.ratio() >= 1.0 && old == new {
        return Ok(format!("{} and {new_name}: no differences", path.display()));
    }
    let text = d
        .unified_diff()
        .context_radius(3)
        .header(&path.display().to_string(), &new_name)
        .to_string();
    Ok(cap(text, DIFF_MAX_OUTPUT, "\n[diff truncated]\n"))
}

/// The start offset of the last `lines` lines of `f` (of `size` bytes),
/// reading backwards in blocks and never more than the output cap.
fn last_lines_start(f: &mut std::fs::File, size: u64, lines: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 << 10;
    let mut pos = size;
    let mut newlines = 0u64;
    let mut buf = vec![0u8; BLOCK as usize];
    // A final newline ends the last line; it does not start another.
    let mut skip_last = true;
    while pos > 0 && size - pos < TAIL_MAX_OUTPUT as u64 {
        let n = BLOCK.min(pos);
        pos -= n;
        f.seek(SeekFrom::Start(pos))?;
        let chunk = &mut buf[..n as usize];
        f.read_exact(chunk)?;
        for (i, b) in chunk.iter().enumerate().rev() {
            if *b != b'\n' {
                skip_last = false;
                continue;
            }
            if skip_last {
                skip_last = false;
                continue;
            }
            newlines += 1;
            if newlines == lines {
                return Ok(pos + i as u64 + 1);
            }
        }
    }
    Ok(pos)
}

pub fn tail_file(a: &TailFileArgs) -> Result<String, String> {
    let path = paths::check_path(&a.path)?;
    let (mut f, size) = open_regular(&path)?;
    let lines = a.lines.unwrap_or(TAIL_DEFAULT_LINES).max(1);
    let start = last_lines_start(&mut f, size, lines).map_err(|e| io_err(&path, e))?;
    f.seek(SeekFrom::Start(start))
        .map_err(|e| io_err(&path, e))?;
    let mut buf = Vec::new();
    (&mut f)
        .take(size - start)
        .read_to_end(&mut buf)
        .map_err(|e| io_err(&path, e))?;
    if buf.iter().take(8192).any(|&b| b == 0) {
        return Err(format!(
            "{} is a binary file; use a command such as `xxd`",
            path.display()
        ));
    }
    let mut out = String::from_utf8_lossy(&buf).into_owned();
    let mut pos = size;
    let follow = a.follow_seconds.unwrap_or(0);
    if follow > 0 {
        let deadline = Instant::now() + Duration::from_secs(follow);
        let mut appended = 0usize;
        let mut note = String::new();
        while Instant::now() < deadline && out.len() < TAIL_MAX_OUTPUT {
            std::thread::sleep(FOLLOW_POLL);
            let now = paths::fstat(f.as_raw_fd())
                .map(|st| u64::try_from(st.st_size).unwrap_or(0))
                .map_err(|e| io_err(&path, e))?;
            if now < pos {
                out.push_str("\n[file truncated; following from its start]\n");
                pos = 0;
            }
            if now > pos {
                f.seek(SeekFrom::Start(pos)).map_err(|e| io_err(&path, e))?;
                let room = (TAIL_MAX_OUTPUT - out.len()) as u64;
                let mut more = Vec::new();
                (&mut f)
                    .take((now - pos).min(room))
                    .read_to_end(&mut more)
                    .map_err(|e| io_err(&path, e))?;
                pos += more.len() as u64;
                appended += more.len();
                out.push_str(&String::from_utf8_lossy(&more));
            }
        }
        if out.len() >= TAIL_MAX_OUTPUT {
            note = " (output cap reached)".to_string();
        }
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "[followed {} for {follow} s: {appended} bytes appended{note}]\n",
            path.display()
        ));
    }
    Ok(cap(out, TAIL_MAX_OUTPUT + 256, "\n[output truncated]\n"))
}
