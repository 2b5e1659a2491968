//! The summary's sections on made-up runs: what each must say, and the JSON line's words.

use super::*;
use crate::broker::BrokerFacts;
use crate::ceiling::delete_only::DeleteOnly;
use crate::ceiling::kafka_perf::KafkaProducerPerf;
use crate::ceiling::Ceiling;
use crate::mariadb::MariaDbSettings;
use crate::receipts::PartitionLog;
use crate::result::{Bound, CpuUsage, Drain, DrainEnd, Verdict};

fn run(name: &str, verdict: Verdict, note: &str) -> RunResult {
    RunResult {
        scenario: name.into(),
        committed: 1_000_000,
        passed: verdict == Verdict::Passed,
        verdict,
        verdict_note: note.into(),
        drain: Some(Drain {
            ended_by: DrainEnd::Accounted,
            seconds: 100.0,
            no_progress_window_s: 30.0,
            cap_s: 1030.0,
            max_verifier_lag: Some(300_000),
            verified_after_s: None,
            startup_s: None,
        }),
        cpu: CpuUsage {
            wall_seconds: 100.0,
            cores: 2,
            broker_cpu_seconds: Some(80.0),
            broker_utilisation: Some(0.8),
            broker_busy: Some(0.97),
            harvester_cpu_seconds: 40.0,
            postgres_cpu_seconds: Some(50.0),
            bound_by: Bound::Broker,
            database: workloads::Backend::Postgres,
        },
        ..RunResult::default()
    }
}

#[test]
fn the_summary_shows_verdict_eviction_drain_end_and_bound() {
    let mut inconclusive = run(
        "drain",
        Verdict::Inconclusive,
        "inconclusive: the embedded broker evicted 99835 records before the verifier read them",
    );
    inconclusive.correctness.lost = 99_835;
    inconclusive.lost_to_eviction = 99_835;
    inconclusive.broker_evicted = 99_835;
    inconclusive.log = vec![PartitionLog {
        partition: 3,
        evicted: 99_835,
        gaps: 2,
        ..PartitionLog::default()
    }];
    let mut failed = RunResult {
        undelivered: 7,
        ..run("steady", Verdict::Failed, "failed: 7 still in the outbox")
    };
    if let Some(d) = failed.drain.as_mut() {
        d.startup_s = Some(0.123);
    }
    let md = markdown(
        &Provenance::default(),
        &Ceilings::default(),
        &[inconclusive, failed],
        &[],
    );
    let row = md.lines().find(|l| l.starts_with("| drain |")).unwrap();
    // Lost net of eviction (0), then the evicted column, the broker's busy share and bound.
    assert!(row.contains("| *inconclusive* |"), "{row}");
    assert!(row.contains("| 0 | 99835 |"), "{row}");
    assert!(row.contains("| 97 % | **broker** |"), "{row}");
    assert!(md.contains("**drain inconclusive: the embedded broker evicted 99835"));
    assert!(md.contains("p3 99835 (2 jumps)"));
    assert!(md.contains("every record arrived or was deleted by the broker unread"));
    assert!(md.contains("lagged by up to 300000 records"));
    assert!(md.contains("the first purge came 123 ms after the first leader"));
    assert!(md.contains("busy 97 % of the time: 80 % on a CPU, 17 % waiting for one"));
    let steady = md.lines().find(|l| l.starts_with("| steady |")).unwrap();
    assert!(
        steady.contains("| **FAILED** |") && steady.contains("7 undelivered"),
        "{steady}"
    );
    assert!(md.contains("**steady failed: 7 still in the outbox**"));
    assert!(
        md.contains("- postgres : fsync="),
        "the Postgres provenance line"
    );
    // The JSON line carries the verdict as a word.
    let json = serde_json::to_value(run("x", Verdict::Inconclusive, "")).unwrap();
    assert_eq!(json["verdict"], "inconclusive");
    assert_eq!(json["cpu"]["bound_by"], "broker");
    assert_eq!(json["drain"]["ended_by"], "accounted");
}

