//! The catalog of the non-command tools, keyed by tool name: what each one
//! does to its paths, its category and risk. The request supplies only
//! paths; what the tool does comes from here. Plain data without the shell
//! analysis, so the broker reads it without linking the parser.

use crate::types::{Category, Risk};
use sysward_ipc::tools::Tool;

/// How a tool uses its target paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No paths.
    None,
    /// Reads every target.
    Read,
    /// Writes every target by atomic rename (parent directory written).
    Write,
    /// Changes every target's current content (an edit, an append, a patch):
    /// written as [`Access::Write`], and the never-readable paths apply to it
    /// too, since its result shows what it read (the outside-project read flag
    /// does not: editing a file there is judged as writing it).
    ReadWrite,
    /// Reads targets[0], writes targets[1].
    Copy,
    /// Moves targets[0] to targets[1].
    Move,
    /// Deletes every target (`recursive` honoured).
    Delete,
    /// Changes attributes of every target (`recursive` honoured).
    Attr,
    /// Creates every target.
    Create,
}

/// One catalog entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSpec {
    pub tool: Tool,
    pub category: Category,
    pub risk: Risk,
    pub access: Access,
}

/// What each tool does, by an exhaustive match: a tool added to the shared
/// list ([`Tool`]) does not compile until it has its entry here. None for the
/// two tools that run commands (`exec`, `shell`), which are decided as the
/// commands they run.
pub fn catalog(tool: Tool) -> Option<ToolSpec> {
    use Access as A;
    use Category as C;
    use Risk as R;
    let (category, risk, access) = match tool {
        Tool::Exec | Tool::Shell => return None,
        Tool::ReadFile | Tool::ListDir | Tool::Stat | Tool::DiffFiles | Tool::TailFile => {
            (C::ReadOnly, R::Safe, A::Read)
        }
        // As `journalctl` without options that change the journal.
        Tool::ReadJournal => (C::ReadOnly, R::Safe, A::None),
        Tool::ApplyPatch => (C::Write, R::Low, A::ReadWrite),
        Tool::SystemInfo | Tool::FindProgram => (C::ReadOnly, R::Safe, A::None),
        Tool::AskSecret => (C::ReadOnly, R::Low, A::None),
        Tool::WriteFile => (C::Write, R::Low, A::Write),
        Tool::EditFile | Tool::AppendFile => (C::Write, R::Low, A::ReadWrite),
        Tool::CopyFile => (C::Write, R::Low, A::Copy),
        Tool::MoveFile => (C::Write, R::Low, A::Move),
        Tool::Mkdir => (C::Write, R::Low, A::Create),
        Tool::RemoveFile => (C::Delete, R::High, A::Delete),
        Tool::Chmod | Tool::Chown => (C::Admin, R::Medium, A::Attr),
        Tool::Remember | Tool::Forget => (C::Write, R::Low, A::None),
        // Run by the confined network executor: no file access, one
        // connection each, internal destinations only where the operator
        // listed them (NETWORK_ALLOW).
        Tool::ProbeTcp | Tool::ProbeDns | Tool::ProbeHttp => (C::Network, R::Low, A::None),
        Tool::WebFetch | Tool::WebSearch | Tool::CveLookup => (C::Network, R::Low, A::None),
        // Writes a project tool's script and manifest beneath
        // PROJECT/tools/NAME/: a write there, so ALLOW_SELF_TOOL_CREATION
        // and the path rules decide. Running the tool is decided apart, as
        // the command it is, once a person approved it.
        Tool::RegisterTool => (C::Write, R::Low, A::Write),
        // Gated by ALLOW_NETWORK and ALLOW_DOWNLOADS (the category), and its
        // one target judged exactly as write_file's.
        Tool::Download => (C::Download, R::Low, A::Write),
    };
    Some(ToolSpec {
        tool,
        category,
        risk,
        access,
    })
}

/// The tools that read the web for the model: ALLOW_WEB_RESEARCH gates them
/// as well as ALLOW_NETWORK. Read from the shared tool list's gates, so the
/// prompt's withholding and the policy's flag checks name the same tools.
#[cfg_attr(not(feature = "engine"), allow(dead_code))]
pub fn is_web_research(tool: Tool) -> bool {
    tool.gates().contains(&"ALLOW_WEB_RESEARCH")
}

/// The tools that reach the network (ALLOW_NETWORK gates them).
pub fn is_network(tool: Tool) -> bool {
    tool.gates().contains(&"ALLOW_NETWORK")
}

/// The names of the tools the catalog judges.
pub fn tool_names() -> Vec<&'static str> {
    Tool::ALL
        .iter()
        .filter_map(|t| catalog(*t))
        .map(|s| s.tool.name())
        .collect()
}

/// The catalog entry of the tool a request names.
#[cfg_attr(not(feature = "engine"), allow(dead_code))]
pub fn spec(name: &str) -> Option<ToolSpec> {
    catalog(Tool::from_name(name)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_and_research_tools_are_the_gated_ones() {
        let named = |f: fn(Tool) -> bool| -> Vec<&str> {
            Tool::ALL
                .iter()
                .filter(|t| f(**t))
                .map(|t| t.name())
                .collect()
        };
        assert_eq!(
            named(is_network),
            [
                "probe_tcp",
                "probe_dns",
                "probe_http",
                "web_fetch",
                "web_search",
                "cve_lookup",
                "download"
            ]
        );
        assert_eq!(
            named(is_web_research),
            ["web_fetch", "web_search", "cve_lookup"]
        );
    }

    /// A tool the agent leaves out of the prompt when a flag is off
    /// (`Tool::gates`) is one the policy denies in any form then: the
    /// network category needs ALLOW_NETWORK, and every network tool names it.
    #[test]
    fn the_gates_the_agent_withholds_by_are_the_catalogs() {
        for t in Tool::ALL {
            let network = catalog(*t)
                .is_some_and(|s| matches!(s.category, Category::Network | Category::Download));
            assert_eq!(
                network,
                t.gates().contains(&"ALLOW_NETWORK"),
                "{}",
                t.name()
            );
        }
    }
}
