//! `NETWORK_ALLOW`: the operator's list of internal destinations the network
//! tools may reach, parsed strictly and rendered back.
#![allow(clippy::unwrap_used)]

use sysward_policy::parse_agent_md;

fn md(body: &str) -> String {
    format!("# A\n\n```policy\n{body}\n```\n")
}

#[test]
fn entries_accumulate_over_lines_and_render_back() {
    let p = parse_agent_md(&md(
        "NETWORK_ALLOW=10.0.0.0/8, 127.0.0.1:8080\nNETWORK_ALLOW=[::1]:443, intranet.example\nNETWORK_ALLOW=10.0.0.0/8",
    ))
    .unwrap();
    let shown: Vec<String> = p
        .block
        .network_allow
        .iter()
        .map(|a| a.to_string())
        .collect();
    assert_eq!(
        shown,
        [
            "10.0.0.0/8",
            "127.0.0.1:8080",
            "[::1]:443",
            "intranet.example"
        ],
        "in order, each once"
    );
    let rendered = p.block.render();
    assert!(
        rendered
            .contains("NETWORK_ALLOW=10.0.0.0/8, 127.0.0.1:8080, [::1]:443, intranet.example\n"),
        "{rendered}"
    );
    let again = parse_agent_md(&md(&rendered)).unwrap();
    assert_eq!(again.block, p.block);
    assert!(parse_agent_md(&md(""))
        .unwrap()
        .block
        .network_allow
        .is_empty());
}

#[test]
fn a_malformed_entry_refuses_the_policy_and_names_it() {
    for bad in [
        "NETWORK_ALLOW=",
        "NETWORK_ALLOW=10.0.0.1/8",
        "NETWORK_ALLOW=10.0.0.0/8,,",
        "NETWORK_ALLOW=127.0.0.1:99999",
        "NETWORK_ALLOW=*.example.com",
        "NETWORK_ALLOW=http://10.0.0.1/",
    ] {
        let err = parse_agent_md(&md(bad)).unwrap_err().to_string();
        assert!(err.contains("NETWORK_ALLOW"), "{bad}: {err}");
    }
}

#[test]
fn extra_roots_are_an_absolute_path() {
    let p = parse_agent_md(&md("NETWORK_EXTRA_ROOTS=/etc/ssl/internal-ca.pem")).unwrap();
    assert_eq!(
        p.block.network_extra_roots.as_deref(),
        Some("/etc/ssl/internal-ca.pem")
    );
    let again = parse_agent_md(&md(&p.block.render())).unwrap();
    assert_eq!(again.block, p.block);
    for bad in ["ca.pem", "/etc/../root/ca.pem", ""] {
        let err = parse_agent_md(&md(&format!("NETWORK_EXTRA_ROOTS={bad}")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("NETWORK_EXTRA_ROOTS"), "{bad}: {err}");
    }
}
