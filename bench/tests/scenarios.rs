//! Every scenario of the `full` profile, end to end at a tenth of its size, with the real
//! `reaper` binary, real Postgres (and the bench's own cluster for pg-restart) and the embedded
//! broker: each must verify (0 lost, 0 reordered) and produce the figures it exists for.

use std::path::PathBuf;

use bench::cli::{run, RunOptions};
use bench::scenario::Kind;

fn reaper() -> PathBuf {
    // target/<profile>/deps/scenarios-<hash> -> target/<profile>/reaper (built by the workspace).
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_runs_verified_and_reports_its_figures() {
    testkit::init_tracing();
    // Both outbox modes, one after the other (they share the broker, the database and the
    // bench's own Postgres port): MP/R with the same-run ceilings, then, with `--set
    // outbox.mode=snapshot`, every scenario whose path differs in snapshot mode (how rows are
    // found, re-found after a failure or a fault, and held back by open transactions).
    full_profile(Vec::new(), Vec::new(), true).await;
    full_profile(
        SNAPSHOT_PATHS.iter().map(|s| s.to_string()).collect(),
        vec!["outbox.mode=snapshot".into()],
        false,
    )
    .await;
}

/// The scenarios run again in snapshot mode. Those left out (steady, hot-keys, and the
/// transactional twins) repeat a path listed here with another load; the harvester's conformance
/// and transactional suites run each of their tests in snapshot mode too (the
/// `postgres_snapshot` backend).
const SNAPSHOT_PATHS: &[&str] = &[
    "drain",
    "hot-keys-pipelined",
    "failover-kill",
    "failover-zombie",
    "broker-faults",
    "out-of-order",
    "xmin-pinned",
    "long-transactions",
    "pg-restart",
];

/// Runs `scenarios` (every one of the full profile when empty) at a tenth of its size with `set`
/// and checks every run's figures.
async fn full_profile(scenarios: Vec<String>, set: Vec<String>, ceilings: bool) {
    let out = std::env::temp_dir().join(testkit::names::unique("bench-results"));
    let snapshot = !set.is_empty();
    let wanted = if scenarios.is_empty() {
        bench::scenario::ScenarioFile::builtin()
            .profile("full")
            .unwrap()
    } else {
        scenarios.clone()
    };
    let summary = run(RunOptions {
        profile: "full".into(),
        scenarios,
        file: None,
        set,
        scale: 0.1,
        brokers: None,
        embedded: true,
        database_url: None,
        reaper: Some(reaper()),
        out: out.clone(),
        ceilings,
        // Below the ephemeral range: 54332 was once held by an outgoing connection.
        private_pg_port: 25432,
        // The server as found: tests/autovacuum.rs checks the switch itself.
        autovacuum: bench::pg::AutovacuumMode::AsFound,
        target_rate: None,
        shape: Default::default(),
        cold: false,
    })
    .await
    .unwrap_or_else(|e| panic!("the full profile (snapshot mode: {snapshot}) failed: {e}"));
    println!("{}", summary.markdown);
    for wanted in &wanted {
        assert!(
            summary
                .runs
                .iter()
                .any(|r| r.scenario == *wanted || r.scenario.starts_with(&format!("{wanted}/"))),
            "{wanted} did not run"
        );
    }
    for r in &summary.runs {
        let name = if snapshot {
            format!("{} (snapshot mode)", r.scenario)
        } else {
            r.scenario.clone()
        };
        assert!(r.passed, "{} failed: {}", name, r.problems);
        // The only loss allowed is the mock broker's own (acknowledged, not in its log), and
        // only where errors are injected into its Produce requests.
        let allowed = if r.kind == Some(Kind::BrokerFaults) {
            r.broker_lost
        } else {
            0
        };
        assert!(
            r.correctness.lost <= allowed,
            "{}: lost {}",
            name,
            r.correctness.lost
        );
        assert_eq!(r.correctness.reordered, 0, "{}", name);
        // A restart replays less than a key's window of it (bench::run::rewinds); a resumed
        // zombie's pre-stall produce request may land late, unless the broker fences it: at
        // most what it had in flight.
        let within_window =
            r.correctness.rewinds == 0 || r.correctness.deepest_rewind < r.key_window;
        assert!(
            within_window || r.correctness.rewinds <= r.rewinds_allowed,
            "{name}: {} rewinds, deepest {}, key window {}, {} of any depth allowed",
            r.correctness.rewinds,
            r.correctness.deepest_rewind,
            r.key_window,
            r.rewinds_allowed
        );
        if r.kind != Some(Kind::FailoverZombie) {
            assert_eq!(r.rewinds_allowed, 0, "{name}");
        }
        assert_eq!(
            r.correctness.delivered + r.correctness.lost,
            r.committed,
            "{}",
            name
        );
        match r.kind.unwrap() {
            Kind::Drain | Kind::PgRestart => {
                assert!(r.drain_records_per_s.unwrap() > 0.0, "{}", name);
                if r.kind == Some(Kind::Drain) {
                    // On the embedded broker a backlog is verified after its drain, which is
                    // timed to the empty outbox and charted from the harvesters' counts.
                    let d = r.drain.unwrap();
                    assert_eq!(d.ended_by, bench::result::DrainEnd::Emptied, "{d:?}");
                    assert!(d.verified_after_s.is_some(), "{d:?}");
                    assert!(r.topic.verify_after, "{:?}", r.topic);
                    let charted: f64 = r.per_second.iter().map(|p| p.1).sum();
                    assert!(charted >= r.committed as f64 / 2.0, "{charted}");
                }
            }
            _ => {
                let l = r
                    .latency_ms
                    .unwrap_or_else(|| panic!("{} has no latency", name));
                assert!(
                    l.p50 <= l.p99 && l.p99 <= l.max && l.count > 0,
                    "{}: {l:?}",
                    name
                );
                assert!(r.sustained_records_per_s.unwrap() > 0.0);
            }
        }
        if matches!(r.kind.unwrap(), Kind::FailoverKill | Kind::FailoverZombie) {
            let f = r
                .failover
                .unwrap_or_else(|| panic!("{} has no failover figures", name));
            assert!(f.gap_ms > 0.0 && f.fault_to_acquired_ms > 0.0, "{f:?}");
        }
        if matches!(r.kind.unwrap(), Kind::BrokerFaults | Kind::PgRestart) {
            assert!(r.stall_ms.is_some(), "{} has no stall figure", name);
        }
        assert!(r.cpu_seconds_per_million.unwrap() > 0.0 && r.peak_rss_mib > 0.0);
    }
    if snapshot {
        assert!(
            summary.markdown.contains("outbox.mode=snapshot"),
            "the report shows the mode"
        );
    }
    if ceilings {
        let c = summary.ceilings;
        assert!(c.db_mark_purge.unwrap().per_second > 0.0 && c.producer.unwrap().per_second > 0.0);
        assert!(c.delete_only.unwrap().best.per_second > 0.0);
        assert!(
            summary.markdown.contains("x lower ceiling")
                && summary.markdown.contains("x delete-only")
        );
    }
    assert!(summary.files.iter().any(|f| f.ends_with(".jsonl")));
    assert!(summary.files.iter().filter(|f| f.ends_with(".svg")).count() >= summary.runs.len());
    let _ = std::fs::remove_dir_all(out);
}
