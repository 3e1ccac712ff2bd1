//! Property tests: 102,000 generated inputs in total (60,000 token scripts,
//! 30,000 arbitrary strings, 12,000 wrapper checks), each decided under two
//! or more policies. Measured on a 2-vCPU machine: about 17 s in a debug
//! build and about 5 s in release (`cargo test --release`), well under a
//! minute either way, so CI runs them on every push.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use sysward_policy::{
    explain, parse_agent_md, Decision, Engine, HostFacts, LexicalPaths, Request, Risk, Verdict,
};

fn facts() -> HostFacts {
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    f
}

struct Engines {
    list: Vec<(bool, bool, Engine)>, // (outside write allowed, network allowed, engine)
}

fn engines() -> &'static Engines {
    static E: OnceLock<Engines> = OnceLock::new();
    E.get_or_init(|| {
        let mk = |body: &str, ow: bool, net: bool| {
            let md = format!("```policy\n{body}\n```\n");
            (ow, net, Engine::new(parse_agent_md(&md).unwrap().block, facts()))
        };
        Engines {
            list: vec![
                mk("EXECUTION_MODE=privileged\nALLOW_DELETE=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nAPPROVAL_MODE=permissive", false, false),
                mk("EXECUTION_MODE=unrestricted\nALLOW_NETWORK=true\nALLOW_DOWNLOADS=true\nALLOW_PACKAGE_INSTALL=true\nALLOW_SERVICE_RESTART=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nALLOW_REBOOT=true\nALLOW_SELF_TOOL_CREATION=true\nAPPROVAL_MODE=permissive", true, true),
            ],
        }
    })
}

const PROTECTED: &[&str] = &[
    "/etc/sysward",
    "/etc/sysward/secrets",
    "/var/lib/sysward/audit.log",
    "/usr/bin/sysward",
    "/srv/agent/agent.md",
    "/srv/agent/init.conf",
];

