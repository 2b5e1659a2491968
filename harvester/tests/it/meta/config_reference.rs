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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use harvester::Config;
use serde_json::{json, Value};

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
// The source: every struct, enum and type alias of `harvester/src`, by name.
// ------------------------------------------------------------------------------------------

#[derive(Clone)]
enum Def {
    Struct(syn::ItemStruct),
    Enum(syn::ItemEnum),
    Alias(syn::Type),
}

#[derive(Clone)]
struct Item {
    file: PathBuf,
    def: Def,
}

#[derive(Default)]
struct Source {
    items: BTreeMap<String, Vec<Item>>,
}

impl Source {
    /// Every `.rs` file under `dir` except the binaries'.
    fn parse_dir(dir: &Path) -> Source {
        let mut source = Source::default();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).expect("the source folder is readable") {
                let path = entry.expect("a folder entry").path();
                if path.is_dir() && path.file_name().is_some_and(|n| n != "bin") {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).expect("a source file is readable");
                    source.add(&path, &text);
                }
            }
        }
        source
    }

    /// The file's top-level items (inline modules, tests among them, are not configuration).
    fn add(&mut self, file: &Path, text: &str) {
        let parsed = syn::parse_file(text)
            .unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
        for item in parsed.items {
            let (name, def) = match item {
                syn::Item::Struct(s) => (s.ident.to_string(), Def::Struct(s)),
                syn::Item::Enum(e) => (e.ident.to_string(), Def::Enum(e)),
                syn::Item::Type(t) => (t.ident.to_string(), Def::Alias(*t.ty)),
                _ => continue,
            };
            let file = file.to_path_buf();
            self.items.entry(name).or_default().push(Item { file, def });
        }
    }

    /// The item `name` as `from` (a file) sees it: the only one of that name, or the one in
    /// `from` itself.
    fn find(&self, name: &str, from: &Path) -> Result<&Item, String> {
        let candidates = self.items.get(name).map(Vec::as_slice).unwrap_or_default();
        match candidates {
            [] => Err(format!("no struct, enum or type `{name}` in the source")),
            [one] => Ok(one),
            many => many.iter().find(|i| i.file == from).ok_or_else(|| {
                format!(
                    "`{name}` (used in {}) is defined in several files: teach the generator which",
                    from.display()
                )
            }),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Attributes: doc comments and what serde makes of an item or field.
// ------------------------------------------------------------------------------------------

/// The doc comment as Markdown: paragraphs kept, lines joined, intra-doc links as code.
fn doc_of(attrs: &[syn::Attribute]) -> String {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
            {
                lines.push(s.value().trim().to_owned());
            }
        }
    }
    let paragraphs: Vec<String> = lines
        .split(|l| l.is_empty())
        .filter(|p| !p.is_empty())
        .map(|p| p.join(" "))
        .collect();
    unlink(&paragraphs.join("\n\n"))
}

