//! A command run without input reads /dev/null: each of several actions in
//! one session finds /dev/null as its standard input and reads end of file
//! from it at once (the broker hands each a duplicate of one descriptor it
//! opened once). Through the real broker → agent → gateway → action tree;
//! needs root and skips loudly otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sysward_tests::*;

#[test]
fn every_command_reads_end_of_file_from_dev_null() {
    if !require_root("every_command_reads_end_of_file_from_dev_null") {
        return;
    }
    ensure_accounts();
    let p = TestProject::new("command-stdin");
    let probe = |n: u32| {
        tool_call(
            "exec",
            serde_json::json!({
                "command": "sh",
                "args": ["-c", format!("echo run{n} $(readlink /proc/self/fd/0) $(wc -c)")],
            }),
        )
    };
    let run = run_scripted(
        &p,
        vec![probe(1), probe(2), probe(3)],
        "EXECUTION_MODE=guarded",
        "Show what the commands read.",
    );
    assert_eq!(run.results.len(), 3, "{:?}", run.results);
    for (i, result) in run.results.iter().enumerate() {
        let want = format!("run{} /dev/null 0", i + 1);
        assert!(result.contains(&want), "result {i}: {result}");
    }
}
