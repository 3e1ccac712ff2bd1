//! Path arithmetic and the path rules' building blocks. Pure: symlinks are
//! resolved only through [`PathFacts`], which the broker implements.

use crate::facts::{HostFacts, PathFacts};
use crate::shell::Arg;
use std::path::{Component, Path, PathBuf};

/// Lexical normalization of an absolute path: `.` dropped, `..` applied
/// (never above `/`), repeated slashes collapsed.
pub fn normalize(p: &Path) -> PathBuf {
    if is_clean(bytes(p)) {
        // Already spelled as its components (nearly every path a command
        // names): nothing to drop, apply or collapse.
        return p.to_path_buf();
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// Whether `p` is absolute and spelled the one way its components are: no
/// empty, `.` or `..` component and no trailing slash (`/` itself is
/// clean). For two clean paths, comparing bytes gives what comparing
/// components gives.
fn is_clean(p: &[u8]) -> bool {
    match p {
        [b'/'] => true,
        [b'/', rest @ ..] => rest
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".."),
        _ => false,
    }
}

/// `a.starts_with(b)` ([`Path::starts_with`], component-wise), by bytes when
/// both are clean: the decisions compare every target with every protected
/// path, and parsing components was most of a write decision's time.
pub fn within(a: &Path, b: &Path) -> bool {
    if both_clean(a, b) {
        within_clean(bytes(a), bytes(b))
    } else {
        a.starts_with(b)
    }
}

fn bytes(p: &Path) -> &[u8] {
    use std::os::unix::ffi::OsStrExt;
    p.as_os_str().as_bytes()
}

fn both_clean(a: &Path, b: &Path) -> bool {
    is_clean(bytes(a)) && is_clean(bytes(b))
}

/// [`within`] for two clean paths.
fn within_clean(x: &[u8], y: &[u8]) -> bool {
    y == b"/" || (x.starts_with(y) && (x.len() == y.len() || x[y.len()] == b'/'))
}

/// `(q == p, q within p, p within q)`, each path's spelling checked once.
fn compare(q: &Path, p: &Path) -> (bool, bool, bool) {
    if both_clean(q, p) {
        let (x, y) = (bytes(q), bytes(p));
        (x == y, within_clean(x, y), within_clean(y, x))
    } else {
        (q == p, q.starts_with(p), p.starts_with(q))
    }
}

/// A path argument, resolved as far as static analysis allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A literal path (absolute, normalized, real when the broker knew it).
    Path(PathBuf),
    /// A glob: the literal directory prefix and the pattern components below it.
    Glob {
        prefix: PathBuf,
        pattern: Vec<String>,
    },
    /// Anything beneath a directory (`find DIR -exec … {}`).
    Beneath(PathBuf),
    /// Not known until run time (`$X`, `~`, `$(…)`, xargs input).
    Unresolved,
}

impl Target {
    pub fn describe(&self) -> String {
        match self {
            Target::Path(p) => p.display().to_string(),
            Target::Glob { prefix, pattern } => {
                let mut s = prefix.display().to_string();
                for c in pattern {
                    if !s.ends_with('/') {
                        s.push('/');
                    }
                    s.push_str(c);
                }
                s
            }
            Target::Beneath(p) => format!("{}/…", p.display()),
            Target::Unresolved => "an unresolved path".to_string(),
        }
    }
}

fn has_glob(s: &str) -> bool {
    s.contains(['*', '?']) || s.find('[').is_some_and(|i| s[i + 1..].contains(']'))
}

/// Resolves an argument against the cwd (None: unknown cwd) and the broker's
/// symlink facts.
pub fn resolve(arg: &Arg, cwd: Option<&Path>, facts: &dyn PathFacts) -> Target {
    resolve_with(arg, cwd, facts, true)
}

/// [`resolve`] without following the last component: the name itself, in
/// its directory's real path (what `ln -sf`, `rm` or `mv` act on when the
/// name is a symlink).
pub fn resolve_no_follow(arg: &Arg, cwd: Option<&Path>, facts: &dyn PathFacts) -> Target {
    resolve_with(arg, cwd, facts, false)
}

