//! `bench run --database mysql://...`: the same scenarios on MariaDB (`MARIADB_URL`, from
//! `scripts/services.sh up`) at a tenth of their size, with the real `reaper` binary and the
//! embedded broker: each verifies, the ceilings are MariaDB's own, the provenance names the
//! server and its settings, and a Postgres-only scenario is skipped with the reason.

use std::path::PathBuf;

use bench::cli::{run, RunOptions};
use bench::scenario::Kind;

fn reaper() -> PathBuf {
    // target/<profile>/deps/mariadb-<hash> -> target/<profile>/reaper (built by the workspace).
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_run_verified_on_mariadb_against_its_own_ceilings() {
    testkit::init_tracing();
    let out = std::env::temp_dir().join(testkit::names::unique("bench-mariadb"));
    let summary = run(RunOptions {
        profile: "quick".into(),
        scenarios: vec!["drain".into(), "steady".into(), "pg-restart".into()],
        file: None,
        set: Vec::new(),
        scale: 0.1,
        brokers: None,
        embedded: true,
        database_url: Some(testkit::mariadb::mariadb_url()),
        reaper: Some(reaper()),
        out: out.clone(),
        ceilings: true,
        private_pg_port: 54333,
        autovacuum: bench::pg::AutovacuumMode::AsFound,
        target_rate: None,
        shape: Default::default(),
        cold: false,
    })
    .await
    .unwrap();
    println!("{}", summary.markdown);
    let names: Vec<&str> = summary.runs.iter().map(|r| r.scenario.as_str()).collect();
    assert_eq!(names, ["drain", "steady"], "pg-restart is skipped");
    for r in &summary.runs {
        assert!(
            r.passed,
            "{}: {} {}",
            r.scenario, r.verdict_note, r.problems
        );
        assert_eq!(r.correctness.lost, 0, "{}", r.scenario);
        assert_eq!(r.correctness.reordered, 0, "{}", r.scenario);
        assert_eq!(r.left_in_outbox, 0, "{}", r.scenario);
        assert_eq!(
            r.quarantined, 0,
            "{}: {:?}",
            r.scenario, r.quarantine_reasons
        );
        // Postgres's own figures are not measured on MariaDB.
        assert!(r.wal_bytes_per_record.is_none() && r.outbox_after.is_none());
        assert_eq!(r.cpu.database, workloads::Backend::MariaDb);
        match r.kind.unwrap() {
            Kind::Drain => assert!(r.drain_records_per_s.unwrap() > 0.0),
            _ => assert!(r.latency_ms.is_some() && r.sustained_records_per_s.unwrap() > 0.0),
        }
    }
    let c = summary.ceilings;
    assert!(c.db_mark_purge.unwrap().per_second > 0.0 && c.writers.unwrap().per_second > 0.0);
    let md = &summary.markdown;
    assert!(md.contains("- mariadb ") && md.contains("innodb_flush_log_at_trx_commit="));
    assert!(
        md.contains("DB-only mark+purge, concurrently (MariaDB store, best of mark batch"),
        "{md}"
    );
    assert!(
        md.contains(
            "- pg-restart: skipped on MariaDB: it restarts the bench's own Postgres server."
        ),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(out);
}
