//! A decision: what the broker does with one request and shows about it,
//! and what the classifier helper is set up from. Plain data, shared by
//! the engine that makes decisions and the broker that acts on them.

use crate::block::PolicyBlock;
use crate::facts::HostFacts;
use crate::types::{Category, Risk, Verdict};
use serde::{Deserialize, Serialize};
use sysward_ipc::profile::ConfinementProfile;

/// What the broker does with one request, and everything it shows about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub verdict: Verdict,
    /// The headline category (of the command that decided).
    pub category: Category,
    /// The highest risk among the commands.
    pub risk: Risk,
    pub reason: String,
    /// The commands after unwrapping, one line.
    pub normalized: String,
    /// Which rule decided (`ALLOW_DELETE`, `operator rule line 12`, `critical risk`, …).
    pub source: String,
    /// The confinement for Allow and Ask; None for Deny.
    pub profile: Option<ConfinementProfile>,
    /// Every simple command found (after unwrapping), in order, with its own
    /// category and risk: what a person approving the request must see.
    pub parts: Vec<Part>,
}

/// One simple command of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub text: String,
    pub category: Category,
    pub risk: Risk,
}

/// Everything an engine (`Engine`, with the `engine` feature) is built from: what the broker sends the
/// classifier helper so that it decides with exactly the broker's engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineSetup {
    pub block: PolicyBlock,
    pub facts: HostFacts,
}

/// What `sysward policy explain` prints: one line with the decision, category,
/// risk, reason, the rule that decided, and the profile.
pub fn explain(decision: &Decision) -> String {
    let profile = match &decision.profile {
        Some(p) => p.to_string(),
        None => "none".to_string(),
    };
    format!(
        "decision: {}; category: {}; risk: {}; reason: {}; rule: {}; command: {}; profile: {}",
        decision.verdict,
        decision.category,
        decision.risk,
        decision.reason,
        decision.source,
        decision.normalized,
        profile
    )
    .replace(['\n', '\r'], " ")
}
