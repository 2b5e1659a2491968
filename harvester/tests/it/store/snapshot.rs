//! The snapshot reader (store/postgres/snapshot) on real Postgres: each committed row read once,
//! late commits found (also those that commit while a window is paged), rolled-back rows never,
//! rows sent back read again first, and each key's rows in id order under concurrent writers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::postgres::snapshot::SnapshotReader;
use harvester::store::postgres::PgStore;
use harvester::store::{OutboxConfig, OutboxStore};
use testkit::pg::TestDb;

async fn setup(db: &TestDb) -> (PgStore, TableName) {
    let table = TableName::parse(&format!("{}.outbox", db.schema)).unwrap();
    let outbox = OutboxConfig {
        table: table.clone(),
        ..OutboxConfig::default()
    };
    let store = PgStore::on(db.pool.clone(), &outbox);
    store.migrate().await.unwrap();
    SnapshotReader::migrate(&table, &db.pool).await.unwrap();
    SnapshotReader::migrate(&table, &db.pool).await.unwrap(); // idempotent
    (store, table)
}

/// Inserts one row of `key` in a transaction of its own and returns it, still open.
async fn open_insert(
    store: &PgStore,
    key: &str,
) -> (sqlx::Transaction<'static, sqlx::Postgres>, i64) {
    let mut tx = store.pool().begin().await.unwrap();
    let record = StashRecord::new("t", key.as_bytes().to_vec(), b"v".to_vec());
    let ids = store
        .stasher()
        .stash_batch(&mut tx, &[record])
        .await
        .unwrap();
    (tx, ids[0])
}

async fn insert(store: &PgStore, key: &str) -> i64 {
    let (tx, id) = open_insert(store, key).await;
    tx.commit().await.unwrap();
    id
}

fn ids(rows: &[Decoded]) -> Vec<i64> {
    rows.iter()
        .map(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        })
        .collect()
}

#[tokio::test]
async fn late_commits_rollbacks_and_rows_sent_back() {
    let db = TestDb::new("snapshot_reader").await.unwrap();
    let (store, table) = setup(&db).await;
    let pool = db.pool.clone();
    let mut reader = SnapshotReader::new(&table, true);

    // Open before the full read: not visible in its snapshot, so left to a window.
    let (late, late_id) = open_insert(&store, "late").await;
    let first = insert(&store, "a").await;
    let second = insert(&store, "a").await;
    assert!(!reader.caught_up());
    assert_eq!(
        ids(&reader.read(&pool, 10).await.unwrap()),
        vec![first, second]
    );
    assert!(reader.caught_up(), "a short page ends the full read");

    // A rolled-back row is never read.
    let (rolled_back, _) = open_insert(&store, "b").await;
    rolled_back.rollback().await.unwrap();
    late.commit().await.unwrap();
    assert_eq!(
        ids(&reader.read(&pool, 10).await.unwrap()),
        vec![late_id],
        "the late commit, below ids read before"
    );
    assert!(reader.read(&pool, 10).await.unwrap().is_empty());

    // A row that commits while a window is being paged, with an id below the page's: the
    // window (its end fixed by its first page) leaves it to the next window.
    let (slow, slow_id) = open_insert(&store, "c").await;
    let quick = insert(&store, "d").await;
    let quick2 = insert(&store, "d").await;
    assert!(slow_id < quick);
    assert_eq!(ids(&reader.read(&pool, 1).await.unwrap()), vec![quick]);
    slow.commit().await.unwrap();
    assert_eq!(
        ids(&reader.read(&pool, 1).await.unwrap()),
        vec![quick2],
        "the window's second page: the slow row is not visible in the window's end"
    );
    assert_eq!(
        ids(&reader.read(&pool, 5).await.unwrap()),
        vec![slow_id],
        "the next window finds it"
    );

    // Sent back: returned first by the next read, in id order with what is new.
    let newer = insert(&store, "a").await;
    reader.reread([second, first]);
    assert_eq!(
        ids(&reader.read(&pool, 10).await.unwrap()),
        vec![first, second, newer]
    );
    // Never more than asked for: the rest of what was sent back comes next, before new rows.
    let newest = insert(&store, "a").await;
    reader.reread([newer, second, first]);
    assert_eq!(
        ids(&reader.read(&pool, 2).await.unwrap()),
        vec![first, second]
    );
    assert_eq!(
        ids(&reader.read(&pool, 2).await.unwrap()),
        vec![newer, newest],
        "the last one sent back, then room for what is new"
    );
    assert!(reader.read(&pool, 2).await.unwrap().is_empty());
    // Deleted rows sent back are simply gone.
    assert_eq!(reader.delete(&pool, &[first, second]).await.unwrap(), 2);
    reader.reread([first]);
    assert!(reader.read(&pool, 10).await.unwrap().is_empty());

    // A new reader (a new term) reads everything still in the table, once.
    let mut next = SnapshotReader::new(&table, true);
    let all = ids(&next.read(&pool, 100).await.unwrap());
    assert_eq!(all, vec![late_id, slow_id, quick, quick2, newer, newest]);
    db.close().await.unwrap();
}

