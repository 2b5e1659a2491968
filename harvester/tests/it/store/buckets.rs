//! Marks scoped to buckets (harvesters sharing one outbox by `hash(key) mod B`): on real Postgres
//! and on the in-memory store, two scopes that split the buckets take every row exactly once,
//! each key wholly in one scope, each scope in id order, with their floors kept apart.

use std::collections::{BTreeMap, BTreeSet};

use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::memory::MemoryStore;
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

/// Two scopes splitting the buckets take every row once, and no key in both (after the layout
/// guard's checks, which take nothing).
async fn split_takes_everything_once(store: &dyn OutboxStore, written: usize) {
    crate::common::contract::layout_guards_scoped_marks(store, COUNT).await;
    let left = BucketScope::new(COUNT, 0..COUNT / 2);
    let right = BucketScope::new(COUNT, COUNT / 2..COUNT);
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    // Interleave the two scopes' marks, as two harvesters would.
    let mut taken: BTreeMap<i64, (bool, Vec<u8>)> = BTreeMap::new();
    let (mut left_keys, mut right_keys) = (BTreeSet::new(), BTreeSet::new());
    loop {
        let l = drain(store, a, &left, 7).await;
        let r = drain(store, b, &right, 7).await;
        if l.is_empty() && r.is_empty() {
            break;
        }
        for (id, key) in l {
            left_keys.insert(key.clone());
            assert!(
                taken.insert(id, (true, key)).is_none(),
                "row {id} taken twice"
            );
        }
        for (id, key) in r {
            right_keys.insert(key.clone());
            assert!(
                taken.insert(id, (false, key)).is_none(),
                "row {id} taken twice"
            );
        }
    }
    assert_eq!(taken.len(), written, "every row taken");
    assert!(left_keys.is_disjoint(&right_keys), "a key in both scopes");
    assert!(
        !left_keys.is_empty() && !right_keys.is_empty(),
        "both scopes had keys"
    );
}

#[tokio::test]
async fn postgres_scopes_split_the_rows_by_key() {
    let db = TestDb::new("buckets_split").await.unwrap();
    let store = pg_store(&db).await;
    let mut tx = store.pool().begin().await.unwrap();
    store
        .stasher()
        .stash_batch(&mut tx, &records(500, 40))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    split_takes_everything_once(&store, 500).await;
    // The bucket the scoped mark uses is a pure function of the key, in range.
    let b = store.bucket_of("key-1", COUNT).await.unwrap();
    assert!(b < COUNT);
    assert_eq!(store.bucket_of("key-1", COUNT).await.unwrap(), b);
    let mut spread = BTreeSet::new();
    for k in 0..40 {
        spread.insert(store.bucket_of(&format!("key-{k}"), COUNT).await.unwrap());
    }
    assert!(
        spread.len() >= 6,
        "40 keys spread over {} of 8 buckets",
        spread.len()
    );
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

#[tokio::test]
async fn memory_scopes_split_the_rows_by_key() {
    let store = MemoryStore::new();
    store.insert(&records(300, 30));
    split_takes_everything_once(&store, 300).await;
}

#[tokio::test]
async fn goharvest_tables_are_split_by_their_text_keys() {
    let db = TestDb::new("buckets_goharvest").await.unwrap();
    let table = TableName::parse(&format!("{}.outbox", db.schema)).unwrap();
    // goharvest's own DDL: text key and value, text header arrays.
    sqlx::query(&harvester::store::postgres::goharvest_table(&table))
        .execute(&db.pool)
        .await
        .unwrap();
    let outbox = OutboxConfig {
        table,
        shape: harvester::outbox::Shape::Goharvest,
        ..OutboxConfig::default()
    };
    let store = PgStore::on(db.pool.clone(), &outbox);
    store.migrate().await.unwrap();
    let mut tx = store.pool().begin().await.unwrap();
    store
        .stasher()
        .stash_batch(&mut tx, &records(300, 30))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    split_takes_everything_once(&store, 300).await;
    let b = store.bucket_of("key-3", COUNT).await.unwrap();
    assert!(b < COUNT);
}
