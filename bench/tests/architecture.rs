//! The bench's module structure: no two modules import each other, directly or around a
//! circle, so a run's phases, its result model and its rendering can each be read (and
//! changed) from the modules below them.
//!
//! Two levels are checked from the source text of `bench/src` (the binary under `src/bin`
//! excluded) by [`testkit::modgraph`]: the top-level modules (`run`, `result`, `report`, ...)
//! and the submodules within each folder (`run::faults`, `ground::postgres`, `report::scenarios`, ...).

use std::collections::BTreeSet;
use std::path::Path;

use testkit::modgraph::{circles, find_cycle, graphs};

#[test]
fn no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (top, folders) = graphs(&src).unwrap();
    assert!(
        top.len() >= 20,
        "the scan found the modules: {:?}",
        top.keys()
    );
    let circles = circles(&top, &folders);
    assert!(circles.is_empty(), "{circles:#?}");
    for folder in ["run", "ground", "report", "result"] {
        assert!(
            folders.contains_key(folder),
            "the scan found the folders: {:?}",
            folders.keys()
        );
    }
    // The error type and the result model sit below everything that fills or renders them.
    assert_eq!(top["error"], BTreeSet::new(), "error must stay a leaf");
    for above in ["run", "report", "cli", "plan", "tune", "capacity", "versus"] {
        assert!(
            !top["result"].contains(above),
            "result must not import {above}"
        );
    }
    println!("module graph: {top:#?}");
}

/// The checker itself finds circles (a test that cannot fail is a defect).
#[test]
fn the_checker_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("bench-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a/bin")).unwrap();
    let write = |path: &str, text: &str| std::fs::write(dir.join(path), text).unwrap();
    write("lib.rs", "mod a; mod b; mod c; pub use c::{C, D};");
    write("a/mod.rs", "mod x; mod y; use crate::b::Thing;");
    write("a/x.rs", "use super::y::Y; // crate::c in a comment");
    write("a/y.rs", "use crate::a::x::X;");
    write("a/bin/tool.rs", "use crate::c::Z;");
    write("b.rs", "use crate::{D, error::E};");
    write("c.rs", "fn f() { crate::a::go() }");
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
    assert!(
        !top["a"].contains("c"),
        "comments and binaries are not imports"
    );
}