/// The invariants every decision keeps, whatever the input.
fn check(d: &Decision, outside_write: bool, network: bool) -> Result<(), TestCaseError> {
    let line = explain(d);
    prop_assert!(!line.contains('\n'));
    prop_assert!(!d.normalized.contains('\n'));
    if d.risk == Risk::Critical {
        prop_assert!(d.verdict.is_deny(), "critical must be denied: {line}");
    }
    match (&d.verdict, &d.profile) {
        (Verdict::Deny { .. }, p) => prop_assert!(p.is_none()),
        (_, None) => prop_assert!(false, "allow/ask without a profile: {line}"),
        (_, Some(p)) => {
            let re = p.read_all_except.as_ref().unwrap();
            prop_assert!(re.iter().any(|x| x == "/etc/sysward/secrets"));
            prop_assert!(re.iter().any(|x| x == "/etc/sysward"));
            if !network {
                prop_assert!(!p.network, "network without ALLOW_NETWORK: {line}");
            }
            if p.can_write() {
                for must in PROTECTED {
                    prop_assert!(
                        p.protected_paths.iter().any(|x| x == must),
                        "{must} is not protected: {line}"
                    );
                }
            }
            match p.write_everywhere {
                true => {
                    prop_assert!(outside_write, "system-wide write without the flag: {line}");
                }
                false => {
                    for w in &p.write_paths {
                        let w = PathBuf::from(w);
                        if !outside_write {
                            prop_assert!(
                                w.starts_with("/srv/agent"),
                                "write outside the project: {line}"
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn decide_all(script: &str) -> Result<(), TestCaseError> {
    for (ow, net, e) in &engines().list {
        let d = e.decide(
            &Request::Shell {
                script,
                cwd: Path::new("/srv/agent/work"),
            },
            &LexicalPaths,
        );
        check(&d, *ow, *net)?;
    }
    Ok(())
}

const TOKENS: &[&str] = &[
    "ls",
    "rm",
    "-rf",
    "/",
    "/etc",
    "/etc/*",
    "*",
    "cat",
    "echo",
    "x",
    "sudo",
    "env",
    "-S",
    "bash",
    "-c",
    "sh",
    "timeout",
    "5",
    "find",
    ".",
    "-delete",
    "-exec",
    "{}",
    ";",
    "+",
    "xargs",
    "tar",
    "-xf",
    "a.tar",
    "--to-command=sh",
    "sed",
    "-i",
    "s/a/b/",
    "cp",
    "mv",
    "/etc/sysward",
    "/etc/sysward/secrets",
    "../agent.md",
    "../init.conf",
    "/dev/sda",
    "dd",
    "of=/dev/sda",
    "chmod",
    "-R",
    "777",
    "systemctl",
    "restart",
    "stop",
    "nginx",
    "sysward",
    "apt-get",
    "install",
    "curl",
    "https://x",
    "|",
    "||",
    "&&",
    "&",
    ";",
    "(",
    ")",
    "{",
    "}",
    "$(",
    "`",
    "'",
    "\"",
    "$X",
    "${X:-rm}",
    ">",
    ">>",
    "<",
    "<<EOF\nrm -rf /\nEOF\n",
    "<<<",
    "2>&1",
    "/dev/null",
    "if",
    "then",
    "fi",
    "for",
    "in",
    "do",
    "done",
    "while",
    "case",
    "esac",
    "!",
    "[[",
    "]]",
    "((",
    "))",
    "f()",
    "LD_PRELOAD=/x",
    "PATH=/tmp",
    "eval",
    "source",
    "git",
    "-c",
    "core.pager=sh",
    "log",
    "awk",
    "BEGIN{system(\"x\")}",
    "kill",
    "-9",
    "1",
    "mkfs.ext4",
    "/dev/sdb",
    "reboot",
    "\n",
    "\\",
    "~",
    "/tmp",
    "..",
    "tools/x",
    ".agent/tmp/y",
];

fn token_script() -> impl Strategy<Value = String> {
    prop::collection::vec((0..TOKENS.len(), prop::bool::ANY), 0..24).prop_map(|v| {
        let mut s = String::new();
        for (i, space) in v {
            s.push_str(TOKENS[i]);
            if space {
                s.push(' ');
            }
        }
        s
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60_000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn token_scripts_keep_the_invariants(s in token_script()) {
        decide_all(&s)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 30_000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_strings_keep_the_invariants(s in arbitrary_string()) {
        decide_all(&s)?;
        let argv = vec![s.clone(), s.clone()];
        for (ow, net, e) in &engines().list {
            let d = e.decide(&Request::Exec { argv: &argv, env: &[], stdin: None, cwd: Path::new("/srv/agent") }, &LexicalPaths);
            check(&d, *ow, *net)?;
        }
        let _ = parse_agent_md(&format!("```policy\n{s}\n```\n"));
        let _ = parse_agent_md(&s);
    }
}

/// Any characters, or printable ASCII (which shells care about most).
fn arbitrary_string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(any::<char>(), 0..64).prop_map(|v| v.into_iter().collect::<String>()),
        prop::collection::vec(0x20u8..0x7f, 0..128)
            .prop_map(|v| v.into_iter().map(char::from).collect::<String>()),
    ]
}

const SIMPLE: &[&str] = &[
    "ls -la",
    "rm -rf /",
    "rm -rf build",
    "cat /etc/passwd",
    "systemctl restart nginx",
    "apt-get install nginx",
    "cp a /etc/b",
    "curl -o f https://x",
    "chmod -R 777 /",
    "dd if=/dev/zero of=/dev/sda",
    "python3 x.py",
    "echo hi",
    "reboot",
    "useradd bob",
    "find . -delete",
    "tar -xf a.tar",
    "kill 1234",
    "mkfs.ext4 /dev/sdb",
    "git push",
    "sed -i s/a/b/ f",
];
const WRAPPERS: &[&str] = &[
    "sudo ",
    "timeout 5 ",
    "nice -n 5 ",
    "nohup ",
    "env ",
    "command ",
    "stdbuf -oL ",
    "setsid ",
    "ionice -c3 ",
    "doas ",
    "busybox ",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 12_000, failure_persistence: None, ..ProptestConfig::default() })]
    /// Wrapping a command (once, twice, or in `bash -c`) never changes its verdict.
    #[test]
    fn wrappers_do_not_change_the_verdict(c in 0..SIMPLE.len(), w1 in 0..WRAPPERS.len(), w2 in 0..WRAPPERS.len(), shell in prop::bool::ANY) {
        let plain = SIMPLE[c];
        let mut wrapped = format!("{}{}{}", WRAPPERS[w1], WRAPPERS[w2], plain);
        if shell {
            wrapped = format!("bash -c '{wrapped}'");
        }
        for (_, _, e) in &engines().list {
            let a = e.decide(&Request::Shell { script: plain, cwd: Path::new("/srv/agent/work") }, &LexicalPaths);
            let b = e.decide(&Request::Shell { script: &wrapped, cwd: Path::new("/srv/agent/work") }, &LexicalPaths);
            prop_assert_eq!(a.verdict.as_str(), b.verdict.as_str(), "{} vs {}", plain, wrapped);
            prop_assert_eq!(a.risk, b.risk, "{} vs {}", plain, wrapped);
        }
    }
}
