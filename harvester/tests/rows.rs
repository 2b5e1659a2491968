//! Row-level guarantees: stale leaders cannot touch re-marked rows, poison rows go to the
//! quarantine while other keys flow, and a goharvest table is harvested unchanged.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::World;
use harvester::election::mock::MockElector;
use harvester::election::Elector;
use harvester::outbox::{Shape, StashRecord};
use harvester::store::postgres::{PgStore, Stasher, Statements};
use harvester::{HarvestEvent, Harvester};
use sqlx::Row;
use testkit::{envelope, wait_for};
use uuid::Uuid;

#[tokio::test]
async fn stale_leader_cannot_purge_or_reset_rows_re_marked_by_a_newer_leader() {
    let world = World::new("hvstale", 1).await;
    world.migrate().await;
    world.write(2, 2, 4).await;
    let c = world.config();
    let sql = Statements::new(&c.outbox.table, &c.outbox.quarantine(), Shape::Native);
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    let marked_old = sqlx::query(&sql.mark)
        .bind(old)
        .bind(10i64)
        .bind(0i64)
        .fetch_all(&world.db.pool)
        .await
        .unwrap();
    assert_eq!(marked_old.len(), 4);
    let ids: Vec<i64> = marked_old.iter().map(|r| r.get::<i64, _>("id")).collect();
    // A newer leader re-marks everything the old one had in flight.
    let marked_new = sqlx::query(&sql.mark)
        .bind(new)
        .bind(10i64)
        .bind(0i64)
        .fetch_all(&world.db.pool)
        .await
        .unwrap();
    assert_eq!(marked_new.len(), 4);

    let purged: Vec<i64> = sqlx::query_scalar(&sql.purge)
        .bind(&ids)
        .bind(vec![old])
        .fetch_all(&world.db.pool)
        .await
        .unwrap();
    let reset: Vec<i64> = sqlx::query_scalar(&sql.reset)
        .bind(&ids)
        .bind(vec![old])
        .fetch_all(&world.db.pool)
        .await
        .unwrap();
    let quarantined: Option<i64> = sqlx::query_scalar(&sql.quarantine)
        .bind(ids[0])
        .bind(vec![old])
        .bind("x")
        .fetch_optional(&world.db.pool)
        .await
        .unwrap();
    assert!(
        purged.is_empty() && reset.is_empty() && quarantined.is_none(),
        "stale leader touched rows"
    );
    let owners: Vec<Option<Uuid>> = sqlx::query_scalar(&format!(
        "SELECT leader_id FROM {} ORDER BY id",
        world.table().quoted()
    ))
    .fetch_all(&world.db.pool)
    .await
    .unwrap();
    assert!(
        owners.iter().all(|o| *o == Some(new)),
        "rows still belong to the newer leader"
    );
    let purged_new: Vec<i64> = sqlx::query_scalar(&sql.purge)
        .bind(&ids)
        .bind(vec![new])
        .fetch_all(&world.db.pool)
        .await
        .unwrap();
    assert_eq!(purged_new.len(), 4, "the current leader can purge");
}

