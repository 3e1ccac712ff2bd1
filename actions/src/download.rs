//! `download`: a URL to a file, through the confined network executor.
//!
//! The broker opens the temporary file itself (`O_EXCL|O_NOFOLLOW`, 0600,
//! relative to the target directory's descriptor) and hands the executor
//! only that descriptor (fd 4): the executor never gets a path. The broker
//! then hashes what is in the file (never a hash the executor reports),
//! compares it with the expected one, and only then renames it into place
//! (fsync of the file, rename, fsync of the directory). Any failure removes
//! the temporary file, so a refused or failed download leaves nothing.

use crate::project::hex;
use nix::fcntl::{openat, renameat2, OFlag, RenameFlags};
use nix::sys::stat::{fchmod, fstat, fstatat, Mode};
use nix::unistd::{fsync, linkat, unlinkat, UnlinkatFlags};
use sha2::{Digest, Sha256, Sha512};
use std::io::{Read, Seek};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use sysward_ipc::net::DownloadArgs;

/// The largest checksum file read (a few thousand lines).
pub const CHECKSUM_MAX_BODY: u64 = 1 << 20;
/// A checksum file line longer than this is refused.
const CHECKSUM_MAX_LINE: usize = 4096;
/// The longest time a download may ask for.
pub const MAX_DOWNLOAD_SECS: u64 = 3600;
/// Where downloads go by default, under the state directory.
pub const DOWNLOADS_DIR: &str = ".agent/downloads";

/// What the downloaded bytes must hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Nothing: the result reports the sha256 and says it was not verified.
    Nothing,
    Sha256(String),
    Sha512(String),
    /// The line for the file's name in this sha256sum/sha512sum file.
    ChecksumUrl(String),
}

/// The broker's plan of one download.
#[derive(Debug, Clone)]
pub struct DownloadPlan {
    pub url: String,
    /// The file created (absolute).
    pub target: PathBuf,
    pub expect: Expect,
    pub overwrite: bool,
    /// The name a checksum file lists it by (the URL's last segment).
    pub listed_name: String,
}

/// The last path segment of `url` when it is a plain file name.
fn url_file_name(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let path = rest.split(['?', '#']).next()?;
    let (_, path) = path.split_once('/')?;
    let name = path.rsplit('/').next()?;
    plain_name(name).then(|| name.to_string())
}

/// A file name of letters, digits and `._+-`, not `.`/`..`, not hidden.
fn plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'+' | b'-'))
}

/// Lower-case hex of exactly `len` digits.
fn check_hex(value: &str, len: usize, what: &str) -> Result<String, String> {
    let v = value.trim().to_ascii_lowercase();
    if v.len() != len || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("download: {what} must be {len} hex digits"));
    }
    Ok(v)
}

/// Decodes and checks the arguments (`check_url` is the network tools' URL
/// check). The target is absolute: the policy judges it as write_file's.
pub fn plan(
    a: DownloadArgs,
    cwd: &Path,
    check_url: impl Fn(&str) -> Result<(), String>,
) -> Result<(DownloadPlan, Option<String>, Option<u64>), String> {
    check_url(&a.url)?;
    let expect = match (a.sha256, a.sha512, a.checksum_url) {
        (None, None, None) => Expect::Nothing,
        (Some(h), None, None) => Expect::Sha256(check_hex(&h, 64, "sha256")?),
        (None, Some(h), None) => Expect::Sha512(check_hex(&h, 128, "sha512")?),
        (None, None, Some(u)) => {
            check_url(&u).map_err(|e| format!("download: checksum_url: {e}"))?;
            Expect::ChecksumUrl(u)
        }
        _ => {
            return Err("download: give at most one of sha256, sha512 and checksum_url".to_string())
        }
    };
    let from_url = url_file_name(&a.url);
    let target = match a.path.as_deref() {
        None | Some("") => {
            let name = from_url.clone().ok_or_else(|| {
                "download: the URL does not end in a plain file name; give `path`".to_string()
            })?;
            cwd.join(DOWNLOADS_DIR).join(name)
        }
        Some(p) if p.contains('\0') || p.len() > 4096 => {
            return Err("download: path must be under 4096 bytes without NUL".to_string())
        }
        Some(p) => {
            let base = if Path::new(p).is_absolute() {
                PathBuf::from(p)
            } else {
                cwd.join(p)
            };
            if p.ends_with('/') {
                let name = from_url.clone().ok_or_else(|| {
                    "download: the URL does not end in a plain file name; give the file's path"
                        .to_string()
                })?;
                base.join(name)
            } else {
                base
            }
        }
    };
    let target = normalize(&target)?;
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| "download: the target has no file name".to_string())?
        .to_string();
    if let Some(t) = a.timeout_seconds {
        if t == 0 || t > MAX_DOWNLOAD_SECS {
            return Err(format!(
                "download: timeout_seconds must be 1 to {MAX_DOWNLOAD_SECS}"
            ));
        }
    }
    let listed_name = from_url.unwrap_or(name);
    Ok((
        DownloadPlan {
            url: a.url,
            target,
            expect,
            overwrite: a.overwrite.unwrap_or(false),
            listed_name,
        },
        a.reason,
        a.timeout_seconds,
    ))
}

