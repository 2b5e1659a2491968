//! The library's module structure: no two modules import each other, directly or around a
//! circle, so every module can be understood (and replaced) from the ones below it.
//!
//! Two levels are checked, from the source text of `harvester/src` (binaries excluded):
//! - the top-level modules (`config`, `election`, `store`, `pipeline`, ...): an edge `a -> b`
//!   for every `crate::b` path written in a file of `a`;
//! - the submodules within each folder (`pipeline::marker`, `pipeline::shard`, ...): an edge for
//!   every `super::x` or `crate::<folder>::x` path naming a sibling. A folder's `mod.rs` (the
//!   parent that declares them) is not a sibling.
//!
//! And the two wings stay apart: the bucket assignors (`assign`) use the election port (the
//! items of `election/mod.rs`, and `election::mock` in tests) but no elector's internals
//! (`election::etcd`, `election::neli`, ...); what both need lives below them in
//! `coordination`, which imports neither wing nor the core.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file, e.g. `["pipeline", "marker"]`; `mod.rs` is its folder.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments (doc links are not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first path segments after each `prefix` (`crate::`, `super::`), braces expanded one level:
/// `crate::{a::X, b}` names `a` and `b`.
fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // part of a longer path, e.g. `super::super::` or `x::crate::`
        }
        names.extend(segments(&code[i + prefix.len()..]));
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The first segment of the path `rest` starts with, or of each path in its leading group.
fn segments(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let inner = &group[..group.find('}').unwrap_or(group.len())];
    let mut names = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (j, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(ident(inner[start..j].trim()));
                start = j + 1;
            }
            _ => {}
        }
    }
    names.push(ident(inner[start..].trim()));
    names
}

/// The modules below both wings must not import: the wings and the core.
const ABOVE_COORDINATION: [&str; 7] = [
    "election",
    "assign",
    "pipeline",
    "harvester",
    "config",
    "metrics",
    "http",
];

/// The submodules of a folder: its files (but `mod.rs`) and its folders.
fn submodules(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() || (path.extension().is_some_and(|e| e == "rs") && name != "mod") {
            names.insert(name);
        }
    }
    names
}

/// The names after every `election::` in `code`, however it is reached (`crate::election::x`,
/// `crate::{election::x, ...}`, `super::super::election::x`), braces expanded one level.
fn election_paths(code: &str) -> Vec<String> {
    let prefix = "election::";
    let mut names = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // part of a longer name, e.g. `reelection::`
        }
        names.extend(segments(&code[i + prefix.len()..]));
    }
    names
}

/// Every `election::<submodule>` that a file under `src/assign` names, other than `mock`: the
/// assignors may use the election port, not an elector's internals.
fn assign_reaching_into_electors(src: &Path) -> Vec<String> {
    let electors: BTreeSet<String> = submodules(&src.join("election"))
        .into_iter()
        .filter(|m| m != "mock")
        .collect();
    let mut files = Vec::new();
    rust_files(&src.join("assign"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let named: BTreeSet<String> = election_paths(&text).into_iter().collect();
        for name in named.intersection(&electors) {
            let rel = file.strip_prefix(src).unwrap().display();
            found.push(format!("{rel}: election::{name}"));
        }
    }
    found
}

/// What the shared module imports that is above it.
fn coordination_reaching_up(top: &Graph) -> BTreeSet<String> {
    let above = BTreeSet::from(ABOVE_COORDINATION.map(str::to_owned));
    top.get("coordination")
        .map(|imports| imports.intersection(&above).cloned().collect())
        .unwrap_or_default()
}

fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

/// Names the crate root re-exports (`pub use harvester::{Harvester, ...}`), by the module they
/// come from: `crate::Harvester` is an import of `harvester`.
fn root_reexports(src: &Path) -> BTreeMap<String, String> {
    let lib = code(&std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default());
    let mut names = BTreeMap::new();
    for statement in lib.split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let name = item.rsplit("::").next().unwrap_or("").trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.trim().to_owned());
            }
        }
    }
    names
}

