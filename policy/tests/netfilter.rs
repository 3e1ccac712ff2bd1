//! Netfilter listings in read-only actions: the exact listing forms keep
//! CAP_NET_ADMIN (the kernel refuses nftables and iptables-nft listings
//! without it), and only when the listing is the whole request; every other
//! shape of the same programs keeps no capability beyond reading.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use sysward_policy::{parse_agent_md, Engine, HostFacts, LexicalPaths, Request, Verdict};

fn engine(directives: &str) -> Engine {
    let mut f = HostFacts::packaged(0, 0);
    f.project_root = "/srv/agent".into();
    f.scratch_dir = "/srv/agent/.agent/tmp".into();
    let md = format!("```policy\n{directives}\n```\n");
    Engine::new(parse_agent_md(&md).unwrap().block, f)
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

fn exec(e: &Engine, argv: &[&str], env: &[(String, String)]) -> sysward_policy::Decision {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    e.decide(
        &Request::Exec {
            argv: &argv,
            env,
            stdin: None,
            cwd: Path::new("/srv/agent"),
        },
        &LexicalPaths,
    )
}

const READ: &str = "ALLOW_OUTSIDE_PROJECT_READ=true";

fn has_net_admin(d: &sysward_policy::Decision) -> bool {
    d.profile
        .as_ref()
        .is_some_and(|p| p.capabilities.iter().any(|c| c == "CAP_NET_ADMIN"))
}

#[test]
fn a_listing_alone_keeps_net_admin_and_nothing_writable() {
    let e = engine(READ);
    for script in [
        "nft list ruleset",
        "nft -a list ruleset",
        "nft -j list tables inet",
        "nft list chain inet filter input",
        "iptables -L -n",
        "iptables -nvL INPUT --line-numbers",
        "ip6tables -S -t filter",
        "iptables-save",
        "iptables-save -c",
    ] {
        let d = sh(&e, script);
        assert_eq!(d.verdict, Verdict::Allow, "{script}: {}", d.reason);
        let p = d.profile.as_ref().unwrap();
        assert_eq!(p.name, "netfilter-list", "{script}");
        assert_eq!(
            p.capabilities,
            vec![
                "CAP_DAC_READ_SEARCH".to_string(),
                "CAP_NET_ADMIN".to_string()
            ],
            "{script}"
        );
        assert!(!p.can_write() && p.write_paths.is_empty(), "{script}");
        assert!(
            p.scratch_dir.is_none() && p.read_paths.is_empty(),
            "{script}"
        );
        assert!(!p.network, "{script}: no inet socket");
    }
    let d = exec(&e, &["nft", "list", "ruleset"], &[]);
    assert!(has_net_admin(&d), "the exec tool's listing");
}

#[test]
fn other_shapes_keep_no_net_admin() {
    let e = engine(READ);
    for script in [
        // Not alone: every process of the action would hold it.
        "nft list ruleset | grep drop",
        "nft list ruleset; id",
        "nft list ruleset > /srv/agent/rules.txt",
        "iptables -L -n && cat /etc/hostname",
        "sudo nft list ruleset",
        // Not a listing form.
        "nft list ruleset inet extra",
        "nft -N list ruleset",
        "nft monitor",
        "nft list table inet $T",
        "iptables -L --modprobe=/tmp/x",
        "iptables -L -M /tmp/x",
        "iptables-save -M /tmp/x",
        "iptables-legacy -L",
        "nft -c -f /etc/nftables.conf",
    ] {
        let d = sh(&e, script);
        assert!(
            !(has_net_admin(&d) && d.profile.as_ref().unwrap().name != "admin")
                || d.verdict.is_deny(),
            "{script}: {:?} {:?}",
            d.verdict,
            d.profile.map(|p| (p.name, p.capabilities))
        );
        if let Some(p) = &d.profile {
            assert_ne!(p.name, "netfilter-list", "{script}");
        }
    }
    // A variable of its own in the exec tool's environment: not the listing.
    let env = vec![("NFT_DEBUG".to_string(), "1".to_string())];
    let d = exec(&e, &["nft", "list", "ruleset"], &env);
    assert!(!has_net_admin(&d) || d.verdict.is_deny());
}

#[test]
fn changes_are_admin_requests_not_listings() {
    let e = engine(READ);
    for script in [
        "nft add table inet x",
        "nft -f /etc/nftables.conf",
        "nft flush ruleset",
        "iptables -A INPUT -j DROP",
        "iptables -F",
    ] {
        let d = sh(&e, script);
        assert!(
            !matches!(d.verdict, Verdict::Allow),
            "{script}: {:?}",
            d.verdict
        );
        if let Some(p) = &d.profile {
            assert_ne!(p.name, "netfilter-list", "{script}");
        }
    }
}
