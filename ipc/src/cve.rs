//! `cve_lookup`: the model's arguments, what the broker asks the network
//! executor to extract from the two services (NVD's CVE API 2.0 and the
//! Debian security tracker's JSON), and the small typed records it answers.
//!
//! The executor parses the services' JSON and compares versions; the broker
//! only checks these records against the bounds below ([`NvdRecord::check`],
//! [`TrackerFindings::check`]) and renders them.

use serde::{Deserialize, Serialize};

/// The model's arguments: exactly one of `cve`, `package`, `installed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CveLookupArgs {
    #[serde(default)]
    pub cve: Option<String>,
    #[serde(default)]
    pub package: Option<String>,
    #[serde(default)]
    pub installed: Option<bool>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// What to extract from the tracker's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrackerQuery {
    /// One CVE, in whichever source packages it is listed.
    Cve(String),
    /// Every CVE of one source package.
    Package(String),
    /// Every CVE of the source packages installed on this host.
    Installed,
}

/// Most CVE records in one answer (the counts cover the rest).
pub const MAX_CVE_RECORDS: usize = 50;
/// Longest description kept.
pub const MAX_DESCRIPTION_CHARS: usize = 600;
/// References kept per CVE.
pub const MAX_REFERENCES: usize = 5;
/// Longest reference URL kept.
pub const MAX_REFERENCE_CHARS: usize = 300;
/// Longest version, package, status, severity or vector string.
pub const MAX_FIELD_CHARS: usize = 128;

/// A CVE id: `CVE-YYYY-NNNN…` (four or more digits, at most 19 in all).
pub fn is_cve_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("CVE-") else {
        return false;
    };
    let Some((year, num)) = rest.split_once('-') else {
        return false;
    };
    year.len() == 4
        && (4..=19).contains(&num.len())
        && year.bytes().all(|b| b.is_ascii_digit())
        && num.bytes().all(|b| b.is_ascii_digit())
}

/// A Debian source package name (policy §5.6.1): lower-case letters,
/// digits, `+ - .`, at least two characters, starting alphanumeric.
pub fn is_package_name(s: &str) -> bool {
    (2..=100).contains(&s.len())
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b))
}

/// One CVE as NVD describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvdRecord {
    pub id: String,
    /// `CRITICAL`, `HIGH`, … from the newest CVSS version present.
    pub severity: Option<String>,
    /// The base score as printed by NVD (`9.8`).
    pub score: Option<String>,
    pub vector: Option<String>,
    pub description: String,
    pub references: Vec<String>,
}

/// This host's position on one CVE of one source package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostVerdict {
    /// Installed and vulnerable, with no fix in this release yet.
    Affected,
    /// Installed below the version that fixes it: upgrade to it.
    FixedIn(String),
    /// Installed at or above the fixed version, or Debian marks the
    /// release not affected.
    NotAffected,
    /// The source package is not installed.
    NotInstalled,
    /// The tracker says nothing usable about this release.
    Unknown,
}

/// One CVE of one source package, from the tracker, judged for this host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerRecord {
    pub id: String,
    pub source_package: String,
    pub description: String,
    /// The tracker's status for the host's release (`resolved`, `open`, …).
    pub status: Option<String>,
    pub urgency: Option<String>,
    pub fixed_version: Option<String>,
    /// The installed version of the source package.
    pub installed: Option<String>,
    pub verdict: HostVerdict,
}

/// The tracker's answer for the host's release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerFindings {
    /// The host's release codename (`VERSION_CODENAME`).
    pub release: String,
    /// Records shown: affected ones first.
    pub records: Vec<TrackerRecord>,
    /// CVE entries matched in all (shown or not).
    pub matched: u32,
    /// Of those, how many leave this host affected.
    pub affected: u32,
    /// Source packages read from the host's dpkg database.
    pub installed_sources: u32,
}

fn bounded(what: &str, s: &str, max: usize) -> Result<(), String> {
    if s.chars().count() > max + 1 || s.chars().any(|c| c.is_control() && c != '\n') {
        return Err(format!(
            "{what} is longer than {max} characters or has control characters"
        ));
    }
    Ok(())
}

fn bounded_opt(what: &str, s: &Option<String>, max: usize) -> Result<(), String> {
    s.as_deref().map_or(Ok(()), |s| bounded(what, s, max))
}

impl NvdRecord {
    /// Within the bounds above (the broker checks every record it gets).
    pub fn check(&self) -> Result<(), String> {
        if !is_cve_id(&self.id) {
            return Err("an NVD record without a CVE id".into());
        }
        bounded_opt("a severity", &self.severity, MAX_FIELD_CHARS)?;
        bounded_opt("a score", &self.score, MAX_FIELD_CHARS)?;
        bounded_opt("a vector", &self.vector, MAX_FIELD_CHARS)?;
        bounded("a description", &self.description, MAX_DESCRIPTION_CHARS)?;
        if self.references.len() > MAX_REFERENCES {
            return Err(format!("more than {MAX_REFERENCES} references"));
        }
        for r in &self.references {
            bounded("a reference", r, MAX_REFERENCE_CHARS)?;
        }
        Ok(())
    }
}

impl TrackerFindings {
    /// Within the bounds above.
    pub fn check(&self) -> Result<(), String> {
        bounded("a release", &self.release, MAX_FIELD_CHARS)?;
        if self.records.len() > MAX_CVE_RECORDS {
            return Err(format!("more than {MAX_CVE_RECORDS} tracker records"));
        }
        for r in &self.records {
            if !is_cve_id(&r.id) || !is_package_name(&r.source_package) {
                return Err("a tracker record without a CVE id or package name".into());
            }
            bounded("a description", &r.description, MAX_DESCRIPTION_CHARS)?;
            bounded_opt("a status", &r.status, MAX_FIELD_CHARS)?;
            bounded_opt("an urgency", &r.urgency, MAX_FIELD_CHARS)?;
            bounded_opt("a fixed version", &r.fixed_version, MAX_FIELD_CHARS)?;
            bounded_opt("an installed version", &r.installed, MAX_FIELD_CHARS)?;
            if let HostVerdict::FixedIn(v) = &r.verdict {
                bounded("a fixed version", v, MAX_FIELD_CHARS)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_package_names_are_checked_strictly() {
        for ok in ["CVE-2014-6271", "CVE-2024-123456"] {
            assert!(is_cve_id(ok), "{ok}");
        }
        for bad in [
            "cve-2014-6271",
            "CVE-14-6271",
            "CVE-2014-62",
            "CVE-2014-6271;ls",
            "CVE-2014-6271 ",
            "",
        ] {
            assert!(!is_cve_id(bad), "{bad:?}");
        }
        for ok in ["bash", "libc6", "g++-12", "python3.11"] {
            assert!(is_package_name(ok), "{ok}");
        }
        for bad in ["B", "a", "-x", "bash;id", "a b", "../x", "Bash"] {
            assert!(!is_package_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn records_beyond_the_bounds_are_refused() {
        let mut r = NvdRecord {
            id: "CVE-2014-6271".into(),
            severity: Some("CRITICAL".into()),
            score: Some("9.8".into()),
            vector: None,
            description: "x".into(),
            references: vec![],
        };
        assert!(r.check().is_ok());
        r.description = "x".repeat(MAX_DESCRIPTION_CHARS + 5);
        assert!(r.check().is_err());
        r.description = "a\x1b[2Jb".into();
        assert!(r.check().is_err());
    }
}
