//! One network request of a tool call: its own `sysward-net` executor,
//! spawned into the action's cgroup, handed one [`NetSpec`] and read back
//! one [`NetReport`]; redirects followed here, one new executor per hop
//! (its Landlock ruleset allows that hop's port only), at most
//! [`MAX_REDIRECTS`] of them and never from https to http. Each hop's
//! destination is checked again by its executor against the internal
//! ranges and `NETWORK_ALLOW`. A download's hops are each handed the
//! broker's temporary file on fd 4 (a fresh descriptor of it per executor).

use crate::action::Runner;
use crate::cancel::CancelToken;
use crate::redact::Redactor;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use sysward_ipc::net::{
    NetAllow, NetOp, NetReport, NetRequest, NetSpec, MAX_URL_LEN, NET_REPORT_MAX, NET_SPEC_MAX,
};
use sysward_ipc::Channel;

/// The executor binary, beside `sysward-exec`.
pub const NET_BINARY: &str = "sysward-net";

/// Redirects followed for one request.
pub const MAX_REDIRECTS: usize = 5;

/// The account the network executor drops to.
const NOBODY: &str = "nobody";
const NOBODY_ID: u32 = 65534;

/// Where the system's trust roots are (Debian's ca-certificates bundle; it
/// includes the local CAs in /usr/local/share/ca-certificates).
const SYSTEM_ROOTS: &str = "/etc/ssl/certs/ca-certificates.crt";
/// The bundle is refused beyond this size.
const MAX_ROOTS: u64 = 4 << 20;

/// An http(s) URL of printable ASCII without spaces, within the length cap.
/// The executor parses it fully; this keeps the broker's records and the
/// approval text honest.
pub fn check_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("the URL is longer than {MAX_URL_LEN} bytes"));
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "a URL must be printable ASCII without spaces (percent-encode the rest)".into(),
        );
    }
    let lower = url.to_ascii_lowercase();
    if !lower.starts_with("http://") && !lower.starts_with("https://") {
        return Err("only http:// and https:// URLs are fetched".into());
    }
    Ok(())
}

/// Percent-encodes a query string value (RFC 3986 unreserved kept).
pub fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether a redirect from `current` to `location` may be followed after
/// `hops` requests: at most [`MAX_REDIRECTS`], only to http(s), and never
/// from https down to plain http.
pub fn check_redirect(
    current: &str,
    location: &str,
    status: u16,
    hops: usize,
) -> Result<(), String> {
    let shown = crate::sanitize::one_line(location, 300);
    if hops > MAX_REDIRECTS {
        return Err(format!(
            "refused: more than {MAX_REDIRECTS} redirects (the last, HTTP {status}, to {shown}); fetch the final URL directly if it is the right one"
        ));
    }
    check_url(location).map_err(|e| format!("refused: HTTP {status} redirect to {shown}: {e}"))?;
    if current.to_ascii_lowercase().starts_with("https://")
        && location.to_ascii_lowercase().starts_with("http://")
    {
        return Err(format!(
            "refused: HTTP {status} redirect from https to plain http ({shown}); a downgrade is never followed"
        ));
    }
    Ok(())
}

/// What a network action needs from its session.
pub struct NetRun<'a> {
    pub runner: &'a Runner,
    pub audit: &'a crate::audit::Audit,
    pub cancel: &'a CancelToken,
    pub redactor: Arc<Redactor>,
    /// The policy's `NETWORK_ALLOW`.
    pub allow: Vec<NetAllow>,
    /// init.conf's `SEARCH_URL`.
    pub search_url: Option<String>,
    /// init.conf's `NVD_URL` and `DEBIAN_TRACKER_URL` (None: the real
    /// services).
    pub nvd_url: Option<String>,
    pub tracker_url: Option<String>,
    /// The policy's `NETWORK_EXTRA_ROOTS` (a PEM file).
    pub extra_roots: Option<String>,
    /// The policy's `MAX_DOWNLOAD_SIZE`.
    pub max_download: u64,
    /// The broker's state directory (the default downloads directory is
    /// under it).
    pub state_dir: PathBuf,
    /// Where a download's directory is noted, so that a temporary file a
    /// killed broker leaves there is swept by the next session.
    pub layout: &'a crate::project::Layout,
    pub action_id: String,
}

