//! The root broker's shape, as a reviewer reads it: its modules form no
//! import cycle (each file can be read after the ones it uses), neither do
//! those of the crates it was split into (store, secrets, actions), and the
//! broker crate itself stays small enough to read in a day. A module's
//! `#[cfg(test)]` part does not count.
#![allow(clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The non-test code of a module: its file, or every file of its folder
/// (`session/`), each without its `#[cfg(test)]` part.
fn module_code(path: &Path) -> String {
    if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .expect("module folder")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        return files.iter().map(|f| module_code(f)).collect();
    }
    if path.extension().is_none_or(|x| x != "rs") {
        return String::new();
    }
    let text = std::fs::read_to_string(path).expect("source");
    text.split("#[cfg(test)]").next().unwrap_or("").to_string()
}

/// The `src` folder of a workspace crate, by its folder name.
fn crate_src(folder: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(folder)
        .join("src")
}

/// Module → the modules of the same crate its non-test code names
/// (`crate::x`).
fn module_graph_of(folder: &str) -> BTreeMap<String, BTreeSet<String>> {
    let dir = crate_src(folder);
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("crate src folder") {
        let path = entry.expect("entry").path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| {
            if path.is_dir() {
                Some(n)
            } else {
                n.strip_suffix(".rs")
            }
        }) else {
            continue;
        };
        let code = module_code(&path);
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

/// Module → the broker modules its non-test code names (`crate::x`).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    module_graph_of("broker")
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
    // Fewer files since on-disk state, secrets and action running left for
    // crates of their own; the bound only proves the folder was read.
    assert!(graph.len() > 15, "broker modules not found: {graph:?}");
    // A module that is a folder is read whole.
    assert!(
        graph.get("session").is_some_and(|u| u.contains("audit")),
        "the session/ folder was not read: {graph:?}"
    );
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

/// The crates split out of the broker keep the same rule: no module of
/// theirs imports one that imports it back.
#[test]
fn the_crates_split_from_the_broker_form_no_import_cycle() {
    for folder in ["store", "secrets", "actions"] {
        let graph = module_graph_of(folder);
        assert!(graph.len() > 2, "{folder}/src modules not found: {graph:?}");
        let cycles: Vec<String> = graph
            .keys()
            .filter_map(|m| cycle_from(&graph, m))
            .map(|c| c.join(" -> "))
            .collect();
        assert!(
            cycles.is_empty(),
            "import cycles in {folder}/src: {cycles:#?}"
        );
    }
}

/// Non-blank lines of a module's code before its `#[cfg(test)]` part.
fn non_test_lines(path: &Path) -> usize {
    module_code(path)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
}

/// The broker crate is at most 8,000 lines of non-test code: the part a
/// reviewer must read first, with on-disk state, secrets and action running
/// in crates of their own.
#[test]
fn the_broker_crate_is_at_most_8000_lines_of_non_test_code() {
    let dir = crate_src("broker");
    let total: usize = std::fs::read_dir(&dir)
        .expect("broker/src")
        .map(|e| non_test_lines(&e.expect("entry").path()))
        .sum();
    assert!(total > 1000, "broker/src was not read: {total} lines");
    assert!(
        total <= 8000,
        "broker/src has {total} non-blank lines of non-test code; at most 8,000"
    );
}
