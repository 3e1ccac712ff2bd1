//! The policy block parser: every rule of seed `000` and the extensions,
//! including the error texts the operator sees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sysward_policy::{
    parse_agent_md, ApprovalMode, ExecutionMode, PolicyBlock, PolicyError, RuleAction,
};

fn block(body: &str) -> Result<sysward_policy::ParsedPolicy, PolicyError> {
    parse_agent_md(&format!(
        "# Agent\n\nSome prose.\n\n```policy\n{body}\n```\n"
    ))
}

fn err(body: &str) -> String {
    block(body).unwrap_err().to_string()
}

#[test]
fn no_block_gives_the_seed_defaults() {
    let p = parse_agent_md("# Agent\nEXECUTION_MODE=unrestricted\nALLOW_DELETE=true\n").unwrap();
    let b = p.block;
    assert_eq!(b, PolicyBlock::default());
    assert_eq!(b.execution_mode, ExecutionMode::Guarded);
    assert!(!b.allow_network && !b.allow_web_research && !b.allow_downloads);
    assert!(!b.allow_package_install && !b.allow_service_restart);
    assert!(!b.allow_outside_project_read && !b.allow_outside_project_write);
    assert!(!b.allow_delete && !b.allow_reboot && !b.allow_self_tool_creation);
    assert!(b.backup_before_system_edit);
    assert_eq!(b.default_command_timeout, 60);
    assert_eq!(b.max_steps, 40);
    assert_eq!(b.max_download_size, 1 << 30);
    assert!(b.task_order.is_empty());
    assert_eq!(b.approval_mode, ApprovalMode::Strict);
    assert!(b.rules.is_empty());
    assert!(p.warnings.is_empty());
}

#[test]
fn only_the_policy_fence_is_read() {
    // KEY=VALUE in prose, in other code blocks and in a policy example nested
    // in a longer fence grant nothing.
    let md = "ALLOW_DELETE=true\n\n```bash\nALLOW_NETWORK=true\n```\n\n````markdown\n```policy\nALLOW_REBOOT=true\n```\n````\n\n~~~policy\nALLOW_DOWNLOADS=true\n~~~\n";
    let b = parse_agent_md(md).unwrap().block;
    assert!(!b.allow_delete && !b.allow_network && !b.allow_reboot);
    assert!(b.allow_downloads, "a ~~~policy fence is a policy block too");
}

#[test]
fn every_directive_is_read() {
    let b = block(
        "EXECUTION_MODE=privileged\nALLOW_NETWORK=true\nALLOW_WEB_RESEARCH=yes\nALLOW_DOWNLOADS=1\nALLOW_PACKAGE_INSTALL=on\nALLOW_SERVICE_RESTART=TRUE\nALLOW_OUTSIDE_PROJECT_READ=Yes\nALLOW_OUTSIDE_PROJECT_WRITE=true\nALLOW_DELETE=true\nALLOW_REBOOT=true\nALLOW_SELF_TOOL_CREATION=true\nBACKUP_BEFORE_SYSTEM_EDIT=off\nDEFAULT_COMMAND_TIMEOUT=120\nMAX_STEPS=1000\nMAX_DOWNLOAD_SIZE=512M\nTASK_ORDER=02-b.md, 01-a.md\nAPPROVAL_MODE=permissive\nCOMMAND_ALLOW=systemctl restart nginx\nCOMMAND_ASK=git push\nCOMMAND_DENY=rm\nCOMMAND_DENY=shutdown",
    )
    .unwrap()
    .block;
    assert_eq!(b.execution_mode, ExecutionMode::Privileged);
    for f in sysward_policy::ALLOW_FLAGS {
        assert_eq!(b.flag(f), Some(true), "{f}");
    }
    assert!(!b.backup_before_system_edit);
    assert_eq!(b.default_command_timeout, 120);
    assert_eq!(b.max_steps, 1000);
    assert_eq!(b.max_download_size, 512 << 20);
    assert_eq!(b.task_order, vec!["02-b.md", "01-a.md"]);
    assert_eq!(b.approval_mode, ApprovalMode::Permissive);
    assert_eq!(b.rules.len(), 4);
    assert_eq!(b.rules[0].action, RuleAction::Allow);
    assert_eq!(b.rules[0].prefix, vec!["systemctl", "restart", "nginx"]);
    assert_eq!(b.rules[2].action, RuleAction::Deny);
    assert_eq!(b.rules[2].line, 25);
}

