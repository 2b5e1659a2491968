//! The dashboards and the alerting rules cannot drift from the code: every metric name they use
//! is defined in `metrics::names` and exported by a running reaper, and every rule tells the
//! operator what to do and is unit-tested both ways. (`tests/operations.rs` runs them on a real
//! Prometheus.)

use std::collections::BTreeSet;

use crate::common::reaper::Reaper;
use crate::common::World;
use harvester::metrics::names;
use testkit::wait_for;

fn dashboards() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards")
}

/// Every `harvester_*` token in `text` (histogram series folded to their base).
fn names_in(text: &str) -> BTreeSet<String> {
    let bytes = text.as_bytes();
    let mut used = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = text[i..].find(names::PREFIX) {
        let start = i + at;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
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
    used
}

/// The names of `used` that `metrics::names` does not define.
fn undefined(used: &BTreeSet<String>) -> Vec<&String> {
    used.iter()
        .filter(|n| !names::ALL.contains(&n.as_str()))
        .collect()
}

/// Every `harvester_*` token in the dashboards folder: the dashboard, the scrape config, the
/// alerting rules and their unit tests.
fn names_used() -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(dashboards()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        used.extend(names_in(&text));
    }
    used
}

/// A YAML file of the dashboards folder.
fn yaml(file: &str) -> serde_yaml::Value {
    let text = std::fs::read_to_string(dashboards().join(file)).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The alerting rules of `alerts.yml`.
fn alert_rules() -> Vec<serde_yaml::Value> {
    let doc = yaml("alerts.yml");
    let groups = doc["groups"]
        .as_sequence()
        .expect("alerts.yml: a groups list");
    groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("a rules list").clone())
        .collect()
}

/// Alert names the unit tests expect (`fire`) or expect silent (`!fire`) at some instant.
fn unit_tested(fire: bool) -> BTreeSet<String> {
    let doc = yaml("alerts.test.yml");
    let tests = doc["tests"]
        .as_sequence()
        .expect("alerts.test.yml: a tests list");
    tests
        .iter()
        .flat_map(|t| {
            t["alert_rule_test"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|case| {
            let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
            (expected > 0) == fire
        })
        .filter_map(|case| case["alertname"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn dashboards_use_only_defined_names() {
    let used = names_used();
    assert!(
        used.len() >= 20,
        "the dashboards use {} names: {used:?}",
        used.len()
    );
    let unknown = undefined(&used);
    assert!(
        unknown.is_empty(),
        "not defined in metrics::names: {unknown:?}"
    );
}

/// Each rule reads only names defined in code, has a severity and tells the operator what
/// happened and what to do, and the unit tests (`alerts.test.yml`, run by promtool in
/// `tests/operations.rs`) see it fire on a failing series and stay silent on a healthy one.
#[test]
fn every_alert_rule_uses_defined_names_says_what_to_do_and_is_unit_tested_both_ways() {
    let rules = alert_rules();
    assert!(rules.len() >= 5, "alerts.yml has {} rules", rules.len());
    let (firing, silent) = (unit_tested(true), unit_tested(false));
    for rule in &rules {
        let name = rule["alert"].as_str().expect("every rule is an alert");
        let expr = rule["expr"].as_str().expect("an expr");
        let used = names_in(expr);
        assert!(!used.is_empty(), "{name} reads no harvester metric: {expr}");
        let unknown = undefined(&used);
        assert!(
            unknown.is_empty(),
            "{name}: not defined in metrics::names: {unknown:?}"
        );
        assert!(rule["for"].as_str().is_some(), "{name}: no `for` stated");
        assert!(
            rule["labels"]["severity"].as_str().is_some(),
            "{name}: no severity"
        );
        for annotation in ["summary", "description"] {
            let text = rule["annotations"][annotation].as_str().unwrap_or("");
            assert!(text.len() >= 30, "{name}: {annotation} too short: {text:?}");
        }
        assert!(firing.contains(name), "{name}: no unit test sees it fire");
        assert!(silent.contains(name), "{name}: no unit test sees it silent");
    }
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
