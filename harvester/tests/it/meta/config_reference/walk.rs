//! The walk: `Config`'s fields, in order, into the page's sections and entries, each with the
//! default `Config` really starts from at that path.
//!
//! Defaults come from serde, not prose: the defaults serialised, read back with a [`Context`]
//! (a kind's tag, an optional table given empty) written in. Whatever the walk cannot understand
//! or finds undocumented is collected as a problem rather than left off the page.

use std::path::Path;

use harvester::Config;
use serde_json::{json, Value};

use super::render::toml_inline;
use super::source::{doc_of, renamed, serde_of, Def, Item, Source};
use super::types::{classify, Classified, Kind};

/// What must be written for a path to exist: a kind's tag (`leader = { kind = "etcd" }`), an
/// optional table given empty (`leader.tls = {}`); as overlays on the defaults and as the
/// `--set` overrides that select the same kinds.
#[derive(Clone, Default)]
struct Context {
    overlays: Vec<(String, Value)>,
    sets: Vec<(String, String)>,
}

/// `Config` as it reads the defaults with `overlays` written in, serialised again.
fn defaults(overlays: &[(String, Value)]) -> Result<Value, String> {
    let mut tree = serde_json::to_value(Config::default()).map_err(|e| e.to_string())?;
    for (path, v) in overlays {
        let mut node = &mut tree;
        let parts: Vec<&str> = path.split('.').collect();
        for part in &parts[..parts.len() - 1] {
            node = &mut node[*part];
        }
        node[parts[parts.len() - 1]] = v.clone();
    }
    let config: Config = serde_json::from_value(tree).map_err(|e| e.to_string())?;
    serde_json::to_value(config).map_err(|e| e.to_string())
}

pub(super) fn at<'v>(tree: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(tree, |node, part| node.get(part))
        .filter(|v| !v.is_null())
}

/// A default as the page shows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Shown {
    Value(Value),
    /// Not set: the meaning says what the harvester does then.
    Unset,
    /// Must be written whenever its table is.
    Required,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub(super) path: String,
    pub(super) ty: String,
    pub(super) default: Shown,
    pub(super) doc: String,
    /// The overrides that select this entry's kinds (for the `--set` check).
    pub(super) sets: Vec<(String, String)>,
    /// A table of fields (listed after it), not one value.
    pub(super) table: bool,
}

#[derive(Debug)]
pub(super) enum Block {
    Entry(Entry),
    Section(Section),
}

#[derive(Debug)]
pub(super) struct Section {
    pub(super) title: String,
    pub(super) intro: String,
    pub(super) blocks: Vec<Block>,
}

pub(super) struct Walk<'a> {
    pub(super) src: &'a Source,
    pub(super) problems: Vec<String>,
}

impl<'a> Walk<'a> {
    /// One section per field of `Config`.
    pub(super) fn config(&mut self, config: &'a Item) -> Vec<Section> {
        let Def::Struct(s) = &config.def else {
            panic!("Config is a struct");
        };
        let mut sections = Vec::new();
        for field in &s.fields {
            let Some(name) = self.field_name(field, None) else {
                continue;
            };
            let ctx = Context::default();
            let mut intro = doc_of(&field.attrs);
            // A top-level table is its section: its fields are the entries. A value (the Kafka
            // maps) is the section's one entry, which carries the doc comment.
            let blocks = match classify(self.src, &field.ty, &config.file, None) {
                Ok(Classified {
                    kind: Kind::Table(item),
                    ..
                }) => self.table(item, &format!("{name}."), &ctx),
                Ok(Classified {
                    kind: Kind::Value { .. },
                    ..
                }) => {
                    intro.clear();
                    self.field(field, &config.file, &name, &ctx)
                }
                _ => self.field(field, &config.file, &name, &ctx),
            };
            sections.push(Section {
                title: format!("`[{name}]`"),
                intro,
                blocks,
            });
        }
        sections
    }

