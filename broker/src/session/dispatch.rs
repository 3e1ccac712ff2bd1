//! The agent protocol's dispatch table, in the shape of OpenSSH's monitor:
//! the kind in a frame's header selects one row, the row says in which
//! protocol states that kind is legal and how large its frame may be (both
//! checked before the body is decoded: an unknown or unpermitted kind ends
//! the session), and names the one handler that serves it.

use super::*;
use sysward_ipc::agent::request_kind as kind;

/// What the serve loop does after a handler.
pub(super) enum Flow {
    Next,
    /// The agent said goodbye: the session ends normally.
    End,
}

/// A request's handler: the row's kind is the only variant it is given
/// (the codec checks that a body is the kind its header announced).
type Handler = fn(&mut Session<'_>, AgentRequest) -> Result<Flow>;

pub(super) struct Row {
    pub kind: u16,
    /// The protocol states in which the kind is legal.
    pub legal_in: &'static [AgentState],
    /// Largest frame accepted, checked from the header.
    pub cap: usize,
    /// A request of this kind that arrives once the broker is stopping
    /// (SIGTERM) ends the session instead of being served.
    pub refused_when_stopping: bool,
    pub handler: Handler,
}

const HELLO_ONLY: &[AgentState] = &[AgentState::AwaitHello];
const READY: &[AgentState] = &[AgentState::Ready];

/// One row per agent request kind.
pub(super) const TABLE: [Row; 9] = [
    Row {
        kind: kind::HELLO,
        legal_in: HELLO_ONLY,
        cap: agent_request_cap(kind::HELLO),
        refused_when_stopping: false,
        handler: start::on_hello,
    },
    Row {
        kind: kind::NEXT_INPUT,
        legal_in: READY,
        cap: agent_request_cap(kind::NEXT_INPUT),
        refused_when_stopping: true,
        handler: serve::on_next_input,
    },
    Row {
        kind: kind::MODEL,
        legal_in: READY,
        cap: agent_request_cap(kind::MODEL),
        refused_when_stopping: true,
        handler: model::on_model,
    },
    Row {
        kind: kind::TOOL,
        legal_in: READY,
        cap: agent_request_cap(kind::TOOL),
        refused_when_stopping: true,
        handler: tool::on_tool,
    },
    Row {
        kind: kind::LOAD_STATE,
        legal_in: READY,
        cap: agent_request_cap(kind::LOAD_STATE),
        refused_when_stopping: false,
        handler: state_files::on_load_state,
    },
    Row {
        kind: kind::SAVE_STATE,
        legal_in: READY,
        cap: agent_request_cap(kind::SAVE_STATE),
        refused_when_stopping: false,
        handler: state_files::on_save_state,
    },
    Row {
        kind: kind::EVENT,
        legal_in: READY,
        cap: agent_request_cap(kind::EVENT),
        refused_when_stopping: false,
        handler: events::on_event,
    },
    Row {
        kind: kind::TASK_FINISHED,
        legal_in: READY,
        cap: agent_request_cap(kind::TASK_FINISHED),
        refused_when_stopping: false,
        handler: events::on_task_finished,
    },
    Row {
        kind: kind::SHUTDOWN,
        legal_in: READY,
        cap: agent_request_cap(kind::SHUTDOWN),
        refused_when_stopping: false,
        handler: serve::on_shutdown,
    },
];

/// The row of `kind`, None for a kind the table does not have.
pub(super) fn row(kind: u16) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.kind == kind)
}

/// The frame cap of `kind` in `state`, or why the kind is refused there.
pub(super) fn permit(state: AgentState, kind: u16) -> Result<usize, ChannelError> {
    match row(kind) {
        Some(r) if r.legal_in.contains(&state) => Ok(r.cap),
        _ => Err(ChannelError::Illegal {
            kind: AgentRequest::kind_name(kind)
                .unwrap_or("unknown")
                .to_string(),
            state: format!("in state {state:?}"),
        }),
    }
}

/// What a handler answers when given a request of another kind (which the
/// codec's kind check makes impossible).
pub(super) fn wrong_kind(request: &AgentRequest) -> SessionError {
    SessionError::Ended(format!(
        "the dispatch table handed a {} request to another kind's handler",
        AgentRequest::kind_name(request.kind()).unwrap_or("unknown")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_kind_has_one_row_and_only_hello_opens() {
        let kinds: Vec<u16> = (0..=u16::MAX)
            .filter(|k| AgentRequest::kind_name(*k).is_some())
            .collect();
        for k in &kinds {
            assert_eq!(TABLE.iter().filter(|r| r.kind == *k).count(), 1, "kind {k}");
        }
        assert_eq!(TABLE.len(), kinds.len());
        for state in [
            AgentState::AwaitHello,
            AgentState::Ready,
            AgentState::Closed,
        ] {
            let legal: Vec<u16> = kinds
                .iter()
                .copied()
                .filter(|k| permit(state, *k).is_ok())
                .collect();
            match state {
                AgentState::AwaitHello => assert_eq!(legal, [kind::HELLO]),
                AgentState::Ready => assert!(!legal.contains(&kind::HELLO) && legal.len() == 8),
                AgentState::Closed => assert!(legal.is_empty()),
            }
        }
        assert!(permit(AgentState::Ready, 0).is_err());
        assert!(permit(AgentState::Ready, 10).is_err());
    }

    #[test]
    fn a_control_message_never_gets_a_tool_calls_cap() {
        for r in &TABLE {
            assert!(r.cap <= AGENT_REQUEST_MAX, "kind {}", r.kind);
            let control = matches!(
                r.kind,
                kind::HELLO | kind::NEXT_INPUT | kind::LOAD_STATE | kind::SHUTDOWN
            );
            if control {
                assert!(r.cap <= 64 << 10, "kind {}: {}", r.kind, r.cap);
            }
        }
        assert!(row(kind::TOOL).is_some_and(|r| r.cap == AGENT_REQUEST_MAX));
    }
}
