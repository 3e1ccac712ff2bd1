//! `sysward doctor`: one row per prerequisite, its state, and the fix.

use crate::project::{Layout, Project};
use anyhow::Result;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

struct Row {
    name: &'static str,
    ok: bool,
    state: String,
    fix: String,
}

fn row(name: &'static str, ok: bool, state: impl Into<String>, fix: impl Into<String>) -> Row {
    Row {
        name,
        ok,
        state: state.into(),
        fix: fix.into(),
    }
}

fn landlock_abi() -> Row {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // only returns the ABI version; no memory is passed.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    if abi >= 4 {
        row("landlock", true, format!("ABI {abi}"), "")
    } else if abi > 0 {
        row(
            "landlock",
            false,
            format!("ABI {abi} (TCP rules need 4, signal scopes 6)"),
            "use a kernel ≥ 6.7 for full confinement",
        )
    } else {
        row("landlock", false, "not available", "boot with lsm=...,landlock (CONFIG_SECURITY_LANDLOCK=y); actions are refused without it")
    }
}

fn seccomp() -> Row {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let has = status.lines().any(|l| l.starts_with("Seccomp:"));
    let actions =
        std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail").unwrap_or_default();
    if has && actions.contains("errno") {
        row(
            "seccomp",
            true,
            format!("filter mode available ({})", actions.trim()),
            "",
        )
    } else {
        row(
            "seccomp",
            false,
            "not available",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        )
    }
}

fn namespaces() -> Row {
    let ok = Path::new("/proc/self/ns/net").exists();
    let userns = std::fs::read_to_string("/proc/sys/user/max_net_namespaces").unwrap_or_default();
    if ok && userns.trim() != "0" {
        row("namespaces", true, "network namespaces available", "")
    } else {
        row(
            "namespaces",
            false,
            "network namespaces unavailable",
            "enable CONFIG_NET_NS and user.max_net_namespaces > 0",
        )
    }
}

fn cgroup() -> Row {
    match crate::cgroup::actions_root() {
        Some(p) => row("cgroup", true, format!("v2 with cgroup.kill at {}", p.display()), ""),
        None => row("cgroup", false, "no cgroup v2 with cgroup.kill", "mount cgroup2 (kernel ≥ 5.14); without it daemonized children of an action can survive it"),
    }
}

fn user(name: &str, what: &'static str) -> Row {
    match crate::spawn::account(name) {
        Ok(a) => row(
            what,
            true,
            format!("{name} (uid {} gid {})", a.uid, a.gid),
            "",
        ),
        Err(e) => row(
            what,
            false,
            format!("{e:#}"),
            format!("useradd --system --no-create-home --shell /usr/sbin/nologin {name}"),
        ),
    }
}

fn group() -> Row {
    match crate::control::operator_gid() {
        Ok(g) => row("operator group", true, format!("sysward (gid {g})"), ""),
        Err(_) => row(
            "operator group",
            false,
            "missing",
            "groupadd --system sysward; usermod -aG sysward <operator>",
        ),
    }
}

fn socket_path() -> Row {
    let path = Path::new(crate::control::SOCKET_PATH);
    match crate::control::check_path_components(path) {
        Err(e) => row("control socket", false, format!("{e:#}"), "fix the ownership/mode of the path components"),
        Ok(()) => match std::fs::symlink_metadata(path) {
            Ok(m) => row("control socket", true, format!("{} (mode {:o}, owner {}:{})", path.display(), m.mode() & 0o777, m.uid(), m.gid()), ""),
            Err(_) => row("control socket", true, format!("{} not present (the daemon is not running; `sysward run --root DIR` works without it)", path.display()), ""),
        },
    }
}

fn binaries() -> Row {
    let mut problems = Vec::new();
    for b in ["sysward-agent", "sysward-exec", "sysward-gateway"] {
        if let Err(e) = crate::spawn::sibling(b) {
            problems.push(format!("{e:#}"));
        }
    }
    if problems.is_empty() {
        row(
            "binaries",
            true,
            "agent, executor and gateway installed beside sysward, root-owned",
            "",
        )
    } else {
        row(
            "binaries",
            false,
            problems.join("; "),
            "install all four sysward binaries in one root-owned directory",
        )
    }
}

fn file_modes(layout: &Layout) -> Row {
    let mut bad = Vec::new();
    for p in [
        layout.config_dir.clone(),
        layout.init_conf(),
        layout.config_dir.join("agent.md"),
    ] {
        if let Ok(m) = std::fs::metadata(&p) {
            if m.mode() & 0o002 != 0 {
                bad.push(format!("{} is world-writable", p.display()));
            }
        }
    }
    if let Ok(m) = std::fs::metadata(layout.init_conf()) {
        if m.mode() & 0o004 != 0 {
            bad.push(format!(
                "{} is world-readable (it holds API_KEY)",
                layout.init_conf().display()
            ));
        }
    }
    if bad.is_empty() {
        row(
            "file modes",
            true,
            format!("{} ok", layout.config_dir.display()),
            "",
        )
    } else {
        row(
            "file modes",
            false,
            bad.join("; "),
            format!(
                "chmod o-rw {0}/init.conf; chmod o-w {0} {0}/*.md",
                layout.config_dir.display()
            ),
        )
    }
}

fn model_endpoint(project: &Result<Project>) -> Row {
    let p = match project {
        Ok(p) => p,
        Err(e) => {
            return row(
                "model endpoint",
                false,
                format!("project does not load: {e:#}"),
                "fix init.conf / agent.md as the message says",
            )
        }
    };
    let url = &p.conf.api_url;
    let addr = format!("{}:{}", url.host, url.port);
    use std::net::ToSocketAddrs;
    let reachable = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(3)).is_ok()
        });
    match reachable {
        Some(true) => row(
            "model endpoint",
            true,
            format!(
                "{} accepts connections (key {})",
                url.raw,
                p.conf.masked_key()
            ),
            "",
        ),
        Some(false) => row(
            "model endpoint",
            false,
            format!("{} refuses connections", url.raw),
            "start the model server or fix API_URL in init.conf",
        ),
        None => row(
            "model endpoint",
            false,
            format!("cannot resolve {}", url.host),
            "fix API_URL's host in init.conf",
        ),
    }
}

pub fn run(layout: &Layout) -> Result<i32> {
    let project = Project::load(layout.clone());
    let mut rows = vec![
        landlock_abi(),
        seccomp(),
        namespaces(),
        cgroup(),
        binaries(),
        group(),
        socket_path(),
        file_modes(layout),
        model_endpoint(&project),
    ];
    match &project {
        Ok(p) => {
            rows.insert(4, user(&p.conf.agent_user, "agent user"));
            rows.insert(5, user(&p.conf.model_user, "gateway user"));
        }
        Err(_) => {
            rows.insert(4, user(crate::config::DEFAULT_AGENT_USER, "agent user"));
            rows.insert(5, user(crate::config::DEFAULT_MODEL_USER, "gateway user"));
        }
    }
    let mut failed = 0;
    for r in &rows {
        println!(
            "{:<16} {:<4} {}",
            r.name,
            if r.ok { "ok" } else { "FAIL" },
            r.state
        );
        if !r.ok {
            failed += 1;
            println!("{:<16}      fix: {}", "", r.fix);
        }
    }
    Ok(if failed == 0 { 0 } else { 1 })
}
