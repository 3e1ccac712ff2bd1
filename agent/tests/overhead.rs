//! Prompt overhead (system prompt + tool schemas, estimated tokens) and
//! observation sizes per step. Run with `--nocapture` to see the figures.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::*;
use serde_json::json;
use sysward_agent::context::Estimator;
use sysward_agent::prompt::{self, PromptParts};
use sysward_agent::tools;
use sysward_ipc::agent::*;

fn overhead(native: bool, tasks: bool) -> (usize, u64) {
    overhead_with(native, tasks, false)
}

fn overhead_with(native: bool, tasks: bool, compact: bool) -> (usize, u64) {
    overhead_of(native, tasks, compact, true)
}

/// The prompt a session sends: with the default policy (every ALLOW_* flag
/// off, so the network tools are withheld), or with every flag on.
fn overhead_of(native: bool, tasks: bool, compact: bool, default_policy: bool) -> (usize, u64) {
    let mut s = setup(
        if tasks {
            SessionMode::Tasks { rerun: false }
        } else {
            SessionMode::Cli
        },
        vec![],
    );
    s.instructions = String::new();
    s.policy_text = String::new();
    if !default_policy {
        s.withheld_tools.clear();
    }
    let p = prompt::build(&PromptParts {
        setup: &s,
        native_tools: native,
        memory: "",
        summary: "",
        previous: &[],
        context_size: Some(32768),
        compact,
    });
    let schema = if native {
        tools::native_tools_with(compact, tasks, &s)
            .to_string()
            .len()
    } else {
        0
    };
    let bytes = p.len() + schema;
    (bytes, Estimator::raw(bytes))
}

#[test]
fn prompt_overhead_is_within_budget() {
    let (nb, nt) = overhead(true, true);
    let (tb, tt) = overhead(false, true);
    let (cb, ct) = overhead(true, false);
    let schema = tools::native_tools(false, true).to_string().len();
    println!("prompt overhead, tasks mode, native tools: {nb} bytes ≈ {nt} tokens (tool schemas {schema} bytes ≈ {} tokens)", Estimator::raw(schema));
    println!("prompt overhead, tasks mode, text protocol: {tb} bytes ≈ {tt} tokens");
    println!("prompt overhead, CLI mode, native tools: {cb} bytes ≈ {ct} tokens");
    assert!(nt <= 3000, "native overhead {nt} tokens");
    assert!(tt <= 3000, "text overhead {tt} tokens");
    // With every flag on, the tools each flag withholds are described too:
    // the probes, web research, CVE lookups, downloads and register_tool.
    let (ab, at) = overhead_of(true, true, false, false);
    println!("prompt overhead, tasks mode, native tools, every ALLOW_* flag on: {ab} bytes ≈ {at} tokens");
    assert!(at <= 4000, "native overhead with every tool {at} tokens");
    // Compact descriptions (TOOL_SCHEMA=compact, or auto under 8,192 tokens).
    let (knb, knt) = overhead_with(true, true, true);
    let (ktb, ktt) = overhead_with(false, true, true);
    let (kcb, kct) = overhead_with(true, false, true);
    let kschema = tools::native_tools(true, true).to_string().len();
    println!("prompt overhead, compact, tasks mode, native tools: {knb} bytes ≈ {knt} tokens (tool schemas {kschema} bytes ≈ {} tokens)", Estimator::raw(kschema));
    println!("prompt overhead, compact, tasks mode, text protocol: {ktb} bytes ≈ {ktt} tokens");
    println!("prompt overhead, compact, CLI mode, native tools: {kcb} bytes ≈ {kct} tokens");
    for (what, t) in [("native", knt), ("text", ktt), ("cli native", kct)] {
        assert!(t <= 1500, "compact {what} overhead {t} tokens");
    }
}

