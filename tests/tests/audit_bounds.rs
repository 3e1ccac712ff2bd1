//! A hostile model reply cannot lock later sessions out through the audit
//! log: a 14 MiB argument of quotes (which shell quoting and JSON escaping
//! would grow to ~73 MB, past the verifier's line limit) makes a bounded
//! record, and the next session starts on an intact chain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

#[test]
fn a_fourteen_mebibyte_argument_leaves_a_bounded_record_and_an_intact_chain() {
    if !require_root("a_fourteen_mebibyte_argument_leaves_a_bounded_record_and_an_intact_chain") {
        return;
    }
    ensure_accounts();
    let quotes = "'".repeat(14 << 20);
    let call = serde_json::json!({"tool_calls": [{"name": "exec", "arguments": {"command": "echo", "args": [quotes]}}]});
    let server = scenario(&format!(
        r#"{{"steps":[{call},{{"content":"It was refused.\nTASK_STATUS: BLOCKED"}},{{"tool_calls":[{{"name":"exec","arguments":{{"command":"uname","args":["-r"]}}}}]}},{{"content":"Kernel printed.\nTASK_STATUS: DONE"}}]}}"#
    ));
    let p = TestProject::new("audit-bounds");
    p.init_conf(&server, "")
        .agent_md("EXECUTION_MODE=guarded")
        .write("01-t.md", "# T\nEcho it.\n");
    let root = p.dir.to_str().unwrap();
    let first = run_sysward(&["run", "--root", root, "--json"], Duration::from_secs(120));
    let log = std::fs::read_to_string(p.path("audit.log")).unwrap();
    let longest = log.lines().map(str::len).max().unwrap();
    assert!(
        longest < 4 << 20,
        "a record of {longest} bytes\n{}",
        describe(&first)
    );
    assert!(
        log.contains("bytes in all, sha256"),
        "the long argument was not cut"
    );
    // The legitimate twin: the next session is not refused and its action runs.
    p.write("01-t.md", "# T\nPrint the kernel release.\n");
    let second = run_sysward(&["run", "--root", root, "--json"], Duration::from_secs(120));
    assert_eq!(second.status.code(), Some(0), "{}", describe(&second));
    let v = run_sysward(
        &["audit", "verify", "--root", root],
        Duration::from_secs(60),
    );
    assert!(v.status.success(), "{}", describe(&v));
}
