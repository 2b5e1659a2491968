//! SQL Server's own side of the store port (`MSSQL_URL`, e.g.
//! `sqlserver://sa:password@127.0.0.1:1433/harvester_test?encrypt=false`), each test in a schema
//! of its own. The clauses every store keeps run on SQL Server in `store::contract` (module
//! `mssql`); here: leader ids round-tripping as UNIQUEIDENTIFIERs, the quarantine (an oversize
//! value too), a row another statement holds waited for (not skipped) while writers go on, scoped marks
//! split by key under the layout guard with `buckets_of` agreeing with SHA-256, and concurrent
//! migrations.
//!
//! Without `MSSQL_URL` when the tests are built every test is ignored (`harvester/build.rs`): no
//! SQL Server runs where this was written. The database must be a scratch one: the suite turns its READ_COMMITTED_SNAPSHOT on
//! if it is off (which ends the database's other sessions). Each test's schema is dropped when
//! it ends, passed or failed (`common::mssql`).
#![cfg(feature = "mssql")]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::common::mssql::{self, TestMssql};
use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::mssql::{guid_bytes, Client, MssqlStore};
use harvester::store::{BucketScope, DatabaseConfig, OutboxConfig, OutboxStore};
use sha2::{Digest, Sha256};
use testkit::wait_for;
use uuid::Uuid;

/// Whatever must not wait for a lock finishes within this: the locks are held by the test's
/// open transactions until it ends them, so a call that waited would wait that long; a call
/// that does not wait needs only the load margin.
const QUICK: Duration = testkit::LOAD_MARGIN;

/// A test's schema in the `MSSQL_URL` database (`common::mssql`), with the store suite's
/// helpers.
struct Db(TestMssql);

impl std::ops::Deref for Db {
    type Target = TestMssql;

    fn deref(&self) -> &TestMssql {
        &self.0
    }
}

impl Db {
    /// `None` (after printing why) when `MSSQL_URL` is not set.
    async fn new(prefix: &str) -> Option<Db> {
        let Some(db) = TestMssql::new(prefix).await else {
            testkit::skip::skip(mssql::UNSET);
            return None;
        };
        Some(Db(db))
    }

    fn outbox(&self, table: &str) -> OutboxConfig {
        OutboxConfig {
            table: self.table(table),
            ..OutboxConfig::default()
        }
    }

