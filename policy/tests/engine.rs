//! Engine behaviour beyond the corpus: profiles, operator rules, tools,
//! symlinks, exec requests, explain.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use sysward_policy::{
    explain, parse_agent_md, Category, Engine, HostFacts, LexicalPaths, PathFacts, Request, Risk,
    ToolPaths, Verdict,
};

fn facts() -> HostFacts {
    let mut f = HostFacts::packaged(1234, 1234);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    f
}

fn engine(directives: &str) -> Engine {
    let md = format!("```policy\n{directives}\n```\n");
    Engine::new(parse_agent_md(&md).unwrap().block, facts())
}

fn sh(e: &Engine, script: &str) -> sysward_policy::Decision {
    e.decide(
        &Request::Shell {
            script,
            cwd: Path::new("/srv/agent/work"),
        },
        &LexicalPaths,
    )
}

const OPEN: &str = "EXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nALLOW_REBOOT=true";

#[test]
fn read_only_profile_writes_only_scratch() {
    let d = sh(&engine(""), "ls -la && cat notes.txt | grep x");
    assert_eq!(d.verdict, Verdict::Allow);
    let p = d.profile.unwrap();
    assert_eq!(p.name, "read-only");
    assert!(p.write_paths.is_empty());
    assert!(!p.write_everywhere);
    assert!(
        !p.can_write(),
        "a read-only action needs no mount namespace"
    );
    assert_eq!(p.scratch_dir.as_deref(), Some("/srv/agent/.agent/tmp"));
    assert!(!p.network);
    assert_eq!((p.uid, p.gid), (1234, 1234));
    assert_eq!(p.timeout_secs, 60);
    let except = p.read_all_except.unwrap();
    for must in [
        "/etc/sysward/secrets",
        "/etc/sysward",
        "/srv/agent/init.conf",
        "/srv/agent/.context-history",
        "/var/lib/sysward/audit.log",
        "/var/lib/sysward/approvals",
    ] {
        assert!(except.iter().any(|e| e == must), "{must} not in {except:?}");
    }
}

#[test]
fn write_profile_names_only_the_targets() {
    let e = engine(OPEN);
    let d = sh(&e, "sed -i s/a/b/ /etc/nginx/nginx.conf");
    assert_eq!(d.category, Category::Write);
    assert_eq!(d.risk, Risk::Medium);
    assert_eq!(d.verdict, Verdict::Ask, "strict asks for medium");
    let p = d.profile.unwrap();
    assert_eq!(
        p.write_paths,
        vec!["/etc/nginx".to_string()],
        "sed -i renames into place: its directory"
    );
    assert!(!p.write_everywhere);
    let d = sh(&e, "echo x >> /etc/motd");
    // /etc holds /etc/sysward: the grant is /etc (a file in /etc can be
    // created, renamed, backed up), and /etc/sysward is read-only in the
    // action's mount namespace.
    let p = d.profile.unwrap();
    assert_eq!(p.write_paths, vec!["/etc".to_string()]);
    assert!(p.protected_paths.iter().any(|x| x == "/etc/sysward"));
    assert!(p.hidden_paths.iter().any(|x| x == "/etc/sysward/secrets"));
    assert!(
        p.to_string()
            .contains("writes beneath /etc (sysward's own paths read-only)"),
        "{p}"
    );
    let d = sh(&e, "echo x > /var/www/index.html");
    assert_eq!(
        d.profile.unwrap().write_paths,
        vec!["/var/www".to_string()],
        "a missing file: its directory"
    );
}

#[test]
fn write_next_to_protected_files_grants_the_directory_and_protects_the_files() {
    // The project root holds agent.md and init.conf: the root is granted
    // (a new file can be created there) and those files are protected by
    // the mount namespace.
    let d = sh(&engine(""), "echo hi > ../notes.txt");
    assert_eq!(d.verdict, Verdict::Allow);
    let p = d.profile.unwrap();
    assert_eq!(p.write_paths, vec!["/srv/agent".to_string()]);
    for must in ["/srv/agent/agent.md", "/srv/agent/init.conf"] {
        assert!(p.protected_paths.iter().any(|x| x == must), "{must}: {p:?}");
    }
    assert!(p.hidden_paths.iter().any(|x| x == "/srv/agent/init.conf"));
}