fn resolve_with(arg: &Arg, cwd: Option<&Path>, facts: &dyn PathFacts, follow_last: bool) -> Target {
    if let Some(dir) = &arg.under {
        return match resolve(&Arg::lit(dir), cwd, facts) {
            Target::Path(p) => Target::Beneath(p),
            Target::Glob { prefix, .. } => Target::Beneath(prefix),
            other => other,
        };
    }
    if !arg.literal || arg.text.is_empty() || arg.text.contains('\0') {
        return Target::Unresolved;
    }
    let raw = Path::new(&arg.text);
    let joined = if raw.is_absolute() {
        raw.to_path_buf()
    } else {
        match cwd {
            Some(c) => c.join(raw),
            None => return Target::Unresolved,
        }
    };
    if arg.glob && has_glob(&arg.text) {
        let mut prefix = PathBuf::from("/");
        let mut pattern = Vec::new();
        let norm = normalize(&joined);
        for c in norm.components() {
            if let Component::Normal(n) = c {
                let s = n.to_string_lossy().to_string();
                if pattern.is_empty() && !has_glob(&s) {
                    prefix.push(&s);
                } else {
                    pattern.push(s);
                }
            }
        }
        let prefix = real(&prefix, facts);
        return Target::Glob { prefix, pattern };
    }
    if !follow_last {
        let norm = normalize(&joined);
        if let (Some(parent), Some(name)) = (norm.parent(), norm.file_name()) {
            return Target::Path(real(parent, facts).join(name));
        }
    }
    Target::Path(real(&joined, facts))
}

/// The real path of an absolute path: the broker's answer for it, else its
/// parent's real path plus its name, else the lexical normalization.
pub fn real(p: &Path, facts: &dyn PathFacts) -> PathBuf {
    if let Some(r) = facts.real_path(p) {
        return normalize(&r);
    }
    // The deepest ancestor the broker can resolve, plus the rest: a link in
    // the middle of a path to a file that does not exist yet still counts.
    let norm = normalize(p);
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cur: &Path = &norm;
    for _ in 0..256 {
        let (Some(parent), Some(name)) = (cur.parent(), cur.file_name()) else {
            break;
        };
        rest.push(name);
        if let Some(rp) = facts.real_path(parent) {
            let mut out = rp;
            for n in rest.iter().rev() {
                out.push(n);
            }
            return normalize(&out);
        }
        cur = parent;
    }
    norm
}

/// How a target may relate to a fixed path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rel {
    /// May be the path itself.
    pub equal: bool,
    /// May be strictly beneath it.
    pub inside: bool,
    /// May be a strict ancestor of it.
    pub ancestor: bool,
}

impl Rel {
    pub fn at_or_inside(self) -> bool {
        self.equal || self.inside
    }
    const ALL: Rel = Rel {
        equal: true,
        inside: true,
        ancestor: true,
    };
}

pub fn relation(t: &Target, p: &Path) -> Rel {
    match t {
        Target::Unresolved => Rel::ALL,
        Target::Path(q) => {
            let (equal, down, up) = compare(q, p);
            Rel {
                equal,
                inside: !equal && down,
                ancestor: !equal && up,
            }
        }
        Target::Beneath(q) => {
            let (_, down, up) = compare(q, p);
            Rel {
                equal: down || up,
                inside: down || up,
                ancestor: up,
            }
        }
        Target::Glob { prefix, pattern } => glob_relation(prefix, pattern, p),
    }
}

fn glob_relation(prefix: &Path, pattern: &[String], p: &Path) -> Rel {
    if within(prefix, p) {
        // Every match is at or beneath p.
        return Rel {
            equal: false,
            inside: true,
            ancestor: false,
        };
    }
    let Ok(rest) = p.strip_prefix(prefix) else {
        return Rel::default();
    };
    let comps: Vec<String> = rest
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let n = comps.len().min(pattern.len());
    let mut all = true;
    for i in 0..n {
        if !fnmatch(&pattern[i], &comps[i]) {
            all = false;
            break;
        }
    }
    if !all {
        return Rel::default();
    }
    Rel {
        equal: comps.len() == pattern.len(),
        inside: pattern.len() > comps.len(),
        ancestor: pattern.len() < comps.len(),
    }
}

