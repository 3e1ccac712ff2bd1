//! Forward-secure sealing: with the verification key kept off the host, a
//! rewrite of sealed records — chained again and re-anchored, so that the
//! hash chain alone calls it intact — is found, and so is the removal of
//! sealed records; the untouched log verifies (as root, the real binaries).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_testdir::RemoveOnDrop;
use sysward_tests::*;

fn verify(p: &TestProject, key_file: Option<&std::path::Path>) -> std::process::Output {
    let mut args = vec!["audit", "verify", "--root", p.dir.to_str().unwrap()];
    if let Some(k) = key_file {
        args.extend(["--key-file", k.to_str().unwrap()]);
    }
    run_sysward(&args, Duration::from_secs(20))
}

/// What root can do without the key (see [`sysward_tests::rechain`]).
fn rewrite_chain(p: &TestProject, records: Vec<serde_json::Value>) {
    rechain(&p.path("audit.log"), &p.path(".agent/audit.head"), records);
}

fn project_with_a_session(name: &str) -> (TestProject, RemoveOnDrop) {
    ensure_accounts();
    let p = TestProject::new(name);
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uname","args":["-r"]}}]},
          {"content":"done\nTASK_STATUS: DONE"}
        ]}"#,
    );
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-uname.md", "# Kernel\nShow the kernel release.\n");
    let setup = run_sysward(
        &["audit", "setup-keys", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(20),
    );
    assert!(setup.status.success(), "{}", describe(&setup));
    let key = String::from_utf8(setup.stdout).unwrap();
    assert!(key.starts_with("sysward-seal-v1:"), "{key}");
    // The key is not kept on the host.
    let state = std::fs::read_to_string(p.path(".agent/audit.seal")).unwrap();
    assert!(!state.contains(key.trim().trim_start_matches("sysward-seal-v1:")));
    let key_file = RemoveOnDrop(
        std::env::temp_dir().join(format!("sysward-seal-key-{name}-{}", std::process::id())),
    );
    std::fs::write(&key_file, &key).unwrap();
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    (p, key_file)
}

#[test]
fn an_untouched_sealed_log_verifies_with_its_key_and_not_with_another() {
    if !require_root("an_untouched_sealed_log_verifies") {
        return;
    }
    let (p, key_file) = project_with_a_session("seal-ok");
    let out = verify(&p, Some(&key_file));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        describe(&out).contains("seals intact: 2 epoch(s)"),
        "{}",
        describe(&out)
    );
    let seals = audit_records(&p)
        .into_iter()
        .filter(|r| r["event"]["event"] == "seal")
        .count();
    assert_eq!(seals, 2);
    let wrong = RemoveOnDrop(key_file.with_extension("wrong"));
    std::fs::write(&wrong, format!("sysward-seal-v1:{}", "ab".repeat(32))).unwrap();
    let out = verify(&p, Some(&wrong));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let _ = std::fs::remove_file(&wrong);
    let _ = std::fs::remove_file(&key_file);
}

#[test]
fn a_rechained_rewrite_of_sealed_records_is_found_with_the_key() {
    if !require_root("a_rechained_rewrite_of_sealed_records_is_found") {
        return;
    }
    let (p, key_file) = project_with_a_session("seal-rewrite");
    // Root changes what the action was, chains every record again and
    // re-anchors: the hash chain alone cannot tell.
    let mut records = audit_records(&p);
    let tool = records
        .iter_mut()
        .find(|r| r["event"]["event"] == "tool")
        .unwrap();
    tool["event"]["request"] = serde_json::json!("uname -a");
    rewrite_chain(&p, records);
    let plain = verify(&p, None);
    assert!(
        plain.status.success(),
        "the rewrite is not consistent: {}",
        describe(&plain)
    );
    let keyed = verify(&p, Some(&key_file));
    assert_eq!(keyed.status.code(), Some(1), "{}", describe(&keyed));
    assert!(
        describe(&keyed).contains("does not match"),
        "{}",
        describe(&keyed)
    );
    let _ = std::fs::remove_file(&key_file);
}

#[test]
fn removing_sealed_records_is_found_with_the_key() {
    if !require_root("removing_sealed_records_is_found") {
        return;
    }
    let (p, key_file) = project_with_a_session("seal-truncate");
    // Back to the first seal: the whole session is gone, the chain and the
    // head agree with each other.
    let records = audit_records(&p);
    let first_seal = records
        .iter()
        .position(|r| r["event"]["event"] == "seal")
        .unwrap();
    rewrite_chain(&p, records[..=first_seal].to_vec());
    let plain = verify(&p, None);
    assert!(plain.status.success(), "{}", describe(&plain));
    let keyed = verify(&p, Some(&key_file));
    assert_eq!(keyed.status.code(), Some(1), "{}", describe(&keyed));
    assert!(
        describe(&keyed).contains("sealed records were removed"),
        "{}",
        describe(&keyed)
    );
    let _ = std::fs::remove_file(&key_file);
}

#[test]
fn an_action_cannot_read_the_sealing_key() {
    if !require_root("an_action_cannot_read_the_sealing_key") {
        return;
    }
    let (p, key_file) = project_with_a_session("seal-hidden");
    let state = std::fs::read_to_string(p.path(".agent/audit.seal")).unwrap();
    let current_key = state.split_whitespace().nth(1).unwrap().to_string();
    let seal = p.path(".agent/audit.seal");
    let task = p.path("01-uname.md");
    let server = scenario(&format!(
        r#"{{"steps":[
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"cat","args":["{}"]}}}}]}},
          {{"tool_calls":[{{"name":"read_file","arguments":{{"path":"{}"}}}}]}},
          {{"tool_calls":[{{"name":"exec","arguments":{{"command":"cat","args":["{}"]}}}}]}},
          {{"content":"done\nTASK_STATUS: DONE"}}
        ]}}"#,
        seal.display(),
        seal.display(),
        task.display()
    ));
    p.init_conf(&server, "").agent_md(
        "EXECUTION_MODE=privileged\nAPPROVAL_MODE=permissive\nALLOW_OUTSIDE_PROJECT_READ=true",
    );
    let out = run_sysward(
        &["run", "--root", p.dir.to_str().unwrap(), "--rerun"],
        Duration::from_secs(60),
    );
    let chats = server.chat_requests();
    assert!(chats.len() >= 4, "{}", describe(&out));
    for c in &chats {
        assert!(
            !c.contains(&current_key),
            "the sealing key reached the model"
        );
    }
    // The legitimate read of a task file in the same project works.
    assert!(
        chats[3].contains("Show the kernel release"),
        "{}",
        chats[3].message_text()
    );
    let _ = std::fs::remove_file(&key_file);
}
