//! The commit a bench binary is built from, and whether the tree had uncommitted changes then,
//! read at build time: a binary copied aside (an A/B's old side) reports its own source, not
//! the checkout it happens to run in. Cargo reruns this when HEAD moves, the index changes or a
//! source file of the crates a run measures is touched.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let commit = git(dir, &["rev-parse", "--short", "HEAD"]).unwrap_or_default();
    // Dirty: a tracked file changed anywhere, or an untracked file where cargo would build it
    // (a new test, binary or build script is picked up by its path; `.cargo/` can change the
    // flags). Untracked files elsewhere do not count: the reports a run writes under
    // `results/` are untracked until committed.
    let changed = |args: &[&str]| git(dir, args).is_some_and(|s| !s.is_empty());
    let dirty = changed(&["status", "--porcelain", "--untracked-files=no"])
        || changed(&[
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--",
            ".",
            "../harvester",
            "../workloads",
            "../testkit",
            "../.cargo",
            "../Cargo.toml",
            "../Cargo.lock",
        ]);
    println!("cargo:rustc-env=BENCH_BUILD_COMMIT={commit}");
    println!("cargo:rustc-env=BENCH_BUILD_DIRTY={dirty}");
    // What moves the commit or the tree's state: HEAD, the branch it names, packed refs, the
    // index; and the sources of every crate a run builds on.
    let mut watched = vec!["HEAD".to_owned(), "index".into(), "packed-refs".into()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        // A missing path would rerun this (and rebuild the crate) on every build.
        let path = git(
            dir,
            &["rev-parse", "--path-format=absolute", "--git-path", &name],
        );
        if let Some(path) = path.filter(|p| Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    for source in [
        "src",
        "scenarios",
        "Cargo.toml",
        "../harvester",
        "../workloads",
        "../testkit",
        "../Cargo.toml",
        "../Cargo.lock",
        "../.cargo",
    ] {
        // A missing path would rerun this on every build.
        if dir.join(source).exists() {
            println!("cargo:rerun-if-changed={source}");
        }
    }
}