/// (top-level graph, per-folder sibling graphs) of `src`.
fn graphs(src: &Path) -> (Graph, BTreeMap<String, Graph>) {
    let reexports = root_reexports(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let top: BTreeSet<String> = modules.iter().filter_map(|m| m.first().cloned()).collect();
    let mut top_graph = Graph::new();
    let mut folders: BTreeMap<String, Graph> = BTreeMap::new();
    for (file, module) in files.iter().zip(&modules) {
        let Some(own) = module.first() else { continue };
        let text = code(&std::fs::read_to_string(file).unwrap());
        let node = top_graph.entry(own.clone()).or_default();
        for name in named_after(&text, "crate::") {
            let name = reexports.get(&name).cloned().unwrap_or(name);
            if top.contains(&name) && &name != own {
                node.insert(name);
            }
        }
        // Siblings: files of the same folder, named through `super::` or `crate::<folder>::`.
        let is_folder_root = file.file_name().is_some_and(|n| n == "mod.rs");
        if module.len() < 2 || is_folder_root {
            continue;
        }
        let folder = module[..module.len() - 1].join("::");
        let me = module.last().unwrap().clone();
        let siblings: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == module.len() && m[..m.len() - 1] == module[..module.len() - 1])
            .map(|m| m.last().unwrap().clone())
            .collect();
        let mut named = named_after(&text, "super::");
        named.extend(named_after(&text, &format!("crate::{folder}::")));
        let graph = folders.entry(folder).or_default();
        let edges = graph.entry(me.clone()).or_default();
        for name in named {
            if siblings.contains(&name) && name != me {
                edges.insert(name);
            }
        }
    }
    (top_graph, folders)
}

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, folders) = graphs(&src);
    assert!(
        top.len() >= 10,
        "the scan found the modules: {:?}",
        top.keys()
    );
    if let Some(cycle) = find_cycle(&top) {
        panic!("modules import each other: {}", cycle.join(" -> "));
    }
    for (folder, graph) in &folders {
        if let Some(cycle) = find_cycle(graph) {
            panic!(
                "in {folder}, submodules import each other: {}",
                cycle.join(" -> ")
            );
        }
    }
    // The leaves import nothing of the crate; kafka only the leaves (the error type, secrets
    // and the PEM check).
    for leaf in ["error", "hash", "secret", "pem"] {
        assert_eq!(top[leaf], BTreeSet::new(), "{leaf} must stay a leaf");
    }
    let leaves = BTreeSet::from(["error", "secret", "pem"].map(str::to_owned));
    assert!(top["kafka"].is_subset(&leaves), "kafka must stay a leaf");
    // The ports do not know the core or each other's implementations.
    for port in ["election", "store"] {
        for core in ["pipeline", "harvester", "config", "metrics", "http"] {
            assert!(!top[port].contains(core), "{port} must not import {core}");
        }
    }
    // The wings meet only through the election port and the shared module below them.
    assert!(
        top.contains_key("coordination"),
        "the shared module is scanned"
    );
    let sideways = assign_reaching_into_electors(&src);
    assert!(
        sideways.is_empty(),
        "assign names electors' internals (move what both need to coordination): {sideways:#?}"
    );
    let up = coordination_reaching_up(&top);
    assert!(
        up.is_empty(),
        "coordination must stay below the wings and the core, but imports {up:?}"
    );
    println!("module graph: {top:#?}");
}

/// The checker itself finds circles (a test that cannot fail is a defect).
#[test]
fn the_checker_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(
        dir.join("lib.rs"),
        "mod a; mod b; mod c; pub use c::{C, D};",
    )
    .unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x; mod y; use crate::b::Thing;").unwrap();
    std::fs::write(
        dir.join("a/x.rs"),
        "use super::y::Y; // crate::c in a comment",
    )
    .unwrap();
    std::fs::write(dir.join("a/y.rs"), "use crate::a::x::X;").unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::{D, error::E};").unwrap();
    std::fs::write(dir.join("c.rs"), "fn f() { crate::a::go() }").unwrap();
    let (top, folders) = graphs(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        find_cycle(&top).unwrap(),
        ["a", "b", "c", "a"].map(String::from)
    );
    assert_eq!(
        find_cycle(&folders["a"]).unwrap(),
        ["x", "y", "x"].map(String::from)
    );
    assert!(!top["a"].contains("c"), "comments are not imports");
}

/// The wing checks fire on a tree that breaks them (a test that cannot fail is a defect).
#[test]
fn the_checker_sees_a_wing_reaching_sideways() {
    let dir = std::env::temp_dir().join(format!("arch-wings-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for folder in ["assign/rink", "election/etcd", "coordination"] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
    }
    let files = [
        (
            "lib.rs",
            "mod assign; mod coordination; mod election; mod hash;",
        ),
        (
            "election/mod.rs",
            "pub mod etcd; pub mod mock; mod naming; pub struct Ack;",
        ),
        ("election/etcd/mod.rs", ""),
        ("election/mock.rs", ""),
        ("election/naming.rs", ""),
        (
            "assign/mod.rs",
            "use crate::election::{Ack, mock::M}; // crate::election::naming in a comment",
        ),
        (
            "assign/rink/x.rs",
            "use crate::election::etcd::keeper::K;\nuse crate::{election::naming::n, hash};",
        ),
        ("coordination/mod.rs", "use crate::{hash, election::Term};"),
        ("hash.rs", ""),
    ];
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    let (top, _) = graphs(&dir);
    let sideways = assign_reaching_into_electors(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        sideways,
        [
            "assign/rink/x.rs: election::etcd",
            "assign/rink/x.rs: election::naming"
        ],
        "an elector's internals are found, the port, mock and comments are not"
    );
    assert_eq!(
        coordination_reaching_up(&top),
        BTreeSet::from(["election".to_owned()])
    );
}