pub fn account() -> (u32, u32) {
    match nix::unistd::User::from_name(NOBODY) {
        Ok(Some(u)) if u.uid.as_raw() != 0 && u.gid.as_raw() != 0 => {
            (u.uid.as_raw(), u.gid.as_raw())
        }
        _ => (NOBODY_ID, NOBODY_ID),
    }
}

/// The system bundle (missing: none) and the operator's extra roots (an
/// error when named but unreadable: the operator meant them to be used).
fn trust_roots(extra: Option<&str>) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(SYSTEM_ROOTS) {
        let _ = f.take(MAX_ROOTS).read_to_end(&mut buf);
    }
    if let Some(path) = extra {
        let mut roots = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_ROOTS).read_to_end(&mut roots))
            .map_err(|e| {
                format!("cannot read NETWORK_EXTRA_ROOTS {path}: {e}; nothing was sent")
            })?;
        buf.push(b'\n');
        buf.extend_from_slice(&roots);
    }
    Ok(buf)
}

/// The requests of one tool call, each with its own executor, within one
/// deadline; the URLs asked (for the audit) and whether anything was sent.
pub struct Hops<'r, 'a> {
    pub run: &'r NetRun<'a>,
    pub net_path: PathBuf,
    pub account: (u32, u32),
    pub deadline: Instant,
    pub limit: Duration,
    pub urls: Vec<String>,
    pub ran: bool,
}