#[test]
fn a_real_broker_run_reads_the_drain_against_kafkas_own_producer() {
    let provenance = Provenance {
        broker: "Apache Kafka 4.1.2 (scripts/services/kafka.sh, KRaft, 1 node) at 127.0.0.1:19092"
            .into(),
        broker_facts: BrokerFacts {
            kind: crate::broker::BrokerKind::Kafka,
            ..BrokerFacts::default()
        },
        ..Provenance::default()
    };
    let ceiling = |per_second: f64| Ceiling {
        records: 20_000,
        seconds: 20_000.0 / per_second,
        per_second,
    };
    let ceilings = Ceilings {
        producer: Some(ceiling(40_000.0)),
        kafka_producer: Some(KafkaProducerPerf {
            ceiling: ceiling(50_000.0),
            mb_per_second: 9.5,
            avg_latency_ms: 120.4,
            max_latency_ms: 400.0,
            p99_latency_ms: Some(300.0),
            record_bytes: 200,
            partitions: 8,
        }),
        ..Ceilings::default()
    };
    let mut drain = run("drain", Verdict::Passed, "passed");
    drain.drain_records_per_s = Some(10_000.0);
    let faults = RunResult {
        broker_note: Some("on the mock: injected request errors".into()),
        ..run("broker-faults", Verdict::Passed, "passed")
    };
    let md = markdown(&provenance, &ceilings, &[drain, faults], &[]);
    assert!(
        md.contains("- broker: Apache Kafka 4.1.2 (scripts/services/kafka.sh"),
        "{md}"
    );
    assert!(
        md.contains("| producer-only, Kafka's own ProducerPerformance (Java client; acks=all, enable.idempotence=true, linger.ms=5; 200 B values without keys, 8 partitions; avg latency 120 ms, p99 300 ms): Kafka's reference producer on this broker | 20000 | 50000 |"),
        "{md}"
    );
    // x lower ceiling (our producer, 40k), x delete-only (none), x Kafka producer (50k).
    let row = md.lines().find(|l| l.starts_with("| drain |")).unwrap();
    assert!(row.contains("| 10000 | 0.25 | - | 0.20 |"), "{row}");
    assert!(
        md.contains("| broker-faults (on the mock: injected request errors) | passed |"),
        "{md}"
    );
    assert!(md.contains("- broker-faults (on the mock: injected request errors): "));
    // Not measured on a real broker: said; on the mock: no row at all.
    let missing = Ceilings {
        kafka_producer: None,
        ..ceilings
    };
    assert!(markdown(&provenance, &missing, &[], &[]).contains("ProducerPerformance: not measured"));
    assert!(
        !markdown(&Provenance::default(), &missing, &[], &[]).contains("| producer-only, Kafka's")
    );
    let json = serde_json::to_value(ceilings).unwrap();
    assert_eq!(json["kafka_producer"]["ceiling"]["per_second"], 50_000.0);
}