#[test]
fn booleans_accept_the_seed_spellings() {
    for (v, want) in [
        ("true", true),
        ("false", false),
        ("yes", true),
        ("no", false),
        ("1", true),
        ("0", false),
        ("on", true),
        ("off", false),
        ("ON", true),
        ("No", false),
    ] {
        let b = block(&format!("ALLOW_NETWORK={v}")).unwrap().block;
        assert_eq!(b.allow_network, want, "{v}");
    }
    let e = err("ALLOW_NETWORK=maybe");
    assert_eq!(
        e,
        "line 6: invalid value for ALLOW_NETWORK: \"maybe\" (true/false, yes/no, 1/0 or on/off)"
    );
}

#[test]
fn unrestricted_only_when_written_literally_and_grants_nothing() {
    let b = block("EXECUTION_MODE=unrestricted").unwrap().block;
    assert_eq!(b.execution_mode, ExecutionMode::Unrestricted);
    for f in sysward_policy::ALLOW_FLAGS {
        assert_eq!(b.flag(f), Some(false), "unrestricted implies no {f}");
    }
    for bad in [
        "Unrestricted",
        "UNRESTRICTED",
        "unrestricted!",
        "full",
        "root",
    ] {
        let e = err(&format!("EXECUTION_MODE={bad}"));
        assert!(
            e.starts_with("line 6: invalid value for EXECUTION_MODE"),
            "{e}"
        );
        assert!(
            e.contains("guarded, privileged or unrestricted, in lower case"),
            "{e}"
        );
    }
}

#[test]
fn multiple_blocks_refuse_to_start() {
    let md = "```policy\nALLOW_NETWORK=true\n```\n\ntext\n\n```policy\nALLOW_DELETE=true\n```\n";
    let e = parse_agent_md(md).unwrap_err();
    assert_eq!(
        e,
        PolicyError::MultiplePolicyBlocks {
            first: 1,
            second: 7
        }
    );
    assert_eq!(e.line(), 7);
    assert_eq!(
        e.to_string(),
        "multiple policy blocks (line 1 and line 7): keep a single ```policy block in agent.md"
    );
}

#[test]
fn repeated_directive_refuses_to_start() {
    let e = err("ALLOW_NETWORK=true\nALLOW_NETWORK=false");
    assert_eq!(
        e,
        "line 7: duplicate directive ALLOW_NETWORK (first set at line 6)"
    );
}

#[test]
fn invalid_values_name_the_line() {
    let cases = [
        ("DEFAULT_COMMAND_TIMEOUT=0", "line 6: invalid value for DEFAULT_COMMAND_TIMEOUT: \"0\" (seconds, 1 to 7200)"),
        ("DEFAULT_COMMAND_TIMEOUT=-5", "line 6: invalid value for DEFAULT_COMMAND_TIMEOUT: \"-5\" (seconds, 1 to 7200)"),
        ("DEFAULT_COMMAND_TIMEOUT=7201", "line 6: invalid value for DEFAULT_COMMAND_TIMEOUT: \"7201\" (seconds, 1 to 7200)"),
        ("MAX_STEPS=0", "line 6: invalid value for MAX_STEPS: \"0\" (1 to 1000)"),
        ("MAX_STEPS=1001", "line 6: invalid value for MAX_STEPS: \"1001\" (1 to 1000)"),
        ("MAX_STEPS=ten", "line 6: invalid value for MAX_STEPS: \"ten\" (1 to 1000)"),
        ("MAX_DOWNLOAD_SIZE=0", "line 6: invalid value for MAX_DOWNLOAD_SIZE: \"0\" (bytes > 0, optional suffix K, M or G)"),
        ("MAX_DOWNLOAD_SIZE=1T", "line 6: invalid value for MAX_DOWNLOAD_SIZE: \"1T\" (bytes > 0, optional suffix K, M or G)"),
        ("MAX_DOWNLOAD_SIZE=99999999999999G", "line 6: invalid value for MAX_DOWNLOAD_SIZE: \"99999999999999G\" (bytes > 0, optional suffix K, M or G)"),
        ("MAX_DOWNLOAD_SIZE=1.5G", "line 6: invalid value for MAX_DOWNLOAD_SIZE: \"1.5G\" (bytes > 0, optional suffix K, M or G)"),
        ("APPROVAL_MODE=lenient", "line 6: invalid value for APPROVAL_MODE: \"lenient\" (strict or permissive)"),
        ("TASK_ORDER=a.md,,b.md", "line 6: invalid value for TASK_ORDER: \"a.md,,b.md\" (comma-separated task file names in the project root)"),
        ("TASK_ORDER=../x.md", "line 6: invalid value for TASK_ORDER: \"../x.md\" (comma-separated task file names in the project root)"),
        ("TASK_ORDER=a.md,a.md", "line 6: invalid value for TASK_ORDER: \"a.md,a.md\" (a task named twice)"),
        ("COMMAND_DENY=", "line 6: invalid value for COMMAND_DENY: \"\" (a command prefix, e.g. `systemctl restart nginx`)"),
        ("BACKUP_BEFORE_SYSTEM_EDIT=sometimes", "line 6: invalid value for BACKUP_BEFORE_SYSTEM_EDIT: \"sometimes\" (true/false, yes/no, 1/0 or on/off)"),
    ];
    for (body, want) in cases {
        assert_eq!(err(body), want, "{body}");
    }
}

