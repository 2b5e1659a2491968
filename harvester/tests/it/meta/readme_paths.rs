//! The README is how newcomers find their way in: every repository path it names in backticks
//! (a file or folder under one of the project's top-level folders) must exist, so a file moved
//! or deleted by an unrelated change fails here instead of leaving the README pointing at
//! nothing (the embedding example was once deleted that way and nothing noticed).

use std::path::{Path, PathBuf};

/// The top-level folders whose paths the README names; anything else in backticks (commands,
/// settings, module paths, URLs) is not a path of this repository.
const ROOTS: [&str; 9] = [
    "harvester/",
    "bench/",
    "testkit/",
    "hotpaths/",
    "scripts/",
    ".ci/",
    "dashboards/",
    "workloads/",
    "results/",
];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harvester crate sits in the repository")
        .to_path_buf()
}

/// The backticked spans of `text` that are repository paths: one of [`ROOTS`], then only the
/// characters a path here uses.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| ROOTS.iter().any(|r| span.starts_with(r)))
        .filter(|span| {
            span.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        })
        .collect()
}

#[test]
fn every_path_the_readme_names_exists() {
    let root = repository();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md is readable");
    let paths = named_paths(&readme);
    assert!(
        paths.len() >= 20,
        "the README names only {} repository paths: did the parser stop finding them?",
        paths.len()
    );
    let missing: Vec<&str> = paths
        .iter()
        .copied()
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "the README names paths that do not exist: {missing:?}"
    );
}

#[test]
fn the_parser_finds_paths_and_only_paths() {
    let text =
        "see `harvester/examples/embedded_service.rs`, run `scripts/test.sh --no-fail-fast` \
                or `cargo test`, set `limits.max_in_flight_records`, read `results/`";
    assert_eq!(
        named_paths(text),
        ["harvester/examples/embedded_service.rs", "results/"]
    );
}
