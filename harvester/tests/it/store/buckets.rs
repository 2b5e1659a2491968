//! Postgres's mark floors under bucket scopes (harvesters sharing one outbox by
//! `hash(key) mod B`): each scope's floor moves on without passing a row of its own it has not
//! taken, and a scope of every bucket is the whole table. The scope clauses every store keeps
//! (the layout guard, a key in one bucket, `buckets_of`) run in `store::contract`.

use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::postgres::PgStore;
use harvester::store::{BucketScope, OutboxConfig, OutboxStore};
use testkit::pg::TestDb;
use uuid::Uuid;

const COUNT: u16 = 8;

async fn pg_store(db: &TestDb) -> PgStore {
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.outbox", db.schema)).unwrap(),
        ..OutboxConfig::default()
    };
    let store = PgStore::on(db.pool.clone(), &outbox);
    store.migrate().await.unwrap();
    store
}

fn records(n: usize, keys: usize) -> Vec<StashRecord> {
    (0..n)
        .map(|i| StashRecord::new("t", format!("key-{}", i % keys), format!("{i}")))
        .collect()
}

fn id_key(d: &Decoded) -> (i64, Vec<u8>) {
    match d {
        Ok(r) => (r.id, r.key.clone().unwrap_or_default()),
        Err(p) => (p.id, Vec::new()),
    }
}

/// Drains `scope` for `leader` in marks of `batch`, purging each; returns (id, key) in the
/// order marked, checking each mark comes back in id order.
async fn drain(
    store: &dyn OutboxStore,
    leader: Uuid,
    scope: &BucketScope,
    batch: usize,
) -> Vec<(i64, Vec<u8>)> {
    let mut all = Vec::new();
    loop {
        let got: Vec<(i64, Vec<u8>)> = store
            .mark_scoped(leader, batch, scope)
            .await
            .unwrap()
            .iter()
            .map(id_key)
            .collect();
        if got.is_empty() {
            return all;
        }
        assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "id order");
        let ids: Vec<i64> = got.iter().map(|(id, _)| *id).collect();
        assert_eq!(store.purge(&ids).await.unwrap(), ids.len() as u64);
        all.extend(got);
    }
}

#[tokio::test]
async fn postgres_scoped_marks_keep_floors_apart_and_all_is_the_whole_table() {
    let db = TestDb::new("buckets_floor").await.unwrap();
    let store = pg_store(&db).await;
    let mut tx = store.pool().begin().await.unwrap();
    let ids = store
        .stasher()
        .stash_batch(&mut tx, &records(400, 40))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Half the table by one scope, then the other half by another: each scope's floor moves on.
    let (left, right) = (
        BucketScope::new(COUNT, 0..COUNT / 2),
        BucketScope::new(COUNT, COUNT / 2..COUNT),
    );
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    store.record_buckets(COUNT, "test").await.unwrap();
    let l = drain(&store, a, &left, 50).await;
    let r = drain(&store, b, &right, 50).await;
    assert_eq!(l.len() + r.len(), ids.len());
    // Once drained, new rows of both scopes are still found by each (the floor never passes a
    // row its scope has not taken).
    let mut tx = store.pool().begin().await.unwrap();
    store
        .stasher()
        .stash_batch(&mut tx, &records(40, 40))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let l2 = drain(&store, a, &left, 50).await;
    let r2 = drain(&store, b, &right, 50).await;
    assert_eq!(l2.len() + r2.len(), 40);
    // A scope of every bucket is the whole table.
    let mut tx = store.pool().begin().await.unwrap();
    let more = store
        .stasher()
        .stash_batch(&mut tx, &records(10, 10))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let all = BucketScope::new(COUNT, 0..COUNT);
    assert!(all.is_all());
    let got: Vec<i64> = drain(&store, Uuid::new_v4(), &all, 100)
        .await
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(got, more);
}
