//! The decision table for one effect: (mode × approval × category × risk ×
//! ALLOW_* × operator rules × path rules) → verdict. See DECISIONS.md.

use crate::block::{ApprovalMode, ExecutionMode, PolicyBlock, RuleAction};
use crate::classify::{Effect, WriteKind};
use crate::facts::HostFacts;
use crate::paths::{self, Target};
use crate::types::{Category, Risk, Verdict};
use std::path::{Path, PathBuf};

/// The verdict on one effect, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    pub verdict: Verdict,
    pub risk: Risk,
    pub reason: String,
    pub source: String,
}

fn deny(e: &Effect, risk: Risk, reason: String, source: &str) -> Judged {
    Judged {
        verdict: Verdict::Deny {
            reason: reason.clone(),
        },
        risk: risk.max(e.risk),
        reason,
        source: source.to_string(),
    }
}

/// Precomputed path sets for one engine.
#[derive(Debug, Clone)]
pub struct PathSets {
    /// Directories whose whole content may not be deleted at once.
    pub contents_kept: Vec<PathBuf>,
    pub read_protected: Vec<PathBuf>,
    pub write_protected: Vec<PathBuf>,
    pub never_deletable: Vec<PathBuf>,
    pub tools_dir: PathBuf,
}

impl PathSets {
    pub fn new(facts: &HostFacts) -> PathSets {
        let mut nd: Vec<PathBuf> = paths::NEVER_DELETABLE.iter().map(PathBuf::from).collect();
        for p in [
            facts.project_root.clone(),
            facts.project_root.join(".agent"),
            facts.state_dir.clone(),
            facts.scratch_dir.clone(),
        ] {
            if !nd.contains(&p) {
                nd.push(p);
            }
        }
        let contents_kept: Vec<PathBuf> = nd
            .iter()
            .filter(|p| {
                !matches!(p.to_str(), Some("/tmp" | "/var/tmp" | "/mnt" | "/media"))
                    && **p != facts.scratch_dir
            })
            .cloned()
            .collect();
        PathSets {
            contents_kept,
            read_protected: paths::read_protected(facts),
            write_protected: paths::write_protected(facts),
            never_deletable: nd,
            tools_dir: facts.project_root.join("tools"),
        }
    }
}

/// Inside the project or the scratch directory.
pub fn inside_workspace(t: &Target, facts: &HostFacts) -> bool {
    let within = |p: &Path| p.starts_with(&facts.project_root) || p.starts_with(&facts.scratch_dir);
    match t {
        Target::Path(p) | Target::Beneath(p) => within(p),
        Target::Glob { prefix, .. } => within(prefix),
        Target::Unresolved => false,
    }
}

fn is_system_state(t: &Target) -> bool {
    let p = match t {
        Target::Path(p) | Target::Beneath(p) => p,
        Target::Glob { prefix, .. } => prefix,
        Target::Unresolved => return false,
    };
    p.starts_with("/proc") || p.starts_with("/sys") || p.starts_with("/dev")
}

/// A glob component that matches every name (`*`, `.*`, `?*`, `**`).
fn matches_everything(c: &str) -> bool {
    !c.is_empty() && c.chars().all(|ch| matches!(ch, '*' | '?' | '.')) && c.contains('*')
}

/// Deleting this target is critical: a never-deletable path, everything in
/// one, or the whole filesystem.
fn critical_delete(t: &Target, sets: &PathSets) -> Option<String> {
    match t {
        Target::Path(p) => sets
            .never_deletable
            .iter()
            .any(|n| n == p)
            .then(|| format!("deletes {}, which is never deletable", p.display())),
        Target::Beneath(p) => {
            (p == Path::new("/")).then(|| "deletes files anywhere beneath /".to_string())
        }
        Target::Glob { prefix, pattern } => {
            if pattern.len() == 1
                && matches_everything(&pattern[0])
                && sets.contents_kept.iter().any(|n| n == prefix)
            {
                return Some(format!(
                    "deletes everything in {}, which is never deletable",
                    prefix.display()
                ));
            }
            for n in &sets.never_deletable {
                if paths::relation(t, n).equal {
                    return Some(format!(
                        "the pattern {} can match {}, which is never deletable",
                        t.describe(),
                        n.display()
                    ));
                }
            }
            None
        }
        Target::Unresolved => None,
    }
}

/// Entirely inside the action's scratch directory.
fn in_scratch(t: &Target, facts: &HostFacts) -> bool {
    match t {
        Target::Path(p) | Target::Beneath(p) => paths::within(p, &facts.scratch_dir),
        Target::Glob { prefix, .. } => paths::within(prefix, &facts.scratch_dir),
        Target::Unresolved => false,
    }
}