#[test]
fn a_mariadb_run_reports_its_server_its_ceiling_and_what_it_skipped() {
    let provenance = Provenance {
        mariadb: Some(MariaDbSettings {
            version: "10.11.19-MariaDB".into(),
            innodb_flush_log_at_trx_commit: "1".into(),
            sync_binlog: "0".into(),
            log_bin: "OFF".into(),
            transaction_isolation: "REPEATABLE-READ".into(),
            innodb_buffer_pool_size: "128MB".into(),
        }),
        ..Provenance::default()
    };
    let ceilings = Ceilings {
        db_mark_purge: Some(Ceiling {
            records: 100,
            seconds: 1.0,
            per_second: 100.0,
        }),
        delete_only: Some(DeleteOnly {
            best: Ceiling {
                records: 100,
                seconds: 0.25,
                per_second: 400.0,
            },
            batch: 1000,
            connections: 2,
        }),
        batch: 100,
        ..Ceilings::default()
    };
    let mut r = run("drain", Verdict::Passed, "passed");
    r.cpu.database = workloads::Backend::MariaDb;
    let md = markdown(&provenance, &ceilings, &[r], &[]);
    assert!(
        md.contains("- mariadb 10.11.19-MariaDB: innodb_flush_log_at_trx_commit=1, sync_binlog=0"),
        "{md}"
    );
    assert!(!md.contains("autovacuum="), "no Postgres lines: {md}");
    assert!(
        md.contains("| DB-only mark+purge, concurrently (MariaDB store, best of mark batch 100/500/1000: 100) | 100 | 100 |"),
        "{md}"
    );
    assert!(
        md.contains("| DB-only batched DELETE alone (MariaDB store, best of 100/1000 ids x 1/2 connections: 1000 x 2) | 100 | 400 |"),
        "{md}"
    );
    assert!(md.contains("harvesters 40.0 s, mariadb 50.0 s;"), "{md}");
    let skipped = unsupported_section(
        workloads::Backend::MariaDb,
        &[(
            "pg-restart".into(),
            "it restarts the bench's own Postgres server".into(),
        )],
    );
    assert_eq!(
        skipped,
        "\n## Not run on MariaDB\n\n- pg-restart: skipped on MariaDB: it restarts the bench's own Postgres server.\n"
    );
    assert_eq!(unsupported_section(workloads::Backend::Postgres, &[]), "");
}

#[test]
fn a_report_from_an_uncommitted_tree_says_so_first_and_names_its_machine() {
    let provenance = |commit: &str| Provenance {
        run_id: "20260101-000000".into(),
        commit: commit.into(),
        machine: "2 cores (AMD EPYC 7B13), 8 GiB".into(),
        broker: "embedded (librdkafka mock cluster, 3 brokers)".into(),
        ..Provenance::default()
    };
    let runs = [run("drain", Verdict::Passed, "passed")];
    let dirty = markdown(
        &provenance("5d35504 (with uncommitted changes)"),
        &Ceilings::default(),
        &runs,
        &[],
    );
    assert!(
        dirty.starts_with("> **NOT FROM A COMMITTED TREE: built from 5d35504 (with uncommitted changes), so no commit reproduces these figures — do not quote them.**\n\n# Benchmark run 20260101-000000\n"),
        "{dirty}"
    );
    let clean = markdown(&provenance("5d35504"), &Ceilings::default(), &runs, &[]);
    assert!(
        clean.starts_with("# Benchmark run 20260101-000000\n"),
        "{clean}"
    );
    assert!(!clean.contains("NOT FROM"), "{clean}");
    // The machine (CPU model, cores) and the broker right under the title.
    let head: Vec<&str> = clean.lines().take(6).collect();
    assert_eq!(
        head[2..],
        [
            "- command: ``",
            "- commit: 5d35504",
            "- machine: 2 cores (AMD EPYC 7B13), 8 GiB",
            "- broker: embedded (librdkafka mock cluster, 3 brokers)",
        ],
        "{clean}"
    );
    // A tree git could not name is not quoted either; the autovacuum warning comes after.
    let mut unknown = provenance("");
    unknown.postgres.autovacuum = "off".into();
    let md = markdown(&unknown, &Ceilings::default(), &runs, &[]);
    assert!(md.starts_with("> **NOT FROM A KNOWN COMMIT"), "{md}");
    assert!(md.contains("**\n\n> **WARNING: autovacuum was OFF"), "{md}");
    assert!(md.contains("- commit: unknown\n"), "{md}");
}

