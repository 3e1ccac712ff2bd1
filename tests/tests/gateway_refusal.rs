//! A gateway that refuses to start says why, and the broker reports that
//! reason — also when the gateway exits before reading the broker's hello,
//! which leaves a connection reset pending ahead of the reason (observed in
//! a container whose seccomp filter refuses Landlock: the session said only
//! "socket error: ECONNRESET").
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sysward_tests::*;

#[test]
fn the_gateways_reason_for_refusing_reaches_the_operator() {
    if !require_root("the_gateways_reason_for_refusing_reaches_the_operator") {
        return;
    }
    let (conf, _) =
        sysward_broker::config::parse("API_URL=http://127.0.0.1:9/v1\nMODEL=m\n").unwrap();
    let account = sysward_broker::spawn::Account {
        name: "nobody".into(),
        uid: 65534,
        gid: 65534,
    };
    let program = bin_dir().join("sysward-test-refusing-gateway");
    for _ in 0..5 {
        let err = match sysward_broker::gateway_link::GatewayLink::start(&program, &conf, &account)
        {
            Ok(_) => panic!("a refusing gateway was accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            err.contains("the model gateway refused to start: refusing-gateway: a confinement layer is missing"),
            "{err}"
        );
    }
}