    /// The field's name in a file, or none when serde skips it.
    fn field_name(&mut self, field: &syn::Field, rule: Option<&str>) -> Option<String> {
        let serde = self.ok(serde_of(&field.attrs))?;
        if serde.skip {
            return None;
        }
        let ident = field.ident.as_ref()?.to_string();
        match serde.rename {
            Some(r) => Some(r),
            None => self.ok(renamed(&ident, rule, false)),
        }
    }

    fn ok<T>(&mut self, r: Result<T, String>) -> Option<T> {
        r.map_err(|e| self.problems.push(e)).ok()
    }

    /// The fields of the struct `item` under `prefix` (`leader.`), flattened ones inline.
    fn table(&mut self, item: &'a Item, prefix: &str, ctx: &Context) -> Vec<Block> {
        let Def::Struct(s) = &item.def else {
            unreachable!("tables are structs")
        };
        let rule = self.ok(serde_of(&s.attrs)).and_then(|s| s.rename_all);
        let mut blocks = Vec::new();
        for field in &s.fields {
            let Some(serde) = self.ok(serde_of(&field.attrs)) else {
                continue;
            };
            if serde.flatten {
                match self.ok(classify(self.src, &field.ty, &item.file, None)) {
                    Some(Classified {
                        kind: Kind::Table(inner),
                        ..
                    }) => blocks.extend(self.table(inner, prefix, ctx)),
                    _ => self
                        .problems
                        .push(format!("{prefix}: a flattened field that is not a table")),
                }
                continue;
            }
            if let Some(name) = self.field_name(field, rule.as_deref()) {
                let path = format!("{prefix}{name}");
                blocks.extend(self.field(field, &item.file, &path, ctx));
            }
        }
        blocks
    }

    /// One field at `path`: an entry, plus its table's fields or its kinds' sections.
    fn field(&mut self, field: &syn::Field, file: &Path, path: &str, ctx: &Context) -> Vec<Block> {
        let doc = doc_of(&field.attrs);
        if doc.is_empty() {
            self.problems.push(format!(
                "`{path}` ({}) has no doc comment: say what it does and its default",
                file.display()
            ));
        }
        let Some(serde) = self.ok(serde_of(&field.attrs)) else {
            return Vec::new();
        };
        let Some(c) = self.ok(classify(self.src, &field.ty, file, serde.with.as_deref())) else {
            self.problems
                .push(format!("`{path}`: the type above is not understood"));
            return Vec::new();
        };
        let default = self.default(ctx, path, c.optional || serde.default);
        let entry = |ty: String, doc: String, table: bool, default: Shown| {
            Block::Entry(Entry {
                path: path.to_owned(),
                ty,
                default,
                doc,
                sets: ctx.sets.clone(),
                table,
            })
        };
        match c.kind {
            Kind::Value { ty, extra } => {
                if let Some(p) = prose_disagrees(&doc, &default) {
                    self.problems.push(format!("`{path}`: {p}"));
                }
                let doc = [doc, extra].join(" ").trim().to_owned();
                vec![entry(ty, doc, false, default)]
            }
            Kind::Table(item) => {
                let mut inner = ctx.clone();
                if default == Shown::Unset {
                    inner.overlays.push((path.to_owned(), json!({})));
                }
                let mut blocks = vec![entry("table".into(), doc, true, default)];
                blocks.extend(self.table(item, &format!("{path}."), &inner));
                blocks
            }
            Kind::Tagged(item) => self.tagged(item, path, ctx),
        }
    }

    /// The default at `path`; when the context cannot be read without more fields, the field is
    /// unset if it may be left out and required if not.
    fn default(&mut self, ctx: &Context, path: &str, may_be_left_out: bool) -> Shown {
        match defaults(&ctx.overlays) {
            Ok(tree) => at(&tree, path).map_or(Shown::Unset, |v| Shown::Value(v.clone())),
            Err(_) if may_be_left_out => Shown::Unset,
            Err(_) => Shown::Required,
        }
    }

