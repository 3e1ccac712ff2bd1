//! Write rules (`WRITE_ALLOW`/`WRITE_ASK`/`WRITE_DENY`) and a task's
//! pre-approvals: they decide only what the flags, the mode, the path rules
//! and the critical risks leave to decide, with the same precedence as the
//! command rules; an operator rule that asks or denies outranks a task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use sysward_policy::{
    parse_agent_md, task_rules, Engine, HostFacts, LexicalPaths, PolicyBlock, Request, ToolPaths,
    Verdict,
};

fn facts() -> HostFacts {
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    f
}

fn block(directives: &str) -> PolicyBlock {
    parse_agent_md(&format!("```policy\n{directives}\n```\n"))
        .unwrap()
        .block
}

fn with_task(mut b: PolicyBlock, task: &str) -> Engine {
    let a = task_rules::parse(task, "10-t.md (sha256 ab12)").unwrap();
    b.rules.extend(a.rules);
    b.write_rules.extend(a.write_rules);
    Engine::new(b, facts())
}

fn tool(e: &Engine, name: &str, path: &str) -> sysward_policy::Decision {
    let targets = vec![PathBuf::from(path)];
    e.decide(
        &Request::Tool {
            name,
            paths: ToolPaths {
                targets: &targets,
                recursive: false,
                cwd: Path::new("/srv/agent"),
            },
        },
        &LexicalPaths,
    )
}

fn sh(e: &Engine, script: &str) -> sysward_policy::Decision {
    e.decide(
        &Request::Shell {
            script,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    )
}

const ADMIN: &str = "EXECUTION_MODE=privileged\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_SERVICE_RESTART=true\nAPPROVAL_MODE=strict";

#[test]
fn write_rules_decide_file_tools_by_path_glob() {
    let e = Engine::new(
        block(&format!(
            "{ADMIN}\nWRITE_ALLOW=/etc/sysctl.d/90-*.conf\nWRITE_DENY=/etc/ssh/**"
        )),
        facts(),
    );
    let d = tool(&e, "write_file", "/etc/sysctl.d/90-net.conf");
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert!(d.source.starts_with("operator rule line"), "{d:?}");
    // The legitimate neighbour outside the glob still asks.
    let d = tool(&e, "write_file", "/etc/sysctl.d/10-net.conf");
    assert_eq!(d.verdict, Verdict::Ask, "{d:?}");
    let d = tool(&e, "edit_file", "/etc/ssh/sshd_config");
    assert!(d.verdict.is_deny(), "{d:?}");
    assert!(d.reason.contains("WRITE_DENY=/etc/ssh/**"), "{d:?}");
    // A glob never covers a shell write to the same path.
    let d = sh(&e, "echo x > /etc/sysctl.d/90-net.conf");
    assert_eq!(d.verdict, Verdict::Ask, "{d:?}");
}

#[test]
fn a_task_pre_approves_its_own_actions_and_nothing_more() {
    let task =
        "# Kernel\n```approvals\nexec sysctl --system\nwrite_file /etc/sysctl.d/90-*.conf\n```\n";
    let e = with_task(block(ADMIN), task);
    let d = tool(&e, "write_file", "/etc/sysctl.d/90-hardening.conf");
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    assert_eq!(d.source, "pre-approved by 10-t.md (sha256 ab12) line 4");
    assert_eq!(task_rules::line_of(&d.source), Some(4));
    let d = sh(&e, "sysctl --system");
    assert_eq!(d.verdict, Verdict::Allow, "{d:?}");
    // Another tool on the same path, another command: they still ask.
    let d = tool(&e, "edit_file", "/etc/sysctl.d/90-hardening.conf");
    assert_eq!(d.verdict, Verdict::Ask, "{d:?}");
    let d = sh(&e, "sysctl --system && systemctl restart ssh");
    assert_eq!(d.verdict, Verdict::Ask, "{d:?}");
}

#[test]
fn a_pre_approval_lifts_no_flag_no_mode_no_operator_rule_no_critical() {
    let task = "```approvals\nexec systemctl restart\nexec useradd\nwrite_file /etc/**\nexec rm -rf /\nexec dd\n```\n";
    // A flag stays off.
    let e = with_task(
        block("EXECUTION_MODE=privileged\nALLOW_OUTSIDE_PROJECT_READ=true"),
        task,
    );
    assert!(tool(&e, "write_file", "/etc/motd").verdict.is_deny());
    assert!(sh(&e, "systemctl restart nginx").verdict.is_deny());
    // The mode stays guarded (administration needs privileged).
    let e = with_task(
        block("ALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true"),
        task,
    );
    assert!(sh(&e, "useradd bob").verdict.is_deny());
    // The operator's ask and deny outrank the task.
    let e = with_task(
        block(&format!(
            "{ADMIN}\nCOMMAND_ASK=systemctl restart\nWRITE_DENY=/etc/shadow"
        )),
        task,
    );
    assert_eq!(sh(&e, "systemctl restart nginx").verdict, Verdict::Ask);
    assert!(tool(&e, "write_file", "/etc/shadow").verdict.is_deny());
    // Critical is denied in every mode.
    let e = with_task(
        block("EXECUTION_MODE=unrestricted\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true\nALLOW_DELETE=true"),
        task,
    );
    assert!(sh(&e, "rm -rf /").verdict.is_deny());
    // sysward's own paths stay refused.
    assert!(tool(&e, "write_file", "/etc/sysward/agent.md")
        .verdict
        .is_deny());
}

#[test]
fn sysward_never_installs_or_upgrades_itself_from_an_action() {
    let e = Engine::new(
        block("EXECUTION_MODE=unrestricted\nALLOW_PACKAGE_INSTALL=true\nALLOW_NETWORK=true\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_OUTSIDE_PROJECT_READ=true"),
        facts(),
    );
    for cmd in [
        "apt-get install -y sysward",
        "apt install ./sysward_0.2.0-1_amd64.deb",
        "apt-get install --reinstall sysward=0.1.0-1",
        "dpkg -i /tmp/sysward_0.2.0-1_amd64.deb",
    ] {
        let d = sh(&e, cmd);
        assert!(d.verdict.is_deny(), "{cmd}: {d:?}");
        assert!(d.reason.contains("half-way"), "{cmd}: {d:?}");
    }
    // The legitimate neighbours.
    for cmd in [
        "apt-get install -y jq",
        "dpkg -i /tmp/jq_1.6_amd64.deb",
        "apt-get install -y syswatch",
    ] {
        assert!(!sh(&e, cmd).verdict.is_deny(), "{cmd}");
    }
}