/// Whether a write to `t` of kind `k` may touch protected path `p`.
fn touches(t: &Target, k: WriteKind, p: &Path) -> bool {
    if matches!(t, Target::Unresolved) {
        return false; // the kernel profile keeps it out
    }
    let rel = paths::relation(t, p);
    rel.at_or_inside() || (rel.ancestor && matches!(k, WriteKind::Tree | WriteKind::Move))
}

/// A write to a project file the agent may never change.
fn project_protected(t: &Target, k: WriteKind, facts: &HostFacts) -> Option<String> {
    let root = &facts.project_root;
    match t {
        Target::Path(p) => {
            if let Some(what) = paths::project_protected_write(facts, p) {
                return Some(what.to_string());
            }
            if matches!(k, WriteKind::Tree | WriteKind::Move) && root.starts_with(p) {
                return Some("the project root and its protected files".to_string());
            }
            None
        }
        Target::Beneath(p) => (root.starts_with(p)).then(|| {
            "the project root and its protected files (work in a subdirectory)".to_string()
        }),
        Target::Glob { prefix, pattern } => {
            if root.starts_with(prefix) && prefix != root {
                return Some("a pattern that reaches the project root".to_string());
            }
            if prefix == root {
                if let Some(first) = pattern.first() {
                    for probe in paths::PROJECT_PROBES {
                        if paths::fnmatch(first, probe) && pattern.len() == 1 {
                            return Some(format!(
                                "a pattern matching the protected project file {probe}"
                            ));
                        }
                        if paths::fnmatch(first, probe) && *probe == ".agent" {
                            return None;
                        }
                    }
                }
            }
            None
        }
        Target::Unresolved => None,
    }
}

