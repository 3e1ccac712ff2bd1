//! A newcomer's path: `sysward init DIR`, point init.conf at a model server,
//! `sysward doctor --json`, run the example task; `sysward status` says what
//! happened. An unreadable task file is skipped by name while the others run
//! (as root, real tree, scripted model).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

#[test]
fn init_doctor_and_a_first_task() {
    if !require_root("init_doctor_and_a_first_task") {
        return;
    }
    ensure_accounts();
    let dir = std::env::temp_dir().join(format!("sysward-newcomer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    struct Cleanup(std::path::PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _cleanup = Cleanup(dir.clone());
    let d = dir.to_str().unwrap();
    let init = run_sysward(&["init", d], Duration::from_secs(20));
    assert!(init.status.success(), "{}", describe(&init));
    for f in ["init.conf", "agent.md", "01-health-check.md"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    // Never overwrites.
    std::fs::write(
        dir.join("agent.md"),
        "# mine\n\n```policy\nEXECUTION_MODE=guarded\n```\n",
    )
    .unwrap();
    let again = run_sysward(&["init", d], Duration::from_secs(20));
    assert!(describe(&again).contains("kept"), "{}", describe(&again));
    assert!(std::fs::read_to_string(dir.join("agent.md"))
        .unwrap()
        .starts_with("# mine"));

    // The newcomer edits API_URL and MODEL, as the comments say.
    let server = scenario(
        r#"{"steps":[
          {"tool_calls":[{"name":"exec","arguments":{"command":"uptime"}}]},
          {"content":"| item | state |\n| uptime | fine |\nTASK_STATUS: DONE"}
        ]}"#,
    );
    let conf = std::fs::read_to_string(dir.join("init.conf")).unwrap();
    let conf: String = conf
        .lines()
        .map(|l| {
            if l.starts_with("API_URL=") {
                format!("API_URL={}", server.base_url())
            } else if l.starts_with("MODEL=") {
                "MODEL=scripted-model".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(dir.join("init.conf"), conf + "\n").unwrap();
    let doctor = run_sysward(&["doctor", "--root", d, "--json"], Duration::from_secs(30));
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout)
        .unwrap_or_else(|e| panic!("doctor --json is not JSON ({e}): {}", describe(&doctor)));
    let check = |name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .unwrap_or_else(|| panic!("no {name} row: {report}"))
            .clone()
    };
    assert_eq!(check("configuration")["ok"], true, "{report}");
    // An unreadable task beside the example: skipped by name, the rest runs.
    std::fs::write(dir.join("02-broken.md"), [0xffu8, 0xfe, 0x00, 0x41]).unwrap();
    let run = run_sysward(&["run", "--root", d], Duration::from_secs(60));
    let said = describe(&run);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(said.contains("01-health-check.md: DONE"), "{said}");
    assert!(said.contains("02-broken.md skipped"), "{said}");
    let status = run_sysward(&["status", "--root", d], Duration::from_secs(20));
    let shown = describe(&status);
    assert!(
        shown.contains("01-health-check.md") && shown.contains("DONE"),
        "{shown}"
    );
    assert!(shown.contains("chain intact"), "{shown}");
}
