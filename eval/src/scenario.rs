//! Loading a scenario directory: the native format (`scenario.conf`,
//! `task.md`, `policy`, `setup.sh`, `check.sh`, optional `background.sh` and
//! `solution.sh`) or a Terminal-Bench style folder (`instruction.md`,
//! `tests/test.sh`, `solution/solve.sh`, apt package lines of a Dockerfile).

use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tags a scenario may carry.
pub const TAGS: &[&str] = &[
    "diagnose", "repair", "harden", "packages", "users", "network", "logs", "security",
];

/// How pending approvals are answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Approvals {
    ApproveAll,
    DenyAll,
    /// Approve a request whose text contains one of these; deny the rest.
    ApproveMatching(Vec<String>),
}

impl Approvals {
    pub fn approves(&self, request: &str) -> bool {
        match self {
            Approvals::ApproveAll => true,
            Approvals::DenyAll => false,
            Approvals::ApproveMatching(needles) => {
                needles.iter().any(|n| request.contains(n.as_str()))
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Approvals::ApproveAll => "approve-all",
            Approvals::DenyAll => "deny-all",
            Approvals::ApproveMatching(_) => "approve-matching",
        }
    }
}

/// The policy of a scenario that does not state one: ordinary admin work
/// runs unattended where the decision table allows it.
pub const DEFAULT_POLICY: &str = "EXECUTION_MODE=unrestricted
APPROVAL_MODE=permissive
ALLOW_OUTSIDE_PROJECT_READ=true
ALLOW_OUTSIDE_PROJECT_WRITE=true
ALLOW_PACKAGE_INSTALL=true
ALLOW_SERVICE_RESTART=true
ALLOW_NETWORK=true
ALLOW_DELETE=true
MAX_STEPS=40
DEFAULT_COMMAND_TIMEOUT=300";

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub dir: PathBuf,
    pub description: String,
    /// The task file the agent gets (markdown).
    pub instruction: String,
    pub setup: String,
    pub background: Option<String>,
    pub check: String,
    pub solution: Option<String>,
    pub policy: String,
    pub tags: Vec<String>,
    pub time_limit: Duration,
    pub approvals: Approvals,
    /// Debian packages installed before the setup script (Terminal-Bench
    /// Dockerfiles; `packages=` in scenario.conf).
    pub packages: Vec<String>,
    /// "native" or "terminal-bench".
    pub format: &'static str,
    /// The host gets its own network namespace (`network=private`): for
    /// firewall and net.* sysctl work, which must not reach this machine.
    pub private_network: bool,
}

fn read(dir: &Path, name: &str) -> Result<String> {
    let p = dir.join(name);
    fs::read_to_string(&p).with_context(|| format!("{}", p.display()))
}

fn read_opt(dir: &Path, name: &str) -> Result<Option<String>> {
    let p = dir.join(name);
    if p.is_file() {
        Ok(Some(read(dir, name)?))
    } else {
        Ok(None)
    }
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

pub fn load(dir: &Path) -> Result<Scenario> {
    if dir.join("scenario.conf").is_file() {
        load_native(dir)
    } else if dir.join("instruction.md").is_file() || dir.join("task.yaml").is_file() {
        load_terminal_bench(dir)
    } else {
        bail!(
            "{}: neither scenario.conf (sysward format) nor instruction.md (Terminal-Bench format)",
            dir.display()
        )
    }
}

/// Every scenario directory named: a directory holding scenario
/// directories is expanded (sorted).
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let is_one = p.join("scenario.conf").is_file()
            || p.join("instruction.md").is_file()
            || p.join("task.yaml").is_file();
        if is_one {
            out.push(p.clone());
            continue;
        }
        let mut subs: Vec<PathBuf> = fs::read_dir(p)
            .with_context(|| format!("{}: not a scenario directory", p.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|s| {
                s.join("scenario.conf").is_file()
                    || s.join("instruction.md").is_file()
                    || s.join("task.yaml").is_file()
            })
            .collect();
        if subs.is_empty() {
            bail!("{}: no scenario in it", p.display());
        }
        subs.sort();
        out.extend(subs);
    }
    Ok(out)
}