/// The path rules for one effect. Returns a deny, or the risk the paths imply.
fn path_rules(
    e: &Effect,
    block: &PolicyBlock,
    facts: &HostFacts,
    sets: &PathSets,
) -> Result<Risk, Judged> {
    let mut risk = e.risk;
    for t in &e.deletes {
        if let Some(why) = critical_delete(t, sets) {
            return Err(deny(
                e,
                Risk::Critical,
                why,
                "critical: never-deletable path",
            ));
        }
    }
    // Reads, and what an edit reads of the files it changes.
    for (t, edit) in e
        .reads
        .iter()
        .map(|t| (t, false))
        .chain(e.edits.iter().map(|t| (t, true)))
    {
        if matches!(t, Target::Unresolved) {
            continue;
        }
        let scratch = in_scratch(t, facts);
        for p in &sets.read_protected {
            // The scratch directory is the action's own, even when it lies
            // inside a protected state directory.
            if scratch && !paths::within(p, &facts.scratch_dir) {
                continue;
            }
            // A recursive reader of an ancestor (grep -r, git status in the
            // project) is not refused: the kernel profile keeps p unreadable.
            let hit = match t {
                Target::Beneath(q) => paths::within(q, p),
                _ => paths::relation(t, p).at_or_inside(),
            };
            if hit {
                return Err(deny(
                    e,
                    risk,
                    format!("reads {}, which no action may read", p.display()),
                    "path rule: never readable",
                ));
            }
        }
        if !edit
            && !block.allow_outside_project_read
            && !inside_workspace(t, facts)
            && !is_system_state(t)
        {
            return Err(deny(
                e,
                risk,
                format!(
                    "reads {} outside the project (ALLOW_OUTSIDE_PROJECT_READ=false)",
                    t.describe()
                ),
                "ALLOW_OUTSIDE_PROJECT_READ",
            ));
        }
    }
    // Writes and deletes.
    let mut all: Vec<(&Target, WriteKind, bool)> =
        e.writes.iter().map(|(t, k)| (t, *k, false)).collect();
    for t in &e.deletes {
        all.push((
            t,
            if e.recursive {
                WriteKind::Tree
            } else {
                WriteKind::Move
            },
            true,
        ));
    }
    let mut outside = false;
    let mut unresolved = false;
    for (t, _, _) in &all {
        if let Target::Path(p) = t {
            let s = p.to_string_lossy();
            if crate::classify::is_block_device(&s) {
                return Err(deny(
                    e,
                    Risk::Critical,
                    format!("writes straight onto the block device {s}"),
                    "critical: block device",
                ));
            }
        }
    }
    for (t, k, is_delete) in &all {
        if *is_delete {
            if let Some(why) = critical_delete(t, sets) {
                return Err(deny(
                    e,
                    Risk::Critical,
                    why,
                    "critical: never-deletable path",
                ));
            }
        }
        let system_dir_change = *k == WriteKind::Move
            || (*k == WriteKind::Tree && e.recursive && e.category == Category::Admin);
        if system_dir_change {
            if let Target::Path(p) = t {
                if sets.never_deletable.iter().any(|n| n == p) {
                    return Err(deny(
                        e,
                        Risk::Critical,
                        format!(
                            "{} {}, a system directory",
                            if *k == WriteKind::Move {
                                "moves"
                            } else {
                                "recursively changes"
                            },
                            p.display()
                        ),
                        "critical: system directory",
                    ));
                }
            }
        }
        let scratch = in_scratch(t, facts);
        for p in &sets.write_protected {
            if scratch && !paths::within(p, &facts.scratch_dir) {
                continue;
            }
            if touches(t, *k, p) {
                return Err(deny(
                    e,
                    risk,
                    format!(
                        "writes {}, which belongs to sysward and is never writable",
                        p.display()
                    ),
                    "path rule: sysward's own files",
                ));
            }
        }
        if let Some(what) = project_protected(t, *k, facts) {
            return Err(deny(
                e,
                risk,
                format!("writes {what}, which the agent may never change"),
                "path rule: protected project file",
            ));
        }
        if !block.allow_self_tool_creation && touches(t, *k, &sets.tools_dir) {
            return Err(deny(
                e,
                risk,
                format!(
                    "writes {} (ALLOW_SELF_TOOL_CREATION=false)",
                    sets.tools_dir.display()
                ),
                "ALLOW_SELF_TOOL_CREATION",
            ));
        }
        match t {
            Target::Unresolved => unresolved = true,
            _ if !inside_workspace(t, facts) => outside = true,
            _ => {}
        }
    }
    if (outside || unresolved) && !e.wide_write {
        if block.execution_mode == ExecutionMode::Guarded {
            return Err(deny(
                e,
                risk,
                format!(
                    "{} outside the project, which guarded mode never allows",
                    if unresolved { "may write" } else { "writes" }
                ),
                "EXECUTION_MODE=guarded",
            ));
        }
        if !block.allow_outside_project_write {
            return Err(deny(
                e,
                risk,
                format!(
                    "{} outside the project (ALLOW_OUTSIDE_PROJECT_WRITE=false)",
                    if unresolved { "may write" } else { "writes" }
                ),
                "ALLOW_OUTSIDE_PROJECT_WRITE",
            ));
        }
    }
    if e.wide_write && !block.allow_outside_project_write {
        return Err(deny(
            e,
            risk,
            format!(
                "{}: writes system-wide (ALLOW_OUTSIDE_PROJECT_WRITE=false)",
                e.reason
            ),
            "ALLOW_OUTSIDE_PROJECT_WRITE",
        ));
    }
    // Writes that grant privileges or persistence are high risk.
    for (t, k, _) in &all {
        let sensitive = paths::SENSITIVE_WRITE.iter().any(|s| {
            let rel = paths::relation(t, Path::new(s));
            rel.at_or_inside() || (rel.ancestor && matches!(k, WriteKind::Tree | WriteKind::Move))
        });
        if sensitive && !matches!(t, Target::Unresolved) {
            risk = risk.max(Risk::High);
        }
    }
    // Risk from where it writes.
    if !all.is_empty() {
        let any_delete = all.iter().any(|(_, _, d)| *d);
        if outside || unresolved {
            risk = risk.max(if any_delete { Risk::High } else { Risk::Medium });
        } else if any_delete {
            risk = risk.max(Risk::Medium);
        }
    }
    Ok(risk)
}

/// The category gate (seed `000`'s table).
fn gate(e: &Effect, block: &PolicyBlock) -> Option<(String, &'static str)> {
    let mode = block.execution_mode;
    let privileged = mode != ExecutionMode::Guarded;
    match e.category {
        Category::ReadOnly | Category::Write => None,
        Category::Network if !block.allow_network => Some(("needs the network (ALLOW_NETWORK=false)".to_string(), "ALLOW_NETWORK")),
        Category::Network if e.web_research && !block.allow_web_research => Some(("reads the web (ALLOW_WEB_RESEARCH=false)".to_string(), "ALLOW_WEB_RESEARCH")),
        Category::Network => None,
        Category::Download => {
            if !block.allow_network {
                Some(("downloads (ALLOW_NETWORK=false)".to_string(), "ALLOW_NETWORK"))
            } else if !block.allow_downloads {
                Some(("downloads (ALLOW_DOWNLOADS=false)".to_string(), "ALLOW_DOWNLOADS"))
            } else {
                None
            }
        }
        Category::Delete => (!block.allow_delete).then(|| ("deletes (ALLOW_DELETE=false)".to_string(), "ALLOW_DELETE")),
        Category::Package => (!block.allow_package_install).then(|| ("changes packages (ALLOW_PACKAGE_INSTALL=false)".to_string(), "ALLOW_PACKAGE_INSTALL")),
        Category::Service => (!block.allow_service_restart).then(|| ("changes services (ALLOW_SERVICE_RESTART=false)".to_string(), "ALLOW_SERVICE_RESTART")),
        Category::Admin => (!privileged).then(|| (format!("is an administrative action, which needs EXECUTION_MODE=privileged (now {})", mode.as_str()), "EXECUTION_MODE")),
        Category::Unknown => (!privileged).then(|| (format!("runs something the catalog cannot analyse, which needs EXECUTION_MODE=privileged (now {})", mode.as_str()), "EXECUTION_MODE")),
        Category::Destructive => (mode != ExecutionMode::Unrestricted).then(|| (format!("is destructive, which needs EXECUTION_MODE=unrestricted (now {})", mode.as_str()), "EXECUTION_MODE")),
        Category::Reboot => (!block.allow_reboot).then(|| ("stops or restarts the machine (ALLOW_REBOOT=false)".to_string(), "ALLOW_REBOOT")),
    }
}

