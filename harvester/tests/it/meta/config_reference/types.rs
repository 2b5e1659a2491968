//! Classifying a field's type: how a user writes its value (one value, a table of fixed fields,
//! or a tagged table whose `tag` picks a kind), so the walk knows whether to list an entry or
//! descend, and the page can name the type.
//!
//! A type the generator does not understand is an error here, which the walk reports as a
//! problem: a new kind of setting must be taught ([`VALUES`]) rather than silently mislisted.

use std::path::Path;

use super::source::{derives, doc_of, renamed, serde_of, Def, Item, Serde, Source};

/// Types written as one value, and how the page names them.
const VALUES: [(&str, &str); 12] = [
    ("String", "string"),
    ("bool", "boolean"),
    ("usize", "integer"),
    ("u16", "integer"),
    ("u32", "integer"),
    ("u64", "integer"),
    ("f64", "number"),
    ("PathBuf", "path"),
    ("SocketAddr", "address"),
    ("Duration", "duration"),
    // Manual serde impls: a string or a number, and a table of one source.
    ("Adaptive", "`\"auto\"` or integer"),
    ("Secret", "secret"),
];

/// What a field holds.
pub(super) enum Kind<'a> {
    /// One value: its type as the page names it, and what the meaning adds (enum values).
    Value { ty: String, extra: String },
    /// A table of fixed fields (a struct).
    Table(&'a Item),
    /// A table whose `tag` field picks a kind (an internally tagged enum).
    Tagged(&'a Item),
}

pub(super) struct Classified<'a> {
    pub(super) kind: Kind<'a>,
    pub(super) optional: bool,
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

pub(super) fn classify<'a>(
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