#[tokio::test]
async fn concurrent_writers_every_committed_row_once_in_key_order() {
    let db = TestDb::new("snapshot_concurrent").await.unwrap();
    let (store, table) = setup(&db).await;
    let store = Arc::new(store);
    let pool = db.pool.clone();
    let stop = tokio_util::sync::CancellationToken::new();

    // Writers: one key each, one transaction after another; every 7th rolls back, every 11th
    // stays open 150 ms (a late commit under the reader's feet).
    let mut writers = Vec::new();
    for w in 0..6 {
        let (store, stop) = (Arc::clone(&store), stop.clone());
        writers.push(tokio::spawn(async move {
            let key = format!("key-{w}");
            let mut committed = Vec::new();
            let mut n = 0u32;
            while !stop.is_cancelled() {
                n += 1;
                let (tx, id) = open_insert(&store, &key).await;
                if n.is_multiple_of(7) {
                    tx.rollback().await.unwrap();
                    continue;
                }
                if n % 11 == w {
                    tokio::time::sleep(Duration::from_millis(150)).await;
                }
                tx.commit().await.unwrap();
                committed.push(id);
                tokio::time::sleep(Duration::from_millis(u64::from(n % 3))).await;
            }
            (key, committed)
        }));
    }

    // The reader: small pages, deletes what it read (as acknowledgements would).
    let mut reader = SnapshotReader::new(&table, true);
    let mut seen: Vec<(String, i64)> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut empty_after_stop = 0;
    loop {
        let rows = reader.read(&pool, 7).await.unwrap();
        let got: Vec<i64> = ids(&rows);
        for d in &rows {
            let r = d.as_ref().expect("well-formed rows");
            seen.push((String::from_utf8(r.key.clone().unwrap()).unwrap(), r.id));
        }
        if !got.is_empty() {
            reader.delete(&pool, &got).await.unwrap();
        }
        if tokio::time::Instant::now() >= deadline && !stop.is_cancelled() {
            stop.cancel();
        }
        if stop.is_cancelled() {
            // Writers stop within a transaction; wait for them, then read until two empty
            // windows in a row.
            if got.is_empty() && writers.iter().all(|w| w.is_finished()) {
                empty_after_stop += 1;
                if empty_after_stop >= 2 {
                    break;
                }
            } else {
                empty_after_stop = 0;
            }
        }
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    let mut committed: HashMap<String, Vec<i64>> = HashMap::new();
    for w in writers {
        let (key, ids) = w.await.unwrap();
        committed.insert(key, ids);
    }

    let unique: HashSet<i64> = seen.iter().map(|(_, id)| *id).collect();
    assert_eq!(unique.len(), seen.len(), "a row read twice");
    let expected: HashSet<i64> = committed.values().flatten().copied().collect();
    assert!(
        expected.len() > 300,
        "writers wrote {} rows",
        expected.len()
    );
    let missing: Vec<_> = expected.difference(&unique).collect();
    let extra: Vec<_> = unique.difference(&expected).collect();
    assert!(missing.is_empty(), "committed rows never read: {missing:?}");
    assert!(
        extra.is_empty(),
        "rows read that were never committed: {extra:?}"
    );
    let mut last: HashMap<&str, i64> = HashMap::new();
    for (key, id) in &seen {
        let prev = last.insert(key.as_str(), *id);
        assert!(
            prev.is_none_or(|p| p < *id),
            "{key}: row {id} read after {prev:?}"
        );
    }
    let left: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {}", table.quoted()))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "every row read was deleted");
    db.close().await.unwrap();
}

/// The table's tuple reads so far: rows read by sequential scans plus rows fetched by index
/// scans (bitmap heap scans included), from Postgres's statistics. `conn`'s own pending counts
/// are flushed first (a backend otherwise reports them up to 10s later).
async fn tuples_read(pool: &sqlx::PgPool, table: &TableName) -> i64 {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_stat_force_next_flush()")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let mut observer = pool.acquire().await.unwrap(); // the same (only) connection, flushed
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(&mut *observer)
        .await
        .unwrap();
    sqlx::query_scalar(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables \
         WHERE schemaname = $1 AND relname = $2",
    )
    .bind(table.schema.as_deref().unwrap())
    .bind(&table.table)
    .fetch_one(&mut *observer)
    .await
    .unwrap()
}

/// A window costs what is new plus what was in progress at its start: not the rows still in
/// flight (read, not yet deleted), even with the oldest open transaction older than all of
/// them (its xid keeps the snapshots' xmin below every one of them).
#[tokio::test]
async fn a_window_reads_what_is_new_not_the_rows_in_flight() {
    const IN_FLIGHT: usize = 20_000;
    const NEW: usize = 10;
    let db = TestDb::new("snapshot_window_cost").await.unwrap();
    let (store, table) = setup(&db).await;
    // One connection, so that its statistics can be flushed on demand (`tuples_read`).
    let reader_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(db.url())
        .await
        .unwrap();
    let mut reader = SnapshotReader::new(&table, true);

    let (pin, pin_id) = open_insert(&store, "pin").await;
    let mut tx = store.pool().begin().await.unwrap();
    let records: Vec<StashRecord> = (0..IN_FLIGHT)
        .map(|i| StashRecord::new("t", format!("k{}", i % 100).into_bytes(), b"v".to_vec()))
        .collect();
    store
        .stasher()
        .stash_batch(&mut tx, &records)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    sqlx::query(&format!("ANALYZE {}", table.quoted()))
        .execute(&db.pool)
        .await
        .unwrap();
    // Read everything (the full read, then windows) and leave it in the table: in flight.
    let mut read = 0;
    loop {
        let page = reader.read(&reader_pool, 5_000).await.unwrap();
        if page.is_empty() && reader.caught_up() {
            break;
        }
        read += page.len();
    }
    assert_eq!(read, IN_FLIGHT);

    let mut new = Vec::new();
    for i in 0..NEW {
        new.push(insert(&store, &format!("n{i}")).await);
    }
    let before = tuples_read(&reader_pool, &table).await;
    let window = ids(&reader.read(&reader_pool, 1_000).await.unwrap());
    let after = tuples_read(&reader_pool, &table).await;
    // Ended before anything is asserted: left open, it would hold up the schema's drop.
    pin.commit().await.unwrap();
    assert_eq!(
        window, new,
        "the window holds the new rows, the pinning one still open"
    );
    let cost = after - before;
    println!(
        "a window of {NEW} new rows over {IN_FLIGHT} in flight, the oldest transaction open: {cost} tuples read"
    );
    assert!(
        cost <= (NEW as i64) * 5,
        "a window of {NEW} new rows read {cost} tuples: it walks the {IN_FLIGHT} rows in flight"
    );

    // The pinning transaction's row is found by the next window.
    assert_eq!(
        ids(&reader.read(&reader_pool, 1_000).await.unwrap()),
        vec![pin_id]
    );
    reader_pool.close().await;
}
