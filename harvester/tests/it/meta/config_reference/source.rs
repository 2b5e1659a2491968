//! Reading the source: every struct, enum and type alias of `harvester/src` by name, their doc
//! comments as Markdown, and what serde makes of them (`#[serde(...)]`, `rename_all` rules).
//!
//! This is the only part of the generator that knows about `syn`'s attribute syntax; the rest
//! asks it for a doc comment, a [`Serde`] or a renamed identifier.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone)]
pub(super) enum Def {
    Struct(syn::ItemStruct),
    Enum(syn::ItemEnum),
    Alias(syn::Type),
}

#[derive(Clone)]
pub(super) struct Item {
    pub(super) file: PathBuf,
    pub(super) def: Def,
}

#[derive(Default)]
pub(super) struct Source {
    pub(super) items: BTreeMap<String, Vec<Item>>,
}

impl Source {
    /// Every `.rs` file under `dir` except the binaries'.
    pub(super) fn parse_dir(dir: &Path) -> Source {
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
    pub(super) fn add(&mut self, file: &Path, text: &str) {
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
    pub(super) fn find(&self, name: &str, from: &Path) -> Result<&Item, String> {
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
pub(super) fn doc_of(attrs: &[syn::Attribute]) -> String {
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
pub(super) fn unlink(text: &str) -> String {
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
pub(super) struct Serde {
    pub(super) rename: Option<String>,
    pub(super) rename_all: Option<String>,
    pub(super) tag: Option<String>,
    pub(super) with: Option<String>,
    pub(super) flatten: bool,
    pub(super) skip: bool,
    pub(super) default: bool,
    pub(super) transparent: bool,
    /// `try_from`/`from = "String"`: written as a string.
    pub(super) string_form: bool,
}

pub(super) fn serde_of(attrs: &[syn::Attribute]) -> Result<Serde, String> {
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

/// Whether `#[derive(...)]` names `trait` (serde's derives are what the walk reads).
pub(super) fn derives(attrs: &[syn::Attribute], wanted: &str) -> bool {
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

/// serde's `rename_all` applied to a field (`snake_case` ident) or a variant (`PascalCase`).
pub(super) fn renamed(ident: &str, rule: Option<&str>, variant: bool) -> Result<String, String> {
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
