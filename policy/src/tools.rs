//! Effects of the non-command tools, from a catalog keyed by tool name. The
//! request supplies only paths; what the tool does comes from here.

use crate::classify::{Effect, WriteKind};
use crate::facts::PathFacts;
use crate::paths::{self, Target};
use crate::request::ToolPaths;
use crate::shell::Arg;
use crate::types::{Category, Risk};

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
    pub name: &'static str,
    pub category: Category,
    pub risk: Risk,
    pub access: Access,
    /// Needs ALLOW_WEB_RESEARCH as well as ALLOW_NETWORK.
    pub web: bool,
}

const fn t(name: &'static str, category: Category, risk: Risk, access: Access) -> ToolSpec {
    ToolSpec {
        name,
        category,
        risk,
        access,
        web: false,
    }
}

const fn w(name: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        category: Category::Network,
        risk: Risk::Low,
        access: Access::None,
        web: true,
    }
}

/// Every tool the broker knows, and its effect.
pub const TOOL_CATALOG: &[ToolSpec] = &[
    t("read_file", Category::ReadOnly, Risk::Safe, Access::Read),
    t("list_dir", Category::ReadOnly, Risk::Safe, Access::Read),
    t("stat", Category::ReadOnly, Risk::Safe, Access::Read),
    t("diff_files", Category::ReadOnly, Risk::Safe, Access::Read),
    t("system_info", Category::ReadOnly, Risk::Safe, Access::None),
    t("find_program", Category::ReadOnly, Risk::Safe, Access::None),
    t("ask_secret", Category::ReadOnly, Risk::Low, Access::None),
    t("write_file", Category::Write, Risk::Low, Access::Write),
    t("edit_file", Category::Write, Risk::Low, Access::ReadWrite),
    t("append_file", Category::Write, Risk::Low, Access::ReadWrite),
    t("apply_patch", Category::Write, Risk::Low, Access::ReadWrite),
    t("copy_file", Category::Write, Risk::Low, Access::Copy),
    t("move_file", Category::Write, Risk::Low, Access::Move),
    t("mkdir", Category::Write, Risk::Low, Access::Create),
    t("remove_file", Category::Delete, Risk::High, Access::Delete),
    t("chmod", Category::Admin, Risk::Medium, Access::Attr),
    t("chown", Category::Admin, Risk::Medium, Access::Attr),
    t("remember", Category::Write, Risk::Low, Access::None),
    t("forget", Category::Write, Risk::Low, Access::None),
    t("register_tool", Category::Write, Risk::Low, Access::None),
    w("web_search"),
    w("web_fetch"),
    w("cve_lookup"),
    ToolSpec {
        name: "download",
        category: Category::Download,
        risk: Risk::Medium,
        access: Access::Write,
        web: false,
    },
];

/// The names in the catalog.
pub fn tool_names() -> Vec<&'static str> {
    TOOL_CATALOG.iter().map(|s| s.name).collect()
}

pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    TOOL_CATALOG.iter().find(|s| s.name == name)
}

/// What a file tool's effect reads of its write targets: all of them for an
/// edit ([`Access::ReadWrite`]), none otherwise.
pub fn edited_targets(e: &Effect) -> Vec<&Target> {
    let edits = e.file_tool
        && e.argv
            .first()
            .and_then(|n| spec(n))
            .is_some_and(|s| s.access == Access::ReadWrite);
    if edits {
        e.writes.iter().map(|(t, _)| t).collect()
    } else {
        Vec::new()
    }
}

/// The effect of one tool call.
pub fn effect(name: &str, tp: &ToolPaths<'_>, facts: &dyn PathFacts) -> Option<Effect> {
    let s = spec(name)?;
    let mut e = Effect::new(s.category, s.risk, format!("{} ({})", name, s.category));
    if s.category == Category::Network || s.category == Category::Download {
        e.network = true;
    }
    let cwd = if tp.cwd.is_absolute() {
        Some(tp.cwd)
    } else {
        None
    };
    let targets: Vec<Target> = tp
        .targets
        .iter()
        .map(|p| {
            let a = Arg::lit(&p.to_string_lossy());
            paths::resolve(&a, cwd, facts)
        })
        .collect();
    let tree = |k| if tp.recursive { WriteKind::Tree } else { k };
    match s.access {
        Access::None => {}
        Access::Read => e.reads = targets.clone(),
        Access::Write => {
            for t in &targets {
                e.writes.push((t.clone(), WriteKind::Create));
            }
        }
        Access::ReadWrite => {
            for t in &targets {
                e.writes.push((t.clone(), WriteKind::Create));
            }
        }
        Access::Create => {
            for t in &targets {
                e.writes.push((t.clone(), WriteKind::Create));
            }
        }
        Access::Copy => {
            if let Some(src) = targets.first() {
                e.reads.push(src.clone());
            }
            for d in targets.iter().skip(1) {
                e.writes.push((d.clone(), tree(WriteKind::Create)));
            }
        }
        Access::Move => {
            if let Some(src) = targets.first() {
                e.writes.push((src.clone(), WriteKind::Move));
            }
            for d in targets.iter().skip(1) {
                e.writes.push((d.clone(), WriteKind::Create));
            }
        }
        Access::Delete => {
            e.recursive = tp.recursive;
            e.deletes = targets.clone();
        }
        Access::Attr => {
            e.recursive = tp.recursive;
            if tp.recursive {
                e.raise(Risk::High);
            }
            e.caps = vec!["CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE"];
            for t in &targets {
                e.writes.push((t.clone(), tree(WriteKind::File)));
            }
        }
    }
    if targets.is_empty() && !matches!(s.access, Access::None) {
        e.merge(Effect::evasive(format!("{name} without a target path")));
    }
    e.file_tool = true;
    e.argv = std::iter::once(name.to_string())
        .chain(tp.targets.iter().map(|p| p.to_string_lossy().to_string()))
        .collect();
    e.text = e.argv.join(" ");
    if tp.recursive {
        e.text.push_str(" (recursive)");
    }
    Some(e)
}
