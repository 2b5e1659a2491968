//! The dashboards cannot drift from the code: every metric name they use is defined in
//! `metrics::names` and exported by a running reaper.

use std::collections::BTreeSet;

use crate::common::reaper::Reaper;
use crate::common::World;
use harvester::metrics::names;
use testkit::wait_for;

/// Every `harvester_*` token in the dashboards folder (histogram series folded to their base).
fn names_used() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards");
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let bytes = text.as_bytes();
        let mut i = 0;
        while let Some(at) = text[i..].find(names::PREFIX) {
            let start = i + at;
            let boundary = start == 0
                || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
            let end = start
                + text[start..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(text.len() - start);
            if boundary {
                let name = &text[start..end];
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|b| names::ALL.contains(b)))
                    .unwrap_or(name);
                used.insert(base.to_owned());
            }
            i = end;
        }
    }
    used
}

#[test]
fn dashboards_use_only_defined_names() {
    let used = names_used();
    assert!(
        used.len() >= 20,
        "the dashboards use {} names: {used:?}",
        used.len()
    );
    let unknown: Vec<_> = used
        .iter()
        .filter(|n| !names::ALL.contains(&n.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "not defined in metrics::names: {unknown:?}"
    );
}

#[tokio::test]
async fn a_running_reaper_exports_every_name_the_dashboards_use() {
    let world = World::new("rdash", 1).await;
    world.migrate().await;
    let config = world.reaper_config(|_| {});
    let reaper = Reaper::spawn("r", &config).await;
    wait_for("the reaper leads", world.first_lead(), || async {
        reaper.is_leader().await
    })
    .await
    .unwrap();
    let (status, text) = reaper.get("/metrics").await;
    assert_eq!(status, 200);
    let exported: BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let missing: Vec<_> = names_used()
        .into_iter()
        .filter(|n| !exported.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "used by dashboards but not exported: {missing:?}\n{text}"
    );
}
