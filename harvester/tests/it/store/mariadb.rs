//! MariaDB's own side of the store port, on a real MariaDB (`MARIADB_URL`, default
//! `mysql://root@127.0.0.1:3306/test`), each test in a database of its own. The clauses every
//! store keeps (marks take the head, generations, stale leaders, purge, reset, long id lists,
//! backlog and probes, poison, late commits) run on MariaDB in `store::contract`; here: the
//! quarantine's JSON row, a mark holding its locks not blocking a writer, purge, reset and mark
//! not waiting for a writer on a small table, scoped marks split by key under the layout guard with `buckets_of`
//! agreeing, and concurrent migrations.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::mariadb::MariaDbStore;
use harvester::store::{BucketScope, DatabaseConfig, OutboxConfig, OutboxStore};
use sqlx::MySqlPool;
use testkit::mariadb::TestMariaDb;
use testkit::wait_for;
use uuid::Uuid;

/// Whatever must not wait for a lock finishes within this: the locks are held by the test's
/// open transactions until it ends them, so a call that waited would wait that long or its lock
/// wait timeout (innodb_lock_wait_timeout, 50 s by default); a call that does not wait needs
/// only the load margin.
const QUICK: Duration = testkit::LOAD_MARGIN;

fn outbox(db: &TestMariaDb, table: &str) -> OutboxConfig {
    OutboxConfig {
        table: TableName::parse(&format!("{}.{table}", db.database)).unwrap(),
        ..OutboxConfig::default()
    }
}

/// A store on a pool of its own (the harvester's session settings), migrated.
async fn store_on(db: &TestMariaDb, outbox: &OutboxConfig) -> MariaDbStore {
    let database = DatabaseConfig {
        url: db.url().to_owned(),
        ..DatabaseConfig::default()
    };
    let store = MariaDbStore::connect(&database, outbox).await.unwrap();
    store.migrate().await.unwrap();
    store
}

async fn store(db: &TestMariaDb) -> MariaDbStore {
    store_on(db, &outbox(db, "outbox")).await
}

fn records(n: usize, keys: usize) -> Vec<StashRecord> {
    (0..n)
        .map(|i| StashRecord::new("t", format!("key-{}", i % keys), format!("{i}")))
        .collect()
}

async fn stash(store: &MariaDbStore, records: &[StashRecord]) -> Vec<i64> {
    let mut tx = store.pool().begin().await.unwrap();
    let ids = store.stasher().stash_batch(&mut tx, records).await.unwrap();
    tx.commit().await.unwrap();
    ids
}

fn id_of(d: &Decoded) -> i64 {
    match d {
        Ok(r) => r.id,
        Err(p) => p.id,
    }
}

fn ids(marked: &[Decoded]) -> Vec<i64> {
    marked.iter().map(id_of).collect()
}

