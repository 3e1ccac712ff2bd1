//! Why a session ended before its agent said goodbye. The operator reads
//! [`crate::error::chain`] of it: each variant's own words, then its cause's.

use sysward_ipc::ChannelError;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The session ends for a reason that is complete as said: the agent
    /// misbehaved or went away, the gateway failed, the broker is stopping.
    #[error("{0}")]
    Ended(String),
    #[error("cannot answer the agent")]
    AnswerAgent(#[source] ChannelError),
    #[error("cannot load the skill packs")]
    Skills(#[source] crate::skills::SkillError),
    #[error("cannot start the model gateway")]
    Gateway(#[source] crate::gateway_link::GatewayError),
    #[error("cannot start the agent stderr relay")]
    StderrRelay(#[source] std::io::Error),
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    #[error(transparent)]
    Project(#[from] crate::project::ProjectError),
    #[error(transparent)]
    Approvals(#[from] crate::approvals::ApprovalsError),
    #[error(transparent)]
    Pinned(#[from] crate::pinned::PinnedError),
    #[error(transparent)]
    Spawn(#[from] crate::spawn::SpawnSetupError),
}

pub type Result<T, E = SessionError> = std::result::Result<T, E>;

/// Why no action runs any more: the broker's own paths no longer name what
/// it opened at start-up. The session's error, the audit and the action's
/// notes say it in these words, and every later check repeats them.
#[derive(Debug, thiserror::Error)]
pub enum PinnedStop {
    /// An earlier check stopped the broker; its reason, as said then.
    #[error("{0}")]
    Stopped(String),
    #[error(
        "the broker stopped: its own paths changed ({}): {}. No further action runs; inspect the host, restore the paths and restart sysward",
        after(.action),
        .changes.join("; ")
    )]
    Changed {
        /// The action after which the change was seen (None: before the
        /// session).
        action: Option<String>,
        changes: Vec<String>,
    },
}

fn after(action: &Option<String>) -> String {
    action
        .as_ref()
        .map_or("before the session".to_string(), |a| {
            format!("after action {a}")
        })
}

/// Why a turn is refused: agent.md changed and no longer loads. The operator
/// is warned, the audit records it and the model is told, in these words.
#[derive(Debug, thiserror::Error)]
pub enum PolicyRefusal {
    #[error(
        "agent.md no longer loads ({}): this turn is refused until it is fixed",
        crate::error::chain(.0)
    )]
    NoLongerLoads(SessionError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_stop_reads_as_it_always_did() {
        let changed = |action: Option<&str>| PinnedStop::Changed {
            action: action.map(String::from),
            changes: vec!["/a moved".into(), "/b moved".into()],
        };
        assert_eq!(
            changed(None).to_string(),
            "the broker stopped: its own paths changed (before the session): /a moved; /b moved. No further action runs; inspect the host, restore the paths and restart sysward"
        );
        assert!(changed(Some("s-1"))
            .to_string()
            .starts_with("the broker stopped: its own paths changed (after action s-1): /a moved"));
    }
}
