//! A crate's module graph, read from its source text, for architecture tests that fail on
//! import circles.
//!
//! A module that imports one which imports it back (directly or around a circle) cannot be
//! understood, tested or replaced without the other; every crate of the workspace forbids that,
//! so the checker lives here once rather than copied into each crate's `tests/architecture.rs`.
//!
//! Two levels are read from a `src` folder (binaries under `bin/` excluded):
//! - the top-level modules: an edge `a -> b` for every `crate::b` path written in a file of `a`
//!   (a name the crate root re-exports counts as its module);
//! - the submodules within each folder: an edge for every `super::x` or `crate::<folder>::x`
//!   path naming a sibling. A folder's `mod.rs` (the parent that declares them) is not a
//!   sibling.
//!
//! Comments are not code: a doc link is not an import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::TestkitError;

/// Module name -> the modules it imports.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `dir`, recursively, except those under a `bin` folder.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), TestkitError> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                rust_files(&path, out)?;
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module path of a file below `src`, e.g. `["pipeline", "marker"]`; `mod.rs` is its
/// folder and `lib.rs` the crate root (an empty path).
pub fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
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
pub fn code(text: &str) -> String {
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
pub fn named_after(code: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // part of a longer path, e.g. `super::super::` or `x::crate::`
        }
        let rest = &code[i + prefix.len()..];
        match rest.strip_prefix('{') {
            Some(group) => names.extend(group_heads(group)),
            None => names.push(ident(rest)),
        }
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The names after every `<module>::` in `code`, however the path reaches it
/// (`crate::m::x`, `crate::{m::x, ...}`, `super::super::m::x`), braces after it expanded one
/// level: what a file names inside `module`.
pub fn named_inside(code: &str, module: &str) -> Vec<String> {
    let prefix = format!("{module}::");
    let mut names = Vec::new();
    for (i, _) in code.match_indices(&prefix) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // part of a longer name, e.g. `reelection::`
        }
        let rest = &code[i + prefix.len()..];
        match rest.strip_prefix('{') {
            Some(group) => names.extend(group_heads(group)),
            None => names.push(ident(rest)),
        }
    }
    names.retain(|n| !n.is_empty() && n != "self");
    names
}

/// The submodules of a folder: its files (but `mod.rs`) and its folders.
pub fn submodules(dir: &Path) -> Result<BTreeSet<String>, TestkitError> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() || (path.extension().is_some_and(|e| e == "rs") && name != "mod") {
            names.insert(name);
        }
    }
    Ok(names)
}

/// Every import circle of a crate's graphs (from [`graphs`]), one line each: at most one at the
/// top level and one per folder, so a failing test names them all at once.
pub fn circles(top: &Graph, folders: &BTreeMap<String, Graph>) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(cycle) = find_cycle(top) {
        found.push(format!("modules import each other: {}", cycle.join(" -> ")));
    }
    for (folder, graph) in folders {
        if let Some(cycle) = find_cycle(graph) {
            found.push(format!(
                "in {folder}, submodules import each other: {}",
                cycle.join(" -> ")
            ));
        }
    }
    found
}

/// The leading identifier of `s`.
fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The first segment of each top-level item of a `{...}` group (`group` starts after the `{`).
fn group_heads(group: &str) -> Vec<String> {
    let inner = &group[..group.find('}').unwrap_or(group.len())];
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (j, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                heads.push(ident(inner[start..j].trim()));
                start = j + 1;
            }
            _ => {}
        }
    }
    heads.push(ident(inner[start..].trim()));
    heads
}

/// A circle in `graph`, as the modules around it with the first repeated at the end
/// (`["a", "b", "a"]`), or `None` when there is none.
pub fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
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
pub fn root_reexports(src: &Path) -> BTreeMap<String, String> {
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

/// (top-level graph, sibling graph of each folder by its path such as `run::faults`) of `src`.
pub fn graphs(src: &Path) -> Result<(Graph, BTreeMap<String, Graph>), TestkitError> {
    let reexports = root_reexports(src);
    let mut files = Vec::new();
    rust_files(src, &mut files)?;
    let modules: Vec<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    let top: BTreeSet<String> = modules.iter().filter_map(|m| m.first().cloned()).collect();
    let mut top_graph = Graph::new();
    let mut folders: BTreeMap<String, Graph> = BTreeMap::new();
    for (file, module) in files.iter().zip(&modules) {
        let Some(own) = module.first() else { continue };
        let text = code(&std::fs::read_to_string(file)?);
        let node = top_graph.entry(own.clone()).or_default();
        for name in named_after(&text, "crate::") {
            let name = reexports.get(&name).cloned().unwrap_or(name);
            if top.contains(&name) && &name != own {
                node.insert(name);
            }
        }
        let is_folder_root = file.file_name().is_some_and(|n| n == "mod.rs");
        if module.len() >= 2 && !is_folder_root {
            add_sibling_edges(&text, module, &modules, &mut folders);
        }
    }
    Ok((top_graph, folders))
}

/// The edges from the submodule `module` (not a folder root) to its siblings: files of the
/// same folder, named through `super::` or `crate::<folder>::`.
fn add_sibling_edges(
    text: &str,
    module: &[String],
    modules: &[Vec<String>],
    folders: &mut BTreeMap<String, Graph>,
) {
    let (me, parent) = module.split_last().expect("a submodule has a parent");
    let folder = parent.join("::");
    let siblings: BTreeSet<&String> = modules
        .iter()
        .filter_map(|m| m.split_last())
        .filter(|(_, p)| *p == parent)
        .map(|(name, _)| name)
        .collect();
    let mut named = named_after(text, "super::");
    named.extend(named_after(text, &format!("crate::{folder}::")));
    let edges = folders
        .entry(folder)
        .or_default()
        .entry(me.clone())
        .or_default();
    for name in named {
        if siblings.contains(&name) && &name != me {
            edges.insert(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_expand_one_level_and_longer_paths_are_skipped() {
        let code = "use crate::{a::X, b, c::{D, E}}; use x::crate::z; crate::f::g();";
        assert_eq!(named_after(code, "crate::"), ["a", "b", "c", "f"]);
        // `super::super::q` names the grandparent's `q`, never a sibling `q`.
        assert_eq!(
            named_after("super::super::q; super::r", "super::"),
            ["super", "r"]
        );
    }

    #[test]
    fn comments_are_not_code() {
        assert_eq!(code("use a; // crate::b\n/// [`crate::c`]"), "use a; \n");
    }

    #[test]
    fn a_circle_is_found_and_a_tree_has_none() {
        let graph = |edges: &[(&str, &str)]| {
            let mut g = Graph::new();
            for (a, b) in edges {
                g.entry((*a).to_owned())
                    .or_default()
                    .insert((*b).to_owned());
                g.entry((*b).to_owned()).or_default();
            }
            g
        };
        assert_eq!(
            find_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])),
            None
        );
        assert_eq!(
            find_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])).unwrap(),
            ["a", "b", "c", "a"]
        );
    }

    #[test]
    fn mod_rs_and_lib_rs_name_their_folder() {
        let src = Path::new("/s");
        assert_eq!(module_of(src, Path::new("/s/a/mod.rs")), ["a"]);
        assert_eq!(module_of(src, Path::new("/s/a/b.rs")), ["a", "b"]);
        assert!(module_of(src, Path::new("/s/lib.rs")).is_empty());
    }
}