/// `.` and `..` removed lexically; `..` above the root is refused.
fn normalize(p: &Path) -> Result<PathBuf, String> {
    use std::path::Component;
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err("download: the path climbs above /".to_string());
                }
            }
            Component::Normal(n) => out.push(n),
            Component::Prefix(_) => return Err("download: unusable path".to_string()),
        }
    }
    Ok(out)
}

/// The directory a download is written in, opened without following a
/// symlink in any component of its path (the policy decided on the real
/// path; a path through a symlink, or one swapped for a symlink since the
/// decision, is refused); the default downloads directory is made (0700)
/// when missing.
pub fn open_dir(plan: &DownloadPlan, state_dir: &Path) -> Result<(OwnedFd, String), String> {
    use nix::fcntl::{openat2, OpenHow, ResolveFlag, AT_FDCWD};
    let dir = plan
        .target
        .parent()
        .ok_or_else(|| "the target has no directory".to_string())?;
    if dir == state_dir.join(DOWNLOADS_DIR) {
        crate::project::ensure_private_dir(dir).map_err(|e| crate::error::chain(&e))?;
    }
    let how = OpenHow::new()
        .flags(OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_RDONLY)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = openat2(AT_FDCWD, dir, how).map_err(|e| match e {
        nix::errno::Errno::ELOOP => format!(
            "download: the path of {} goes through a symlink; name the directory by its real path (realpath)",
            dir.display()
        ),
        e => format!("cannot open {}: {e}", dir.display()),
    })?;
    let name = plan
        .target
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| "the target has no file name".to_string())?
        .to_string();
    Ok((fd, name))
}

/// Whether `name` exists in `dir` (a symlink counts; it is never followed).
pub fn exists(dir: &OwnedFd, name: &str) -> Result<Option<bool>, String> {
    match fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st.st_mode & libc::S_IFMT == libc::S_IFREG)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(format!("cannot check {name}: {e}")),
    }
}

/// A temporary file in the target directory, removed when dropped unless
/// it was renamed into place.
pub struct TempFile<'a> {
    dir: &'a OwnedFd,
    pub name: String,
    pub file: std::fs::File,
    placed: bool,
}

