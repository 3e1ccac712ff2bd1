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