#[test]
fn sizes_take_k_m_g() {
    for (v, want) in [
        ("1024", 1024u64),
        ("1K", 1024),
        ("2M", 2 << 20),
        ("3G", 3u64 << 30),
        ("5k", 5 << 10),
    ] {
        assert_eq!(
            block(&format!("MAX_DOWNLOAD_SIZE={v}"))
                .unwrap()
                .block
                .max_download_size,
            want,
            "{v}"
        );
    }
}

#[test]
fn syntax_errors_and_comments() {
    assert_eq!(
        err("ALLOW_NETWORK true"),
        "line 6: expected KEY=VALUE in the policy block, found \"ALLOW_NETWORK true\""
    );
    assert_eq!(
        err("=true"),
        "line 6: expected KEY=VALUE in the policy block, found \"=true\""
    );
    let p = block("# a comment\n\n   ALLOW_NETWORK = true   \nALLOW_DELETE=\"yes\"").unwrap();
    assert!(p.block.allow_network && p.block.allow_delete);
}

#[test]
fn unknown_directives_warn_and_are_ignored() {
    let p = block("ALLOW_EVERYTHING=true\nallow_network=true").unwrap();
    assert_eq!(p.block, PolicyBlock::default());
    assert_eq!(
        p.warnings,
        vec![
            "agent.md line 6: unknown policy directive ALLOW_EVERYTHING ignored".to_string(),
            "agent.md line 7: unknown policy directive allow_network ignored".to_string(),
        ]
    );
}

#[test]
fn unterminated_block_refuses() {
    let e = parse_agent_md("text\n```policy\nALLOW_NETWORK=true\n").unwrap_err();
    assert_eq!(e.to_string(), "line 2: unterminated policy block");
}

#[test]
fn oversized_agent_md_refuses() {
    let big = "x".repeat(sysward_policy::MAX_AGENT_MD + 1);
    let e = parse_agent_md(&big).unwrap_err();
    assert!(e.to_string().starts_with("agent.md is too large"), "{e}");
}

#[test]
fn render_round_trips() {
    let p = block("EXECUTION_MODE=privileged\nALLOW_NETWORK=true\nMAX_DOWNLOAD_SIZE=1536K\nTASK_ORDER=b.md,a.md\nAPPROVAL_MODE=permissive\nCOMMAND_DENY=git push\nCOMMAND_ALLOW=systemctl status").unwrap();
    let text = p.block.render();
    assert!(text.contains("EXECUTION_MODE=privileged\n"));
    assert!(text.contains("ALLOW_DELETE=false\n"));
    assert!(text.contains("MAX_DOWNLOAD_SIZE=1536K\n"));
    assert!(text.contains("COMMAND_DENY=git push\n"));
    let again = parse_agent_md(&format!("```policy\n{text}```\n"))
        .unwrap()
        .block;
    let strip = |mut b: PolicyBlock| {
        for r in &mut b.rules {
            r.line = 0;
        }
        b
    };
    assert_eq!(strip(again), strip(p.block));
    assert!(PolicyBlock::default()
        .render()
        .contains("# TASK_ORDER unset: lexicographic"));
    // Found by cargo-fuzz: values the parser unquotes must render quoted.
    let p = block("TASK_ORDER=\"'a.md'\"\nCOMMAND_DENY=\"'x' 'y'\"").unwrap();
    assert_eq!(p.block.task_order, vec!["'a.md'"]);
    let again = parse_agent_md(&format!("```policy\n{}```\n", p.block.render()))
        .unwrap()
        .block;
    assert_eq!(again.task_order, p.block.task_order);
    assert_eq!(again.rules[0].prefix, p.block.rules[0].prefix);
}

#[test]
fn crlf_and_indented_fences() {
    let md = "intro\r\n  ```policy\r\nALLOW_NETWORK=true\r\n  ```\r\n";
    assert!(parse_agent_md(md).unwrap().block.allow_network);
}
