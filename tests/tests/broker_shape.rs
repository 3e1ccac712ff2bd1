//! The root broker's shape, as a reviewer reads it: its modules form no
//! import cycle (each file can be read after the ones it uses). A module's
//! `#[cfg(test)]` part does not count.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module → the broker modules its non-test code names (`crate::x`).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../broker/src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("broker/src") {
        let path = entry.expect("entry").path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".rs"))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut uses = BTreeSet::new();
        for piece in code.split("crate::").skip(1) {
            let module: String = piece
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_' || c.is_ascii_digit())
                .collect();
            if !module.is_empty() && module != name {
                uses.insert(module);
            }
        }
        graph.insert(name.to_string(), uses);
    }
    graph
}

/// A cycle through `start`, if any (depth-first search over the graph).
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_string());
                return Some(cycle);
            }
            if graph.contains_key(next) && seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push((next.clone(), p));
            }
        }
    }
    None
}

#[test]
fn the_broker_modules_form_no_import_cycle() {
    let graph = module_graph();
    assert!(graph.len() > 20, "broker modules not found: {graph:?}");
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|m| cycle_from(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles in the broker: {cycles:#?}"
    );
}
