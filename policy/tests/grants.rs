//! An allow the kernel then refuses is a bug: every write a corpus of
//! ordinary admin commands is allowed (or asked) to make gets a profile whose
//! Landlock grant covers the files it names, their directories (temporary
//! files, backups, lock files are created there) and, for trees, the tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use sysward_policy::{parse_agent_md, Engine, HostFacts, LexicalPaths, Request};

fn engine() -> Engine {
    let md = "```policy\nEXECUTION_MODE=unrestricted\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_NETWORK=true\nALLOW_DELETE=true\nALLOW_SERVICE_RESTART=true\n```\n";
    let mut facts = HostFacts::packaged(0, 0);
    facts.project_root = "/srv/agent".into();
    facts.scratch_dir = "/srv/agent/.agent/tmp".into();
    Engine::new(parse_agent_md(md).unwrap().block, facts)
}

/// The profile of an allowed `script` run in the project's `work/`; panics,
/// naming it, when the engine denies it.
fn profile_of(e: &Engine, script: &str) -> sysward_ipc::profile::ConfinementProfile {
    let d = e.decide(
        &Request::Shell {
            script,
            cwd: Path::new("/srv/agent/work"),
        },
        &LexicalPaths,
    );
    assert!(!d.verdict.is_deny(), "{script}: denied: {d:?}");
    d.profile.expect("an allowed command has a profile")
}

/// (command, paths it must be able to create or change)
const CORPUS: &[(&str, &[&str])] = &[
    ("sed -i s/a/b/ /etc/hosts", &["/etc/hosts", "/etc/sedXYZ"]),
    (
        "sed -i.bak s/a/b/ /etc/login.defs",
        &["/etc/login.defs", "/etc/login.defs.bak"],
    ),
    (
        "echo 'net.ipv4.ip_forward=0' > /etc/sysctl.d/90-x.conf",
        &["/etc/sysctl.d/90-x.conf"],
    ),
    ("echo x >> /etc/motd", &["/etc/motd"]),
    ("tee /etc/nftables.conf < rules", &["/etc/nftables.conf"]),
    ("cp rules /etc/nftables.conf", &["/etc/nftables.conf"]),
    ("mkdir -p /etc/app/conf.d", &["/etc/app/conf.d"]),
    ("mkdir /var/lib/app", &["/var/lib/app"]),
    ("touch /tmp/report.txt", &["/tmp/report.txt"]),
    ("echo r > /srv/agent/report.txt", &["/srv/agent/report.txt"]),
    ("mkdir /srv/agent/work2", &["/srv/agent/work2"]),
    (
        "useradd -m bob",
        &["/etc/passwd", "/etc/passwd+", "/etc/.pwd.lock", "/home/bob"],
    ),
    ("groupadd ops", &["/etc/group", "/etc/gshadow"]),
    ("usermod -aG ops bob", &["/etc/group", "/etc/gshadow"]),
    ("passwd -l bob", &["/etc/shadow", "/etc/nshadow"]),
    ("chage -M 90 bob", &["/etc/shadow"]),
    (
        "apt-get install -y nginx",
        &[
            "/usr/bin/nginx",
            "/etc/nginx/nginx.conf",
            "/var/lib/dpkg/status",
        ],
    ),
    ("chmod 0640 /etc/app.conf", &["/etc/app.conf"]),
    ("tar -xzf a.tgz -C /opt/app", &["/opt/app/bin/x"]),
];

#[test]
fn every_allowed_write_gets_a_grant_that_covers_its_own_targets() {
    let e = engine();
    let mut checked = 0;
    for (script, targets) in CORPUS {
        let p = profile_of(&e, script);
        for t in *targets {
            let covered =
                p.write_everywhere || p.write_paths.iter().any(|w| Path::new(t).starts_with(w));
            assert!(covered, "{script}: {t} is not writable under {p}");
            checked += 1;
        }
        assert!(p.can_write(), "{script}: {p}");
        assert!(
            p.protected_paths.iter().any(|x| x == "/etc/sysward"),
            "{script}: sysward's own paths are not protected: {p}"
        );
        assert!(
            p.to_string().contains("(sysward's own paths read-only)"),
            "{script}: the profile line does not say what the kernel keeps: {p}"
        );
    }
    assert_eq!(checked, CORPUS.iter().map(|c| c.1.len()).sum::<usize>());
}

/// Removing an entry is a right on the directory holding it: the grant must
/// cover that directory (the last `rmdir` of `rm -rf DIR` happens in DIR's
/// parent).
const DELETES: &[(&str, &str)] = &[
    ("rm -rf /srv/agent/data", "/srv/agent"),
    ("rm -r /var/lib/app", "/var/lib"),
    ("rm /etc/app.conf", "/etc"),
    ("rmdir /etc/app/conf.d", "/etc/app"),
    ("rm -rf /srv/agent/work/build/", "/srv/agent/work"),
];

#[test]
fn every_allowed_delete_gets_a_grant_on_the_directory_that_holds_it() {
    let e = engine();
    for (script, parent) in DELETES {
        let p = profile_of(&e, script);
        let covered = p.write_everywhere
            || p.write_paths
                .iter()
                .any(|w| Path::new(parent).starts_with(w));
        assert!(covered, "{script}: {parent} is not writable under {p}");
    }
}

/// Removing another user's files outside the project needs what replacing
/// them needs: root without CAP_DAC_OVERRIDE cannot unlink in a 0700
/// directory it does not own, nor without CAP_FOWNER in a sticky one.
#[test]
fn a_removal_outside_the_project_keeps_the_dac_capabilities() {
    let e = engine();
    for script in [
        "rm -rf /var/tmp/app",
        "rm /tmp/report.txt",
        "rmdir /opt/app/old",
    ] {
        let p = profile_of(&e, script);
        for cap in ["CAP_DAC_OVERRIDE", "CAP_FOWNER"] {
            assert!(
                p.capabilities.iter().any(|c| c == cap),
                "{script}: no {cap}: {p}"
            );
        }
    }
    // Inside the project root owns what it removes: nothing more is kept.
    let p = profile_of(&e, "rm -rf /srv/agent/work/build");
    assert!(
        !p.capabilities.iter().any(|c| c == "CAP_DAC_OVERRIDE"),
        "{p}"
    );
}