    /// A store on a pool of its own, migrated.
    async fn store_on(&self, outbox: &OutboxConfig) -> MssqlStore {
        let store = MssqlStore::connect(&self.database(), outbox).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    async fn store(&self) -> MssqlStore {
        self.store_on(&self.outbox("outbox")).await
    }

    async fn count(&self, table: &str) -> i64 {
        self.0.count(&self.table(table)).await
    }

    /// Drops the test's tables and schema.
    async fn cleanup(self) {
        self.0.close().await
    }
}

fn records(n: usize, keys: usize) -> Vec<StashRecord> {
    (0..n)
        .map(|i| StashRecord::new("t", format!("key-{}", i % keys), format!("{i}")))
        .collect()
}

/// Stashes and commits `records` in a transaction of their own.
async fn stash(store: &MssqlStore, records: &[StashRecord]) -> Vec<i64> {
    let mut client = store.pool().open_client().await.unwrap();
    client.begin_transaction().await.unwrap();
    let ids = store
        .stasher()
        .stash_batch(&mut client, records)
        .await
        .unwrap();
    client.commit_transaction().await.unwrap();
    ids
}

async fn execute(client: &mut Client, sql: &str) {
    client
        .simple_query(sql)
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
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

#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn leader_ids_round_trip_as_uniqueidentifiers() {
    let Some(db) = Db::new("guid").await else {
        return;
    };
    let store = db.store().await;
    let all = stash(&store, &records(1, 1)).await;
    let leader = Uuid::parse_str("00112233-4455-6677-8899-aabbccddeeff").unwrap();
    assert_eq!(ids(&store.mark(leader, 1).await.unwrap()), all);
    let sql = format!(
        "SELECT leader_id, CONVERT(CHAR(36), leader_id), CAST(leader_id AS BINARY(16)) FROM {}",
        db.qualified("outbox")
    );
    let row = &db.rows(&sql).await[0];
    assert_eq!(row.get::<Uuid, _>(0), Some(leader));
    assert_eq!(
        row.get::<&str, _>(1),
        Some("00112233-4455-6677-8899-AABBCCDDEEFF")
    );
    assert_eq!(row.get::<&[u8], _>(2), Some(&guid_bytes(leader)[..]));
    // A reset conditioned on the same Uuid finds the row.
    assert_eq!(store.reset(&all, &[leader]).await.unwrap(), 1);
    assert_eq!(store.purge(&all).await.unwrap(), 1);
    db.cleanup().await;
}

#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn quarantine_moves_the_row_with_its_reason_oversize_values_too() {
    let Some(db) = Db::new("quarantine").await else {
        return;
    };
    let store = db.store().await;
    // A value far over Kafka's default message size: the pipeline quarantines such a record
    // after the producer refuses it; the store must move it whole.
    let big: Vec<u8> = (0..3 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let all = stash(
        &store,
        &[
            StashRecord::new("t", "k", "v").header("h", "x"),
            StashRecord::new("t", "big", big.clone()),
        ],
    )
    .await;
    let leader = Uuid::new_v4();
    let marked = store.mark(leader, 10).await.unwrap();
    assert_eq!(marked[1].as_ref().unwrap().value.as_deref(), Some(&big[..]));
    for (id, reason) in all.iter().zip(["too large", "over message.max.bytes"]) {
        assert!(store.quarantine(*id, &[leader], reason).await.unwrap());
        assert!(
            !store.quarantine(*id, &[leader], "again").await.unwrap(),
            "already moved"
        );
    }
    assert_eq!(db.count("outbox").await, 0);
    let sql = format!(
        "SELECT outbox_id, reason, topic, kafka_key, kafka_value, header_keys, leader_id \
         FROM {} ORDER BY outbox_id",
        db.qualified("outbox_quarantine")
    );
    let moved = db.rows(&sql).await;
    assert_eq!(moved.len(), 2);
    assert_eq!(moved[0].get::<i64, _>(0), Some(all[0]));
    assert_eq!(moved[0].get::<&str, _>(1), Some("too large"));
    assert_eq!(moved[0].get::<&str, _>(2), Some("t"));
    assert_eq!(moved[0].get::<&[u8], _>(3), Some(&b"k"[..]));
    assert_eq!(moved[0].get::<&[u8], _>(4), Some(&b"v"[..]));
    assert_eq!(moved[0].get::<&str, _>(5), Some(r#"["h"]"#));
    assert_eq!(moved[0].get::<Uuid, _>(6), Some(leader));
    assert_eq!(moved[1].get::<&[u8], _>(4), Some(&big[..]), "kept whole");
    db.cleanup().await;
}

#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn a_held_row_is_waited_for_not_skipped_and_writers_go_on() {
    let Some(db) = Db::new("held").await else {
        return;
    };
    let store = db.store().await;
    let all = stash(&store, &records(5, 5)).await;
    let table = db.qualified("outbox");
    // Hold the middle row, as a purge or reset in progress would.
    let mut holder = store.pool().open_client().await.unwrap();
    let spid: i16 = holder
        .simple_query("SELECT CAST(@@SPID AS SMALLINT)")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get(0)
        .unwrap();
    holder.begin_transaction().await.unwrap();
    execute(
        &mut holder,
        &format!(
            "UPDATE {table} SET leader_id = NEWID() WHERE id = {}",
            all[2]
        ),
    )
    .await;
    let leader = Uuid::new_v4();
    let marking = tokio::spawn({
        let store = store.clone();
        async move { store.mark(leader, 10).await }
    });
    wait_for(
        "the mark to wait for the held row",
        Duration::from_secs(5),
        || {
            let db = &db;
            async move {
                let sql = format!(
                    "SELECT COUNT(*) FROM sys.dm_exec_requests WHERE blocking_session_id = {spid}"
                );
                db.rows(&sql).await[0].get::<i32, _>(0).unwrap_or(0) > 0
            }
        },
    )
    .await
    .unwrap();
    // The mark holds rows 1-2 and waits for row 3: a writer inserts and commits at once.
    let inserted = tokio::time::timeout(QUICK, stash(&store, &records(3, 3)))
        .await
        .expect("a writer's insert must not wait for a mark");
    assert!(!marking.is_finished(), "the mark is still waiting");
    holder.commit_transaction().await.unwrap();
    let marked = marking.await.unwrap().unwrap();
    assert_eq!(
        ids(&marked),
        all,
        "the held row was waited for, not skipped"
    );
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), inserted);
    db.cleanup().await;
}

