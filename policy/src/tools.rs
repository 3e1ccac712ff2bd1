//! Effects of the non-command tools, from the catalog ([`crate::catalog`]).

use crate::catalog::{is_network, is_web_research, Access, ToolSpec};
use crate::classify::{Effect, WriteKind};
use crate::facts::PathFacts;
use crate::paths::{self, Target};
use crate::request::ToolPaths;
use crate::shell::Arg;
use crate::types::Risk;

/// The effect of one tool call.
pub fn effect(s: ToolSpec, tp: &ToolPaths<'_>, facts: &dyn PathFacts) -> Effect {
    let name = s.tool.name();
    let mut e = Effect::new(s.category, s.risk, format!("{} ({})", name, s.category));
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
            e.edits = targets.clone();
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
    e.network = is_network(s.tool);
    e.web_research = is_web_research(s.tool);
    e.argv = std::iter::once(name.to_string())
        .chain(tp.targets.iter().map(|p| p.to_string_lossy().to_string()))
        .collect();
    e.text = e.argv.join(" ");
    if tp.recursive {
        e.text.push_str(" (recursive)");
    }
    e
}
