//! The operator protocol's dispatch table: which request kinds a console
//! may send in each state of its connection, and how large each frame may
//! be, checked from the header before the body is decoded (an unknown or
//! unpermitted kind ends the connection). The handlers: `Hello` is
//! `operator_channel::greet`, the opening request is `control.rs`'s (the
//! daemon: a session, a decision, the approvals listing) or
//! `standalone.rs`'s (one session), and a session's requests go to
//! `operator_channel::serve_session`'s reader.

use sysward_ipc::operator::{request_kind as kind, OperatorRequest};
use sysward_ipc::{Channel, ChannelError, Message};

/// Where a console's connection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorState {
    /// Before its `Hello`.
    AwaitHello,
    /// After `Hello`: the one request that says what it wants.
    Opening,
    /// In the session it opened.
    InSession,
}

pub struct Row {
    pub kind: u16,
    pub legal_in: &'static [OperatorState],
    /// Largest frame accepted, checked from the header.
    pub cap: usize,
}

/// Requests without text of their own.
const BARE: usize = 1 << 10;
/// A line of input, an approval's note, a secret, run options.
const TEXT: usize = sysward_ipc::operator::OPERATOR_REQUEST_MAX;

use OperatorState as S;

/// One row per operator request kind.
pub const TABLE: [Row; 10] = [
    Row {
        kind: kind::HELLO,
        legal_in: &[S::AwaitHello],
        cap: BARE,
    },
    Row {
        kind: kind::RUN,
        legal_in: &[S::Opening],
        cap: TEXT,
    },
    Row {
        kind: kind::CLI,
        legal_in: &[S::Opening],
        cap: TEXT,
    },
    Row {
        kind: kind::DECIDE,
        legal_in: &[S::Opening],
        cap: TEXT,
    },
    Row {
        kind: kind::LIST_APPROVALS,
        legal_in: &[S::Opening],
        cap: BARE,
    },
    Row {
        kind: kind::INPUT,
        legal_in: &[S::InSession],
        cap: TEXT,
    },
    Row {
        kind: kind::CANCEL,
        legal_in: &[S::InSession],
        cap: BARE,
    },
    Row {
        kind: kind::APPROVAL,
        legal_in: &[S::InSession],
        cap: TEXT,
    },
    Row {
        kind: kind::DETACH,
        legal_in: &[S::InSession],
        cap: BARE,
    },
    Row {
        kind: kind::SECRET,
        legal_in: &[S::InSession],
        cap: TEXT,
    },
];

/// The frame cap of `kind` in `state`, or why the kind is refused there.
pub fn permit(state: OperatorState, kind: u16) -> Result<usize, ChannelError> {
    match TABLE.iter().find(|r| r.kind == kind) {
        Some(r) if r.legal_in.contains(&state) => Ok(r.cap),
        _ => Err(ChannelError::Illegal {
            kind: OperatorRequest::kind_name(kind)
                .unwrap_or("unknown")
                .to_string(),
            state: format!("{state:?}"),
        }),
    }
}

/// Receives the console's next request, legal in `state`.
pub fn recv(rx: &mut Channel, state: OperatorState) -> Result<OperatorRequest, ChannelError> {
    rx.recv_checked::<OperatorRequest>(|header| permit(state, header.kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_one_row_and_each_state_its_own_kinds() {
        let kinds: Vec<u16> = (0..=u16::MAX)
            .filter(|k| OperatorRequest::kind_name(*k).is_some())
            .collect();
        for k in &kinds {
            assert_eq!(TABLE.iter().filter(|r| r.kind == *k).count(), 1, "kind {k}");
        }
        assert_eq!(TABLE.len(), kinds.len());
        let legal = |state| -> Vec<u16> {
            let mut v: Vec<u16> = kinds
                .iter()
                .copied()
                .filter(|k| permit(state, *k).is_ok())
                .collect();
            v.sort();
            v
        };
        assert_eq!(legal(S::AwaitHello), [kind::HELLO]);
        assert_eq!(
            legal(S::Opening),
            [kind::RUN, kind::CLI, kind::DECIDE, kind::LIST_APPROVALS]
        );
        assert_eq!(
            legal(S::InSession),
            [
                kind::INPUT,
                kind::CANCEL,
                kind::APPROVAL,
                kind::DETACH,
                kind::SECRET
            ]
        );
        assert!(permit(S::InSession, 0).is_err() && permit(S::InSession, 11).is_err());
        assert!(TABLE
            .iter()
            .all(|r| r.cap <= sysward_ipc::operator::OPERATOR_REQUEST_MAX));
    }
}