fn key_of(d: &Decoded, written: &BTreeMap<i64, Option<Vec<u8>>>) -> Option<Vec<u8>> {
    written[&id_of(d)].clone()
}

const COUNT: u16 = 8;

/// The documented bucket: the first four bytes of the key's SHA-256, big-endian, mod B; a NULL
/// key hashes as the empty key.
fn sha_bucket(key: Option<&[u8]>, count: u16) -> u16 {
    let digest = Sha256::digest(key.unwrap_or_default());
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    (head % u32::from(count)) as u16
}

/// Drains `scope` for `leader` in marks of `batch`, purging each; returns the ids in the
/// order marked, checking each mark comes back in id order.
async fn drain(store: &MssqlStore, leader: Uuid, scope: &BucketScope, batch: usize) -> Vec<i64> {
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
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn the_layout_guards_scoped_marks_and_the_first_count_stands() {
    let Some(db) = Db::new("layout").await else {
        return;
    };
    // A table name that needs quoting.
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.\"my-out]box\"", db.schema)).unwrap(),
        ..OutboxConfig::default()
    };
    let store = db.store_on(&outbox).await;
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
    let sql = format!(
        "SELECT recorded_by FROM {}",
        db.qualified("my-out]box_layout")
    );
    assert_eq!(db.rows(&sql).await[0].get::<&str, _>(0), Some("first"));
    db.cleanup().await;
}

#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn scoped_marks_split_the_rows_by_key_and_buckets_of_agrees() {
    let Some(db) = Db::new("scopes").await else {
        return;
    };
    let store = db
        .store_on(&OutboxConfig {
            require_key: false,
            ..db.outbox("outbox")
        })
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
    // The documented hash, computed here.
    for (key, b) in &bucket_of_key {
        assert_eq!(*b, sha_bucket(key.as_deref(), COUNT), "{key:?}");
    }
    assert_eq!(
        store.buckets_of(&[], COUNT).await.unwrap(),
        Vec::<u16>::new()
    );
    // More keys than one statement takes, and large keys (over 8000 bytes), in order.
    let mut many: Vec<Option<Vec<u8>>> = (0..1500)
        .map(|i| Some(format!("key-{}", i % 40).into_bytes()))
        .collect();
    many.push(Some(vec![7u8; 10_000]));
    many.push(None);
    let spread = store.buckets_of(&many, COUNT).await.unwrap();
    assert_eq!(spread.len(), many.len());
    for (key, b) in many.iter().zip(spread) {
        assert_eq!(
            sha_bucket(key.as_deref(), COUNT),
            b,
            "in order, across lists"
        );
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
    db.cleanup().await;
}

#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn concurrent_migrations_do_not_race_and_connect_takes_mssql_urls() {
    let Some(db) = Db::new("migrate").await else {
        return;
    };
    let outbox = db.outbox("outbox");
    let database = DatabaseConfig {
        url: db.url.replacen("sqlserver://", "mssql://", 1),
        ..db.database()
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
    let sql = format!(
        "SELECT version, name FROM {} ORDER BY version",
        db.qualified("outbox_migrations")
    );
    let ledger: Vec<(i32, String)> = db
        .rows(&sql)
        .await
        .iter()
        .map(|r| (r.get(0).unwrap(), r.get::<&str, _>(1).unwrap().to_owned()))
        .collect();
    assert_eq!(
        ledger,
        vec![
            (1, "outbox".into()),
            (2, "quarantine".into()),
            (3, "layout".into())
        ]
    );
    assert_eq!(store.backlog().await.unwrap().rows, 0);
    db.cleanup().await;
}