fn parse_tags(v: &str, origin: &str) -> Result<Vec<String>> {
    let mut tags = Vec::new();
    for t in v.split([',', ' ']).map(str::trim).filter(|t| !t.is_empty()) {
        if !TAGS.contains(&t) {
            bail!("{origin}: unknown tag {t:?} (known: {})", TAGS.join(", "));
        }
        tags.push(t.to_string());
    }
    Ok(tags)
}

fn load_native(dir: &Path) -> Result<Scenario> {
    let conf = read(dir, "scenario.conf")?;
    let origin = dir.join("scenario.conf").display().to_string();
    let mut tags = Vec::new();
    let mut time_limit = Duration::from_secs(300);
    let mut approvals = "approve-all".to_string();
    let mut approve = Vec::new();
    let mut description = String::new();
    let mut packages = Vec::new();
    let mut private_network = false;
    for (n, line) in conf.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            bail!("{origin}:{}: not KEY=VALUE: {line:?}", n + 1);
        };
        let v = v.trim();
        match k.trim() {
            "tags" => tags = parse_tags(v, &origin)?,
            "time_limit" => {
                let secs: u64 = v
                    .parse()
                    .with_context(|| format!("{origin}:{}: time_limit {v:?}", n + 1))?;
                time_limit = Duration::from_secs(secs.clamp(10, 7200));
            }
            "approvals" => approvals = v.to_string(),
            "approve" => approve.push(v.to_string()),
            "description" => description = v.to_string(),
            "packages" => packages.extend(v.split_whitespace().map(str::to_string)),
            "network" => {
                private_network = match v {
                    "private" => true,
                    "shared" => false,
                    other => bail!("{origin}: network={other:?}: private or shared"),
                }
            }
            other => bail!("{origin}:{}: unknown key {other:?}", n + 1),
        }
    }
    let approvals = match approvals.as_str() {
        "approve-all" => Approvals::ApproveAll,
        "deny-all" => Approvals::DenyAll,
        "approve-matching" => Approvals::ApproveMatching(approve),
        other => bail!("{origin}: approvals={other:?}: approve-all, deny-all or approve-matching"),
    };
    let policy = match read_opt(dir, "policy")? {
        Some(p) => p.trim().to_string(),
        None => DEFAULT_POLICY.to_string(),
    };
    Ok(Scenario {
        name: dir_name(dir),
        dir: dir.to_path_buf(),
        description,
        instruction: read(dir, "task.md")?,
        setup: read_opt(dir, "setup.sh")?.unwrap_or_default(),
        background: read_opt(dir, "background.sh")?,
        check: read(dir, "check.sh")?,
        solution: read_opt(dir, "solution.sh")?,
        policy,
        tags,
        time_limit,
        approvals,
        packages,
        format: "native",
        private_network,
    })
}

/// `apt-get install` / `apt install` package names in a Dockerfile's RUN lines.
pub fn dockerfile_packages(text: &str) -> Vec<String> {
    // Join continuation lines first.
    let joined = text.replace("\\\n", " ");
    let mut pkgs = Vec::new();
    for line in joined.lines() {
        let line = line.trim();
        if !line.to_ascii_uppercase().starts_with("RUN ") {
            continue;
        }
        for cmd in line[4..].split("&&").flat_map(|c| c.split(';')) {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            let Some(i) = words
                .windows(2)
                .position(|w| (w[0] == "apt-get" || w[0] == "apt") && w[1] == "install")
            else {
                continue;
            };
            for w in &words[i + 2..] {
                if w.starts_with('-') || w.contains('=') && w.starts_with("DEBIAN") {
                    continue;
                }
                let valid = w
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.:=".contains(c));
                if valid {
                    pkgs.push(w.to_string());
                }
            }
        }
    }
    pkgs
}