/// `[`X`]` and `[`X`](target)` become `` `X` ``, and `crate::`/`super::` paths lose that prefix.
fn unlink(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let Some(len) = rest[start..].find("`]") else {
            break;
        };
        out.push_str(&rest[..start]);
        let code = &rest[start + 2..start + len];
        let code = code
            .trim_start_matches("crate::")
            .trim_start_matches("super::");
        out.push('`');
        out.push_str(code);
        out.push('`');
        rest = &rest[start + len + 2..];
        if rest.starts_with('(') {
            if let Some(close) = rest.find(')') {
                rest = &rest[close + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the generator needs of `#[serde(...)]`.
#[derive(Default, Debug)]
struct Serde {
    rename: Option<String>,
    rename_all: Option<String>,
    tag: Option<String>,
    with: Option<String>,
    flatten: bool,
    skip: bool,
    default: bool,
    transparent: bool,
    /// `try_from`/`from = "String"`: written as a string.
    string_form: bool,
}

fn serde_of(attrs: &[syn::Attribute]) -> Result<Serde, String> {
    let mut s = Serde::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        attr.parse_nested_meta(|meta| {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            if meta.input.peek(syn::Token![=]) {
                let value = meta.value()?.parse::<syn::LitStr>()?.value();
                match key.as_str() {
                    "rename" => s.rename = Some(value),
                    "rename_all" => s.rename_all = Some(value),
                    "tag" => s.tag = Some(value),
                    "with" => s.with = Some(value),
                    "default" => s.default = true,
                    "try_from" | "from" => s.string_form = value == "String",
                    _ => {}
                }
            } else if meta.input.peek(syn::token::Paren) {
                // `rename(deserialize = "...")`: what a file must say.
                meta.parse_nested_meta(|inner| {
                    let value = inner.value()?.parse::<syn::LitStr>()?.value();
                    if inner.path.is_ident("deserialize") {
                        match key.as_str() {
                            "rename" => s.rename = Some(value),
                            "rename_all" => s.rename_all = Some(value),
                            _ => {}
                        }
                    }
                    Ok(())
                })?;
            } else {
                match key.as_str() {
                    "flatten" => s.flatten = true,
                    "skip" | "skip_deserializing" => s.skip = true,
                    "default" => s.default = true,
                    "transparent" => s.transparent = true,
                    _ => {}
                }
            }
            Ok(())
        })
        .map_err(|e| format!("cannot read a serde attribute: {e}"))?;
    }
    Ok(s)
}

/// serde's `rename_all` applied to a field (`snake_case` ident) or a variant (`PascalCase`).
fn renamed(ident: &str, rule: Option<&str>, variant: bool) -> Result<String, String> {
    let Some(rule) = rule else {
        return Ok(ident.to_owned());
    };
    let snake = if variant {
        let mut s = String::new();
        for (i, c) in ident.chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        }
        s
    } else {
        ident.to_owned()
    };
    let pascal: String = snake
        .split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    Ok(match rule {
        "lowercase" if variant => ident.to_ascii_lowercase(),
        "UPPERCASE" if variant => ident.to_ascii_uppercase(),
        "lowercase" | "snake_case" => snake,
        "UPPERCASE" | "SCREAMING_SNAKE_CASE" => snake.to_ascii_uppercase(),
        "kebab-case" => snake.replace('_', "-"),
        "SCREAMING-KEBAB-CASE" => snake.replace('_', "-").to_ascii_uppercase(),
        "PascalCase" => pascal,
        "camelCase" => {
            let mut c = pascal.chars();
            c.next()
                .map(|f| f.to_ascii_lowercase().to_string() + c.as_str())
                .unwrap_or_default()
        }
        other => return Err(format!("unknown serde rename_all rule {other:?}")),
    })
}

// ------------------------------------------------------------------------------------------
// Types: how a user writes a field's value.
// ------------------------------------------------------------------------------------------

/// Types written as one value, and how the page names them.
const VALUES: [(&str, &str); 11] = [
    ("String", "string"),
    ("bool", "boolean"),
    ("usize", "integer"),
    ("u16", "integer"),
    ("u32", "integer"),
    ("u64", "integer"),
    ("PathBuf", "path"),
    ("SocketAddr", "address"),
    ("Duration", "duration"),
    // Manual serde impls: a string or a number, and a table of one source.
    ("Adaptive", "`\"auto\"` or integer"),
    ("Secret", "secret"),
];

/// What a field holds.
enum Kind<'a> {
    /// One value: its type as the page names it, and what the meaning adds (enum values).
    Value { ty: String, extra: String },
    /// A table of fixed fields (a struct).
    Table(&'a Item),
    /// A table whose `tag` field picks a kind (an internally tagged enum).
    Tagged(&'a Item),
}

struct Classified<'a> {
    kind: Kind<'a>,
    optional: bool,
}

/// The last path segment of a type and its type arguments.
fn segment(ty: &syn::Type) -> Result<(String, Vec<&syn::Type>), String> {
    let syn::Type::Path(p) = ty else {
        return Err("a type that is not a path".into());
    };
    let last = p.path.segments.last().ok_or("an empty type path")?;
    let args = match &last.arguments {
        syn::PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|a| match a {
                syn::GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok((last.ident.to_string(), args))
}

fn value(ty: impl Into<String>) -> Kind<'static> {
    Kind::Value {
        ty: ty.into(),
        extra: String::new(),
    }
}

fn classify<'a>(
    src: &'a Source,
    ty: &syn::Type,
    from: &Path,
    with: Option<&str>,
) -> Result<Classified<'a>, String> {
    let (name, args) = segment(ty)?;
    let kind = match (name.as_str(), args.as_slice()) {
        ("Option", [inner]) => {
            let mut c = classify(src, inner, from, with)?;
            c.optional = true;
            return Ok(c);
        }
        ("Vec", [inner]) => match classify(src, inner, from, None)?.kind {
            Kind::Value { ty, .. } => value(format!("array of {ty}s")),
            _ => return Err(format!("`Vec<{}>`: an array of tables", segment(inner)?.0)),
        },
        ("BTreeMap" | "HashMap", [k, v]) if segment(k)?.0 == "String" => {
            if segment(v)?.0 == "String" {
                value("table of strings")
            } else {
                value("table of values")
            }
        }
        ("Duration", []) if !with.is_some_and(|w| w.starts_with("humantime_serde")) => return Err(
            "a `Duration` without `with = \"humantime_serde\"` (files write durations as \"10s\")"
                .into(),
        ),
        (n, []) if VALUES.iter().any(|(v, _)| *v == n) => {
            value(VALUES.iter().find(|(v, _)| *v == n).unwrap().1)
        }
        _ => return item_kind(src, src.find(&name, from)?, with),
    };
    Ok(Classified {
        kind,
        optional: false,
    })
}

/// A type defined in the source: an alias, a struct (table, transparent, or written as a
/// string), or an enum (tagged, or of unit variants written as strings).
fn item_kind<'a>(
    src: &'a Source,
    item: &'a Item,
    with: Option<&str>,
) -> Result<Classified<'a>, String> {
    let fixed = |kind| {
        Ok(Classified {
            kind,
            optional: false,
        })
    };
    match &item.def {
        Def::Alias(target) => classify(src, target, &item.file, with),
        Def::Struct(s) => {
            let serde = serde_of(&s.attrs)?;
            match &s.fields {
                _ if serde.string_form => fixed(value("string")),
                syn::Fields::Unnamed(f) if serde.transparent && f.unnamed.len() == 1 => {
                    classify(src, &f.unnamed[0].ty, &item.file, with)
                }
                syn::Fields::Named(_) if derives(&s.attrs, "Deserialize") => {
                    fixed(Kind::Table(item))
                }
                syn::Fields::Named(_) => Err(format!(
                    "`{}` reads itself (no derived Deserialize): add how it is written to VALUES",
                    s.ident
                )),
                _ => Err(format!("`{}`: neither a table nor a value", s.ident)),
            }
        }
        Def::Enum(e) => {
            let serde = serde_of(&e.attrs)?;
            if serde.tag.is_some() {
                return fixed(Kind::Tagged(item));
            }
            if e.variants.iter().all(|v| v.fields.is_empty()) {
                return fixed(unit_enum(e, &serde)?);
            }
            Err(format!(
                "`{}`: an enum that is neither tagged nor of unit variants",
                e.ident
            ))
        }
    }
}