impl<'a> TempFile<'a> {
    pub fn create(dir: &'a OwnedFd, for_name: &str, kind: &str) -> Result<TempFile<'a>, String> {
        let tag = crate::project::random_hex(4).map_err(|e| crate::error::chain(&e))?;
        let n = u64::from_str_radix(&tag, 16).unwrap_or(0);
        let mut short: String = for_name.chars().take(64).collect();
        short.retain(|c| c != '/');
        // The stale-temporaries pattern (`.NAME.sysward-KIND.PID.N`, the
        // broker's pid): what a killed broker leaves is swept next session.
        let name = format!(".{short}.sysward-{kind}.{}.{n}", std::process::id());
        let fd = openat(
            dir.as_fd(),
            name.as_str(),
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| format!("cannot create a temporary file beside {for_name}: {e}"))?;
        Ok(TempFile {
            dir,
            name,
            file: std::fs::File::from(fd),
            placed: false,
        })
    }

    /// Its size now, from the broker's own fstat.
    pub fn size(&self) -> Result<u64, String> {
        fstat(self.file.as_fd())
            .map(|st| st.st_size as u64)
            .map_err(|e| format!("cannot stat the temporary file: {e}"))
    }

    /// Reads it back from the start (a checksum file, small).
    pub fn read_all(&mut self, max: u64) -> Result<Vec<u8>, String> {
        self.file
            .rewind()
            .map_err(|e| format!("cannot read the checksum file back: {e}"))?;
        let mut buf = Vec::new();
        (&self.file)
            .take(max + 1)
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read the checksum file back: {e}"))?;
        if buf.len() as u64 > max {
            return Err(format!("the checksum file is larger than {max} bytes"));
        }
        Ok(buf)
    }

    /// The sha256 and sha512 of what is in the file.
    pub fn hashes(&mut self) -> Result<(String, String), String> {
        self.file
            .rewind()
            .map_err(|e| format!("cannot read the download back: {e}"))?;
        let mut s256 = Sha256::new();
        let mut s512 = Sha512::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = self
                .file
                .read(&mut buf)
                .map_err(|e| format!("cannot read the download back: {e}"))?;
            if n == 0 {
                break;
            }
            s256.update(&buf[..n]);
            s512.update(&buf[..n]);
        }
        Ok((hex(&s256.finalize()), hex(&s512.finalize())))
    }

