//! The host's installed source packages and release, read for `cve_lookup`
//! by the confined network executor (as the unprivileged account, with
//! Landlock granting these files only): dpkg's status database and
//! os-release. Both are bounded; a malformed paragraph is skipped.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// dpkg's database of installed packages.
pub const DPKG_STATUS: &str = "/var/lib/dpkg/status";
/// The release (`VERSION_CODENAME`); `/etc/os-release` is usually a
/// symlink to the second.
pub const OS_RELEASE: &[&str] = &["/etc/os-release", "/usr/lib/os-release"];

/// The status database is refused beyond this size (a host with thousands
/// of packages has a few MiB).
const MAX_STATUS: u64 = 64 << 20;
const MAX_OS_RELEASE: u64 = 64 << 10;

/// Source package → installed source version.
pub type Installed = HashMap<String, String>;

fn read_bounded(path: &str, max: u64) -> Result<String, String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {path}: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("{path} is larger than {max} bytes"));
    }
    Ok(text)
}

/// The files [`installed`] and [`release`] read (for the Landlock grant).
pub fn files() -> Vec<&'static str> {
    std::iter::once(DPKG_STATUS)
        .chain(OS_RELEASE.iter().copied())
        .filter(|p| Path::new(p).exists())
        .collect()
}

/// The source packages installed (status `install ok installed`) and their
/// source versions: `Source: name (version)` when the binary's version
/// differs (a binNMU such as `5.2.15-2+b8`), else the binary's `Version`.
pub fn installed() -> Result<Installed, String> {
    let text = read_bounded(DPKG_STATUS, MAX_STATUS)?;
    Ok(parse_status(&text))
}

pub fn parse_status(text: &str) -> Installed {
    let mut out = Installed::new();
    for para in text.split("\n\n") {
        let (mut package, mut source, mut version, mut ok) = (None, None, None, false);
        for line in para.lines() {
            if let Some(v) = line.strip_prefix("Package: ") {
                package = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Source: ") {
                source = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Version: ") {
                version = Some(v.trim());
            } else if let Some(v) = line.strip_prefix("Status: ") {
                ok = v.trim() == "install ok installed";
            }
        }
        let (Some(package), Some(version), true) = (package, version, ok) else {
            continue;
        };
        let (name, version) = match source {
            Some(s) => match s.split_once(" (") {
                Some((name, v)) => (name, v.trim_end_matches(')')),
                None => (s, version),
            },
            None => (package, version),
        };
        if sysward_ipc::cve::is_package_name(name) && version.len() <= 128 {
            out.insert(name.to_string(), version.to_string());
        }
    }
    out
}

/// The release codename from os-release (`VERSION_CODENAME=bookworm`).
pub fn release() -> Result<String, String> {
    let text = read_bounded(OS_RELEASE[0], MAX_OS_RELEASE)
        .or_else(|_| read_bounded(OS_RELEASE[1], MAX_OS_RELEASE))?;
    codename(&text).ok_or_else(|| {
        "os-release has no VERSION_CODENAME: the Debian tracker's releases cannot be matched to this host".to_string()
    })
}

pub fn codename(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("VERSION_CODENAME="))
        .map(|v| v.trim().trim_matches('"').to_string())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 64
                && v.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_versions_come_from_the_status_database() {
        let status = "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b8\nSource: bash (5.2.15-2)\n\nPackage: libc6\nStatus: install ok installed\nSource: glibc\nVersion: 2.36-9+deb12u10\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n\nPackage: coreutils\nStatus: install ok installed\nVersion: 9.1-1\n";
        let got = parse_status(status);
        assert_eq!(got.get("bash").map(String::as_str), Some("5.2.15-2"));
        assert_eq!(
            got.get("glibc").map(String::as_str),
            Some("2.36-9+deb12u10")
        );
        assert_eq!(got.get("coreutils").map(String::as_str), Some("9.1-1"));
        assert!(!got.contains_key("gone") && !got.contains_key("libc6"));
        assert_eq!(
            codename("ID=debian\nVERSION_CODENAME=bookworm\n").as_deref(),
            Some("bookworm")
        );
        assert_eq!(codename("VERSION_CODENAME=../x\n"), None);
    }
}
