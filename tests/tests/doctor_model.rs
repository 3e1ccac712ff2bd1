//! `sysward doctor`'s model-endpoint row against the scripted OpenAI server:
//! it asks `GET {API_URL}/models` (with the Bearer key) and checks MODEL is
//! listed; a missing /v1, an unlisted MODEL, a rejected key and a closed port
//! each fail the row with the fix. The row needs no root (doctor connects from
//! its own process), so these run as any user; other rows (users, cgroup…)
//! depend on the host, so only this row and the exit code of a failing row are
//! asserted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;
use sysward_tests::*;

const KEY: &str = "sk-test-0123456789abcdef";

/// The served model is `scripted`, which is what `TestProject::init_conf` sets.
fn server(extra: &str) -> Handle {
    scenario(&format!(r#"{{"model":"scripted"{extra},"steps":[]}}"#))
}

fn project(name: &str, api_url: &str, model: &str) -> TestProject {
    let p = TestProject::new(name);
    p.write(
        "init.conf",
        &format!("API_URL={api_url}\nAPI_KEY={KEY}\nMODEL={model}\n"),
    )
    .agent_md("EXECUTION_MODE=guarded");
    p
}

/// Runs doctor; returns the output, the model-endpoint row and its fix line
/// ("" when the row passed).
fn doctor(p: &TestProject) -> (std::process::Output, String, String) {
    let out = run_sysward(
        &["doctor", "--root", p.dir.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.starts_with("model endpoint"))
        .unwrap_or_else(|| panic!("no model endpoint row\n{}", describe(&out)));
    let fix = lines
        .get(i + 1)
        .filter(|l| l.trim_start().starts_with("fix:"))
        .map_or(String::new(), |l| l.trim().to_string());
    eprintln!("{}\n{}", lines[i], fix);
    assert!(
        !stdout.contains(KEY),
        "doctor printed the API key\n{stdout}"
    );
    (out, lines[i].to_string(), fix)
}

fn passed(row: &str) -> bool {
    row.split_whitespace().nth(2) == Some("ok")
}

#[test]
fn correct_api_url_and_model_pass() {
    let s = server("");
    let p = project("doctor-ok", &s.base_url(), "scripted");
    let (out, row, fix) = doctor(&p);
    assert!(passed(&row), "{row}\n{fix}\n{}", describe(&out));
    assert!(row.contains("/v1/models: HTTP 200"), "{row}");
    assert!(row.contains("serves MODEL scripted"), "{row}");
    assert!(row.contains("key sk-tes...def"), "{row}");
    let models: Vec<_> = s
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/v1/models")
        .collect();
    assert_eq!(models.len(), 1, "{:?}", s.requests());
    assert_eq!(
        models[0].authorization(),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[test]
fn api_url_without_v1_fails_and_names_the_prefix() {
    let s = server("");
    let base = format!("http://{}", s.addr());
    let p = project("doctor-nov1", &base, "scripted");
    let (out, row, fix) = doctor(&p);
    assert!(!passed(&row), "{row}");
    assert!(row.contains("HTTP 404"), "{row}");
    assert!(
        fix.contains("API_URL must end with the API prefix, usually /v1"),
        "{fix}"
    );
    assert!(fix.contains(&format!("try API_URL={base}/v1")), "{fix}");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn a_model_the_server_does_not_list_fails_and_lists_the_served_id() {
    let s = server("");
    let p = project("doctor-model", &s.base_url(), "no-such-model");
    let (out, row, fix) = doctor(&p);
    assert!(!passed(&row), "{row}");
    assert!(
        row.contains("MODEL no-such-model is not served; the server lists: scripted"),
        "{row}"
    );
    assert!(fix.contains("MODEL"), "{fix}");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn nothing_listening_is_the_connect_failure() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let p = project("doctor-closed", &url, "scripted");
    let (out, row, fix) = doctor(&p);
    assert!(!passed(&row), "{row}");
    assert!(row.contains(&format!("{url} refuses connections")), "{row}");
    assert!(
        fix.contains("start the model server or fix API_URL in init.conf"),
        "{fix}"
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn a_rejected_key_says_check_api_key() {
    let s = server(r#","require_api_key":"sk-other-0123456789abcdef""#);
    let p = project("doctor-key", &s.base_url(), "scripted");
    let (out, row, fix) = doctor(&p);
    assert!(!passed(&row), "{row}");
    assert!(row.contains("HTTP 401"), "{row}");
    assert!(row.contains("with key sk-tes...def"), "{row}");
    assert!(fix.contains("check API_KEY"), "{fix}");
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
}

#[test]
fn https_says_only_the_connection_was_checked() {
    let s = server("");
    let url = format!("https://{}/v1", s.addr());
    let p = project("doctor-https", &url, "scripted");
    let (_, row, _) = doctor(&p);
    assert!(passed(&row), "{row}");
    assert!(
        row.contains("https: only the TCP connection was checked"),
        "{row}"
    );
    assert!(s.requests().is_empty(), "{:?}", s.requests());
}
