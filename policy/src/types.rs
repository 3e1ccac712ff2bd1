//! The vocabulary of a decision: category, risk, verdict.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The seed's eleven command categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Category {
    ReadOnly,
    Network,
    Download,
    Write,
    Delete,
    Package,
    Service,
    Admin,
    Destructive,
    Reboot,
    Unknown,
}

impl Category {
    /// All categories, in the seed's order.
    pub const ALL: [Category; 11] = [
        Category::ReadOnly,
        Category::Network,
        Category::Download,
        Category::Write,
        Category::Delete,
        Category::Package,
        Category::Service,
        Category::Admin,
        Category::Destructive,
        Category::Reboot,
        Category::Unknown,
    ];

    /// The seed's name (`read-only`, `network`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::ReadOnly => "read-only",
            Category::Network => "network",
            Category::Download => "download",
            Category::Write => "write",
            Category::Delete => "delete",
            Category::Package => "package",
            Category::Service => "service",
            Category::Admin => "admin",
            Category::Destructive => "destructive",
            Category::Reboot => "reboot",
            Category::Unknown => "unknown",
        }
    }

    /// Parses the seed's name.
    pub fn from_name(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// How much a category says about danger, to pick the headline category of a
    /// script made of several commands (higher = shown first).
    #[cfg_attr(not(feature = "engine"), allow(dead_code))]
    pub(crate) fn weight(self) -> u8 {
        match self {
            Category::ReadOnly => 0,
            Category::Network => 1,
            Category::Write => 2,
            Category::Download => 3,
            Category::Unknown => 4,
            Category::Delete => 5,
            Category::Service => 6,
            Category::Admin => 7,
            Category::Package => 8,
            Category::Reboot => 9,
            Category::Destructive => 10,
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Seed `002`'s five risk levels. `Critical` is denied in every mode and never
/// offered for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Risk {
    Safe,
    Low,
    Medium,
    High,
    Critical,
}

impl Risk {
    pub const ALL: [Risk; 5] = [
        Risk::Safe,
        Risk::Low,
        Risk::Medium,
        Risk::High,
        Risk::Critical,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Safe => "safe",
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }

    pub fn from_name(s: &str) -> Option<Risk> {
        Risk::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the broker does with a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// Run it under the decision's profile.
    Allow,
    /// Run it only after a person approves (showing the profile).
    Ask,
    /// Never run it; the reason goes back to the model as `denied by policy: …`.
    Deny { reason: String },
}

impl Verdict {
    /// Allow < Ask < Deny.
    #[cfg_attr(not(feature = "engine"), allow(dead_code))]
    pub(crate) fn rank(&self) -> u8 {
        match self {
            Verdict::Allow => 0,
            Verdict::Ask => 1,
            Verdict::Deny { .. } => 2,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Ask => "ask",
            Verdict::Deny { .. } => "deny",
        }
    }

    pub fn is_deny(&self) -> bool {
        matches!(self, Verdict::Deny { .. })
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