async fn count(pool: &MySqlPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
/// The quarantine keeps the whole row as JSON, its bytes in hex.
async fn the_quarantine_keeps_the_row_as_json_with_hex_bytes() {
    let db = TestMariaDb::new("mdb_quarantine").await.unwrap();
    let store = store(&db).await;
    let all = stash(&store, &[StashRecord::new("t", "k", "v").header("h", "x")]).await;
    let leader = Uuid::new_v4();
    store.mark(leader, 10).await.unwrap();
    assert!(store
        .quarantine(all[0], &[leader], "too large")
        .await
        .unwrap());
    assert!(
        !store.quarantine(all[0], &[leader], "again").await.unwrap(),
        "already moved"
    );
    assert_eq!(count(&db.pool, &db.qualified("outbox")).await, 0);
    // JSON is a LONGTEXT with a binary collation: bytes to sqlx.
    let (id, reason, data): (i64, String, Vec<u8>) = sqlx::query_as(&format!(
        "SELECT outbox_id, reason, row_data FROM {}",
        db.qualified("outbox_quarantine")
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!((id, reason.as_str()), (all[0], "too large"));
    let data: serde_json::Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(data["id"], all[0]);
    assert_eq!(data["topic"], "t");
    assert_eq!(data["kafka_key"], "6B", "key bytes in hex");
    assert_eq!(data["kafka_value"], "76");
    assert!(data["header_keys"].to_string().contains('h'), "{data}");
}

#[tokio::test]
async fn purge_reset_and_mark_do_not_wait_for_a_writer_on_a_small_table() {
    // A handful of rows and a long id list (the padded shapes): the optimizer's full scan
    // would wait for the writer's uncommitted insert until the lock-wait timeout.
    let db = TestMariaDb::new("mdb_scan").await.unwrap();
    let store = store(&db).await;
    let all = stash(&store, &records(4, 4)).await;
    let leader = Uuid::new_v4();
    assert_eq!(ids(&store.mark(leader, 100).await.unwrap()), all);
    sqlx::query(&format!("ANALYZE TABLE {}", db.qualified("outbox")))
        .execute(&db.pool)
        .await
        .unwrap();
    let mut writer = db.pool.begin().await.unwrap();
    store
        .stasher()
        .stash(&mut writer, &StashRecord::new("t", "open", "1"))
        .await
        .unwrap();
    // Ids that are not in the table pad the list to a long shape, as a batch of acks can.
    let mut listed: Vec<i64> = all[..2].to_vec();
    listed.extend(1_000_000..1_000_060);
    let reset = tokio::time::timeout(QUICK, store.reset(&listed, &[leader]))
        .await
        .expect("a reset must not wait for a writer's uncommitted insert")
        .unwrap();
    assert_eq!(reset, 2);
    let mut listed: Vec<i64> = all[2..].to_vec();
    listed.extend(1_000_000..1_000_060);
    let purged = tokio::time::timeout(QUICK, store.purge(&listed))
        .await
        .expect("a purge must not wait for a writer's uncommitted insert")
        .unwrap();
    assert_eq!(purged, 2);
    let marked = tokio::time::timeout(QUICK, store.mark(Uuid::new_v4(), 100))
        .await
        .expect("a mark must not wait for a writer's uncommitted insert")
        .unwrap();
    assert_eq!(
        ids(&marked),
        all[..2].to_vec(),
        "the reset rows, not the open insert"
    );
    writer.rollback().await.unwrap();
}

#[tokio::test]
async fn a_mark_holding_its_locks_does_not_block_a_writer() {
    let db = TestMariaDb::new("mdb_noblock").await.unwrap();
    let store = store(&db).await;
    let all = stash(&store, &records(5, 5)).await;
    let table = db.qualified("outbox");
    // Hold the last row, as a purge in progress would: the mark locks the rows before it and
    // waits there, inside its transaction.
    let mut holder = db.pool.begin().await.unwrap();
    sqlx::query(&format!("SELECT id FROM {table} WHERE id = ? FOR UPDATE"))
        .bind(all[4])
        .fetch_one(&mut *holder)
        .await
        .unwrap();
    let leader = Uuid::new_v4();
    let marking = tokio::spawn({
        let store = store.clone();
        async move { store.mark(leader, 10).await }
    });
    let waiting = format!("%{}%", db.database);
    wait_for(
        "the mark to wait for the held row",
        Duration::from_secs(10),
        || async {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
             WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
            )
            .bind(&waiting)
            .fetch_one(&db.pool)
            .await
            .unwrap();
            n > 0
        },
    )
    .await
    .unwrap();
    // The mark's transaction is open and holds rows 1-4: a writer inserts and commits at once.
    let inserted = tokio::time::timeout(QUICK, stash(&store, &records(3, 3)))
        .await
        .expect("a writer's insert must not wait for a mark");
    assert!(!marking.is_finished(), "the mark is still waiting");
    holder.commit().await.unwrap();
    let marked = marking.await.unwrap().unwrap();
    assert_eq!(ids(&marked), all, "the mark took what it picked");
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), inserted);
}

fn key_of(d: &Decoded, written: &BTreeMap<i64, Option<Vec<u8>>>) -> Option<Vec<u8>> {
    written[&id_of(d)].clone()
}

const COUNT: u16 = 8;

/// Drains `scope` for `leader` in marks of `batch`, purging each; returns the ids in the
/// order marked, checking each mark comes back in id order.
async fn drain(store: &MariaDbStore, leader: Uuid, scope: &BucketScope, batch: usize) -> Vec<i64> {
    let mut all = Vec::new();
    loop {
        let got = ids(&store.mark_scoped(leader, batch, scope).await.unwrap());
        if got.is_empty() {
            return all;
        }
        assert!(got.windows(2).all(|w| w[0] < w[1]), "id order");
        assert_eq!(store.purge(&got).await.unwrap(), got.len() as u64);
        all.extend(got);
    }
}

