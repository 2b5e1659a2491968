//! The reference: what the page is made of, gathered from the source in one pass — the walk's
//! sections, the forms of a secret and goharvest's keys for the header — with every problem
//! met on the way.

use std::path::Path;

use super::repository;
use super::source::{doc_of, renamed, serde_of, Def, Item, Source};
use super::types::{classify, Classified, Kind};
use super::walk::{entries, Entry, Section, Walk};

pub(super) struct Reference {
    pub(super) sections: Vec<Section>,
    pub(super) secret: Vec<(String, String)>,
    pub(super) goharvest_keys: Vec<String>,
    pub(super) problems: Vec<String>,
}

impl Reference {
    pub(super) fn generate() -> Reference {
        let src = Source::parse_dir(&repository().join("harvester/src"));
        Reference::from_source(&src, Path::new("config/mod.rs"))
    }

    /// From `src`, starting at `Config` in the file ending in `config_file`.
    pub(super) fn from_source(src: &Source, config_file: &Path) -> Reference {
        let mut walk = Walk {
            src,
            problems: Vec::new(),
        };
        let config = src.items["Config"]
            .iter()
            .find(|i| i.file.ends_with(config_file))
            .expect("Config is defined");
        let sections = walk.config(config);
        let secret = struct_docs(src, "Secret");
        let goharvest_keys = goharvest_keys(src, &mut walk.problems);
        Reference {
            sections,
            secret,
            goharvest_keys,
            problems: walk.problems,
        }
    }

    pub(super) fn entries(&self) -> Vec<&Entry> {
        self.sections
            .iter()
            .flat_map(|s| entries(&s.blocks))
            .collect()
    }
}

/// A struct's fields and their doc comments (the forms of a secret).
fn struct_docs(src: &Source, name: &str) -> Vec<(String, String)> {
    let Some(Item {
        def: Def::Struct(s),
        ..
    }) = src.items.get(name).and_then(|i| i.first())
    else {
        return Vec::new();
    };
    s.fields
        .iter()
        .map(|f| (f.ident.as_ref().unwrap().to_string(), doc_of(&f.attrs)))
        .collect()
}

/// The keys goharvest's reaper file may hold (`config/goharvest.rs`, camelCase by serde).
fn goharvest_keys(src: &Source, problems: &mut Vec<String>) -> Vec<String> {
    let Some(file) = src
        .items
        .get("GoharvestFile")
        .and_then(|items| items.first())
    else {
        problems.push("no `GoharvestFile`: goharvest's reader moved; teach the generator".into());
        return Vec::new();
    };
    let mut keys = Vec::new();
    goharvest_table(src, file, "", &mut keys, problems);
    keys
}

fn goharvest_table(
    src: &Source,
    item: &Item,
    prefix: &str,
    keys: &mut Vec<String>,
    problems: &mut Vec<String>,
) {
    let Def::Struct(s) = &item.def else { return };
    let rule = serde_of(&s.attrs).ok().and_then(|s| s.rename_all);
    for field in &s.fields {
        let serde = serde_of(&field.attrs).unwrap_or_default();
        let ident = field.ident.as_ref().unwrap().to_string();
        let name = serde
            .rename
            .unwrap_or_else(|| renamed(&ident, rule.as_deref(), false).unwrap_or(ident));
        let key = format!("{prefix}{name}");
        match classify(src, &field.ty, &item.file, serde.with.as_deref()) {
            Ok(Classified {
                kind: Kind::Table(inner),
                ..
            }) => goharvest_table(src, inner, &format!("{key}."), keys, problems),
            Ok(_) => keys.push(key),
            Err(e) => problems.push(format!("goharvest's `{key}`: {e}")),
        }
    }
}