#[tokio::test]
async fn poison_rows_are_quarantined_and_other_keys_keep_flowing() {
    let world = World::new("hvpoison", 4).await;
    world.migrate().await;
    let mut config = world.config();
    config.kafka = config.kafka.set("message.max.bytes", "20000");
    let table = world.table().quoted();
    // Malformed rows, inserted around good ones.
    world.write(5, 3, 5).await;
    sqlx::query(&format!("INSERT INTO {table} (topic, kafka_key, kafka_value, header_keys, header_values) VALUES ($1, 'bad-headers', 'v', '{{a,b}}', '{{\\\\x01}}')"))
        .bind(&world.topic).execute(&world.db.pool).await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO {table} (topic, kafka_key, kafka_value) VALUES ($1, NULL, 'v')"
    ))
    .bind(&world.topic)
    .execute(&world.db.pool)
    .await
    .unwrap();
    let stasher = Stasher::new(&world.table());
    let mut tx = world.db.pool.begin().await.unwrap();
    let too_large = StashRecord::new(&world.topic, "huge", vec![b'x'; 50_000]);
    let huge_id = stasher.stash(&mut tx, &too_large).await.unwrap();
    tx.commit().await.unwrap();
    world.write_keys("after", 5, 3, 5).await;
    let handle = world.start(config).await;
    let report = world.verify(Duration::from_secs(60)).await;
    wait_for("outbox empty", Duration::from_secs(60), || async {
        world.outbox_rows().await == 0
    })
    .await
    .unwrap();
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    let reasons: Vec<(i64, String)> = sqlx::query_as(&format!(
        "SELECT outbox_id, reason FROM {} ORDER BY outbox_id",
        world.config().outbox.quarantine().quoted()
    ))
    .fetch_all(&world.db.pool)
    .await
    .unwrap();
    println!("poison: {report}quarantine: {reasons:?}");
    assert_eq!(reasons.len(), 3, "{reasons:?}");
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
    assert_eq!(stats.quarantined, 3);
    report.assert_correct();
}

/// goharvest's own DDL, in the world's schema.
async fn create_goharvest_table(world: &World) {
    sqlx::query(&format!(
        "CREATE TABLE {} (
            id                  BIGSERIAL PRIMARY KEY,
            create_time         TIMESTAMP WITH TIME ZONE NOT NULL,
            kafka_topic         VARCHAR(249) NOT NULL,
            kafka_key           VARCHAR(100) NOT NULL,
            kafka_value         VARCHAR(10000),
            kafka_header_keys   TEXT[] NOT NULL,
            kafka_header_values TEXT[] NOT NULL,
            leader_id           UUID
        )",
        world.table().quoted()
    ))
    .execute(&world.db.pool)
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
            .bind(&world.db.schema)
            .fetch_all(&world.db.pool)
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
                .execute(&world.db.pool)
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
    .bind(&world.db.schema)
    .fetch_one(&world.db.pool)
    .await
    .unwrap();
    assert_eq!(triggers, 0, "no trigger added to a goharvest table");
}

/// With the mock elector: fencing stops publishing at once, revocation drains then acks.
#[tokio::test]
async fn mock_elector_fence_stops_and_revoke_drains() {
    let world = World::new("hvmock", 2).await;
    world.migrate().await;
    let mock = MockElector::new();
    // The test's own pool (no statement timeout): the harvester opens its own connections.
    let pool = world.db.pool.clone();
    let h = Arc::new(
        Harvester::with_elector(world.config(), pool, Arc::new(mock.clone()))
            .await
            .unwrap(),
    );
    let mut events = h.subscribe();
    let handle = Arc::clone(&h).spawn();
    world.write(3, 2, 6).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        world.outbox_rows().await,
        6,
        "nothing is published before leadership"
    );

    let term = mock.acquire();
    wait_for("drained as leader", Duration::from_secs(20), || async {
        world.outbox_rows().await == 0
    })
    .await
    .unwrap();
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
    wait_for("fence observed", Duration::from_secs(5), || async {
        !h.is_leader()
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    world.write_keys("fenced", 3, 2, 6).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        world.outbox_rows().await,
        6,
        "a fenced harvester publishes nothing"
    );

    mock.acquire();
    wait_for("drained again", Duration::from_secs(20), || async {
        world.outbox_rows().await == 0
    })
    .await
    .unwrap();
    assert!(
        mock.revoke(Duration::from_secs(5)).await,
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
        .fetch_one(&world.db.pool)
        .await
        .unwrap();
    assert_eq!(timeout, "0", "the caller's pool has no statement timeout");
    let mut config = world.config();
    config.database.statement_timeout = Duration::from_millis(1234);
    let store = PgStore::like_pool(&world.db.pool, &config.database, &config.outbox)
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
    let mut tx = world.db.pool.begin().await.unwrap();
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