#[tokio::test]
async fn the_layout_guards_scoped_marks_and_the_first_count_stands() {
    let db = TestMariaDb::new("mdb_layout").await.unwrap();
    // A table name that needs quoting.
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.\"my-outbox\"", db.database)).unwrap(),
        ..OutboxConfig::default()
    };
    let store = store_on(&db, &outbox).await;
    stash(&store, &records(20, 5)).await;
    let all = BucketScope::new(COUNT, 0..COUNT);
    let half = BucketScope::new(COUNT, 0..COUNT / 2);
    let leader = Uuid::new_v4();
    assert!(
        store
            .mark_scoped(leader, 10, &half)
            .await
            .unwrap()
            .is_empty(),
        "no layout recorded"
    );
    crate::common::contract::layout_guards_scoped_marks(&store, COUNT).await;
    let other_half = BucketScope::new(COUNT * 2, 0..COUNT);
    assert!(store
        .mark_scoped(leader, 10, &other_half)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.mark_scoped(leader, 100, &all).await.unwrap().len(),
        20,
        "a scope of every bucket is the whole table"
    );
    let (recorded_by,): (String,) = sqlx::query_as(&format!(
        "SELECT recorded_by FROM {}",
        db.qualified("my-outbox_layout")
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(recorded_by, "first");
}

#[tokio::test]
async fn scoped_marks_split_the_rows_by_key_and_buckets_of_agrees() {
    let db = TestMariaDb::new("mdb_scopes").await.unwrap();
    let store = store_on(
        &db,
        &OutboxConfig {
            require_key: false,
            ..outbox(&db, "outbox")
        },
    )
    .await;
    let mut rows = records(400, 40);
    rows.push(StashRecord {
        key: None,
        ..StashRecord::new("t", "", "keyless")
    });
    let stashed = stash(&store, &rows).await;
    let written: BTreeMap<i64, Option<Vec<u8>>> = stashed
        .iter()
        .zip(&rows)
        .map(|(id, r)| (*id, r.key.clone()))
        .collect();
    store.record_buckets(COUNT, "test").await.unwrap();

    // One scope per bucket: every row once, each key in one bucket only, and buckets_of names
    // the bucket the scoped mark took each key in.
    let mut taken = BTreeSet::new();
    let mut bucket_of_key: BTreeMap<Option<Vec<u8>>, u16> = BTreeMap::new();
    for b in 0..COUNT {
        let scope = BucketScope::new(COUNT, [b]);
        let leader = Uuid::new_v4();
        let marked = store.mark_scoped(leader, 1000, &scope).await.unwrap();
        let keys: Vec<Option<Vec<u8>>> = marked.iter().map(|d| key_of(d, &written)).collect();
        let computed = store.buckets_of(&keys, COUNT).await.unwrap();
        assert!(computed.iter().all(|c| *c == b), "bucket {b}: {computed:?}");
        for (d, key) in marked.iter().zip(keys) {
            assert!(taken.insert(id_of(d)), "row taken twice");
            assert_eq!(
                *bucket_of_key.entry(key).or_insert(b),
                b,
                "a key in two buckets"
            );
        }
        store.reset(&ids(&marked), &[leader]).await.unwrap();
    }
    assert_eq!(taken.len(), rows.len(), "every row in one bucket");
    assert!(
        bucket_of_key.values().collect::<BTreeSet<_>>().len() >= 6,
        "keys spread"
    );
    // The documented hash: CRC-32 (zlib's) of the key's bytes, mod B; NULL as the empty key.
    assert_eq!(bucket_of_key[&None], 0);
    for (key, b) in &bucket_of_key {
        // zlib's CRC-32, what MariaDB's `CRC32()` computes.
        let crc = testkit::broker::limits::crc32(key.as_deref().unwrap_or_default());
        assert_eq!(u32::from(*b), crc % u32::from(COUNT));
    }
    assert_eq!(
        store.buckets_of(&[], COUNT).await.unwrap(),
        Vec::<u16>::new()
    );
    let many: Vec<Option<Vec<u8>>> = (0..600)
        .map(|i| Some(format!("key-{}", i % 40).into_bytes()))
        .collect();
    let spread = store.buckets_of(&many, COUNT).await.unwrap();
    assert_eq!(spread.len(), 600);
    for (key, b) in many.iter().zip(spread) {
        assert_eq!(bucket_of_key[key], b, "in order, across lists");
    }

    // Two scopes splitting the buckets, interleaved as two harvesters would: every row once,
    // no key in both.
    let (left, right) = (
        BucketScope::new(COUNT, 0..COUNT / 2),
        BucketScope::new(COUNT, COUNT / 2..COUNT),
    );
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let (mut l_keys, mut r_keys, mut seen) = (BTreeSet::new(), BTreeSet::new(), 0);
    loop {
        let l = drain(&store, a, &left, 7).await;
        let r = drain(&store, b, &right, 7).await;
        if l.is_empty() && r.is_empty() {
            break;
        }
        seen += l.len() + r.len();
        l_keys.extend(l.iter().map(|id| written[id].clone()));
        r_keys.extend(r.iter().map(|id| written[id].clone()));
    }
    assert_eq!(seen, rows.len());
    assert!(l_keys.is_disjoint(&r_keys), "a key in both scopes");
    assert!(!l_keys.is_empty() && !r_keys.is_empty());
}

#[tokio::test]
async fn concurrent_migrations_do_not_race_and_connect_takes_mariadb_urls() {
    let db = TestMariaDb::new("mdb_migrate").await.unwrap();
    let outbox = outbox(&db, "outbox");
    let url = db.url().replacen("mysql://", "mariadb://", 1);
    let database = DatabaseConfig {
        url,
        ..DatabaseConfig::default()
    };
    let store = harvester::store::connect(&database, &outbox).await.unwrap();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let store = std::sync::Arc::clone(&store);
            tokio::spawn(async move { store.migrate().await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    store.migrate().await.unwrap();
    let ledger: Vec<(i32, String)> = sqlx::query_as(&format!(
        "SELECT version, name FROM {} ORDER BY version",
        db.qualified("outbox_migrations")
    ))
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        ledger,
        vec![
            (1, "outbox".into()),
            (2, "quarantine".into()),
            (3, "layout".into())
        ]
    );
    assert_eq!(store.backlog().await.unwrap().rows, 0);
}
