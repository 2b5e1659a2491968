//! Transactional publishing (`publish.mode = "transactional"`) on every database backend and
//! Apache Kafka: records go out in transactions, a row is purged once its transaction
//! committed, and a failure aborts the transaction and sends the rows of every key it touched
//! again, in order.
//!
//! Refused partition registrations are injected into the mock (`with_faults`), which cannot
//! show fencing (it gives every `init_transactions` a new producer id) nor the read_committed
//! view (it writes no abort markers); on Kafka a shard's transactional id is fenced by another
//! producer, and the broker is probed for both views. Everywhere the tests check what the
//! harvester itself does: every row delivered and purged, first deliveries in order, the
//! transactions counted, and aborted transactions' rows re-sent (a row left behind by an abort
//! would never be purged, and `drained` would fail).

use std::time::Duration;

use crate::common::faults::{self, harvest_under_faults, FaultRun};
use crate::common::{Backend, World};
use crate::on_every_backend;
use harvester::config::PublishConfig;
use harvester::Config;

on_every_backend!(
    transactions_deliver_every_key_in_order,
    a_failed_record_aborts_its_transaction,
    a_row_that_cannot_be_written_is_quarantined_alone,
);

const WINDOW: usize = 64;

fn transactional(world: &World, name: &str) -> Config {
    let mut config = world.config();
    config.publish = serde_json::from_value(serde_json::json!({
        "mode": "transactional",
        // Unique per test and run: the embedded broker is shared by the tests.
        "transactional_id": format!("{name}-{}", uuid::Uuid::new_v4()),
        "linger": "20ms",
        "max_records": 200,
    }))
    .unwrap();
    config.limits.max_in_flight_per_key = WINDOW;
    config.validate().unwrap();
    assert!(matches!(config.publish, PublishConfig::Transactional(_)));
    config
}

async fn transactions_deliver_every_key_in_order(backend: Backend) {
    let world = World::on(backend, "hvtxn", 4).await;
    world.migrate().await;
    let handle = world.start(transactional(&world, "hvtxn")).await;
    world.write(1, 1500, 100).await;
    world.write_keys("cold", 5, 100, 50).await;
    let report = world.verify(Duration::from_secs(90)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "{backend:?}, transactional, {WINDOW} in flight per key: {} transactions committed, {} aborted: {report}stats: {stats:?}",
        stats.txn_committed, stats.txn_aborted
    );
    report.assert_correct();
    assert_eq!(report.delivered, 2000);
    assert_eq!(report.duplicates, 0, "{report}");
    assert_eq!(stats.txn_aborted, 0);
    assert_eq!(stats.published, 2000, "counted once each, at commit");
    assert!(
        stats.txn_committed >= 10 && stats.txn_committed < 2000,
        "records must go out in transactions of more than one: {}",
        stats.txn_committed
    );
}

/// The broker refuses to add a partition to a transaction now and then
/// (`faults::ADD_PARTITIONS_TO_TXN`, only the outbox's producers send these): each refusal
/// dooms its transaction, which is aborted; every key it touched is reset and sent again.
/// (Produce errors would do too, but a transactional producer then bumps its epoch, after which
/// the mock acknowledges records it never writes: see `faults::ADD_PARTITIONS_TO_TXN`.)
async fn a_failed_record_aborts_its_transaction(backend: Backend) {
    let world = World::with_faults(backend, "hvtxnfault").await;
    let FaultRun {
        report,
        injected,
        stats,
        rounds,
        ..
    } = harvest_under_faults(
        &world,
        transactional(&world, "hvtxnfault"),
        faults::ADD_PARTITIONS_TO_TXN,
        (5, 300, 50),
        Duration::from_secs(150),
        |s| s.txn_aborted > 0 && s.reset > 0,
    )
    .await;
    println!(
        "{backend:?}, transactional, partitions refused to transactions: {injected} errors injected; delivery failures {}, transactions committed {} / aborted {}, rows reset {}, pipeline restarts {}, quarantined {}: {report}",
        stats.delivery_failures,
        stats.txn_committed,
        stats.txn_aborted,
        stats.reset,
        stats.pipeline_restarts,
        stats.quarantined
    );
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.unexpected, 0, "{report}");
    assert_eq!(report.delivered, 1500 * rounds);
    assert!(
        stats.txn_aborted > 0 && stats.reset > 0,
        "refused produces must abort transactions and reset their rows"
    );
    assert_eq!(stats.quarantined, 0, "transient faults must not quarantine");
    assert_eq!(world.outbox_rows().await, 0);
}