#[test]
fn package_profile_writes_everything_but_the_protected_set() {
    let d = sh(&engine(OPEN), "apt-get install -y nginx");
    assert_eq!(d.verdict, Verdict::Ask);
    let p = d.profile.unwrap();
    assert!(p.write_everywhere);
    let except = p.protected_paths.clone();
    for must in [
        "/etc/sysward",
        "/etc/sysward/secrets",
        "/var/lib/sysward/audit.log",
        "/usr/bin/sysward",
        "/srv/agent/agent.md",
        "/srv/agent/init.conf",
    ] {
        assert!(except.iter().any(|e| e == must), "{must} not in {except:?}");
    }
    assert!(p.network);
    assert!(p.capabilities.iter().any(|c| c == "CAP_CHOWN"));
    // Reads what root reads; open_by_handle_at, which would bypass Landlock
    // and the mounts with it, is refused by seccomp in every profile.
    assert!(p.capabilities.iter().any(|c| c == "CAP_DAC_READ_SEARCH"));
}

#[test]
fn without_outside_write_no_profile_leaves_the_project() {
    let e = engine("EXECUTION_MODE=privileged\nALLOW_PACKAGE_INSTALL=true\nALLOW_NETWORK=true\nALLOW_DELETE=true");
    for s in [
        "apt-get install nginx",
        "cp a /etc/x",
        "useradd bob",
        "rm -rf /var/www/old",
        "echo x > $F",
        "python3 x.py > /tmp/out",
    ] {
        let d = sh(&e, s);
        match &d.profile {
            None => assert!(d.verdict.is_deny(), "{s}"),
            Some(p) => {
                assert!(!p.write_everywhere, "{s}: {p}");
                for w in &p.write_paths {
                    assert!(w.starts_with("/srv/agent"), "{s}: {w}");
                }
            }
        }
    }
}

#[test]
fn network_needs_the_flag() {
    let d = sh(&engine("ALLOW_NETWORK=true"), "curl -s https://example.com");
    assert_eq!(d.verdict, Verdict::Allow);
    assert!(d.profile.unwrap().network);
    let d = sh(&engine(""), "curl -s https://example.com");
    assert!(
        matches!(d.verdict, Verdict::Deny { ref reason } if reason.contains("ALLOW_NETWORK=false")),
        "{d:?}"
    );
    assert_eq!(d.source, "ALLOW_NETWORK");
    // A write never gets the network.
    let d = sh(&engine("ALLOW_NETWORK=true"), "cp a b");
    assert!(!d.profile.unwrap().network);
}

#[test]
fn critical_is_never_asked() {
    for mode in ["guarded", "privileged", "unrestricted"] {
        for approval in ["strict", "permissive"] {
            let e = engine(
                &format!(
                    "{OPEN}\nEXECUTION_MODE={mode}\nAPPROVAL_MODE={approval}\nCOMMAND_ALLOW=rm"
                )
                .replace("EXECUTION_MODE=privileged\n", ""),
            );
            for s in [
                "rm -rf /",
                "mkfs.ext4 /dev/sda",
                "dd if=/dev/zero of=/dev/sda",
                ":(){ :|:& };:",
                "chmod -R 777 /",
                "rm -rf /etc/*",
                "> /dev/sda",
            ] {
                let d = sh(&e, s);
                assert!(d.verdict.is_deny(), "{mode}/{approval}: {s}: {d:?}");
                assert_eq!(d.risk, Risk::Critical, "{s}");
                assert!(d.profile.is_none());
            }
        }
    }
}

#[test]
fn operator_rules_strictest_wins_and_deny_cannot_be_approved() {
    let e = engine(&format!("{OPEN}\nCOMMAND_ALLOW=systemctl restart nginx\nCOMMAND_DENY=systemctl restart\nCOMMAND_ASK=ls\nCOMMAND_ALLOW=systemctl reload nginx\nCOMMAND_DENY=git push"));
    let d = sh(&e, "systemctl restart nginx");
    assert!(d.verdict.is_deny(), "deny beats allow: {d:?}");
    assert!(d.source.starts_with("operator rule line"), "{}", d.source);
    let d = sh(&e, "systemctl reload nginx");
    assert_eq!(d.verdict, Verdict::Allow, "allow removes the prompt: {d:?}");
    let d = sh(&e, "ls -la");
    assert_eq!(d.verdict, Verdict::Ask, "ask even for safe");
    let d = sh(&e, "sudo git push origin main");
    assert!(d.verdict.is_deny(), "rules match after unwrapping: {d:?}");
    let d = sh(&e, "ls; git push");
    assert!(d.verdict.is_deny(), "one command of a script: {d:?}");
    // Allow never lifts a flag.
    let e = engine("COMMAND_ALLOW=systemctl restart nginx");
    assert!(sh(&e, "systemctl restart nginx").verdict.is_deny());
}

