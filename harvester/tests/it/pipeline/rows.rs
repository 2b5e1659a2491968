//! Row-level guarantees: stale leaders cannot touch re-marked rows, bad input goes to the
//! quarantine with its reason while other keys flow (those two end to end on every backend:
//! `postgres::...`, `mariadb::...`, `mssql::...`), and a goharvest table is harvested unchanged (Postgres).

use std::sync::Arc;
use std::time::Duration;

use crate::common::bad_rows::Bad;
use crate::common::held::{Call, Held};
use crate::common::{Backend, World};
use crate::on_every_backend;
use harvester::election::mock::MockElector;
use harvester::election::Elector;
use harvester::outbox::{Shape, StashRecord};
use harvester::store::postgres::{PgStore, Stasher};
use harvester::store::OutboxMode;
use harvester::{HarvestEvent, Harvester};
use testkit::{envelope, wait_for};

on_every_backend!(
    bad_input_is_quarantined_with_a_reason,
    a_deposed_leader_hands_back_nothing_a_newer_leader_re_marked,
);

/// Every malformed row a backend's table can hold (`common::bad_rows`), and a value larger than
/// the producer's `message.max.bytes`, between good rows: each ends in the quarantine with a
/// reason naming the row and the problem, and the good rows around them are published in order.
async fn bad_input_is_quarantined_with_a_reason(backend: Backend) {
    let world = World::on(backend, "hvpoison", 4).await;
    world.migrate().await;
    let mut config = world.config();
    config.kafka = config.kafka.set("message.max.bytes", "20000");
    // Malformed rows, inserted around good ones.
    world.write(5, 3, 5).await;
    let mut expected = Vec::new();
    for bad in Bad::on(backend) {
        expected.push((world.insert_bad(bad).await, bad.reason()));
    }
    if backend == Backend::MariaDb {
        // Header columns that are not JSON at all cannot be written: the JSON type's
        // CHECK (json_valid(...)) refuses them, so the decoder never meets them.
        let before = world.outbox_rows().await;
        let refused = world.insert_header_text("not json", "[]").await;
        assert!(
            refused.is_err(),
            "text that is not JSON was stored: {refused:?}"
        );
        let refused = world.insert_header_text("[]", "[\"AQ==\"").await;
        assert!(
            refused.is_err(),
            "text that is not JSON was stored: {refused:?}"
        );
        assert_eq!(world.outbox_rows().await, before);
    }
    let too_large = StashRecord::new(&world.topic, "huge", vec![b'x'; 50_000]);
    let huge_id = world.stash(&[too_large]).await[0];
    world.write_keys("after", 5, 3, 5).await;
    let handle = world.start(config).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    let reasons = world.quarantined().await;
    println!("{backend:?}, bad input: {report}quarantine: {reasons:?}");
    assert_eq!(reasons.len(), expected.len() + 1, "{reasons:?}");
    let reason = |id: i64| {
        reasons
            .iter()
            .find(|(q, _)| *q == id)
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    };
    for (id, why) in &expected {
        assert!(
            reason(*id).contains(why),
            "row {id}: {:?}, expected {why:?}",
            reason(*id)
        );
    }
    assert!(reasons
        .iter()
        .any(|(_, r)| r.contains("header arrays differ")));
    assert!(reasons.iter().any(|(_, r)| r.contains("key is NULL")));
    assert!(reasons.iter().any(|(id, r)| *id == huge_id
        && r.contains(&format!("row {huge_id}"))
        && r.to_lowercase().contains("too large")));
    for (id, reason) in &reasons {
        assert!(
            reason.contains(&format!("row {id}")),
            "reason names the row: {reason}"
        );
    }
    assert_eq!(stats.quarantined, reasons.len() as u64);
    report.assert_correct();
    assert_eq!(report.delivered, 30, "the good rows around the bad ones");
}