/// Whether `#[derive(...)]` names `trait` (serde's derives are what the walk reads).
fn derives(attrs: &[syn::Attribute], wanted: &str) -> bool {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("derive"))
        .any(|a| {
            let mut found = false;
            let _ = a.parse_nested_meta(|meta| {
                found |= meta.path.segments.last().is_some_and(|s| s.ident == wanted);
                Ok(())
            });
            found
        })
}

/// An enum written as one of its variants' names; the meaning lists them with their docs.
fn unit_enum(e: &syn::ItemEnum, serde: &Serde) -> Result<Kind<'static>, String> {
    let mut names = Vec::new();
    let mut extra = Vec::new();
    for v in &e.variants {
        let vs = serde_of(&v.attrs)?;
        let name = match vs.rename {
            Some(r) => r,
            None => renamed(&v.ident.to_string(), serde.rename_all.as_deref(), true)?,
        };
        let doc = doc_of(&v.attrs);
        if !doc.is_empty() {
            extra.push(format!("`{name}`: {doc}"));
        }
        names.push(format!("`\"{name}\"`"));
    }
    Ok(Kind::Value {
        ty: format!("one of {}", names.join(", ")),
        extra: extra.join(" "),
    })
}

// ------------------------------------------------------------------------------------------
// Defaults: what `Config` holds when a path is left out, in the context of a kind.
// ------------------------------------------------------------------------------------------

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

