//! The README's quick start, as a newcomer types it, on a fresh Debian host.
//!
//! The cheap test reads the commands out of the README. The full one
//! (`--ignored`: it downloads Rust with rustup and makes a release build in
//! the host, 15 minutes or more on 2 cores) boots a throwaway Debian 12 host
//! without sudo, copies this source tree in (`git archive HEAD`), runs those
//! commands as root, in order, in one shell, and checks that the demo's task
//! ended DONE with an intact audit chain:
//!
//!     cargo test -p sysward-tests --test quick_start -- --ignored --nocapture

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use sysward_tests::hosts::Host;

/// The commands of the README's quick start block, without their `# ` prompt
/// and trailing comments.
fn quick_start_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let section = readme
        .split("\n## Quick start")
        .nth(1)
        .expect("the README has a quick start section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("the quick start has a sh block");
    block
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .map(|l| match l.find("   #") {
            Some(i) => l[..i].trim_end().to_string(),
            None => l.trim_end().to_string(),
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_quick_start_is_root_commands_ending_in_the_demo() {
    let cmds = quick_start_commands();
    assert!(cmds.len() >= 3, "{cmds:?}");
    assert!(
        cmds.iter().all(|c| !c.starts_with("sudo ")),
        "the quick start needs sudo: {cmds:?}"
    );
    assert_eq!(
        cmds.last().map(String::as_str),
        Some("bash examples/demo/run.sh"),
        "{cmds:?}"
    );
}

#[test]
#[ignore = "downloads Rust and builds sysward in a host: 15 minutes or more"]
fn the_quick_start_works_on_a_fresh_debian_without_sudo() {
    let Some(host) = Host::boot("the_quick_start_works_on_a_fresh_debian_without_sudo") else {
        return;
    };
    // A fresh Debian: the test bed's base has sudo, a fresh minimal one not.
    // (sudo's prerm refuses without a root password unless forced.)
    host.sh_ok("SUDO_FORCE_REMOVE=yes DEBIAN_FRONTEND=noninteractive apt-get purge -y -q sudo >/dev/null 2>&1; ! command -v sudo");
    // The local CAs this machine trusts (an egress that inspects TLS) are
    // the host's too, or nothing it downloads over https verifies.
    if let Ok(dir) = std::fs::read_dir("/usr/local/share/ca-certificates") {
        for ca in dir.flatten() {
            let name = ca.file_name().to_string_lossy().into_owned();
            if name.ends_with(".crt") {
                host.copy_in(
                    &ca.path(),
                    &format!("/usr/local/share/ca-certificates/{name}"),
                    0o644,
                );
            }
        }
        host.sh_ok("update-ca-certificates >/dev/null");
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let tar = std::env::temp_dir().join(format!("sysward-quick-start-{}.tar", std::process::id()));
    use sysward_testdir::RemoveOnDrop;
    let _cleanup = RemoveOnDrop(tar.clone());
    let archived = Command::new("git")
        .arg("-C")
        .arg(&repo)
        .args(["archive", "--prefix=sysward/", "-o"])
        .arg(&tar)
        .arg("HEAD")
        .status()
        .unwrap();
    assert!(archived.success(), "git archive failed");
    host.copy_in(&tar, "/root/sysward.tar", 0o600);
    let _ = std::fs::remove_file(&tar);
    host.sh_ok("cd /root && tar -xf sysward.tar && rm sysward.tar");
    // Where sh.rustup.rs does not resolve (a network that reaches only the
    // package registries), the same installer comes from its own host.
    let rustup_reachable = Command::new("getent")
        .args(["hosts", "sh.rustup.rs"])
        .output()
        .is_ok_and(|o| o.status.success());
    let commands: Vec<String> = quick_start_commands()
        .into_iter()
        .map(|c| {
            if !rustup_reachable && c.contains("https://sh.rustup.rs") {
                println!("sh.rustup.rs does not resolve here: rustup-init from static.rust-lang.org instead");
                "curl --proto '=https' --tlsv1.2 -sSf -o /tmp/rustup-init https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init && chmod +x /tmp/rustup-init && /tmp/rustup-init -y".to_string()
            } else {
                c
            }
        })
        .collect();
    let script = format!(
        "set -e\ncd /root\nexport HOME=/root\n{}\n",
        commands.join("\n")
    );
    println!("{script}");
    let out = host.run_timeout(&["bash", "-c", &script], Duration::from_secs(3600));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tail: String = stdout
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    println!("{tail}");
    assert!(
        out.status.success(),
        "the quick start failed: {:?}\n{tail}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("01-health-check") && stdout.contains("DONE"),
        "{tail}"
    );
    assert!(stdout.contains("audit chain intact"), "{tail}");
    assert!(host.shutdown().is_empty());
}
