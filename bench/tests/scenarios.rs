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
    let out = std::env::temp_dir().join(testkit::names::unique("bench-results"));
    let summary = run(RunOptions {
        profile: "full".into(),
        scenarios: Vec::new(),
        file: None,
        set: Vec::new(),
        scale: 0.1,
        brokers: None,
        database_url: None,
        reaper: Some(reaper()),
        out: out.clone(),
        ceilings: true,
        private_pg_port: 54332,
        // The server as found: tests/autovacuum.rs checks the switch itself.
        autovacuum: bench::pg::AutovacuumMode::AsFound,
    })
    .await
    .unwrap();
    println!("{}", summary.markdown);
    let full = bench::scenario::ScenarioFile::builtin()
        .profile("full")
        .unwrap();
    for name in &full {
        assert!(
            summary
                .runs
                .iter()
                .any(|r| r.scenario == *name || r.scenario.starts_with(&format!("{name}/"))),
            "{name} did not run"
        );
    }
    for r in &summary.runs {
        assert!(r.passed, "{} failed: {}", r.scenario, r.problems);
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
            r.scenario,
            r.correctness.lost
        );
        assert_eq!(r.correctness.reordered, 0, "{}", r.scenario);
        if r.kind == Some(Kind::FailoverZombie) {
            // A resumed zombie's pre-stall produce request may land late: counted, bounded.
            assert!(
                r.correctness.rewinds <= r.correctness.duplicates,
                "{}",
                r.scenario
            );
        } else {
            assert_eq!(r.correctness.rewinds, 0, "{}", r.scenario);
        }
        assert_eq!(
            r.correctness.delivered + r.correctness.lost,
            r.committed,
            "{}",
            r.scenario
        );
        match r.kind.unwrap() {
            Kind::Drain | Kind::PgRestart => {
                assert!(r.drain_records_per_s.unwrap() > 0.0, "{}", r.scenario);
                if r.kind == Some(Kind::Drain) {
                    // On the embedded broker a backlog is verified after its drain, which is
                    // timed to the empty outbox and charted from the harvesters' counts.
                    let d = r.drain.unwrap();
                    assert_eq!(d.ended_by, bench::report::DrainEnd::Emptied, "{d:?}");
                    assert!(d.verified_after_s.is_some(), "{d:?}");
                    assert!(r.topic.verify_after, "{:?}", r.topic);
                    let charted: f64 = r.per_second.iter().map(|p| p.1).sum();
                    assert!(charted >= r.committed as f64 / 2.0, "{charted}");
                }
            }
            _ => {
                let l = r
                    .latency_ms
                    .unwrap_or_else(|| panic!("{} has no latency", r.scenario));
                assert!(
                    l.p50 <= l.p99 && l.p99 <= l.max && l.count > 0,
                    "{}: {l:?}",
                    r.scenario
                );
                assert!(r.sustained_records_per_s.unwrap() > 0.0);
            }
        }
        if matches!(r.kind.unwrap(), Kind::FailoverKill | Kind::FailoverZombie) {
            let f = r
                .failover
                .unwrap_or_else(|| panic!("{} has no failover figures", r.scenario));
            assert!(f.gap_ms > 0.0 && f.fault_to_acquired_ms > 0.0, "{f:?}");
        }
        if matches!(r.kind.unwrap(), Kind::BrokerFaults | Kind::PgRestart) {
            assert!(r.stall_ms.is_some(), "{} has no stall figure", r.scenario);
        }
        assert!(r.cpu_seconds_per_million.unwrap() > 0.0 && r.peak_rss_mib > 0.0);
    }
    let c = summary.ceilings;
    assert!(c.db_mark_purge.unwrap().per_second > 0.0 && c.producer.unwrap().per_second > 0.0);
    assert!(c.delete_only.unwrap().best.per_second > 0.0);
    assert!(
        summary.markdown.contains("x lower ceiling") && summary.markdown.contains("x delete-only")
    );
    assert!(summary.files.iter().any(|f| f.ends_with(".jsonl")));
    assert!(summary.files.iter().filter(|f| f.ends_with(".svg")).count() >= summary.runs.len());
    let _ = std::fs::remove_dir_all(out);
}
