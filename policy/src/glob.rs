//! Path globs for the write rules: `*` and `?` match within one path
//! component, `**` (a whole component) any number of components. Nothing
//! else is special, so a rule says exactly which paths it covers.

/// Checks a rule's glob: absolute, normalized (no `.`/`..`/empty
/// components), `**` only as a whole component. Returns it as stored.
pub fn check(glob: &str) -> Result<String, String> {
    let glob = glob.trim();
    if !glob.starts_with('/') {
        return Err("an absolute path glob, e.g. /etc/sysctl.d/90-*.conf".to_string());
    }
    if glob.len() > 1024 {
        return Err("a path glob of at most 1024 bytes".to_string());
    }
    for comp in glob[1..].split('/') {
        if comp.is_empty() || comp == "." || comp == ".." {
            return Err("a normalized path glob (no empty, `.` or `..` components)".to_string());
        }
        if comp.contains("**") && comp != "**" {
            return Err("`**` only as a whole path component (/etc/**/x.conf)".to_string());
        }
    }
    Ok(glob.to_string())
}

/// Whether `path` (absolute, normalized) matches `glob`.
pub fn matches(glob: &str, path: &str) -> bool {
    let (Some(g), Some(p)) = (glob.strip_prefix('/'), path.strip_prefix('/')) else {
        return false;
    };
    let g: Vec<&str> = g.split('/').collect();
    let p: Vec<&str> = p.split('/').collect();
    components(&g, &p)
}

fn components(g: &[&str], p: &[&str]) -> bool {
    match g.split_first() {
        None => p.is_empty(),
        Some((&"**", rest)) => (0..=p.len()).any(|skip| components(rest, &p[skip..])),
        Some((first, rest)) => match p.split_first() {
            Some((name, prest)) => {
                component(first.as_bytes(), name.as_bytes()) && components(rest, prest)
            }
            None => false,
        },
    }
}

/// One component: `*` any run of bytes, `?` one byte.
fn component(g: &[u8], n: &[u8]) -> bool {
    // Iterative with one backtrack point: linear in practice, never
    // exponential (a hostile glob is the operator's own, but still).
    let (mut gi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if gi < g.len() && (g[gi] == b'?' || g[gi] == n[ni]) && g[gi] != b'*' {
            gi += 1;
            ni += 1;
        } else if gi < g.len() && g[gi] == b'*' {
            star = Some((gi, ni));
            gi += 1;
        } else if let Some((sg, sn)) = star {
            gi = sg + 1;
            ni = sn + 1;
            star = Some((sg, sn + 1));
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_exactly_what_they_say() {
        assert!(matches(
            "/etc/sysctl.d/90-*.conf",
            "/etc/sysctl.d/90-net.conf"
        ));
        assert!(!matches(
            "/etc/sysctl.d/90-*.conf",
            "/etc/sysctl.d/90-a/b.conf"
        ));
        assert!(!matches(
            "/etc/sysctl.d/90-*.conf",
            "/etc/sysctl.d/10-net.conf"
        ));
        assert!(!matches(
            "/etc/sysctl.d/90-*.conf",
            "/etc/sysctl.d/90-net.conf.d"
        ));
        assert!(matches("/etc/ssh/sshd_config", "/etc/ssh/sshd_config"));
        assert!(!matches(
            "/etc/ssh/sshd_config",
            "/etc/ssh/sshd_config.d/x.conf"
        ));
        assert!(matches("/etc/**/x.conf", "/etc/x.conf"));
        assert!(matches("/etc/**/x.conf", "/etc/a/b/x.conf"));
        assert!(matches(
            "/etc/ssh/sshd_config.d/*",
            "/etc/ssh/sshd_config.d/50-x.conf"
        ));
        assert!(matches("/tmp/a?c", "/tmp/abc") && !matches("/tmp/a?c", "/tmp/ac"));
        assert!(!matches("/etc/*", "etc/x"));
    }

    #[test]
    fn only_absolute_normalized_globs_are_accepted() {
        for bad in [
            "etc/x",
            "/etc/../shadow",
            "/etc//x",
            "/etc/a**/b",
            "/etc/./x",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert!(check("/etc/**/x.conf").is_ok());
    }
}
