//! MariaDB's own side of the store port, on a real MariaDB (`MARIADB_URL`, default
//! `mysql://root@127.0.0.1:3306/test`), each test in a database of its own. The clauses every
//! store keeps (marks take the head, generations, stale leaders, purge, reset, long id lists,
//! backlog and probes, poison, late commits) run on MariaDB in `store::contract`; here: the
//! quarantine's JSON row, a mark holding its locks not blocking a writer, purge, reset and mark
//! not waiting for a writer on a small table, scoped marks split by key under the layout guard with `buckets_of`
//! agreeing, and concurrent migrations.

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

const COUNT: u16 = 8;

/// MariaDB's bucket is zlib's CRC-32 (its `CRC32()`) of the key's bytes mod B, a NULL key as the
/// empty key (a keyless row is scoped-marked in that key's bucket); the layout names who recorded
/// it, on a table whose name needs quoting.
#[tokio::test]
async fn buckets_are_crc32_of_the_key_and_the_layout_names_who_recorded_it() {
    let db = TestMariaDb::new("mdb_layout").await.unwrap();
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.\"my-outbox\"", db.database)).unwrap(),
        require_key: false,
        ..OutboxConfig::default()
    };
    let store = store_on(&db, &outbox).await;
    assert_eq!(store.record_buckets(COUNT, "first").await.unwrap(), COUNT);
    assert_eq!(
        store.record_buckets(COUNT * 2, "second").await.unwrap(),
        COUNT
    );
    let (recorded_by,): (String,) = sqlx::query_as(&format!(
        "SELECT recorded_by FROM {}",
        db.qualified("my-outbox_layout")
    ))
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(recorded_by, "first");

    let mut keys: Vec<Option<Vec<u8>>> = (0..40)
        .map(|k| Some(format!("key-{k}").into_bytes()))
        .collect();
    keys.push(None);
    let buckets = store.buckets_of(&keys, COUNT).await.unwrap();
    for (key, b) in keys.iter().zip(&buckets) {
        let crc = testkit::broker::limits::crc32(key.as_deref().unwrap_or_default());
        assert_eq!(u32::from(*b), crc % u32::from(COUNT), "{key:?}");
    }
    let keyless = StashRecord {
        key: None,
        ..StashRecord::new("t", "", "keyless")
    };
    let keyless = stash(&store, &[keyless]).await[0];
    let scope = BucketScope::new(COUNT, [buckets[40]]);
    let marked = store.mark_scoped(Uuid::new_v4(), 10, &scope).await.unwrap();
    assert_eq!(ids(&marked), vec![keyless]);
}

/// A `mariadb://` URL connects; the migration ledger names every migration, once. (Concurrent and
/// repeated migrations: `store::contract`.)
#[tokio::test]
async fn connect_takes_mariadb_urls_and_the_ledger_lists_every_migration() {
    let db = TestMariaDb::new("mdb_migrate").await.unwrap();
    let outbox = outbox(&db, "outbox");
    let url = db.url().replacen("mysql://", "mariadb://", 1);
    let database = DatabaseConfig {
        url,
        ..DatabaseConfig::default()
    };
    let store = harvester::store::connect(&database, &outbox).await.unwrap();
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
