//! `docs/reference/configuration.md` is generated from the code, and fails here when stale.
//!
//! A hand-kept reference drifts: a setting is added, renamed or given a new default and the page
//! keeps the old one. So the page is derived from what only the code holds:
//! - names, types and meanings from the source of the config structs (`harvester/src`, parsed
//!   with `syn`), applying serde's `rename`, `rename_all`, `flatten`, `skip`, `transparent`,
//!   `try_from` and the `tag` of the tagged enums (`leader.kind`, `publish.mode`);
//! - defaults from serialising `Config::default()`, each tagged kind as `Config` reads it with
//!   only its tag (`{ kind = "etcd" }`), and each optional table as `Config` reads it given
//!   empty (`tls = {}`): the values the harvester really starts from, never prose.
//!
//! The checks that keep it honest: every field and kind has a doc comment (a new undocumented
//! setting cannot land); a default a doc comment states as a number or a duration is the code's;
//! every key the defaults serialise is on the page and every path on the page is accepted by
//! `--set` with its default (the `syn` reading agrees with serde's); every type used is
//! explained in the header; the page on disk is the generated one. Regenerate with
//! [`REGENERATE`].
//!
//! This file holds those checks on the real tree; the generator is in the modules below, one
//! role each: [`source`] reads the source and its attributes, [`types`] classifies a field's
//! type, [`walk`] turns `Config`'s fields into sections and entries with their defaults,
//! [`reference`] gathers the page's content, [`render`] writes the Markdown, and [`self_tests`]
//! show the generator failing and renaming on made-up sources.

mod reference;
mod render;
mod self_tests;
mod source;
mod types;
mod walk;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use harvester::Config;
use serde_json::{json, Value};

use reference::Reference;
use render::{env_name, render, TYPES};
use walk::{at, Shown};

/// The page, from the repository root.
const PAGE: &str = "docs/reference/configuration.md";

/// The command that rewrites the page.
const REGENERATE: &str = "HARVEST_BLESS=1 cargo test -p harvester --test it meta::config_reference";

/// The variable that makes [`the_reference_is_current`] write the page instead of failing.
const BLESS: &str = "HARVEST_BLESS";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the harvester crate sits in the repository")
        .to_path_buf()
}

// ------------------------------------------------------------------------------------------
// Checks of the generated reference against serde's own view.
// ------------------------------------------------------------------------------------------

/// Keys a serialised tree holds that no entry documents.
fn undocumented_keys(tree: &Value, prefix: &str, r: &Reference, out: &mut BTreeSet<String>) {
    let Some(map) = tree.as_object() else { return };
    let entries = r.entries();
    for (k, v) in map {
        let path = format!("{prefix}{k}");
        match entries.iter().find(|e| e.path == path) {
            Some(e) if e.table => undocumented_keys(v, &format!("{path}."), r, out),
            Some(_) => {}
            // A section (`limits`) or a tagged table (`leader`): its fields have entries.
            None if entries
                .iter()
                .any(|e| e.path.starts_with(&format!("{path}."))) =>
            {
                undocumented_keys(v, &format!("{path}."), r, out)
            }
            None => {
                out.insert(path);
            }
        }
    }
}

/// Every context the walk used whose defaults serde can read.
fn contexts(r: &Reference) -> Vec<Vec<(String, String)>> {
    let mut sets: Vec<Vec<(String, String)>> = r.entries().iter().map(|e| e.sets.clone()).collect();
    sets.sort();
    sets.dedup();
    sets
}

/// The override string that writes `v` (what `--set path=...` takes).
fn raw(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn every_setting_is_documented_and_understood() {
    let r = Reference::generate();
    assert!(
        r.problems.is_empty(),
        "the configuration reference cannot be generated:\n  {}",
        r.problems.join("\n  ")
    );
    let types: BTreeSet<&str> = r.entries().iter().map(|e| e.ty.as_str()).collect();
    for ty in types.iter().filter(|t| !t.starts_with("one of ")) {
        assert!(
            TYPES.iter().any(|(t, _)| t == ty),
            "the type {ty:?} is not explained in the page's header: add it to TYPES"
        );
    }
}

#[test]
fn every_serialised_key_is_on_the_page() {
    let r = Reference::generate();
    let mut missing = BTreeSet::new();
    for sets in contexts(&r) {
        let config = Config::default()
            .with_overrides(sets.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .expect("the kinds the page lists can be selected");
        let tree = serde_json::to_value(config).unwrap();
        undocumented_keys(&tree, "", &r, &mut missing);
    }
    assert!(
        missing.is_empty(),
        "keys the configuration serialises that the reference does not list: {missing:?}"
    );
}

#[test]
fn every_path_on_the_page_is_accepted_with_its_default() {
    let r = Reference::generate();
    let mut checked = 0;
    for e in r.entries() {
        let Shown::Value(v) = &e.default else {
            continue;
        };
        if v.is_object() {
            continue;
        }
        let mut sets = e.sets.clone();
        sets.push((e.path.clone(), raw(v)));
        let config = Config::default()
            .with_overrides(sets.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap_or_else(|err| panic!("--set {}={}: {err}", e.path, raw(v)));
        let tree = serde_json::to_value(config).unwrap();
        assert_eq!(at(&tree, &e.path), Some(v), "{}", e.path);
        checked += 1;
    }
    let entries = r.entries().len();
    assert!(
        checked * 2 > entries,
        "only {checked} of {entries} paths have a default to check: is the walk reading them?"
    );
}

#[test]
fn environment_names_set_their_paths() {
    for (path, raw, expect) in [
        ("limits.send_buffer", "20", json!(20)),
        ("kafka.\"bootstrap.servers\"", "b:9092", json!("b:9092")),
        (
            "database.url",
            "postgres://x@h/d",
            json!("postgres://x@h/d"),
        ),
    ] {
        let config = Config::default()
            .with_env([(env_name(path), raw.to_owned())])
            .unwrap();
        let tree = serde_json::to_value(config).unwrap();
        let key = path.replace('"', "");
        let (section, rest) = key.split_once('.').unwrap();
        assert_eq!(tree[section][rest], expect, "{}", env_name(path));
    }
}

#[test]
fn the_reference_is_current() {
    let r = Reference::generate();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let text = render(&r);
    let page = repository().join(PAGE);
    let on_disk = std::fs::read_to_string(&page).unwrap_or_default();
    if on_disk == text {
        return;
    }
    if std::env::var_os(BLESS).is_some_and(|v| v == "1") {
        std::fs::create_dir_all(page.parent().unwrap()).unwrap();
        std::fs::write(&page, &text).unwrap();
        println!("wrote {PAGE} ({} settings)", r.entries().len());
        return;
    }
    let first = on_disk
        .lines()
        .zip(text.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(on_disk.lines().count().min(text.lines().count()));
    panic!(
        "{PAGE} is stale (first difference at line {}); regenerate it with:\n  {REGENERATE}",
        first + 1
    );
}