    /// fsync, mode 0644, rename to `name` (replacing only when `replace`),
    /// fsync of the directory.
    pub fn place(mut self, name: &str, replace: bool) -> Result<(), String> {
        fchmod(self.file.as_fd(), Mode::from_bits_truncate(0o644))
            .map_err(|e| format!("cannot set the download's mode: {e}"))?;
        fsync(self.file.as_fd()).map_err(|e| format!("cannot sync the download: {e}"))?;
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::RENAME_NOREPLACE
        };
        renameat2(
            self.dir.as_fd(),
            self.name.as_str(),
            self.dir.as_fd(),
            name,
            flags,
        )
        .map_err(|e| match e {
            nix::errno::Errno::EEXIST => format!(
                "{name} appeared while downloading; nothing was replaced (overwrite: true replaces it)"
            ),
            e => format!("cannot rename the download to {name}: {e}"),
        })?;
        self.placed = true;
        fsync(self.dir.as_fd()).map_err(|e| format!("cannot sync the directory: {e}"))?;
        Ok(())
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.placed {
            let _ = unlinkat(
                self.dir.as_fd(),
                self.name.as_str(),
                UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// Keeps the file being replaced as `NAME.sysward.STAMP.bak` (a hard link,
/// as write_file's backups are). Returns the backup's name.
pub fn backup(dir: &OwnedFd, name: &str) -> Result<String, String> {
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .unwrap_or_else(|_| "00000000-000000".into());
    for n in 0..100 {
        let bak = if n == 0 {
            format!("{name}.sysward.{stamp}.bak")
        } else {
            format!("{name}.sysward.{stamp}.bak.{n}")
        };
        match linkat(
            dir.as_fd(),
            name,
            dir.as_fd(),
            bak.as_str(),
            nix::fcntl::AtFlags::empty(),
        ) {
            Ok(()) => return Ok(bak),
            Err(nix::errno::Errno::EEXIST) => continue,
            Err(e) => return Err(format!("cannot back up {name}: {e}")),
        }
    }
    Err(format!("{name}: no free backup name"))
}

/// The expected hash for `name` in a sha256sum/sha512sum-format file:
/// `HEX  NAME` or `HEX *NAME` (also `./NAME`), comments and blank lines
/// skipped. Strict: a line that is neither is refused, as are two lines for
/// the name with different hashes. `Ok(None)`: the name is not listed.
pub fn checksum_for(body: &[u8], name: &str) -> Result<Option<Expect>, String> {
    let text =
        std::str::from_utf8(body).map_err(|_| "the checksum file is not UTF-8 text".to_string())?;
    let mut found: Option<Expect> = None;
    for (i, line) in text.lines().enumerate() {
        if line.len() > CHECKSUM_MAX_LINE {
            return Err(format!(
                "the checksum file's line {} is longer than {CHECKSUM_MAX_LINE} bytes",
                i + 1
            ));
        }
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((digest, rest)) = line.split_once(' ') else {
            return Err(format!(
                "the checksum file's line {} is not `HEX  NAME`",
                i + 1
            ));
        };
        let listed = rest
            .strip_prefix(' ')
            .or_else(|| rest.strip_prefix('*'))
            .ok_or_else(|| format!("the checksum file's line {} is not `HEX  NAME`", i + 1))?;
        let listed = listed.strip_prefix("./").unwrap_or(listed);
        let expect = match digest.len() {
            64 => Expect::Sha256(check_hex(digest, 64, "a sha256 in the checksum file")?),
            128 => Expect::Sha512(check_hex(digest, 128, "a sha512 in the checksum file")?),
            _ => {
                return Err(format!(
                    "the checksum file's line {} has no sha256 or sha512 digest",
                    i + 1
                ))
            }
        };
        if listed != name {
            continue;
        }
        match &found {
            Some(f) if *f != expect => {
                return Err(format!(
                    "the checksum file lists {name} twice with different digests"
                ))
            }
            _ => found = Some(expect),
        }
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const H256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    fn url_ok(u: &str) -> Result<(), String> {
        if u.starts_with("http://") || u.starts_with("https://") {
            Ok(())
        } else {
            Err("not http".into())
        }
    }

    fn args(v: serde_json::Value) -> DownloadArgs {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn plans_default_to_the_downloads_directory_and_take_one_checksum() {
        let cwd = Path::new("/var/lib/sysward");
        let (p, _, _) = plan(
            args(serde_json::json!({"url": "https://x.example/a/tool-1.2.tar.gz?x=1"})),
            cwd,
            url_ok,
        )
        .unwrap();
        assert_eq!(
            p.target,
            Path::new("/var/lib/sysward/.agent/downloads/tool-1.2.tar.gz")
        );
        assert_eq!(p.expect, Expect::Nothing);
        let (p, _, _) = plan(
            args(serde_json::json!({"url": "https://x.example/f", "path": "/opt/x/", "sha256": H256.to_uppercase()})),
            cwd,
            url_ok,
        )
        .unwrap();
        assert_eq!(p.target, Path::new("/opt/x/f"));
        assert_eq!(p.expect, Expect::Sha256(H256.into()));
        for bad in [
            serde_json::json!({"url": "https://x.example/f", "sha256": H256, "sha512": H256}),
            serde_json::json!({"url": "https://x.example/f", "sha256": "abc"}),
            serde_json::json!({"url": "https://x.example/", }),
            serde_json::json!({"url": "https://x.example/.hidden"}),
            serde_json::json!({"url": "https://x.example/f", "checksum_url": "file:///x"}),
            serde_json::json!({"url": "https://x.example/f", "path": "/../../"}),
            serde_json::json!({"url": "https://x.example/f", "timeout_seconds": 0}),
        ] {
            assert!(plan(args(bad.clone()), cwd, url_ok).is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<DownloadArgs>(
            serde_json::json!({"url": "https://x.example/f", "exec": true})
        )
        .is_err());
    }

    #[test]
    fn checksum_files_are_parsed_strictly() {
        let h512 = "a".repeat(128);
        let body = format!("# sums\n{H256}  other.tar\n{H256} *tool.tar\n\n{h512}  ./big.iso\n");
        assert_eq!(
            checksum_for(body.as_bytes(), "tool.tar").unwrap(),
            Some(Expect::Sha256(H256.into()))
        );
        assert_eq!(
            checksum_for(body.as_bytes(), "big.iso").unwrap(),
            Some(Expect::Sha512(h512.clone()))
        );
        assert_eq!(checksum_for(body.as_bytes(), "missing").unwrap(), None);
        for bad in [
            format!("{H256}\n"),
            format!("{H256}  a\n{}  a\n", "b".repeat(64)),
            "zz  a\n".to_string(),
            format!("{}  a\n", "a".repeat(5000)),
        ] {
            assert!(checksum_for(bad.as_bytes(), "a").is_err(), "{bad}");
        }
        assert!(checksum_for(&[0xff, 0xfe], "a").is_err());
    }
}
