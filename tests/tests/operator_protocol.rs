//! The operator protocol's dispatch table through the real daemon (as
//! root): a request kind the connection's state does not permit, or a frame
//! over its kind's cap, ends the connection before its body is decoded,
//! with what the console should have sent; the legitimate requests next to
//! each still work.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sysward_ipc::operator::{OperatorAnswer, OperatorRequest};
use sysward_ipc::Channel;
use sysward_tests::daemon::{channels, connect_raw, hello, TestDaemon};
use sysward_tests::*;

/// The answers until the daemon closes the connection (at most a few).
fn answers_until_closed(reader: &mut Channel) -> (Vec<OperatorAnswer>, bool) {
    let mut out = Vec::new();
    for _ in 0..4 {
        if !reader.wait_readable(10_000).unwrap() {
            return (out, false);
        }
        match reader.recv::<OperatorAnswer>() {
            Ok(a) => out.push(a),
            Err(e) if e.is_disconnect() => return (out, true),
            Err(e) => panic!("reading the daemon's answer: {e}"),
        }
    }
    (out, false)
}

fn error_text(answers: &[OperatorAnswer]) -> String {
    answers
        .iter()
        .filter_map(|a| match a {
            OperatorAnswer::Error { message } => Some(message.clone()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn requests_out_of_turn_or_over_their_cap_end_the_connection_and_legitimate_ones_work() {
    if !require_root("operator_protocol") {
        return;
    }
    ensure_accounts();
    let server = scenario(r#"{"steps":[{"content":"nothing to do"}]}"#);
    let p = TestProject::new("operator-protocol");
    p.init_conf(&server, "").agent_md("EXECUTION_MODE=guarded");
    let d = TestDaemon::start(&p, "opproto", false);

    // Legitimate: Hello, then the approvals listing.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&hello()).unwrap();
    w.send(&OperatorRequest::ListApprovals).unwrap();
    let (answers, _) = answers_until_closed(&mut r);
    assert!(
        matches!(answers.first(), Some(OperatorAnswer::Welcome { .. }))
            && matches!(answers.get(1), Some(OperatorAnswer::Done { ok: true, .. })),
        "Hello then ListApprovals: {answers:?}"
    );

    // Anything before Hello.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&OperatorRequest::ListApprovals).unwrap();
    let (answers, closed) = answers_until_closed(&mut r);
    assert!(
        closed && error_text(&answers).contains("say hello first"),
        "a request before Hello: {answers:?} (closed: {closed})"
    );

    // A session's request as the opening one.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&hello()).unwrap();
    w.send(&OperatorRequest::Input("rm -rf /".into())).unwrap();
    let (answers, closed) = answers_until_closed(&mut r);
    assert!(
        closed
            && matches!(answers.first(), Some(OperatorAnswer::Welcome { .. }))
            && error_text(&answers).contains("expected run or cli"),
        "Input before any session: {answers:?} (closed: {closed})"
    );

    // A second Hello is not an opening request either.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&hello()).unwrap();
    w.send(&hello()).unwrap();
    let (answers, closed) = answers_until_closed(&mut r);
    assert!(
        closed && error_text(&answers).contains("expected run or cli"),
        "a second Hello: {answers:?} (closed: {closed})"
    );

    // A Hello over its kind's cap (1 KiB), though under the protocol's
    // 64 KiB: refused from the header, no answer.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&OperatorRequest::Hello {
        build: "x".repeat(8 << 10),
    })
    .unwrap();
    let (answers, closed) = answers_until_closed(&mut r);
    assert!(
        closed && answers.is_empty(),
        "an oversized Hello: {answers:?} (closed: {closed})"
    );

    // The daemon still serves the legitimate request after all of that.
    let (w, mut r) = channels(connect_raw(&d.socket));
    w.send(&hello()).unwrap();
    w.send(&OperatorRequest::ListApprovals).unwrap();
    let (answers, _) = answers_until_closed(&mut r);
    assert!(
        matches!(answers.get(1), Some(OperatorAnswer::Done { ok: true, .. })),
        "the daemon after the refused connections: {answers:?}"
    );
}