    /// A tagged enum at `path`: its tag as an entry, then a section per kind.
    fn tagged(&mut self, item: &'a Item, path: &str, ctx: &Context) -> Vec<Block> {
        let Def::Enum(e) = &item.def else {
            unreachable!("tagged tables are enums")
        };
        let Some(serde) = self.ok(serde_of(&e.attrs)) else {
            return Vec::new();
        };
        let tag = serde.tag.clone().expect("a tagged enum");
        let mut names = Vec::new();
        let mut sections = Vec::new();
        for v in &e.variants {
            let name = match self.ok(serde_of(&v.attrs)).and_then(|s| s.rename) {
                Some(r) => r,
                None => self
                    .ok(renamed(
                        &v.ident.to_string(),
                        serde.rename_all.as_deref(),
                        true,
                    ))
                    .unwrap_or_default(),
            };
            names.push(format!("`\"{name}\"`"));
            sections.push(Block::Section(self.kind(item, v, path, &tag, &name, ctx)));
        }
        let tag_path = format!("{path}.{tag}");
        let mut blocks = vec![Block::Entry(Entry {
            default: self.default(ctx, &tag_path, true),
            path: tag_path,
            ty: format!("one of {}", names.join(", ")),
            doc: doc_of(&e.attrs),
            sets: ctx.sets.clone(),
            table: false,
        })];
        blocks.extend(sections);
        blocks
    }

    /// The section of one kind: `path.tag = "name"` and its fields.
    fn kind(
        &mut self,
        item: &'a Item,
        v: &syn::Variant,
        path: &str,
        tag: &str,
        name: &str,
        ctx: &Context,
    ) -> Section {
        let intro = doc_of(&v.attrs);
        if intro.is_empty() {
            self.problems.push(format!(
                "the kind `{path}.{tag} = \"{name}\"` has no doc comment"
            ));
        }
        let mut inner = ctx.clone();
        inner.overlays.push((path.to_owned(), json!({ tag: name })));
        inner.sets.push((format!("{path}.{tag}"), name.to_owned()));
        let blocks = match &v.fields {
            syn::Fields::Unit => Vec::new(),
            syn::Fields::Unnamed(f) if f.unnamed.len() == 1 => {
                match self.ok(classify(self.src, &f.unnamed[0].ty, &item.file, None)) {
                    Some(Classified {
                        kind: Kind::Table(t),
                        ..
                    }) => self.table(t, &format!("{path}."), &inner),
                    _ => {
                        self.problems
                            .push(format!("the kind `{name}` of `{path}` holds no table"));
                        Vec::new()
                    }
                }
            }
            _ => {
                self.problems.push(format!(
                    "the kind `{name}` of `{path}`: use a newtype variant"
                ));
                Vec::new()
            }
        };
        Section {
            title: format!("`{path}.{tag} = \"{name}\"`"),
            intro,
            blocks,
        }
    }
}

/// Where a doc comment states a default (`Default 5s`, `default 64`) that is a number or a
/// duration, it must be the one the code has; what else it says is not checked.
pub(super) fn prose_disagrees(doc: &str, default: &Shown) -> Option<String> {
    let Shown::Value(actual) = default else {
        return None;
    };
    let lower = doc.to_lowercase();
    for (at, _) in lower.match_indices("default") {
        let rest = &doc[at + "default".len()..];
        if !rest.starts_with([' ', ':']) {
            continue;
        }
        let token: String = rest
            .trim_start_matches(':')
            .trim_start()
            .chars()
            .take_while(|c| !c.is_whitespace() && !";,)".contains(*c))
            .collect();
        let token = token.trim_end_matches(['.', ':']).trim_matches(['`', '"']);
        let stated = if let Ok(n) = token.parse::<u64>() {
            json!(n)
        } else if token.starts_with(|c: char| c.is_ascii_digit()) {
            match humantime_serde::re::humantime::parse_duration(token) {
                Ok(d) => json!(humantime_serde::re::humantime::format_duration(d).to_string()),
                Err(_) => continue,
            }
        } else {
            continue;
        };
        if &stated != actual {
            return Some(format!(
                "the doc comment says the default is {token}, the code has {}",
                toml_inline(actual)
            ));
        }
    }
    None
}

pub(super) fn entries(blocks: &[Block]) -> Vec<&Entry> {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Entry(e) => out.push(e),
            Block::Section(s) => out.extend(entries(&s.blocks)),
        }
    }
    out
}