#[test]
fn observation_sizes_on_eval_scenarios() {
    // Eval 1 (disk), 5 (non-zero exit), 9 (secret) with realistic outputs, and a 1 MB log.
    type Scenario<'a> = (&'a str, Vec<(&'a str, serde_json::Value)>, String);
    let scenarios: Vec<Scenario> = vec![
        ("disk risk", vec![("exec", json!({"command":"df","args":["-h"]})), ("shell", json!({"command":"du -xh --max-depth=1 /var | sort -h | tail -n 5"}))],
            "Filesystem      Size  Used Avail Use% Mounted on\n/dev/sda1        40G   31G  7.1G  82% /\ntmpfs           2.0G     0  2.0G   0% /dev/shm\n".into()),
        ("non-zero exit", vec![("exec", json!({"command":"systemctl","args":["status","nope.service"]}))],
            "Unit nope.service could not be found.\n".into()),
        ("huge log", vec![("exec", json!({"command":"journalctl","args":["-b"]}))],
            (0..20000).map(|i| format!("Nov 29 10:{:02}:{:02} web01 app[42]: request {i} served in 3ms\n", i / 60 % 60, i % 60)).collect()),
    ];
    for (name, steps, output) in scenarios {
        let mut script = vec![];
        for (i, (tool, args)) in steps.iter().enumerate() {
            script.push(calls(&[(&format!("c{i}"), tool, args.clone())]));
        }
        script.push(text("done\nTASK_STATUS: DONE"));
        let mut f = Fake::new(
            setup(
                SessionMode::Tasks { rerun: false },
                vec![task("01.md", name)],
            ),
            scripted(script),
        );
        let out = output.clone();
        f.tool = Box::new(move |r| ok(r, &out));
        let (_, rec) = f.run();
        let sizes: Vec<usize> = rec
            .chats
            .iter()
            .skip(1)
            .map(|c| {
                c["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .rev()
                    .take_while(|m| m["role"] == "tool")
                    .map(|m| m["content"].as_str().unwrap().chars().count())
                    .sum()
            })
            .collect();
        println!(
            "observation chars per step, {name}: {sizes:?} (raw output {} chars)",
            output.chars().count()
        );
        assert!(sizes.iter().all(|s| *s <= 12_000 + 1_000));
    }
}

#[test]
#[ignore = "prints the full system prompt"]
fn print_system_prompt() {
    let s = setup(
        SessionMode::Tasks { rerun: false },
        vec![task("01-a.md", "x")],
    );
    println!(
        "{}",
        prompt::build(&PromptParts {
            setup: &s,
            native_tools: false,
            memory: "## Hosts\n- a: b\n",
            summary: "OBJECTIVE: x",
            previous: &[],
            context_size: None,
            compact: false,
        })
    );
}

#[test]
#[ignore = "prints a digest"]
fn print_digest() {
    let mut big = String::new();
    for i in 1..=3000 {
        if i % 700 == 0 {
            big.push_str(&format!("Nov 29 10:00:{:02} web01 nginx[42]: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)\n", i % 60));
        } else {
            big.push_str(&format!(
                "Nov 29 10:00:{:02} web01 app[42]: request {i} served in 3ms\n",
                i % 60
            ));
        }
    }
    let r = ToolResult {
        stdout: big,
        exit_code: Some(0),
        ..ToolResult::refused("sw3", ToolStatus::Ok, "")
    };
    println!(
        "{}",
        sysward_agent::observe::render("exec", "exec: journalctl -u nginx", &r, 3000).text
    );
}

/// A session describes neither a tool its policy denies in any form (its
/// flag is off) nor leaves out one it may allow; skill packs are added.
#[test]
fn a_session_describes_the_tools_its_policy_can_allow_and_its_skill_packs() {
    let names = |s: &sysward_ipc::agent::SessionSetup| -> Vec<String> {
        tools::native_tools_with(false, true, s)
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str().map(String::from))
            .collect()
    };
    let mut s = setup(
        sysward_ipc::agent::SessionMode::Tasks { rerun: false },
        vec![],
    );
    let off = names(&s);
    assert!(
        !off.iter().any(|n| n == "web_fetch" || n == "probe_tcp"),
        "{off:?}"
    );
    assert!(off.iter().any(|n| n == "read_journal"), "{off:?}");
    s.withheld_tools = sysward_ipc::tools::withheld(|f| f == "ALLOW_NETWORK");
    let network = names(&s);
    assert!(network.iter().any(|n| n == "probe_tcp"), "{network:?}");
    assert!(!network.iter().any(|n| n == "web_fetch"), "{network:?}");
    s.skills.push(sysward_ipc::agent::SkillTool {
        name: "disk_usage".into(),
        description: "space used".into(),
        params: vec![sysward_ipc::agent::SkillParam {
            name: "paths".into(),
            ty: tools::Ty::StrList,
            required: true,
            description: String::new(),
        }],
    });
    let with_pack = tools::native_tools_with(false, true, &s).to_string();
    assert!(
        with_pack.contains("\"disk_usage\"") && with_pack.contains("\"paths\""),
        "{with_pack}"
    );
}