/// A deposed leader whose statements reach the table only after a newer leader re-marked its
/// rows hands back nothing and deletes only what Kafka has, end to end: the old leader publishes
/// and its purges are held (`common::held`); it is fenced; a newer leader re-marks every row,
/// publishes and its purges are held too. With the rows still in the table and the newer
/// leader's, the old leader's reset and quarantine (by its leader id, through the store port)
/// touch none of them, and its pipeline's held purge, once released, deletes only the rows it
/// had acknowledged. Then the newer leader drains the table: nothing lost or reordered, at most
/// one duplicate per key (the old leader's one in flight).
async fn a_deposed_leader_hands_back_nothing_a_newer_leader_re_marked(backend: Backend) {
    const KEYS: usize = 4;
    const PER_KEY: u64 = 10;
    const QUICK: Duration = Duration::from_secs(30);
    let world = World::on(backend, "hvdeposed", 4).await;
    world.migrate().await;
    world.write(KEYS, PER_KEY, 8).await;
    let rows = (KEYS as u64 * PER_KEY) as i64;
    let table = world.table();
    let config = world.config();
    // Each harvester has a store of its own, as two processes would (a store's state, such as
    // Postgres's mark floor, belongs to the one harvester that marks through it).
    let connect = || harvester::store::connect(&config.database, &config.outbox);
    let start = |store: Arc<Held>, elector: &MockElector| {
        let (config, elector) = (config.clone(), Arc::new(elector.clone()));
        async move {
            let h = Harvester::new(config, store, elector).await.unwrap();
            Arc::new(h).spawn()
        }
    };

    let old_inner = connect().await.unwrap();
    let (old_store, old_purge) = Held::new(Arc::clone(&old_inner), Call::Purge);
    let (new_store, new_purge) = Held::new(connect().await.unwrap(), Call::Purge);
    let (old_elector, new_elector) = (MockElector::new(), MockElector::new());
    let old = start(Arc::clone(&old_store), &old_elector).await;
    // The successor is up (connected, migrated, not leading) before the race starts, so that
    // the old leader's purge waits no longer than the re-mark takes: the pipeline gives up on a
    // store call after 11 s.
    let new = start(new_store, &new_elector).await;
    old_elector.acquire();
    // The old leader's first purge (of the first records acknowledged) waits; its keys wait
    // behind it, so it has published at most one record per key.
    old_purge.reached(QUICK).await;
    let old_leader = old.harvester.leader_id().expect("the old leader's id");
    old_elector.fence();
    // A fenced marker starts no mark, but one already past its leadership check (a busy
    // machine can hold it there for a while) would re-mark the rows after the newer leader
    // did: let it finish first, so that only the statements under test race the newer leader.
    old_store.stop_marking(QUICK).await;

    new_elector.acquire();
    new_purge.reached(QUICK).await;
    let new_leader = new.harvester.leader_id().expect("the new leader's id");
    assert_ne!(old_leader, new_leader);
    if backend.mode() == OutboxMode::MarkPurge {
        let (by_new, by_old) = (
            world.db.marked_by(&table, new_leader).await,
            world.db.marked_by(&table, old_leader).await,
        );
        assert_eq!(
            by_new,
            rows,
            "the newer leader re-marked every row ({by_old} are the old leader's; the new one's {:?})",
            new.harvester.stats()
        );

        // The deposed leader's reset and quarantine, by its id through its store, on rows the
        // newer leader holds.
        let ids = world.db.ids(&table).await;
        assert_eq!(ids.len() as i64, rows);
        assert_eq!(old_inner.reset(&ids, &[old_leader]).await.unwrap(), 0);
        assert!(!old_inner
            .quarantine(ids[0], &[old_leader], "stale")
            .await
            .unwrap());
        assert_eq!(
            world.db.marked_by(&table, new_leader).await,
            rows,
            "every row still belongs to the newer leader"
        );
    }
    // Its pipeline's purges, held since before the re-mark, delete the rows the old leader had
    // acknowledged (at most one per key: their records are in Kafka), which the newer leader
    // may publish again (a duplicate), and nothing else. Its later purges (rows acknowledged
    // while the first was held) stay held, so the count below is all it deleted.
    let deleted = old_purge
        .release(QUICK)
        .await
        .expect("the stale purges ran");
    assert!(
        (1..=KEYS as u64).contains(&deleted),
        "the deposed leader deleted {deleted} rows: it had acknowledged between 1 and {KEYS}"
    );
    assert_eq!(world.outbox_rows().await, rows - deleted as i64);
    assert!(world.quarantined().await.is_empty(), "nothing quarantined");

    new_purge.open();
    world.drained().await;
    let report = world.verify(Duration::from_secs(60)).await;
    let (old_stats, new_stats) = (old.harvester.stats(), new.harvester.stats());
    // Its purges still held find their rows gone; let them through so that it stops at once.
    old_purge.open();
    old.stop().await.unwrap();
    new.stop().await.unwrap();
    println!("{backend:?}, deposed leader: {report}old: {old_stats:?}\nnew: {new_stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, rows as u64);
    assert!(
        old_stats.published > 0,
        "the old leader published before it was deposed"
    );
    assert_eq!(old_stats.purged, deleted, "the stale purge is counted");
    assert_eq!(old_stats.reset, 0, "the stale leader reset nothing");
    assert_eq!(old_stats.quarantined, 0);
    assert_eq!(
        new_stats.purged + deleted,
        rows as u64,
        "the successor purged every other row"
    );
    assert!(
        report.duplicates <= KEYS as u64,
        "at most one duplicate per key (the stale leader's one in flight): {report}"
    );
}

/// goharvest's own DDL, in the world's schema.
async fn create_goharvest_table(world: &World) {
    sqlx::query(&harvester::store::postgres::goharvest_table(&world.table()))
        .execute(&world.pg().pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn goharvest_table_is_harvested_unchanged() {
    let world = World::new("hvgo", 4).await;
    let table = world.table().quoted();
    create_goharvest_table(&world).await;
    let columns = || async {
        sqlx::query_scalar::<_, String>("SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'outbox' ORDER BY ordinal_position")
            .bind(&world.pg().schema)
            .fetch_all(&world.pg().pool)
            .await
            .unwrap()
    };
    let before = columns().await;
    for seq in 0..20u64 {
        for k in 0..5 {
            let key = format!("k{k}");
            let [(rk, rv), (sk, sv)] = envelope::headers(&world.run, seq);
            sqlx::query(&format!("INSERT INTO {table} (create_time, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values) VALUES (now(), $1, $2, $3, $4, $5)"))
                .bind(&world.topic)
                .bind(&key)
                .bind(format!("value {seq}"))
                .bind(vec![rk.to_owned(), sk.to_owned()])
                .bind(vec![rv, sv])
                .execute(&world.pg().pool)
                .await
                .unwrap();
            world
                .verifier
                .lock()
                .expect(&world.topic, key.as_bytes(), seq);
        }
    }
    let mut config = world.config();
    config.outbox.shape = Shape::Goharvest;
    let (report, _) = world.harvest_all(config).await;
    println!("goharvest table: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 100);
    assert_eq!(
        columns().await,
        before,
        "the goharvest table is left as it was"
    );
    let triggers: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.triggers WHERE event_object_schema = $1",
    )
    .bind(&world.pg().schema)
    .fetch_one(&world.pg().pool)
    .await
    .unwrap();
    assert_eq!(triggers, 0, "no trigger added to a goharvest table");
}

/// The next `n` meter events on `events` (one each `interval`, bounded by that plus the load
/// margin), other events skipped.
async fn meters_after(
    events: &mut tokio::sync::broadcast::Receiver<HarvestEvent>,
    n: usize,
    interval: Duration,
) -> Vec<harvester::stats::StatsSnapshot> {
    let mut meters = Vec::new();
    while meters.len() < n {
        let event = tokio::time::timeout(testkit::within(interval), events.recv())
            .await
            .expect("a meter in time")
            .expect("the stream is open");
        if let HarvestEvent::Meter(m) = event {
            meters.push(m);
        }
    }
    meters
}

/// With the mock elector: fencing stops publishing at once, revocation drains then acks.
#[tokio::test]
async fn mock_elector_fence_stops_and_revoke_drains() {
    let world = World::new("hvmock", 2).await;
    world.migrate().await;
    let mock = MockElector::new();
    // The test's own pool (no statement timeout): the harvester opens its own connections.
    let pool = world.pg().pool.clone();
    let h = Arc::new(
        Harvester::with_elector(world.config(), pool, Arc::new(mock.clone()))
            .await
            .unwrap(),
    );
    let mut events = h.subscribe();
    let handle = Arc::clone(&h).spawn();
    world.write(3, 2, 6).await;
    // The harvester runs (two meters after the write) yet publishes nothing before it leads.
    let meters = meters_after(&mut events, 2, world.config().limits.min_metrics_interval).await;
    assert!(meters.iter().all(|m| m.published == 0), "{meters:?}");
    assert_eq!(
        world.outbox_rows().await,
        6,
        "nothing is published before leadership"
    );

    let term = mock.acquire();
    world.drained().await;
    let first = loop {
        match events.recv().await.unwrap() {
            HarvestEvent::Meter(_) => continue,
            other => break other,
        }
    };
    assert_eq!(
        first,
        HarvestEvent::Acquired {
            leader_id: term.id()
        }
    );

    mock.fence();
    wait_for("fence observed", testkit::LOAD_MARGIN, || async {
        !h.is_leader()
    })
    .await
    .unwrap();
    world.write_keys("fenced", 3, 2, 6).await;
    // Two meters after the write: the harvester ran, and published none of it.
    let interval = world.config().limits.min_metrics_interval;
    let published = h.stats().published;
    meters_after(&mut events, 2, interval).await;
    assert_eq!(h.stats().published, published, "nothing published fenced");
    assert_eq!(
        world.outbox_rows().await,
        6,
        "a fenced harvester publishes nothing"
    );

    mock.acquire();
    world.drained().await;
    let drain = world.config().limits.drain_bound();
    assert!(
        mock.revoke(testkit::within(drain)).await,
        "revoke barrier acknowledged after drain"
    );
    mock.fail("injected elector failure");
    match handle.wait().await.unwrap_err() {
        harvester::Error::Election { source, .. } => assert!(
            matches!(source.as_ref(), harvester::Error::Injected(m) if m == "injected elector failure"),
            "{source:?}"
        ),
        other => panic!("expected the elector's failure, got {other:?}"),
    }
    assert!(!mock.is_leader());
}

/// A caller's pool lends its connection options, not its connections: the store's own
/// connections carry `database.statement_timeout`, whatever the caller's pool sets.
#[tokio::test]
async fn a_callers_pool_keeps_the_statement_timeout() {
    let world = World::new("hvpooltimeout", 1).await;
    let timeout: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(&world.pg().pool)
        .await
        .unwrap();
    assert_eq!(timeout, "0", "the caller's pool has no statement timeout");
    let mut config = world.config();
    config.database.statement_timeout = Duration::from_millis(1234);
    let store = PgStore::like_pool(&world.pg().pool, &config.database, &config.outbox)
        .await
        .unwrap();
    let timeout: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(timeout, "1234ms");
    assert_eq!(
        store.pool().options().get_max_connections(),
        config.database.max_connections
    );
}

/// The stasher honours `outbox.shape`: records stashed into a goharvest table (text columns,
/// `create_time` set) are harvested like goharvest's own, and a record the table cannot hold is
/// refused before anything is written.
#[tokio::test]
async fn the_stasher_writes_goharvest_tables_too() {
    let world = World::new("hvgostash", 4).await;
    create_goharvest_table(&world).await;
    let mut config = world.config();
    config.outbox.shape = Shape::Goharvest;
    let stasher = Stasher::for_outbox(&config.outbox);
    let mut tx = world.pg().pool.begin().await.unwrap();
    let records: Vec<StashRecord> = (0..10u64)
        .flat_map(|seq| (0..5).map(move |k| (k, seq)))
        .map(|(k, seq)| world.record(&format!("k{k}"), seq, 12))
        .collect();
    stasher.stash_batch(&mut tx, &records).await.unwrap();
    let binary = StashRecord::new(&world.topic, "k0", vec![0xff, 0xfe]);
    match stasher.stash(&mut tx, &binary).await {
        Err(harvester::Error::Unstashable { index: 0, reason }) => {
            assert!(reason.contains("UTF-8"), "{reason}")
        }
        other => panic!("a binary value must be refused for a goharvest table: {other:?}"),
    }
    tx.commit().await.unwrap();
    {
        let mut v = world.verifier.lock();
        for seq in 0..10u64 {
            for k in 0..5 {
                v.expect(&world.topic, format!("k{k}").as_bytes(), seq);
            }
        }
    }
    assert_eq!(
        world.outbox_rows().await,
        50,
        "the refused record wrote nothing"
    );
    let (report, _) = world.harvest_all(config).await;
    println!("goharvest stasher: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 50);
}

/// A row for a topic that does not exist, on a cluster that does not create topics on demand
/// (`auto.create.topics.enable=false`, as the test broker runs): it cannot be published, so it
/// goes to the quarantine with a reason naming the row and the topic, while the rows around it
/// flow; nothing of it is deleted as if delivered.
#[tokio::test]
async fn a_row_for_a_missing_topic_is_quarantined_naming_the_topic() {
    let world = World::new("hvnotopic", 4).await;
    assert!(
        !world.broker.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    world.migrate().await;
    let missing = testkit::names::topic("missing");
    world.write(5, 3, 5).await;
    let id = world
        .stash(&[StashRecord::new(&missing, "k", "nowhere to go")])
        .await[0];
    world.write_keys("after", 5, 3, 5).await;
    let started = std::time::Instant::now();
    let handle = world.start(world.config()).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    let reasons = world.quarantined().await;
    println!(
        "missing topic: quarantined after {:?}: {reasons:?}; {report}",
        started.elapsed()
    );
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert_eq!(reasons[0].0, id);
    assert!(
        reasons[0].1.contains(&format!("row {id}")) && reasons[0].1.contains(&missing),
        "the reason names the row and the topic: {reasons:?}"
    );
    assert_eq!(stats.quarantined, 1);
    report.assert_correct();
    assert_eq!(report.delivered, 30, "the rows around it");
}