impl Hops<'_, '_> {
    /// One operation, following its redirects (each a new executor, given
    /// its own descriptor of `file` on fd 4 when there is one: a download's
    /// temporary file, opened by the broker).
    pub fn fetch(
        &mut self,
        op: NetOp,
        https_only_after: bool,
        max_body: u64,
        file: Option<BorrowedFd<'_>>,
    ) -> NetReport {
        let run = self.run;
        let needs_roots =
            matches!(&op, NetOp::Http { url, .. } if url.starts_with("https")) || https_only_after;
        let roots = if needs_roots {
            match trust_roots(run.extra_roots.as_deref()) {
                Ok(r) => r,
                Err(error) => return NetReport::Failed { error },
            }
        } else {
            Vec::new()
        };
        let mut spec = NetSpec {
            op,
            uid: self.account.0,
            gid: self.account.1,
            allow: run.allow.clone(),
            timeout_ms: 0,
            max_body,
            roots_pem: roots,
        };
        let mut redirects = 0;
        loop {
            if let NetOp::Http { url, .. } = &spec.op {
                self.urls.push(crate::sanitize::one_line(url, MAX_URL_LEN));
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left < Duration::from_millis(200) {
                return NetReport::Failed {
                    error: format!("no answer within the {} s time cap", self.limit.as_secs()),
                };
            }
            spec.timeout_ms = left.as_millis() as u64;
            let hop = self.urls.len().max(1);
            let fd = match file.map(|f| f.try_clone_to_owned()).transpose() {
                Ok(fd) => fd,
                Err(e) => {
                    return NetReport::Refused {
                        error: format!("cannot share the temporary file: {e}"),
                    }
                }
            };
            let report = one_hop(
                run,
                &self.net_path,
                &spec,
                fd,
                left,
                &format!("{}-{hop}", run.action_id),
            );
            self.ran |= !matches!(
                report,
                NetReport::Refused { .. } | NetReport::ConfinementFailed { .. }
            );
            let NetReport::Redirect { status, location } = &report else {
                return report;
            };
            let NetOp::Http {
                url: current,
                purpose,
            } = &spec.op
            else {
                return NetReport::Failed {
                    error: "a redirect answered a request that was not HTTP".into(),
                };
            };
            redirects += 1;
            if let Err(error) = check_redirect(current, location, *status, redirects) {
                return NetReport::Failed { error };
            }
            if location.to_ascii_lowercase().starts_with("https://") && spec.roots_pem.is_empty() {
                match trust_roots(run.extra_roots.as_deref()) {
                    Ok(r) => spec.roots_pem = r,
                    Err(error) => return NetReport::Failed { error },
                }
            }
            spec.op = NetOp::Http {
                url: location.clone(),
                purpose: purpose.clone(),
            };
        }
    }
}

/// One executor for one connection: spawned into the action's cgroup, given
/// its spec (and `file` on fd 4), killed (with everything in its cgroup)
/// when it overruns.
fn one_hop(
    run: &NetRun<'_>,
    net_path: &Path,
    spec: &NetSpec,
    file: Option<OwnedFd>,
    limit: Duration,
    id: &str,
) -> NetReport {
    let failed = |error: String| NetReport::Refused { error };
    let cgroup = run.runner.cgroup_for(&format!("n{id}"));
    let (ours, theirs) = match Channel::pair() {
        Ok(p) => p,
        Err(e) => return failed(format!("cannot make the executor's channel: {e}")),
    };
    if let Err(e) = ours
        .force_send_buffer(NET_SPEC_MAX)
        .and_then(|()| theirs.force_send_buffer(NET_REPORT_MAX))
    {
        return failed(format!("cannot size the executor's channel: {e}"));
    }
    let mut child = match crate::spawn::spawn_with_channel_and_file(
        net_path,
        &[],
        theirs.into_fd(),
        file,
        Stdio::null(),
        Stdio::null(),
    ) {
        Ok(c) => c,
        Err(e) => {
            return failed(format!(
                "cannot start {NET_BINARY}: {}",
                crate::error::chain(&e)
            ))
        }
    };
    let pid = Pid::from_raw(child.id() as i32);
    let stop = |child: &mut std::process::Child| {
        if let Some(cg) = &cgroup {
            cg.kill_if_populated();
        }
        let _ = kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        let _ = child.kill();
        let _ = child.wait();
    };
    if let Some(cg) = &cgroup {
        if let Err(e) = std::fs::write(cg.dir().join("cgroup.procs"), child.id().to_string()) {
            stop(&mut child);
            return failed(format!(
                "cannot move {NET_BINARY} into {}: {e}",
                cg.dir().display()
            ));
        }
    }
    if let Err(e) = ours.send(&NetRequest::Run(spec.clone())) {
        stop(&mut child);
        return failed(format!("cannot hand the spec to {NET_BINARY}: {e}"));
    }
    let mut ours = ours;
    // Its own time cap ends it first; this one is for an executor that hangs.
    let deadline = Instant::now() + limit + Duration::from_secs(2);
    let report = loop {
        let now = Instant::now();
        if now >= deadline {
            break NetReport::Failed {
                error: format!(
                    "no answer within the {} s time cap; the network executor was killed",
                    limit.as_secs().max(1)
                ),
            };
        }
        if run.cancel.is_cancelled() {
            break NetReport::Failed {
                error: "cancelled by the operator".into(),
            };
        }
        let wait = deadline
            .saturating_duration_since(now)
            .as_millis()
            .clamp(1, 500) as i32;
        let mut fds = [
            PollFd::new(ours.fd(), PollFlags::POLLIN),
            PollFd::new(run.cancel.fd(), PollFlags::POLLIN),
        ];
        match poll(
            &mut fds,
            PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => break failed(format!("poll: {e}")),
        }
        let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
        if readable {
            break match ours.recv::<NetReport>() {
                Ok(r) => r,
                Err(e) => NetReport::Failed {
                    error: format!("the network executor ended without a readable report ({e})"),
                },
            };
        }
    };
    stop(&mut child);
    if let Some(cg) = cgroup {
        run.runner.release_cgroup(cg);
    }
    report
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn redirects_are_bounded_and_never_downgrade() {
        let ok = |from: &str, to: &str, hops| check_redirect(from, to, 302, hops);
        assert!(ok("http://a/", "https://b/", 1).is_ok());
        assert!(ok("http://a/", "http://b/", 5).is_ok());
        assert!(ok("https://a/", "https://b/x", 1).is_ok());
        let down = ok("https://a/", "http://a/", 1).unwrap_err();
        assert!(down.contains("https to plain http"), "{down}");
        assert!(ok("HTTPS://a/", "HTTP://a/", 1).is_err(), "any case");
        assert!(ok("http://a/", "http://b/", 6)
            .unwrap_err()
            .contains("more than 5"));
        assert!(ok("http://a/", "file:///etc/shadow", 1).is_err());
        assert!(ok("http://a/", "gopher://a/", 1).is_err());
    }
}