#[test]
fn approval_modes_follow_seed_002() {
    let strict = engine(&format!("{OPEN}\nAPPROVAL_MODE=strict"));
    let permissive = engine(&format!("{OPEN}\nAPPROVAL_MODE=permissive"));
    // safe, low: auto; medium: strict asks; high: both ask.
    let cases = [
        ("df -h", Risk::Safe, 'A', 'A'),
        ("ping -c1 x", Risk::Low, 'A', 'A'),
        ("cp a /etc/x", Risk::Medium, 'Q', 'A'),
        ("systemctl restart mysql", Risk::High, 'Q', 'Q'),
    ];
    let l = |v: &Verdict| match v {
        Verdict::Allow => 'A',
        Verdict::Ask => 'Q',
        Verdict::Deny { .. } => 'D',
    };
    for (s, risk, st, pe) in cases {
        let a = sh(&strict, s);
        assert_eq!(a.risk, risk, "{s}");
        assert_eq!(l(&a.verdict), st, "{s} strict");
        assert_eq!(l(&sh(&permissive, s).verdict), pe, "{s} permissive");
    }
}

struct Links(HashMap<PathBuf, PathBuf>);
impl PathFacts for Links {
    fn real_path(&self, p: &Path) -> Option<PathBuf> {
        self.0.get(p).cloned()
    }
}

#[test]
fn symlinks_are_judged_by_their_real_target() {
    let mut m = HashMap::new();
    m.insert(PathBuf::from("/srv/agent/work/etc"), PathBuf::from("/etc"));
    m.insert(
        PathBuf::from("/srv/agent/work/cfg"),
        PathBuf::from("/etc/sysward"),
    );
    m.insert(
        PathBuf::from("/srv/agent/work/notes"),
        PathBuf::from("/srv/agent/work/notes"),
    );
    let links = Links(m);
    let e = engine("");
    let d = e.decide(
        &Request::Shell {
            script: "echo x > etc/motd",
            cwd: Path::new("/srv/agent/work"),
        },
        &links,
    );
    assert!(
        d.verdict.is_deny(),
        "a project link to /etc counts as /etc: {d:?}"
    );
    let d = e.decide(
        &Request::Shell {
            script: "cat cfg/secrets/db",
            cwd: Path::new("/srv/agent/work"),
        },
        &links,
    );
    assert!(d.verdict.is_deny(), "{d:?}");
    let e = engine(OPEN);
    let d = e.decide(
        &Request::Shell {
            script: "echo x > cfg/agent.md",
            cwd: Path::new("/srv/agent/work"),
        },
        &links,
    );
    assert!(d.verdict.is_deny(), "{d:?}");
    assert_eq!(d.source, "path rule: sysward's own files");
}

