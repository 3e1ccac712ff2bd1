//! The Debian package in a throwaway host: the .deb built from this tree,
//! installed with dpkg in a booted host (see [`crate::hosts`]), pointed at a
//! scripted model, configured as an operator would. Shared by the service,
//! hardening, fleet and eval tests.

use crate::hosts::{Host, Options};
use crate::{describe, require_root, Handle};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The .deb under test: `SYSWARD_DEB`, or built once per run of this test
/// binary with packaging/build-deb.sh (into this tree's target/, which
/// scripts/package-test.sh reuses after the test suite).
pub fn deb() -> PathBuf {
    static DEB: OnceLock<PathBuf> = OnceLock::new();
    DEB.get_or_init(|| {
        if let Some(p) = std::env::var_os("SYSWARD_DEB") {
            let p = PathBuf::from(p);
            assert!(p.is_file(), "SYSWARD_DEB={} is not a file", p.display());
            println!("using SYSWARD_DEB={}", p.display());
            return p;
        }
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let t = Instant::now();
        let out = Command::new("bash")
            .arg("packaging/build-deb.sh")
            .current_dir(repo)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "build-deb.sh: {}", describe(&out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
        assert!(
            path.is_file(),
            "build-deb.sh printed no .deb: {}",
            describe(&out)
        );
        println!(
            "built {} in {:.0} s",
            path.display(),
            t.elapsed().as_secs_f64()
        );
        path
    })
    .clone()
}

/// Boots a host and installs the package with dpkg, as an administrator
/// would; the postinst enables and starts the broker (systemd is PID 1).
pub fn host_with_package(test: &str, opts: Options) -> Option<Host> {
    if !require_root(test) {
        return None;
    }
    let host = Host::start_with(test, Options { boot: true, ..opts })?;
    let deb = deb();
    host.copy_in(&deb, "/root/sysward.deb", 0o644);
    let t = Instant::now();
    let out = host.run(&["dpkg", "-i", "/root/sysward.deb"]);
    assert!(out.status.success(), "dpkg -i: {}", describe(&out));
    println!(
        "{}: dpkg -i in {:.1} s",
        host.name(),
        t.elapsed().as_secs_f64()
    );
    wait_active(&host, "sysward.service");
    Some(host)
}

pub fn show(host: &Host, unit: &str, prop: &str) -> String {
    host.ok(&["systemctl", "show", unit, "--value", "-p", prop])
        .trim()
        .to_string()
}

pub fn wait_active(host: &Host, unit: &str) {
    let start = Instant::now();
    loop {
        let state = show(host, unit, "ActiveState");
        if state == "active" {
            return;
        }
        if start.elapsed() > Duration::from_secs(60) || state == "failed" {
            let status = host.run(&["systemctl", "status", "--no-pager", "-l", unit]);
            let journal = host.run(&["journalctl", "--no-pager", "-u", unit]);
            panic!(
                "{unit} is {state:?}, not active\n{}\n{}",
                String::from_utf8_lossy(&status.stdout),
                String::from_utf8_lossy(&journal.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Points the packaged /etc/sysward at `server` (an edit of init.conf, as an
/// operator makes), sets the policy block of agent.md and adds task files.
pub fn configure(host: &Host, server: &Handle, policy: &str, tasks: &[(&str, &str)]) {
    host.sh_ok(&format!(
        "sed -i 's#^API_URL=.*#API_URL={}#; s#^MODEL=.*#MODEL=scripted-model#' /etc/sysward/init.conf && echo REQUEST_TIMEOUT=120 >> /etc/sysward/init.conf",
        server.base_url()
    ));
    host.write(
        "/etc/sysward/agent.md",
        format!("# Test host\nYou administer a test host.\n\n```policy\n{policy}\n```\n"),
        0o600,
    );
    for (name, text) in tasks {
        host.write(&format!("/etc/sysward/{name}"), text, 0o600);
    }
}
