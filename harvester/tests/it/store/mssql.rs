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

const COUNT: u16 = 8;

/// The documented bucket: the first four bytes of the key's SHA-256, big-endian, mod B; a NULL
/// key hashes as the empty key.
fn sha_bucket(key: Option<&[u8]>, count: u16) -> u16 {
    let digest = Sha256::digest(key.unwrap_or_default());
    let head = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    (head % u32::from(count)) as u16
}

/// SQL Server's bucket is the first four bytes of the key's SHA-256, big-endian, mod B, a NULL
/// key as the empty key (a keyless row is scoped-marked in that key's bucket); the layout names
/// who recorded it, on a table whose name needs quoting.
#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn buckets_are_sha256_of_the_key_and_the_layout_names_who_recorded_it() {
    let Some(db) = Db::new("layout").await else {
        return;
    };
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.\"my-out]box\"", db.schema)).unwrap(),
        require_key: false,
        ..OutboxConfig::default()
    };
    let store = db.store_on(&outbox).await;
    assert_eq!(store.record_buckets(COUNT, "first").await.unwrap(), COUNT);
    assert_eq!(
        store.record_buckets(COUNT * 2, "second").await.unwrap(),
        COUNT
    );
    let sql = format!(
        "SELECT recorded_by FROM {}",
        db.qualified("my-out]box_layout")
    );
    assert_eq!(db.rows(&sql).await[0].get::<&str, _>(0), Some("first"));

    let mut keys: Vec<Option<Vec<u8>>> = (0..40)
        .map(|k| Some(format!("key-{k}").into_bytes()))
        .collect();
    keys.push(None);
    let buckets = store.buckets_of(&keys, COUNT).await.unwrap();
    for (key, b) in keys.iter().zip(&buckets) {
        assert_eq!(*b, sha_bucket(key.as_deref(), COUNT), "{key:?}");
    }
    let keyless = StashRecord {
        key: None,
        ..StashRecord::new("t", "", "keyless")
    };
    let keyless = stash(&store, &[keyless]).await[0];
    let scope = BucketScope::new(COUNT, [buckets[40]]);
    let marked = store.mark_scoped(Uuid::new_v4(), 10, &scope).await.unwrap();
    assert_eq!(ids(&marked), vec![keyless]);
    db.cleanup().await;
}

/// A `mssql://` URL connects; the migration ledger names every migration, once. (Concurrent and
/// repeated migrations: `store::contract`.)
#[tokio::test]
#[cfg_attr(
    not(mssql_url),
    ignore = "needs a SQL Server: build and run the tests with MSSQL_URL set"
)]
async fn connect_takes_mssql_urls_and_the_ledger_lists_every_migration() {
    let Some(db) = Db::new("migrate").await else {
        return;
    };
    let outbox = db.outbox("outbox");
    let database = DatabaseConfig {
        url: db.url.replacen("sqlserver://", "mssql://", 1),
        ..db.database()
    };
    let store = harvester::store::connect(&database, &outbox).await.unwrap();
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