#[test]
fn exec_requests_are_classified_without_a_shell() {
    let e = engine("");
    let argv: Vec<String> = ["systemctl", "status", "nginx"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let d = e.decide(
        &Request::Exec {
            argv: &argv,
            env: &[],
            stdin: None,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    );
    assert_eq!(d.verdict, Verdict::Allow);
    assert_eq!(d.normalized, "systemctl status nginx");
    // No shell: `;` and `$(…)` are plain arguments, globs are not expanded.
    let argv: Vec<String> = ["echo", "$(rm -rf /)", ";", "*"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let d = e.decide(
        &Request::Exec {
            argv: &argv,
            env: &[],
            stdin: None,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    );
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    // …but an argv that runs a shell gets its script analysed.
    let argv: Vec<String> = ["bash", "-c", "rm -rf /"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let d = e.decide(
        &Request::Exec {
            argv: &argv,
            env: &[],
            stdin: None,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    );
    assert_eq!(d.risk, Risk::Critical);
    assert!(e
        .decide(
            &Request::Exec {
                argv: &[],
                env: &[],
                stdin: None,
                cwd: Path::new("/")
            },
            &LexicalPaths
        )
        .verdict
        .is_deny());
}

#[test]
fn tools_come_from_the_catalog() {
    let e = engine("");
    let cwd = Path::new("/srv/agent/work");
    let t = |name: &str, paths: &[&str], recursive: bool| {
        let targets: Vec<PathBuf> = paths.iter().map(PathBuf::from).collect();
        e.decide(
            &Request::Tool {
                name,
                paths: ToolPaths {
                    targets: &targets,
                    recursive,
                    cwd,
                },
            },
            &LexicalPaths,
        )
    };
    assert_eq!(
        t("read_file", &["notes.txt"], false).verdict,
        Verdict::Allow
    );
    assert!(t("read_file", &["/srv/agent/init.conf"], false)
        .verdict
        .is_deny());
    assert!(t("read_file", &["/etc/sysward/secrets/api"], false)
        .verdict
        .is_deny());
    assert_eq!(t("write_file", &["out.txt"], false).verdict, Verdict::Allow);
    assert!(t("write_file", &["/srv/agent/agent.md"], false)
        .verdict
        .is_deny());
    assert!(
        t("write_file", &["/etc/hosts"], false).verdict.is_deny(),
        "guarded: outside the project"
    );
    assert!(
        t("remove_file", &["old.txt"], false).verdict.is_deny(),
        "ALLOW_DELETE=false"
    );
    assert!(t("launch_missiles", &["x"], false).verdict.is_deny());
    let d = t("launch_missiles", &[], false);
    assert_eq!(d.source, "tool catalog");
    assert!(t("web_search", &[], false).verdict.is_deny());
    assert_eq!(t("system_info", &[], false).verdict, Verdict::Allow);
    let e2 = engine(OPEN);
    let targets = vec![PathBuf::from("/")];
    let d = e2.decide(
        &Request::Tool {
            name: "remove_file",
            paths: ToolPaths {
                targets: &targets,
                recursive: true,
                cwd,
            },
        },
        &LexicalPaths,
    );
    assert_eq!(d.risk, Risk::Critical);
    let d = e2.decide(
        &Request::Tool {
            name: "chmod",
            paths: ToolPaths {
                targets: &targets,
                recursive: true,
                cwd,
            },
        },
        &LexicalPaths,
    );
    assert!(d.verdict.is_deny(), "{d:?}");
    // The catalog judges exactly the shared tool list: a tool no process
    // implements is unknown here too.
    let web = engine("ALLOW_NETWORK=true\nALLOW_WEB_RESEARCH=true");
    let d = web.decide(
        &Request::Tool {
            name: "web_crawl",
            paths: ToolPaths::new(&[], cwd),
        },
        &LexicalPaths,
    );
    assert!(d.verdict.is_deny(), "{d:?}");
    assert_eq!(d.source, "tool catalog");
    // The network tools are network actions: ALLOW_NETWORK gates them all,
    // ALLOW_WEB_RESEARCH also gates web_fetch and web_search.
    let fetch = |e: &Engine, name: &str| {
        e.decide(
            &Request::Tool {
                name,
                paths: ToolPaths::new(&[], cwd),
            },
            &LexicalPaths,
        )
    };
    let d = fetch(&web, "web_fetch");
    assert_eq!(
        (d.verdict.as_str(), d.category),
        ("allow", Category::Network),
        "{d:?}"
    );
    assert!(d.profile.as_ref().is_some_and(|p| p.network), "{d:?}");
    let no_research = engine("ALLOW_NETWORK=true");
    let d = fetch(&no_research, "web_search");
    assert!(
        d.verdict.is_deny() && d.source == "ALLOW_WEB_RESEARCH",
        "{d:?}"
    );
    assert_eq!(fetch(&no_research, "probe_tcp").verdict.as_str(), "allow");
    let offline = engine("ALLOW_WEB_RESEARCH=true");
    let d = fetch(&offline, "probe_dns");
    assert!(d.verdict.is_deny() && d.source == "ALLOW_NETWORK", "{d:?}");
    // download: ALLOW_NETWORK and ALLOW_DOWNLOADS gate it; its target is
    // judged as write_file's (the same verdict and rule outside the project).
    let with_target = |e: &Engine, name: &str, target: &str| {
        let targets = vec![PathBuf::from(target)];
        e.decide(
            &Request::Tool {
                name,
                paths: ToolPaths::new(&targets, cwd),
            },
            &LexicalPaths,
        )
    };
    let downloads = engine("ALLOW_NETWORK=true\nALLOW_DOWNLOADS=true");
    let d = with_target(&downloads, "download", ".agent/downloads/tool.tar.gz");
    assert_eq!(
        (d.verdict.as_str(), d.category),
        ("allow", Category::Download),
        "{d:?}"
    );
    assert!(d.profile.as_ref().is_some_and(|p| p.network), "{d:?}");
    let d = with_target(&web, "download", ".agent/downloads/tool.tar.gz");
    assert!(
        d.verdict.is_deny() && d.source == "ALLOW_DOWNLOADS",
        "{d:?}"
    );
    let d = with_target(
        &engine("ALLOW_DOWNLOADS=true"),
        "download",
        ".agent/downloads/tool.tar.gz",
    );
    assert!(d.verdict.is_deny() && d.source == "ALLOW_NETWORK", "{d:?}");
    for target in [
        "/etc/cron.d/job",
        "/usr/local/bin/tool",
        "/etc/sysward/agent.md",
    ] {
        let got = with_target(&downloads, "download", target);
        let write = with_target(&downloads, "write_file", target);
        assert_eq!(
            (got.verdict.as_str(), got.source.as_str()),
            (write.verdict.as_str(), write.source.as_str()),
            "{target}: {got:?} / {write:?}"
        );
        assert!(got.verdict.is_deny(), "{target}: {got:?}");
    }
    // Where write_file is allowed outside the project, so is download, under
    // the same verdict (here: the operator is asked).
    let open_writes = engine("ALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nEXECUTION_MODE=privileged\nALLOW_OUTSIDE_PROJECT_WRITE=true");
    let got = with_target(&open_writes, "download", "/opt/tool/tool.tar.gz");
    let write = with_target(&open_writes, "write_file", "/opt/tool/tool.tar.gz");
    assert_eq!(got.verdict, write.verdict, "{got:?} / {write:?}");
    assert_eq!(got.verdict.as_str(), "ask", "{got:?}");
    let shared: Vec<&str> = sysward_ipc::tools::Tool::ALL
        .iter()
        .map(|t| t.name())
        .filter(|n| *n != "exec" && *n != "shell")
        .collect();
    assert_eq!(sysward_policy::tool_names(), shared);
}

#[test]
fn explain_is_one_line_with_everything() {
    let d = sh(&engine(OPEN), "systemctl restart nginx");
    let line = explain(&d);
    assert!(!line.contains('\n'));
    for part in [
        "decision: ask",
        "category: service",
        "risk: high",
        "reason: ",
        "rule: APPROVAL_MODE=strict",
        "command: systemctl restart nginx",
        "profile: service: uid 1234",
    ] {
        assert!(line.contains(part), "{part} missing in {line}");
    }
    let d = sh(&engine(""), "rm -rf /");
    assert!(explain(&d).contains("profile: none"));
}

#[test]
fn timeout_and_download_limits_reach_the_profile() {
    let e = engine(&format!(
        "{OPEN}\nDEFAULT_COMMAND_TIMEOUT=300\nMAX_DOWNLOAD_SIZE=10M"
    ));
    let d = sh(&e, "curl -o f.tgz https://x/f.tgz");
    let p = d.profile.unwrap();
    assert_eq!(p.timeout_secs, 300);
    assert_eq!(p.limits.max_file_size, Some(10 << 20));
    assert!(p.network);
}

#[test]
fn kill_needs_signals_outside_the_action() {
    let d = sh(&engine("EXECUTION_MODE=privileged"), "kill 1234");
    let p = d.profile.unwrap();
    assert!(!p.scope_signals);
    assert!(p.capabilities.iter().any(|c| c == "CAP_KILL"));
    let d = sh(&engine("EXECUTION_MODE=privileged"), "ls");
    assert!(d.profile.unwrap().scope_signals);
}

#[test]
fn normalized_is_one_line_after_unwrapping() {
    let d = sh(&engine(""), "sudo timeout 5 nice -n 1 ls -la\n echo 'a b'");
    assert_eq!(d.normalized, "ls -la ; echo 'a b'");
}

#[test]
fn engine_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Engine>();
    assert_send_sync::<sysward_policy::Decision>();
}

#[test]
fn unknown_programs_write_only_scratch_and_found_targets() {
    let d = sh(
        &engine("EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive"),
        "python3 x.py > out.txt",
    );
    assert_eq!(d.verdict, Verdict::Allow);
    let p = d.profile.unwrap();
    assert_eq!(p.write_paths, vec!["/srv/agent/work".to_string()]);
    assert!(!p.write_everywhere);
    let d = sh(
        &engine("EXECUTION_MODE=unrestricted\nALLOW_OUTSIDE_PROJECT_WRITE=true"),
        "python3 x.py",
    );
    assert!(d.profile.unwrap().write_everywhere);
}

/// The broker's packaged layout: the project is /etc/sysward (protected), the
/// state directory /var/lib/sysward is protected as a whole, and the scratch
/// directory lies inside it.
#[test]
fn scratch_inside_a_protected_state_dir_stays_usable() {
    let facts = HostFacts {
        project_root: "/etc/sysward".into(),
        state_dir: "/var/lib/sysward".into(),
        scratch_dir: "/var/lib/sysward/.agent/tmp".into(),
        protected: vec![
            "/etc/sysward".into(),
            "/var/lib/sysward".into(),
            "/var/lib/sysward/audit.log".into(),
            "/etc/sysward/secrets".into(),
        ],
        secrets_dir: "/etc/sysward/secrets".into(),
        secret_files: Vec::new(),
        action_uid: 0,
        action_gid: 0,
    };
    let md = "```policy\nEXECUTION_MODE=guarded\n```\n";
    let e = Engine::new(parse_agent_md(md).unwrap().block, facts);
    let cwd = Path::new("/var/lib/sysward/.agent/tmp");
    let d = e.decide(
        &Request::Shell {
            script: "ls -la > listing.txt && sort listing.txt",
            cwd,
        },
        &LexicalPaths,
    );
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert_eq!(
        d.profile.unwrap().write_paths,
        vec!["/var/lib/sysward/.agent/tmp".to_string()]
    );
    for s in [
        "cat ../../audit.log",
        "echo x > ../../audit.log",
        "rm -rf ../..",
        "cat /etc/sysward/agent.md > x",
    ] {
        let d = e.decide(&Request::Shell { script: s, cwd }, &LexicalPaths);
        assert!(d.verdict.is_deny(), "{s}: {d:?}");
    }
}

/// pam-auth-update rewrites /etc/pam.d/common-* and its state in
/// /var/lib/pam from the profiles in /usr/share/pam-configs: the package
/// profile, not an unknown program confined to the targets the parser finds
/// (there it failed: `open(/var/lib/pam/seen) failed: Permission denied`).
#[test]
fn pam_auth_update_changes_package_configuration() {
    let d = sh(
        &engine(OPEN),
        "pam-auth-update --package --enable sysward-faillock",
    );
    assert_eq!(d.category, Category::Package, "{d:?}");
    assert_eq!(d.verdict, Verdict::Ask);
    assert!(d.profile.unwrap().write_everywhere);
    let d = sh(
        &engine("EXECUTION_MODE=privileged"),
        "pam-auth-update --package",
    );
    assert!(matches!(d.verdict, Verdict::Deny { .. }), "{d:?}");
}

/// A file a secret is delivered to is never readable: `cat` and an edit
/// (whose result shows what it read) are denied, the delivering `write_file`
/// is not. An edit elsewhere outside the project is judged as the write it is,
/// whatever ALLOW_OUTSIDE_PROJECT_READ says.
#[test]
fn secret_files_are_never_read_and_an_edit_reads_what_it_changes() {
    let mut f = facts();
    f.secret_files = vec![PathBuf::from("/etc/app/db.password")];
    let md = "```policy\nEXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_WRITE=true\n```\n";
    let e = Engine::new(parse_agent_md(md).unwrap().block, f);
    let cwd = Path::new("/srv/agent/work");
    let tool = |name: &str, path: &str| {
        let targets = vec![PathBuf::from(path)];
        e.decide(
            &Request::Tool {
                name,
                paths: ToolPaths {
                    targets: &targets,
                    recursive: false,
                    cwd,
                },
            },
            &LexicalPaths,
        )
    };
    for name in ["read_file", "edit_file", "append_file"] {
        let d = tool(name, "/etc/app/db.password");
        assert!(d.verdict.is_deny(), "{name}: {d:?}");
        assert!(d.reason.contains("no action may read"), "{name}: {d:?}");
    }
    let d = tool("write_file", "/etc/app/db.password");
    assert!(!d.verdict.is_deny(), "{d:?}");
    let d = tool("edit_file", "/etc/app/app.conf");
    assert!(!d.verdict.is_deny(), "{d:?}");
    let d = sh(&e, "cat /etc/app/db.password");
    assert!(d.verdict.is_deny(), "{d:?}");
}
