//! The generator on made-up sources: it can fail (an undocumented field, a type it does not
//! understand, a stated default that is not the code's), and it applies serde's names as serde
//! does. The real tree cannot show these, since it is kept free of such problems.

use std::path::Path;

use serde_json::json;

use super::reference::Reference;
use super::source::{unlink, Def, Source};
use super::types::classify;
use super::walk::{prose_disagrees, Shown};

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
