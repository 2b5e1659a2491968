//! The library's module structure: no two modules import each other, directly or around a
//! circle, so every module can be understood (and replaced) from the ones below it.
//!
//! Two levels are checked by `testkit::modgraph`, from the source text of `harvester/src`
//! (binaries excluded):
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

use std::collections::BTreeSet;
use std::path::Path;

use testkit::modgraph::{
    circles, code, find_cycle, graphs, named_inside, rust_files, submodules, Graph,
};

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

/// Every `election::<submodule>` that a file under `src/assign` names, other than `mock`: the
/// assignors may use the election port, not an elector's internals.
fn assign_reaching_into_electors(src: &Path) -> Vec<String> {
    let electors: BTreeSet<String> = submodules(&src.join("election"))
        .unwrap()
        .into_iter()
        .filter(|m| m != "mock")
        .collect();
    let mut files = Vec::new();
    rust_files(&src.join("assign"), &mut files).unwrap();
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let named: BTreeSet<String> = named_inside(&text, "election").into_iter().collect();
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

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, folders) = graphs(&src).unwrap();
    assert!(
        top.len() >= 10,
        "the scan found the modules: {:?}",
        top.keys()
    );
    let circles = circles(&top, &folders);
    assert!(circles.is_empty(), "{circles:#?}");
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
    // A term is built and run by the pipeline; the harvester above it only starts and ends terms.
    assert!(
        !top["pipeline"].contains("harvester"),
        "pipeline must not import harvester"
    );
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
    let (top, folders) = graphs(&dir).unwrap();
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
    assert_eq!(circles(&top, &folders).len(), 2, "one at the top, one in a");
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
    let (top, _) = graphs(&dir).unwrap();
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