/// The paths a file tool's effect changes (resolved; unresolved ones make
/// the list empty, so that no glob covers them).
fn changed_paths(e: &Effect) -> Vec<&Path> {
    let mut out = Vec::new();
    for t in e.writes.iter().map(|(t, _)| t).chain(e.deletes.iter()) {
        match t {
            Target::Path(p) | Target::Beneath(p) => out.push(p.as_path()),
            _ => return Vec::new(),
        }
    }
    out
}

/// Decides one effect.
pub fn judge(e: &Effect, block: &PolicyBlock, facts: &HostFacts, sets: &PathSets) -> Judged {
    if e.unanalysable {
        return deny(e, e.risk, e.reason.clone(), "analysis limits");
    }
    if e.risk == Risk::Critical {
        return deny(
            e,
            Risk::Critical,
            format!("{} (critical risk: denied in every mode)", e.reason),
            "critical risk",
        );
    }
    // Operator rules (command prefixes; path globs for file tools, matching
    // every path the tool changes) and a task's pre-approvals: the strictest
    // match wins.
    let mut rule: Option<(RuleAction, String, String)> = None;
    let mut consider = |action: RuleAction, describe: String, source: String| {
        if rule.as_ref().is_none_or(|cur| action > cur.0) {
            rule = Some((action, describe, source));
        }
    };
    for r in &block.rules {
        if r.matches(&e.argv) {
            consider(r.action, r.describe(), r.source());
        }
    }
    if e.file_tool && !block.write_rules.is_empty() {
        let changed = changed_paths(e);
        let tool = e.argv.first().map(String::as_str).unwrap_or("");
        for r in &block.write_rules {
            if r.matches(tool, &changed) {
                consider(r.action, r.describe(), r.source());
            }
        }
    }
    if let Some((RuleAction::Deny, describe, source)) = &rule {
        return deny(
            e,
            e.risk,
            format!("{describe} (operator rule, cannot be approved)"),
            source,
        );
    }
    let risk = match path_rules(e, block, facts, sets) {
        Ok(r) => r,
        Err(j) => return j,
    };
    if risk == Risk::Critical {
        return deny(
            e,
            risk,
            format!("{} (critical risk)", e.reason),
            "critical risk",
        );
    }
    if let Some((why, flag)) = gate(e, block) {
        return deny(e, risk, format!("{}: {why}", e.reason), flag);
    }
    let threshold = match block.approval_mode {
        ApprovalMode::Strict => Risk::Medium,
        ApprovalMode::Permissive => Risk::High,
    };
    let by_risk = risk >= threshold;
    let (verdict, source, reason) = match rule {
        Some((RuleAction::Ask, _, source)) => (
            Verdict::Ask,
            source,
            format!("{} (operator rule asks)", e.reason),
        ),
        Some((RuleAction::Allow, _, source)) => {
            let why = if source.starts_with("pre-approved") {
                "pre-approved by the task"
            } else {
                "operator rule allows"
            };
            (Verdict::Allow, source, format!("{} ({why})", e.reason))
        }
        _ if by_risk => (
            Verdict::Ask,
            format!("APPROVAL_MODE={}", block.approval_mode.as_str()),
            format!(
                "{} ({} risk needs approval in {} mode)",
                e.reason,
                risk,
                block.approval_mode.as_str()
            ),
        ),
        _ => (
            Verdict::Allow,
            format!("category {} at {} risk", e.category, risk),
            e.reason.clone(),
        ),
    };
    Judged {
        verdict,
        risk,
        reason,
        source,
    }
}
