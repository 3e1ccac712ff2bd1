//! Skill packs through the real tree (`sysward run --root`): the two
//! example packs (`examples/skills`) installed in the project's `skills/`
//! are offered to the model with their manifests' schemas, run confined
//! with the model's arguments on stdin, and give the model their JSON; a
//! network-category pack is denied while ALLOW_NETWORK is off; a pack whose
//! manifest is broken stops the session before it starts, naming the file
//! and the line; a pack a user other than root could change is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use sysward_tests::*;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn install_pack(project: &TestProject, name: &str) {
    let dst = project.path(&format!("skills/{name}"));
    std::fs::create_dir_all(&dst).unwrap();
    for f in ["skill.json", "run"] {
        std::fs::copy(
            repo().join("examples/skills").join(name).join(f),
            dst.join(f),
        )
        .unwrap();
    }
    std::fs::set_permissions(dst.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        dst.join("skill.json"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
}

fn write_pack(project: &TestProject, name: &str, manifest: &str, script: &str) {
    let dst = project.path(&format!("skills/{name}"));
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::write(dst.join("skill.json"), manifest).unwrap();
    std::fs::write(dst.join("run"), script).unwrap();
    std::fs::set_permissions(dst.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn skills_dir_private(project: &TestProject) {
    std::fs::set_permissions(
        project.path("skills"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

#[test]
fn skill_packs_are_offered_run_confined_and_gated_by_their_manifests() {
    let test = "skill_packs_are_offered_run_confined_and_gated_by_their_manifests";
    if !require_root(test) {
        return;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: the example packs need python3");
        return;
    }
    ensure_accounts();
    let project = TestProject::new("skill-packs");
    install_pack(&project, "disk_usage");
    install_pack(&project, "cert_expiry");
    write_pack(
        &project,
        "reach_out",
        r#"{"description": "Sends something somewhere.", "executable": "run", "category": "network", "risk": "low"}"#,
        "#!/bin/sh\necho '{\"sent\": true}'\n",
    );
    skills_dir_private(&project);
    let cert = project.path("test-cert.pem");
    let key = project.path("test-key.pem");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "10",
            "-subj",
            "/CN=skilltest.example",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", describe(&made));
    let steps = vec![
        tool_call(
            "disk_usage",
            serde_json::json!({"paths": [project.dir.display().to_string()], "warn_percent": 101}),
        ),
        tool_call(
            "cert_expiry",
            serde_json::json!({"files": [cert.display().to_string()], "warn_days": 30}),
        ),
        tool_call("reach_out", serde_json::json!({})),
        tool_call("disk_usage", serde_json::json!({"paths": "/"})),
    ];
    let ScriptedRun {
        server,
        results,
        output: out,
    } = run_scripted(
        &project,
        steps,
        "MAX_STEPS=30",
        "Report disk space and certificates.",
    );
    let offered = first_chat_body(&server);
    let records = audit_records(&project);
    let mut c = Checks::default();
    c.check(
        offered.contains("\"disk_usage\"")
            && offered.contains("\"cert_expiry\"")
            && offered.contains("warn_days"),
        "the packs are offered with their manifests' schemas",
        &offered,
    );
    c.check(
        results[0].contains("\"used_percent\"")
            && results[0].contains(&project.dir.display().to_string())
            && results[0].contains("\"warning\": false"),
        "disk_usage runs with the model's arguments and gives its JSON",
        &results[0],
    );
    c.check(
        results[1].contains("skilltest.example")
            && results[1].contains("\"warning\": true")
            && results[1].contains("\"days_left\": 9"),
        "cert_expiry reads the certificate and warns within 30 days",
        &results[1],
    );
    c.check(
        !results[2].contains("\"sent\"") && results[2].contains("ALLOW_NETWORK"),
        "a network pack is denied while ALLOW_NETWORK is off",
        &results[2],
    );
    c.check(
        results[3].contains("must be") && !results[3].contains("used_percent"),
        "an argument of the wrong type is refused before the pack runs",
        &results[3],
    );
    let tools: Vec<(String, String)> = records
        .iter()
        .filter(|r| r["event"]["event"] == "tool")
        .map(|r| {
            (
                r["event"]["tool"].as_str().unwrap_or("").to_string(),
                r["event"]["decision"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    c.check(
        tools.contains(&("disk_usage".to_string(), "allow".to_string()))
            && tools.contains(&("cert_expiry".to_string(), "allow".to_string()))
            && tools.contains(&("reach_out".to_string(), "deny".to_string())),
        "each call has its audit row with the decision",
        &format!("{tools:?}\n{}", describe(&out)),
    );
}

#[test]
fn a_broken_or_unsafe_pack_stops_the_session_naming_its_file() {
    let test = "a_broken_or_unsafe_pack_stops_the_session_naming_its_file";
    if !require_root(test) {
        return;
    }
    ensure_accounts();
    for (what, manifest, mode, want) in [
        (
            "a syntax error",
            "{\n  \"description\": \"x\",\n  \"executable\": \"run\"\n  \"category\": \"read-only\"\n}\n",
            0o644,
            "skill.json line 4",
        ),
        (
            "an unknown field",
            "{\"description\": \"x\", \"executable\": \"run\", \"category\": \"read-only\", \"risk\": \"safe\", \"shell\": true}",
            0o644,
            "unknown field `shell`",
        ),
        (
            "a pack that changes the host",
            "{\"description\": \"x\", \"executable\": \"run\", \"category\": \"write\", \"risk\": \"low\"}",
            0o644,
            "read-only or network",
        ),
        (
            "a manifest others can write",
            "{\"description\": \"x\", \"executable\": \"run\", \"category\": \"read-only\", \"risk\": \"safe\"}",
            0o666,
            "writable by",
        ),
    ] {
        let project = TestProject::new("skill-broken");
        write_pack(&project, "broken", manifest, "#!/bin/sh\necho '{}'\n");
        skills_dir_private(&project);
        std::fs::set_permissions(
            project.path("skills/broken/skill.json"),
            std::fs::Permissions::from_mode(mode),
        )
        .unwrap();
        let server = scenario(r#"{"steps":[{"content":"done\nTASK_STATUS: DONE"}]}"#);
        project
            .init_conf(&server, "")
            .agent_md("MAX_STEPS=5")
            .write("01-t.md", "# T\nNothing.\n");
        let out = run_sysward(
            &["run", "--root", project.dir.to_str().unwrap()],
            Duration::from_secs(120),
        );
        let text = describe(&out);
        assert!(!out.status.success(), "{what}: the session ran\n{text}");
        assert!(text.contains("skills/broken/skill.json"), "{what}: the file is not named\n{text}");
        assert!(text.contains(want), "{what}: no {want:?}\n{text}");
        assert!(server.chat_requests().is_empty(), "{what}: the model was asked\n{text}");
    }
}