/// A row larger than the producers' `message.max.bytes` can never be written. Its failure aborts
/// the transaction it joined (which says nothing of which row was at fault), the transaction's
/// rows are then sent one per transaction, and the row fails alone: it is quarantined, and
/// everything else, the rows of its own key after it included, is delivered in order.
async fn a_row_that_cannot_be_written_is_quarantined_alone(backend: Backend) {
    let world = World::on(backend, "hvtxnbig", 4).await;
    world.migrate().await;
    let mut config = transactional(&world, "hvtxnbig");
    config.producer_kafka = config.producer_kafka.set("message.max.bytes", "20000");
    let handle = world.start(config).await;
    let mut records: Vec<_> = (0..40).map(|seq| world.record("big", seq, 100)).collect();
    records[10] = world.record("big", 10, 50_000);
    world.stash(&records).await;
    for seq in 0..40 {
        world.expect("big", seq);
    }
    world.write_keys("other", 3, 50, 25).await;
    world.drained().await;
    // The quarantined row never arrives: the verifier waits this long for it.
    let report = world.verify(Duration::from_secs(15)).await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "{backend:?}, transactional, one row too large: transactions committed {} / aborted {}, quarantined {}: {report}",
        stats.txn_committed, stats.txn_aborted, stats.quarantined
    );
    assert_eq!(stats.quarantined, 1, "{stats:?}");
    assert_eq!(
        report.lost, 1,
        "only the quarantined row is missing: {report}"
    );
    assert_eq!(report.reordered, 0, "{report}");
    assert_eq!(report.unexpected, 0, "{report}");
    assert_eq!(report.delivered, 40 - 1 + 150);
    assert!(
        stats.txn_aborted >= 1,
        "the row's failure aborts its transaction"
    );
    let quarantined = world.quarantined().await;
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    assert!(
        quarantined[0].1.contains("too large") || quarantined[0].1.contains("TooLarge"),
        "{quarantined:?}"
    );
}