fn at<'v>(tree: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.')
        .try_fold(tree, |node, part| node.get(part))
        .filter(|v| !v.is_null())
}

/// A value as TOML writes it inline.
fn toml_inline(v: &Value) -> String {
    match v {
        Value::String(s) => serde_json::to_string(s).unwrap(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(toml_inline).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(o) if o.is_empty() => "{}".into(),
        Value::Object(o) => {
            let pairs: Vec<String> = o
                .iter()
                .map(|(k, v)| {
                    let bare = k
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    let key = if bare {
                        k.clone()
                    } else {
                        serde_json::to_string(k).unwrap()
                    };
                    format!("{key} = {}", toml_inline(v))
                })
                .collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        other => other.to_string(),
    }
}

/// A default as the page shows it.
#[derive(Clone, Debug, PartialEq)]
enum Shown {
    Value(Value),
    /// Not set: the meaning says what the harvester does then.
    Unset,
    /// Must be written whenever its table is.
    Required,
}

// ------------------------------------------------------------------------------------------
// The walk: Config's fields, in order, into sections and entries.
// ------------------------------------------------------------------------------------------

#[derive(Debug)]
struct Entry {
    path: String,
    ty: String,
    default: Shown,
    doc: String,
    /// The overrides that select this entry's kinds (for the `--set` check).
    sets: Vec<(String, String)>,
    /// A table of fields (listed after it), not one value.
    table: bool,
}

#[derive(Debug)]
enum Block {
    Entry(Entry),
    Section(Section),
}

#[derive(Debug)]
struct Section {
    title: String,
    intro: String,
    blocks: Vec<Block>,
}

struct Walk<'a> {
    src: &'a Source,
    problems: Vec<String>,
}

impl<'a> Walk<'a> {
    /// One section per field of `Config`.
    fn config(&mut self, config: &'a Item) -> Vec<Section> {
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
fn prose_disagrees(doc: &str, default: &Shown) -> Option<String> {
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

fn entries(blocks: &[Block]) -> Vec<&Entry> {
    let mut out = Vec::new();
    for b in blocks {
        match b {
            Block::Entry(e) => out.push(e),
            Block::Section(s) => out.extend(entries(&s.blocks)),
        }
    }
    out
}

// ------------------------------------------------------------------------------------------
// The reference: the walk's sections, the header, and the checks.
// ------------------------------------------------------------------------------------------

struct Reference {
    sections: Vec<Section>,
    secret: Vec<(String, String)>,
    goharvest_keys: Vec<String>,
    problems: Vec<String>,
}

impl Reference {
    fn generate() -> Reference {
        let src = Source::parse_dir(&repository().join("harvester/src"));
        Reference::from_source(&src, Path::new("config/mod.rs"))
    }

    /// From `src`, starting at `Config` in the file ending in `config_file`.
    fn from_source(src: &Source, config_file: &Path) -> Reference {
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

    fn entries(&self) -> Vec<&Entry> {
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

// ------------------------------------------------------------------------------------------
// Rendering.
// ------------------------------------------------------------------------------------------

/// How each type of value is written (every type an entry uses must be here).
const TYPES: [(&str, &str); 11] = [
    ("string", "`\"text\"`"),
    ("integer", "`64`"),
    ("boolean", "`true` or `false`"),
    ("duration", "a string of numbers with units: `\"10s\"`, `\"500ms\"`, `\"1m 30s\"`, `\"2h\"`"),
    ("path", "a file path as a string: `\"/etc/harvester/ca.pem\"`"),
    ("address", "`\"host:port\"` as a string: `\"0.0.0.0:9090\"`; port 0 picks a free port"),
    ("`\"auto\"` or integer", "`\"auto\"`: the harvester chooses within the bounds its meaning states; a number fixes it"),
    ("array of strings", "`[\"a\", \"b\"]`"),
    ("table of strings", "`{ \"key.name\" = \"value\" }`, or a `[section]` of `\"key.name\" = \"value\"` lines (quote dotted keys)"),
    ("table", "a sub-table: `tls = { ca = \"ca.pem\" }` or a `[leader.tls]` section"),
    ("secret", "`{ file = \"/run/secrets/x\" }`, `{ env = \"VAR\" }` or `{ value = \"...\" }` (see [How values are given](#how-values-are-given))"),
];

/// The environment variable that sets `path` (the rule of `ENV_PREFIX` in `config/overrides.rs`:
/// capitals, `__` between the parts; under the Kafka maps a `_` for each `.` of the property).
fn env_name(path: &str) -> String {
    let (section, rest) = path.split_once('.').unwrap_or((path, ""));
    let rest = if ["kafka", "producer_kafka"].contains(&section) {
        rest.trim_matches('"').replace('.', "_")
    } else {
        rest.replace('.', "__")
    };
    format!("{}{section}__{rest}", harvester::config::ENV_PREFIX).to_ascii_uppercase()
}

/// GitHub's anchor of a heading.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn render(r: &Reference) -> String {
    let mut out = header(r);
    for s in &r.sections {
        render_section(&mut out, s, 2);
    }
    out
}

fn header(r: &Reference) -> String {
    let count = r.entries().len();
    let mut out = format!(
        "# Configuration reference\n\n\
<!-- Generated by harvester/tests/it/meta/config_reference.rs; do not edit. Regenerate: {REGENERATE} -->\n\n\
Every setting of the harvester's one configuration, `harvester::Config` ({count} settings): the \
`reaper`'s file, and what an embedder builds in code or with serde. This page is generated from \
the code: names, types and meanings from the config structs' source and doc comments, defaults \
from `Config::default()` (and from each kind as it starts, for the tagged tables). Do not edit \
it by hand; after changing a setting run, from the repository root:\n\n\
```sh\n{REGENERATE}\n```\n\n\
The same test fails while the page is stale, or while a setting has no doc comment.\n\n"
    );
    out.push_str(&how_to_give(r));
    out.push_str("## Types\n\n| Type | How to write it |\n|---|---|\n");
    for (ty, how) in TYPES {
        out.push_str(&format!("| {ty} | {how} |\n"));
    }
    out.push_str(
        "| one of `\"a\"`, `\"b\"` | one of the listed strings |\n\n\
*Default* \"unset\" means the setting has no value unless written; its meaning says what the \
harvester does then. *Required* settings must be written whenever their table is.\n\n\
## Sections\n\n",
    );
    for s in &r.sections {
        out.push_str(&format!("- [{}](#{})\n", s.title, anchor(&s.title)));
        for b in &s.blocks {
            if let Block::Section(k) = b {
                out.push_str(&format!("  - [{}](#{})\n", k.title, anchor(&k.title)));
            }
        }
    }
    out.push('\n');
    out
}

fn how_to_give(r: &Reference) -> String {
    let example = env_name("limits.send_buffer");
    let kafka = env_name("kafka.\"bootstrap.servers\"");
    let prefix = harvester::config::ENV_PREFIX;
    let mut out = format!(
        "## How values are given\n\n\
Layers, each over the one before: the file (`reaper --config reaper.toml`: TOML, or the same \
structure as `.yaml`/`.yml` or `.json`; unknown keys are errors naming the key), then \
environment variables, then `--set path=value` (repeatable) and the `reaper`'s shorthand flags \
(`--bootstrap`, `--database-url`, `--group`, `--table`, `--http`, `--log-format`). \
`reaper check-config` prints the result (secrets redacted) or every problem. Complete files are \
in [`examples/`](../../examples/).\n\n\
- **Environment**: `{prefix}` and the path in capitals, `__` between its parts: \
`{example}=20` sets `limits.send_buffer`. Under `kafka` and `producer_kafka` a `_` stands for \
a `.` of the property's name: `{kafka}=b:9092` sets `kafka.\"bootstrap.servers\"` (a property \
whose name holds `_`, such as `sasl.password_file`, needs `--set`). Values are read as JSON \
when they parse (numbers, booleans, arrays), else as strings. Setting `leader.kind` or \
`publish.mode` this way starts that kind's fields from their defaults.\n\
- **Command line**: `--set limits.max_in_flight_records=5000`, \
`--set 'kafka.\"bootstrap.servers\"=b:9092'`; the paths are this page's.\n\
- **Secrets** are never needed in the file. A setting of type secret is a table holding one \
of:\n"
    );
    for (name, doc) in &r.secret {
        out.push_str(&format!("  - `{name}`: {doc}\n"));
    }
    out.push_str(
        "\n  Any Kafka property (`kafka`, `producer_kafka`) may be given as `<property>_file` (a \
file holding the value) or `<property>_env` (an environment variable): \
`\"sasl.password_file\" = \"/run/secrets/kafka\"`. Printed configurations show `<redacted>` \
for inline secrets and Kafka's passwords and keys.\n\
- **goharvest's reaper YAML**: a `.yaml`/`.yml` file with a top-level `harvest:` is read as \
goharvest's file and mapped onto these settings (NELI, `outbox.shape = \"goharvest\"`, \
`dataSource` as a libpq string or URL, goharvest's polling knobs accepted and ignored); \
anything else in it is an error. Its keys: ",
    );
    let keys: Vec<String> = r.goharvest_keys.iter().map(|k| format!("`{k}`")).collect();
    out.push_str(&keys.join(", "));
    out.push_str(". See [`examples/goharvest.yaml`](../../examples/goharvest.yaml).\n\n");
    out
}

fn render_section(out: &mut String, s: &Section, level: usize) {
    out.push_str(&format!("{} {}\n\n", "#".repeat(level), s.title));
    if !s.intro.is_empty() {
        out.push_str(&format!("{}\n\n", s.intro));
    }
    if s.blocks.is_empty() {
        out.push_str("No further settings.\n\n");
    }
    for b in &s.blocks {
        match b {
            Block::Entry(e) => render_entry(out, e, level + 1),
            Block::Section(k) => render_section(out, k, level + 1),
        }
    }
}

fn render_entry(out: &mut String, e: &Entry, level: usize) {
    let default = match &e.default {
        Shown::Value(v) => format!("*Default:* `{}`", toml_inline(v)),
        Shown::Unset => "*Default:* unset".into(),
        Shown::Required => "*Required*".into(),
    };
    out.push_str(&format!(
        "{} `{}`\n\n*Type:* {} · {default}\n\n{}\n\n",
        "#".repeat(level),
        e.path,
        e.ty,
        e.doc
    ));
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

// ------------------------------------------------------------------------------------------
// The generator on made-up sources: it can fail, and applies serde's names.
// ------------------------------------------------------------------------------------------

fn made_up(text: &str) -> Source {
    let mut src = Source::default();
    src.add(Path::new("made/up.rs"), text);
    src
}

#[test]
fn a_field_without_a_doc_comment_is_a_problem() {
    let src = made_up(
        "/// Settings.\n\
         struct Config {\n\
             /// Documented.\n\
             limits: Limits,\n\
         }\n\
         #[derive(Deserialize)]\n\
         #[serde(default)]\n\
         struct Limits {\n\
             /// Documented.\n\
             send_buffer: usize,\n\
             send_concurrency: usize,\n\
         }",
    );
    let r = Reference::from_source(&src, Path::new("made/up.rs"));
    let undocumented: Vec<_> = r
        .problems
        .iter()
        .filter(|p| p.contains("no doc comment"))
        .collect();
    assert_eq!(undocumented.len(), 1, "{:?}", r.problems);
    assert!(undocumented[0].contains("`limits.send_concurrency`"));
}

#[test]
fn serde_names_and_unknown_types_are_applied_and_reported() {
    let src = made_up(
        "struct Config {\n\
             /// A.\n\
             #[serde(rename = \"lead\")]\n\
             leader: Leader,\n\
             /// B.\n\
             odd: std::cell::Cell<u8>,\n\
             /// C.\n\
             manual: Manual,\n\
         }\n\
         struct Manual {\n\
             x: u8,\n\
         }\n\
         /// Kinds.\n\
         #[serde(tag = \"kind\", rename_all = \"snake_case\")]\n\
         enum Leader {\n\
             /// One.\n\
             NeliBuckets(Inner),\n\
             /// Two.\n\
             #[serde(rename = \"zk\")]\n\
             ZooKeeper(Inner),\n\
         }\n\
         #[derive(Serialize, serde::Deserialize)]\n\
         #[serde(rename_all = \"camelCase\")]\n\
         struct Inner {\n\
             /// C.\n\
             #[serde(with = \"humantime_serde\")]\n\
             heartbeat_timeout: Duration,\n\
             #[serde(flatten)]\n\
             more: More,\n\
         }\n\
         #[derive(Deserialize)]\n\
         struct More {\n\
             /// D.\n\
             bucket_count: u16,\n\
         }",
    );
    let r = Reference::from_source(&src, Path::new("made/up.rs"));
    let paths: Vec<&str> = r.entries().iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "lead.kind",
            "lead.heartbeatTimeout",
            "lead.bucket_count",
            "lead.heartbeatTimeout",
            "lead.bucket_count",
        ],
        "a flattened table keeps its own names (serde applies `rename_all` per struct)"
    );
    assert_eq!(
        r.entries()[0].ty,
        "one of `\"neli_buckets\"`, `\"zk\"`",
        "variants renamed by rule and by name"
    );
    assert!(
        r.problems.iter().any(|p| p.contains("`odd`")),
        "an unknown type is a problem: {:?}",
        r.problems
    );
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("`Manual` reads itself")),
        "a struct without a derived Deserialize is a problem: {:?}",
        r.problems
    );
}

#[test]
fn a_stated_default_must_be_the_codes() {
    let five = Shown::Value(json!("5s"));
    assert_eq!(prose_disagrees("Lease. Default 5s.", &five), None);
    assert_eq!(prose_disagrees("Lease; default 5000ms", &five), None);
    assert!(prose_disagrees("Lease. Default 10s.", &five).is_some());
    let sixty = Shown::Value(json!(64));
    assert_eq!(prose_disagrees("Buckets. Default 64.", &sixty), None);
    assert!(prose_disagrees("Buckets. Default: 32", &sixty).is_some());
    assert_eq!(
        prose_disagrees("Default 2x `ttl`, at most 30s.", &Shown::Unset),
        None
    );
}

#[test]
fn a_duration_without_humantime_is_refused() {
    let src = made_up("struct S { d: Duration }");
    let item = &src.items["S"][0];
    let Def::Struct(s) = &item.def else { panic!() };
    let field = s.fields.iter().next().unwrap();
    assert!(classify(&src, &field.ty, &item.file, None).is_err());
    assert!(classify(&src, &field.ty, &item.file, Some("humantime_serde")).is_ok());
}

#[test]
fn doc_links_become_code() {
    assert_eq!(
        unlink("see [`crate::Harvester::connect`] and [`lease`](Self::lease), [x]"),
        "see `Harvester::connect` and `lease`, [x]"
    );
}
