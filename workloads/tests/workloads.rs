//! The workloads against real Postgres and the embedded broker, harvested by the real pipeline:
//! COPY pre-fill and concurrent writers (rollbacks, out-of-order commits, a Zipf key mix) must
//! produce rows the harvester publishes exactly as the ledger says, in per-key order.

use std::sync::Arc;
use std::time::Duration;

use harvester::config::{DatabaseConfig, KafkaConfig, Limits, OutboxConfig};
use harvester::election::neli::NeliConfig;
use harvester::outbox::TableName;
use harvester::{Config, Harvester};
use testkit::verify::ConsumeOptions;
use testkit::{names, Broker, TestDb, Verifier};
use tokio_util::sync::CancellationToken;
use workloads::prefill::{prefill, Backlog};
use workloads::{key_name, KeyDist, Ledger, LongTransactions, Mode, WriterConfig, WriterPool};

#[tokio::test]
async fn prefill_and_writers_are_harvested_exactly_as_the_ledger_says() {
    testkit::init_tracing();
    let db = TestDb::new("wl").await.unwrap();
    let broker = Broker::discover().unwrap();
    let topic = names::topic("wl");
    broker.create_topic(&topic, 4).await.unwrap();
    let group = names::unique("wl");
    broker
        .create_topic(&format!("{group}.neli"), 1)
        .await
        .unwrap();
    let run = names::unique("run");
    let table = TableName::parse(&format!("{}.outbox", db.schema)).unwrap();
    let config = Config {
        kafka: KafkaConfig::with_bootstrap(broker.bootstrap()),
        leader: NeliConfig {
            group_id: Some(group),
            heartbeat_timeout: Duration::from_secs(1),
            min_poll_interval: Duration::from_millis(50),
            ..Default::default()
        }
        .into(),
        database: DatabaseConfig {
            url: db.url().to_owned(),
            ..Default::default()
        },
        outbox: OutboxConfig {
            table: table.clone(),
            ..Default::default()
        },
        limits: Limits {
            drain_timeout: Some(Duration::from_secs(1)),
            ..Default::default()
        },
        ..Default::default()
    };
    let c = &config.outbox;
    harvester::store::postgres::migrate(&db.pool, &c.table, &c.quarantine(), c.shape)
        .await
        .unwrap();

    let ledger = Arc::new(Ledger::new());
    let backlog = Backlog::uniform(2_000, 50, 64);
    prefill(&db.pool, &table, &topic, &run, backlog, &ledger)
        .await
        .unwrap();
    let writers = WriterConfig {
        writers: 4,
        mode: Mode::Open { rate: 3000.0 },
        keys: KeyDist::Zipf { n: 50, s: 1.1 },
        rows_per_tx: 3,
        max_pre_commit_delay: Duration::from_millis(5),
        rollback_ratio: 0.1,
        long_transactions: Some(LongTransactions {
            writers: 1,
            hold: Duration::from_millis(200),
        }),
        ..Default::default()
    };
    let pool = Arc::new(
        WriterPool::new(
            writers,
            db.pool.clone(),
            &table,
            &topic,
            &run,
            Arc::clone(&ledger),
        )
        .unwrap(),
    );
    pool.start_sequences_at(2_000 / 50);
    let harvester = Arc::new(Harvester::connect(config).await.unwrap()).spawn();
    let stats = pool
        .run(CancellationToken::new(), Some(1_500))
        .await
        .unwrap();
    println!("writers: {stats:?}");
    assert!(stats.rolled_back > 0, "some transactions rolled back");
    assert!(stats.committed >= 1_500);

    let committed = ledger.take();
    assert_eq!(committed.len() as u64, 2_000 + stats.committed);
    // The long transactions wrote key 50 (after the distribution's 50), from sequence 0.
    let mut long: Vec<u64> = committed
        .iter()
        .filter(|c| c.key == 50)
        .map(|c| c.seq)
        .collect();
    long.sort_unstable();
    assert!(
        long.len() >= 3,
        "long transactions committed ({})",
        long.len()
    );
    assert_eq!(long, (0..long.len() as u64).collect::<Vec<_>>());
    let mut verifier = Verifier::new();
    for c in &committed {
        verifier.expect(&topic, key_name(c.key).as_bytes(), c.seq);
    }
    let mut options = ConsumeOptions::new(broker.bootstrap(), &[&topic], &run);
    // A bound on a stall, not on throughput: a loaded machine delivers slowly.
    options.timeout = Duration::MAX;
    options.stall = Some(Duration::from_secs(90));
    let report = testkit::verify::consume(options, verifier, |_, _, _| {})
        .await
        .unwrap()
        .report();
    println!("{report}");
    harvester.stop().await.unwrap();
    report.assert_correct();
    assert_eq!(report.delivered, committed.len() as u64);
    assert_eq!(
        report.unexpected, 0,
        "rolled-back rows were never published"
    );
}