/// What a read_committed consumer can be trusted with: Apache Kafka hides a record of an aborted
/// transaction from it (and shows it read_uncommitted, which proves it was written);
/// librdkafka's mock writes no abort markers and shows it to both, which is why the mock cannot
/// check the read_committed view. Kafka's own Java consumer (`--isolation-level`) reads the real
/// probe topic too and must agree. If the mock learns to hide aborted transactions, the last
/// half fails and the README's "what is tested where" is to be updated.
#[tokio::test]
async fn the_real_broker_hides_aborted_transactions_and_the_mock_does_not() {
    testkit::init_tracing();
    let real = testkit::Broker::discover().unwrap();
    assert!(
        !real.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    let probe = testkit::verify::probe_aborted(&real, Duration::from_secs(30))
        .await
        .unwrap();
    println!("the real broker {}", probe.describe());
    assert!(
        probe.uncommitted_sees_aborted,
        "the aborted record must have been written: {probe:?}"
    );
    assert!(probe.hides_aborted(), "{}", probe.describe());
    let java = |isolation: &'static str| {
        let (bootstrap, topic) = (real.bootstrap().to_owned(), probe.topic.clone());
        // Two records at most; a read that sees one ends 10 s after it.
        let idle = Duration::from_secs(10);
        tokio::task::spawn_blocking(move || {
            testkit::broker::console::read_isolated(&bootstrap, &topic, 2, idle, isolation)
                .unwrap()
                .into_iter()
                .map(|r| r.key)
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(
        java("read_committed").await.unwrap(),
        ["committed"],
        "Kafka's Java consumer, read_committed"
    );
    assert_eq!(
        java("read_uncommitted").await.unwrap(),
        ["aborted", "committed"],
        "Kafka's Java consumer, read_uncommitted"
    );

    let mock = testkit::Broker::mock().unwrap();
    let probe = testkit::verify::probe_aborted(&mock, Duration::from_secs(30))
        .await
        .unwrap();
    println!("the mock {}", probe.describe());
    assert!(
        probe.uncommitted_sees_aborted && probe.committed_sees_aborted,
        "the embedded broker now hides aborted transactions: {probe:?}"
    );
}

/// The real counterpart of the mock's injected PRODUCER_FENCED (`producer_fatal.rs`): on Apache
/// Kafka another producer's `init_transactions` with a shard's transactional id fences the
/// shard's producer (as a successor fences a zombie). Its open transaction is aborted by the
/// broker, librdkafka raises a fatal error, and the pipeline restarts with fresh producers,
/// whose own `init_transactions` fence the intruder in turn. Nothing is lost, first deliveries
/// stay in order, and the read_committed verifier never sees the aborted records.
#[tokio::test]
async fn real_broker_fencing_a_shards_transactional_id_restarts_without_loss() {
    use crate::common::real::write_rounds;
    use rdkafka::producer::{BaseProducer, Producer};

    let world = World::on(Backend::Postgres, "hvtxnfence", 4).await;
    assert!(
        !world.broker.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    world.migrate().await;
    let config = transactional(&world, "hvtxnfence");
    let PublishConfig::Transactional(publish) = &config.publish else {
        unreachable!("transactional() sets the mode")
    };
    let shard_ids: Vec<String> = (0..8).map(|shard| publish.shard_id(shard)).collect();
    // The mock elector: the fencing under test is the broker's, not NELI's.
    let handle = world.start_leading(config).await;
    let keys = 40;
    write_rounds(&world, "k", keys, 0..20).await;
    world.drained().await;
    // Fence every shard's producer (whichever shard a key hashes to, it is fenced).
    let bootstrap = world.broker.bootstrap().to_owned();
    let intruders = tokio::task::spawn_blocking(move || {
        shard_ids
            .iter()
            .map(|id| {
                let p: BaseProducer = rdkafka::ClientConfig::new()
                    .set("bootstrap.servers", &bootstrap)
                    .set("transactional.id", id)
                    .create()
                    .unwrap();
                p.init_transactions(Duration::from_secs(30)).unwrap();
                p
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    write_rounds(&world, "k", keys, 20..40).await;
    world.drained().await;
    drop(intruders);
    let report = world.verify(Duration::from_secs(90)).await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!(
        "real broker, every shard fenced by another producer: pipeline restarts {}, transactions committed {}, aborted {}: {report}",
        stats.pipeline_restarts, stats.txn_committed, stats.txn_aborted
    );
    report.assert_correct();
    assert_eq!(report.delivered, keys as u64 * 40);
    assert!(
        stats.pipeline_restarts >= 1,
        "a fenced producer must be replaced: {stats:?}"
    );
}

/// A term with fewer shards than its predecessor still fences every id the predecessor used: a
/// stalled leader that ran 8 shards (the transactional default before) and resumes after a
/// successor with 2 took over must not commit on its ids 2-7, which no producer of the successor
/// uses. Here the
/// predecessor's shard 5 is a producer of the test's, with a transaction open and a record in it;
/// once the successor's term has started (its first record delivered), that commit must fail.
#[tokio::test]
async fn real_broker_a_term_fences_the_ids_of_more_shards_than_it_runs() {
    use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

    let world = World::on(Backend::Postgres, "hvtxnfewer", 4).await;
    assert!(
        !world.broker.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    world.migrate().await;
    let config = transactional(&world, "hvtxnfewer");
    let PublishConfig::Transactional(publish) = &config.publish else {
        unreachable!("transactional() sets the mode")
    };
    let shards = config.limits.shards();
    assert!(
        shards < 6,
        "the default count must leave shard 5 unused: {shards}"
    );
    let stale_id = publish.shard_id(5);
    let (bootstrap, topic) = (world.broker.bootstrap().to_owned(), world.topic.clone());
    let stale = tokio::task::spawn_blocking(move || {
        let p: BaseProducer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("transactional.id", &stale_id)
            .create()
            .unwrap();
        p.init_transactions(Duration::from_secs(30)).unwrap();
        p.begin_transaction().unwrap();
        p.send(BaseRecord::to(&topic).key("stale").payload("late"))
            .unwrap();
        p.flush(Duration::from_secs(30)).unwrap();
        p
    })
    .await
    .unwrap();
    let handle = world.start_leading(config).await;
    world.write(4, 5, 5).await;
    world.drained().await;
    let committed =
        tokio::task::spawn_blocking(move || stale.commit_transaction(Duration::from_secs(30)))
            .await
            .unwrap();
    let report = world.verify(Duration::from_secs(60)).await;
    handle.stop().await.unwrap();
    let Err(e) = committed else {
        panic!("the stalled predecessor's shard 5 committed after a 2-shard successor started");
    };
    let said = e.to_string().to_lowercase();
    assert!(
        said.contains("fenced") || said.contains("epoch"),
        "the predecessor's commit must fail as fenced: {e}"
    );
    report.assert_correct();
}