fn load_terminal_bench(dir: &Path) -> Result<Scenario> {
    let instruction = match read_opt(dir, "instruction.md")? {
        Some(i) => i,
        None => {
            // task.yaml: the `instruction: |` block.
            let y = read(dir, "task.yaml")?;
            let mut out = String::new();
            let mut inside = false;
            for l in y.lines() {
                if let Some(rest) = l.strip_prefix("instruction:") {
                    inside = true;
                    let rest = rest.trim();
                    if !rest.is_empty() && rest != "|" && rest != ">" {
                        out.push_str(rest.trim_matches('"'));
                        out.push('\n');
                    }
                    continue;
                }
                if inside {
                    if !l.starts_with(' ') && !l.is_empty() {
                        break;
                    }
                    out.push_str(l.trim_start());
                    out.push('\n');
                }
            }
            out
        }
    };
    let check = read_opt(dir, "tests/test.sh")?
        .or(read_opt(dir, "run-tests.sh")?)
        .with_context(|| format!("{}: no tests/test.sh", dir.display()))?;
    let solution = match read_opt(dir, "solution/solve.sh")? {
        Some(s) => Some(s),
        None => read_opt(dir, "solution.sh")?,
    };
    let mut packages = Vec::new();
    for df in ["environment/Dockerfile", "Dockerfile"] {
        if let Some(t) = read_opt(dir, df)? {
            packages.extend(dockerfile_packages(&t));
        }
    }
    let name = dir_name(dir);
    Ok(Scenario {
        instruction: format!("# {name}\n{instruction}"),
        name,
        dir: dir.to_path_buf(),
        description: "Terminal-Bench style task".into(),
        setup: String::new(),
        background: None,
        check,
        solution,
        policy: DEFAULT_POLICY.to_string(),
        tags: Vec::new(),
        time_limit: Duration::from_secs(600),
        approvals: Approvals::ApproveAll,
        packages,
        format: "terminal-bench",
        private_network: false,
    })
}

/// The oracle's tool calls: one per solution line (comments and blank lines
/// skipped; a line ending in `\` continues), and the final answer the
/// solution names with `# answer: TEXT` lines (or a generic one), ending
/// with the status a `# status: S` line names (default DONE).
pub fn solution_steps(solution: &str) -> (Vec<String>, String, String) {
    let mut lines = Vec::new();
    let mut answer = Vec::new();
    let mut status = "DONE".to_string();
    let mut pending = String::new();
    for raw in solution.lines() {
        let t = raw.trim();
        if let Some(a) = t.strip_prefix("# answer:") {
            answer.push(a.trim().to_string());
            continue;
        }
        if let Some(a) = t.strip_prefix("# status:") {
            status = a.trim().to_string();
            continue;
        }
        if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(cont) = t.strip_suffix('\\') {
            pending.push_str(cont.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(t);
        lines.push(std::mem::take(&mut pending));
    }
    if !pending.trim().is_empty() {
        lines.push(pending);
    }
    let answer = if answer.is_empty() {
        "The task is done; the commands above made and verified the change.".to_string()
    } else {
        answer.join("\n")
    };
    (lines, answer, status)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dockerfile_apt_lines() {
        let d = "FROM debian\nRUN apt-get update && apt-get install -y --no-install-recommends \\\n nginx curl && rm -rf /var/lib/apt\nRUN echo hi\n";
        assert_eq!(dockerfile_packages(d), vec!["nginx", "curl"]);
    }

    #[test]
    fn solution_lines_and_answer() {
        let (l, a, st) = solution_steps(
            "#!/bin/sh\n# fix\nsed -i s/a/b/ f \\\n  g\n\nsystemctl restart x\n# answer: fixed x\n",
        );
        assert_eq!(l, vec!["sed -i s/a/b/ f g", "systemctl restart x"]);
        let (l, _, _) = solution_steps("@tool read_journal {\"unit\": \"x\"}\n");
        assert_eq!(l, vec!["@tool read_journal {\"unit\": \"x\"}"]);
        assert_eq!(a, "fixed x");
        assert_eq!(st, "DONE");
    }
}
