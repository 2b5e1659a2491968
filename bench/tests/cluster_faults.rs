//! A broker killed under the harvesters on a private 3-node Apache Kafka cluster, end to end
//! with the real `reaper` binary and real Postgres (its own test binary: the cluster's three
//! JVMs would slow `scenarios.rs`'s runs if both ran at once).

use std::path::PathBuf;

use bench::cli::{run, RunOptions};
use bench::scenario::Kind;

fn reaper() -> PathBuf {
    // target/<profile>/deps/cluster_faults-<hash> -> target/<profile>/reaper.
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

/// A broker of a private 3-node Apache Kafka cluster is killed (`kill -9`, the one leading the
/// most partitions) under the harvesters while writers run, and started again: nothing lost,
/// nothing reordered or rewound, the publish gap measured, the cluster whole again by the end.
/// Needs Java and the Kafka jars (`scripts/services.sh up` fetches them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_killed_under_the_harvesters_loses_nothing() {
    testkit::init_tracing();
    let out = std::env::temp_dir().join(testkit::names::unique("bench-results"));
    let summary = run(RunOptions {
        profile: String::new(),
        scenarios: vec!["kill-busiest-leader".into()],
        file: None,
        set: Vec::new(),
        // Writers run through the fault (its timing is kept) and a little after.
        scale: 0.5,
        brokers: None,
        embedded: false,
        database_url: None,
        reaper: Some(reaper()),
        out: out.clone(),
        ceilings: false,
        private_pg_port: 25432,
        autovacuum: bench::pg::AutovacuumMode::AsFound,
        target_rate: None,
        shape: Default::default(),
        cold: false,
    })
    .await
    .unwrap_or_else(|e| panic!("kill-busiest-leader failed: {e}"));
    println!("{}", summary.markdown);
    let r = &summary.runs[0];
    assert_eq!(r.kind, Some(Kind::ClusterFault));
    assert!(r.passed, "{}", r.problems);
    assert_eq!((r.correctness.lost, r.correctness.reordered), (0, 0));
    // A producer the broker's death failed replays less than a key's window (README).
    assert!(
        r.correctness.rewinds == 0 || r.correctness.deepest_rewind < r.key_window,
        "{} rewinds, deepest {}, key window {}",
        r.correctness.rewinds,
        r.correctness.deepest_rewind,
        r.key_window
    );
    assert_eq!(r.correctness.delivered, r.committed);
    assert!(r.stall_ms.is_some(), "no publish gap measured");
    let said = |what: &str| r.events.iter().any(|(e, _)| e.contains(what));
    assert!(
        said("kill -9 broker") && said("start broker") && said("cluster whole"),
        "{:?}",
        r.events
    );
    assert!(
        r.broker_note
            .as_deref()
            .is_some_and(|n| n.contains("3-node")),
        "{:?}",
        r.broker_note
    );
    let _ = std::fs::remove_dir_all(out);
}