#[test]
fn the_summary_shows_both_parts_of_each_verdict() {
    use crate::result::Pace;
    let mut behind = run("out-of-order", Verdict::Passed, "passed");
    behind.pace = Some(Pace::judge(Some(2000.0), Some((10.0, 1744.0))));
    let mut kept = run("steady", Verdict::Passed, "passed");
    kept.pace = Some(Pace::judge(Some(2000.0), Some((1990.0, 2000.0))));
    let mut short = run("latency-500", Verdict::Passed, "passed");
    short.pace = Some(Pace::judge(Some(500.0), Some((202.0, 202.0))));
    let mut drain = run("drain", Verdict::Passed, "passed");
    drain.pace = Some(Pace::NoWriters);
    let mut closed = run("closed", Verdict::Failed, "failed: 1 still in the outbox");
    closed.pace = Some(Pace::ClosedLoop);
    let md = markdown(
        &Provenance::default(),
        &Ceilings::default(),
        &[behind, kept, short, drain, closed],
        &[],
    );
    let row = |name: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap()
            .to_owned()
    };
    assert!(
        row("out-of-order").starts_with(
            "| out-of-order | passed | **fell behind** (10 of 1744 rec/s written, 0.01) |"
        ),
        "{md}"
    );
    assert!(
        row("steady").starts_with("| steady | passed | kept up (0.99) |"),
        "{md}"
    );
    assert!(
        row("latency-500").starts_with(
            "| latency-500 | passed | relay kept up (1.00); **writers fell behind** (202 of 500 rec/s target) |"
        ),
        "{md}"
    );
    assert!(
        row("drain").starts_with("| drain | passed | n/a (drain) |"),
        "{md}"
    );
    assert!(
        row("closed").starts_with("| closed | **FAILED** | n/a (closed loop) |"),
        "{md}"
    );
    assert!(
        md.contains("\n**out-of-order fell behind: delivered 10 of 1744 rec/s written (0.01 < 0.95; open-loop target 2000 rec/s); the writers themselves reached only 1744 of their 2000 rec/s target (passed)**\n"),
        "{md}"
    );
    assert!(!md.contains("**steady kept up"), "{md}");
}

#[test]
fn a_run_without_ceilings_says_so_instead_of_an_empty_table() {
    let none = Ceilings {
        batch: 500,
        ..Ceilings::default()
    };
    let mut drain = run("drain", Verdict::Passed, "passed");
    drain.drain_records_per_s = Some(10_000.0);
    let md = markdown(&Provenance::default(), &none, &[drain], &[]);
    assert!(
        md.contains("## Ceilings (same run)\n\nNot measured (the run was given `--no-ceilings`)"),
        "{md}"
    );
    assert!(!md.contains("| ceiling | records | records/s |"), "{md}");
    let row = md.lines().find(|l| l.starts_with("| drain |")).unwrap();
    assert!(row.contains("| 10000 | - | - | - |"), "{row}");
}

#[test]
fn a_zombie_run_says_what_its_stalled_leader_held_at_the_freeze() {
    let failover = Some(crate::result::Failover {
        fault_to_acquired_ms: 2981.0,
        gap_ms: 3810.0,
        fault_to_first_publish_ms: 3600.0,
    });
    let zombie = RunResult {
        failover,
        zombie_in_flight: Some(42),
        ..run("failover-zombie-transactional", Verdict::Passed, "")
    };
    let kill = RunResult {
        failover,
        ..run("failover-kill", Verdict::Passed, "")
    };
    let s = notes::failovers(&[zombie, kill]);
    assert!(
        s.contains("failover-zombie-transactional: the stalled leader had 42 records in flight at the freeze."),
        "{s}"
    );
    assert!(!s.contains("failover-kill: the stalled"), "{s}");
}

#[test]
fn the_postgres_line_says_whether_the_connections_use_tls() {
    let with = |connection: &str| {
        let mut p = Provenance::default();
        p.postgres.connection = connection.into();
        markdown(
            &p,
            &Ceilings::default(),
            &[run("drain", Verdict::Passed, "")],
            &[],
        )
    };
    let tls = with("TLS (TLSv1.3)");
    let line = tls.lines().find(|l| l.starts_with("- postgres ")).unwrap();
    assert!(
        line.ends_with("; the bench's and the harvesters' connections (one URL): TLS (TLSv1.3)"),
        "{line}"
    );
    // A report from before the connection was recorded says nothing of it.
    let old = with("");
    let line = old.lines().find(|l| l.starts_with("- postgres ")).unwrap();
    assert!(!line.contains("connections"), "{line}");
}
