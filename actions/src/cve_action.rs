//! `cve_lookup`'s requests: the Debian tracker's entries for the query
//! (judged by the network executor against the host's dpkg database), then
//! NVD's record of the CVE asked for or of the first few affected ones, each
//! its own executor through [`Hops`]; rendered by [`crate::cve_render`].

use crate::net_hops::{check_url, encode_query, Hops};
use sysward_ipc::cve::{is_cve_id, is_package_name, CveLookupArgs, HostVerdict, TrackerQuery};
use sysward_ipc::net::{HttpPurpose, NetOp, NetReport};

/// Largest NVD answer read (one CVE is a few KiB).
pub const NVD_MAX_BODY: u64 = 4 << 20;
/// Largest Debian tracker answer read: its whole JSON is tens of MiB and
/// grows; the executor keeps it in memory only while walking it.
pub const TRACKER_MAX_BODY: u64 = 128 << 20;
/// NVD records fetched for one package or host lookup (NVD answers one CVE
/// per request and limits clients without a key to a few a minute).
pub const MAX_NVD_LOOKUPS: usize = 3;

/// The services `cve_lookup` asks when init.conf names no other.
pub const DEFAULT_NVD_URL: &str = "https://services.nvd.nist.gov/rest/json/cves/2.0";
pub const DEFAULT_TRACKER_URL: &str = "https://security-tracker.debian.org/tracker/data/json";

/// Exactly one of `cve`, `package`, `installed: true`, each checked.
pub fn query(a: &CveLookupArgs) -> Result<TrackerQuery, String> {
    let shown = |s: &str| crate::sanitize::one_line(s, 80);
    match (&a.cve, &a.package, a.installed.unwrap_or(false)) {
        (Some(id), None, false) => {
            let id = id.trim().to_ascii_uppercase();
            if !is_cve_id(&id) {
                return Err(format!(
                    "cve_lookup: {:?} is not a CVE id (CVE-YYYY-NNNN)",
                    shown(&id)
                ));
            }
            Ok(TrackerQuery::Cve(id))
        }
        (None, Some(p), false) => {
            if !is_package_name(p) {
                return Err(format!(
                    "cve_lookup: {:?} is not a Debian source package name (lower case, digits, + - .)",
                    shown(p)
                ));
            }
            Ok(TrackerQuery::Package(p.clone()))
        }
        (None, None, true) => Ok(TrackerQuery::Installed),
        _ => Err("cve_lookup needs exactly one of cve, package or installed: true".into()),
    }
}

/// The NVD request for one CVE at `base` (init.conf's `NVD_URL`).
pub fn nvd_url(base: &str, cve: &str) -> Result<String, String> {
    check_url(base).map_err(|e| format!("NVD_URL in init.conf: {e}"))?;
    if base.contains('#') {
        return Err("NVD_URL in init.conf must not contain a fragment (#)".into());
    }
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}cveId={}", encode_query(cve)))
}

/// `cve_lookup`: the Debian tracker's entries for the query, judged by the
/// executor against the host's dpkg database, then NVD's record of the CVE
/// asked for (or of the first few affected ones), rendered together.
pub fn lookup(hops: &mut Hops<'_, '_>, query: &TrackerQuery) -> NetReport {
    let run = hops.run;
    let tracker_base = run.tracker_url.as_deref().unwrap_or(DEFAULT_TRACKER_URL);
    let nvd_base = run.nvd_url.as_deref().unwrap_or(DEFAULT_NVD_URL);
    if let Err(e) = check_url(tracker_base) {
        return NetReport::Failed {
            error: format!("DEBIAN_TRACKER_URL in init.conf: {e}"),
        };
    }
    let mut failures = Vec::new();
    let tracker_op = NetOp::Http {
        url: tracker_base.to_string(),
        purpose: HttpPurpose::DebianTracker(query.clone()),
    };
    let tracker = match hops.fetch(tracker_op, true, TRACKER_MAX_BODY, None) {
        NetReport::Tracker(f) => match f.check() {
            Ok(()) => Some(f),
            Err(e) => {
                failures.push(format!(
                    "Debian security tracker: an answer out of bounds ({e})"
                ));
                None
            }
        },
        NetReport::Failed { error } | NetReport::Refused { error } => {
            failures.push(format!("Debian security tracker: {error}"));
            None
        }
        NetReport::ConfinementFailed { step, error } => {
            return NetReport::ConfinementFailed { step, error };
        }
        _ => {
            failures.push("Debian security tracker: an unexpected answer".into());
            None
        }
    };
    let wanted: Vec<String> =
        match query {
            TrackerQuery::Cve(id) => vec![id.clone()],
            _ => {
                let Some(t) = &tracker else {
                    return NetReport::Failed {
                        error: failures.join("; "),
                    };
                };
                let mut ids: Vec<String> = Vec::new();
                for r in t.records.iter().filter(|r| {
                    matches!(r.verdict, HostVerdict::Affected | HostVerdict::FixedIn(_))
                }) {
                    if ids.len() < MAX_NVD_LOOKUPS && !ids.contains(&r.id) {
                        ids.push(r.id.clone());
                    }
                }
                ids
            }
        };
    let mut nvd = Vec::new();
    for id in &wanted {
        let url = match nvd_url(nvd_base, id) {
            Ok(u) => u,
            Err(e) => {
                failures.push(e);
                break;
            }
        };
        let op = NetOp::Http {
            url,
            purpose: HttpPurpose::Nvd { cve: id.clone() },
        };
        match hops.fetch(op, true, NVD_MAX_BODY, None) {
            NetReport::Nvd(r) if r.id == *id => match r.check() {
                Ok(()) => nvd.push(*r),
                Err(e) => failures.push(format!("NVD {id}: an answer out of bounds ({e})")),
            },
            NetReport::Failed { error } | NetReport::Refused { error } => {
                failures.push(format!("NVD {id}: {error}"));
            }
            NetReport::ConfinementFailed { step, error } => {
                return NetReport::ConfinementFailed { step, error };
            }
            _ => failures.push(format!("NVD {id}: an unexpected answer")),
        }
    }
    if tracker.is_none() && nvd.is_empty() {
        return NetReport::Failed {
            error: failures.join("; "),
        };
    }
    let cve = match query {
        TrackerQuery::Cve(id) => Some(id.as_str()),
        _ => None,
    };
    let output = crate::cve_render::render(&crate::cve_render::Gathered {
        cve,
        tracker: tracker.as_ref(),
        nvd: &nvd,
        nvd_asked: &wanted,
        failures: &failures,
    });
    NetReport::Done { output, url: None }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn nvd_urls_name_the_cve() {
        assert_eq!(
            nvd_url(DEFAULT_NVD_URL, "CVE-2014-6271").unwrap(),
            "https://services.nvd.nist.gov/rest/json/cves/2.0?cveId=CVE-2014-6271"
        );
        assert!(nvd_url("http://127.0.0.1:1/x#f", "CVE-2014-6271").is_err());
    }
}