/// Shell pattern matching of one path component: `*`, `?`, `[…]` (with `!`
/// or `^`). Conservative: a leading `.` is matched by wildcards too, and a
/// malformed bracket matches anything.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    if p.len() > 256 || n.len() > 256 {
        return true;
    }
    // Iterative matcher with single-star backtracking.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => match bracket(&p[pi..], n[ni]) {
                    Some((true, len)) => {
                        pi += len;
                        ni += 1;
                        continue;
                    }
                    Some((false, _)) => {}
                    None => return true,
                },
                c => {
                    if c == n[ni] {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Matches `c` against the bracket expression at the start of `p`; returns
/// (matched, length) or None when malformed.
fn bracket(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

/// Paths whose deletion (or deletion of everything in them) is critical.
pub const NEVER_DELETABLE: &[&str] = &[
    "/",
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/media",
    "/mnt",
    "/opt",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/srv",
    "/sys",
    "/tmp",
    "/usr",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local",
    "/usr/share",
    "/usr/include",
    "/var",
    "/var/lib",
    "/var/log",
    "/var/cache",
    "/var/spool",
    "/var/tmp",
    "/var/backups",
    "/etc/ssh",
    "/etc/systemd",
    "/etc/default",
    "/etc/apt",
    "/etc/ssl",
    "/etc/pam.d",
    "/etc/security",
    "/etc/sudoers.d",
    "/boot/efi",
    "/var/lib/dpkg",
    "/var/lib/apt",
];

/// Where a write grants privileges or persistence (sudoers, accounts, SSH,
/// PAM, cron, units, shell start-up files, the dynamic loader, boot,
/// binaries, package sources): such writes are high risk, asked in every
/// approval mode.
pub const SENSITIVE_WRITE: &[&str] = &[
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/gshadow",
    "/etc/subuid",
    "/etc/subgid",
    "/etc/ssh",
    "/root",
    "/etc/pam.d",
    "/etc/security",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/var/spool/cron",
    "/etc/systemd",
    "/lib/systemd",
    "/usr/lib/systemd",
    "/etc/init.d",
    "/etc/rc.local",
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/environment",
    "/etc/ld.so.preload",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/modules",
    "/etc/modules-load.d",
    "/etc/modprobe.d",
    "/boot",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/usr/bin",
    "/usr/sbin",
    "/usr/lib",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/etc/apt/sources.list",
    "/etc/apt/sources.list.d",
    "/etc/apt/trusted.gpg.d",
    "/etc/apt/keyrings",
    "/usr/share/keyrings",
    "/etc/yum.repos.d",
    "/etc/polkit-1",
    "/etc/udev",
    "/etc/sysctl.conf",
    "/etc/sysctl.d",
    "/etc/fstab",
    "/etc/hosts.allow",
    "/etc/hosts.deny",
];

/// Files in the project that tools may never write (seed `000`), and the ones
/// they may not even read.
pub fn project_protected_write(facts: &HostFacts, p: &Path) -> Option<&'static str> {
    let root = &facts.project_root;
    if p == root {
        return Some("the project root");
    }
    let Ok(rel) = p.strip_prefix(root) else {
        return None;
    };
    let mut comps = rel.components();
    let first = comps.next()?.as_os_str().to_string_lossy().to_string();
    let deeper = comps.next().is_some();
    if first == ".agent" && !deeper {
        return Some("the project's .agent directory");
    }
    if deeper {
        return None;
    }
    let lower = first.to_ascii_lowercase();
    match lower.as_str() {
        "agent.md" => Some("agent.md (the agent's rules)"),
        "init.conf" => Some("init.conf (configuration and API key)"),
        "agent.log" => Some("agent.log (the audit log)"),
        "contexto.mem" => Some("contexto.mem (the broker keeps it)"),
        ".context-history" => Some(".context-history"),
        "memoria.md" => None,
        _ if lower.ends_with(".md") => Some("a project *.md file (instructions and tasks)"),
        _ => None,
    }
}

/// Names used to test whether a glob in the project root may hit a protected file.
pub const PROJECT_PROBES: &[&str] = &[
    "agent.md",
    "Agent.md",
    "init.conf",
    "agent.log",
    "contexto.mem",
    ".context-history",
    "01-task.md",
    "README.md",
    ".agent",
];

/// The paths no action may read: secrets, `/etc/sysward`, init.conf,
/// `.context-history`, and sysward's protected state (audit log, approvals).
pub fn read_protected(facts: &HostFacts) -> Vec<PathBuf> {
    let mut v = vec![
        facts.secrets_dir.clone(),
        PathBuf::from("/etc/sysward"),
        facts.project_root.join("init.conf"),
        facts.project_root.join(".context-history"),
    ];
    for p in &facts.protected {
        if p.starts_with(&facts.state_dir) && !v.contains(p) {
            v.push(p.clone());
        }
    }
    for p in &facts.secret_files {
        if !v.contains(p) {
            v.push(p.clone());
        }
    }
    v
}

/// sysward's own paths that no action may write in any mode.
pub fn write_protected(facts: &HostFacts) -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("/etc/sysward"), facts.secrets_dir.clone()];
    for p in &facts.protected {
        if !v.contains(p) {
            v.push(p.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of paths over `/`, `a` and `.` up to six bytes (clean or
    /// not, absolute or not), and some with longer names: the byte
    /// comparisons answer what the component comparisons do.
    #[test]
    fn byte_comparisons_agree_with_component_comparisons() {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..6 {
            let next: Vec<String> = last
                .iter()
                .flat_map(|s| ["/", "a", "."].map(|c| format!("{s}{c}")))
                .collect();
            all.extend(next.iter().cloned());
            last = next;
        }
        for named in [
            "/etc/sysward",
            "/etc/sysward2",
            "/etc/sysward/secrets",
            "/etc/sys",
            "/etc",
            "/etc/",
            "//etc/sysward",
            "/etc/./sysward",
            "/etc/../etc/sysward",
            "/srv/agent/.agent",
            "/srv/agent/.agentx",
        ] {
            all.push(named.to_string());
        }
        let paths: Vec<&Path> = all.iter().map(Path::new).collect();
        for a in &paths {
            for b in &paths {
                assert_eq!(within(a, b), a.starts_with(b), "{a:?} within {b:?}");
                // relation() as it was written with std's comparisons.
                let (eq, down, up) = (a == b, a.starts_with(b), b.starts_with(a));
                let path = Target::Path(a.to_path_buf());
                let want = Rel {
                    equal: eq,
                    inside: !eq && down,
                    ancestor: !eq && up,
                };
                assert_eq!(relation(&path, b), want, "{a:?} vs {b:?}");
                let beneath = Target::Beneath(a.to_path_buf());
                let want = Rel {
                    equal: down || up,
                    inside: down || up,
                    ancestor: up,
                };
                assert_eq!(relation(&beneath, b), want, "beneath {a:?} vs {b:?}");
            }
            // The clean spelling is kept as it is; any other is rebuilt.
            if a.is_absolute() {
                let mut rebuilt = PathBuf::from("/");
                for c in a.components() {
                    match c {
                        Component::ParentDir => {
                            rebuilt.pop();
                        }
                        Component::Normal(n) => rebuilt.push(n),
                        _ => {}
                    }
                }
                assert_eq!(normalize(a), rebuilt, "normalize {a:?}");
            }
        }
    }

    #[test]
    fn fnmatch_basics() {
        assert!(fnmatch("*", "etc"));
        assert!(fnmatch("e*", "etc"));
        assert!(!fnmatch("x*", "etc"));
        assert!(fnmatch("*.md", "agent.md"));
        assert!(fnmatch("[a-c]gent.md", "agent.md"));
        assert!(!fnmatch("[!a]gent.md", "agent.md"));
        assert!(fnmatch("a?c", "abc"));
        assert!(fnmatch("*a*b*", "xxaxxbxx"));
        assert!(!fnmatch("*a*b", "xxaxxbxx"));
    }

    #[test]
    fn normalize_dots() {
        assert_eq!(
            normalize(Path::new("/a/./b/../c//d")),
            PathBuf::from("/a/c/d")
        );
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
    }

    #[test]
    fn glob_relations() {
        let t = Target::Glob {
            prefix: PathBuf::from("/"),
            pattern: vec!["e*".into()],
        };
        assert!(relation(&t, Path::new("/etc")).equal);
        assert!(relation(&t, Path::new("/etc/sysward")).ancestor);
        let t = Target::Glob {
            prefix: PathBuf::from("/etc/sysward"),
            pattern: vec!["*".into()],
        };
        assert!(relation(&t, Path::new("/etc/sysward")).inside);
    }
}
