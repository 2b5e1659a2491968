//! The mark's floor on real Postgres: marks skip the purged head of the table, yet a late commit,
//! a reset or another leader's hands below the floor are still found (store/postgres/cursor.rs).

use harvester::outbox::{Decoded, StashRecord, TableName};
use harvester::store::postgres::PgStore;
use harvester::store::{OutboxConfig, OutboxStore};
use sqlx::{Connection, PgConnection};
use testkit::pg::TestDb;
use uuid::Uuid;

async fn store(db: &TestDb) -> PgStore {
    store_with(db, true).await
}

async fn store_with(db: &TestDb, mark_floor: bool) -> PgStore {
    let outbox = OutboxConfig {
        table: TableName::parse(&format!("{}.outbox", db.schema)).unwrap(),
        mark_floor,
        ..OutboxConfig::default()
    };
    let store = PgStore::on(db.pool.clone(), &outbox);
    store.migrate().await.unwrap();
    store
}

async fn write(store: &PgStore, n: usize, key: &str) -> Vec<i64> {
    let records: Vec<StashRecord> = (0..n)
        .map(|i| StashRecord::new("t", key.as_bytes().to_vec(), format!("{i}").into_bytes()))
        .collect();
    let mut tx = store.pool().begin().await.unwrap();
    let ids = store
        .stasher()
        .stash_batch(&mut tx, &records)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    ids
}

fn ids(marked: &[Decoded]) -> Vec<i64> {
    marked
        .iter()
        .map(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        })
        .collect()
}

/// Marks and purges in batches of `batch` until a mark comes back empty; returns what it took.
async fn drain(store: &PgStore, leader: Uuid, batch: usize) -> Vec<i64> {
    let mut all = Vec::new();
    loop {
        let got = ids(&store.mark(leader, batch).await.unwrap());
        if got.is_empty() {
            return all;
        }
        assert_eq!(store.purge(&got).await.unwrap(), got.len() as u64);
        all.extend(got);
    }
}

#[tokio::test]
async fn marks_skip_the_purged_head_when_no_writer_is_open() {
    let db = TestDb::new("floor_head").await.unwrap();
    let store = store(&db).await;
    let written = write(&store, 1000, "k").await;
    let leader = Uuid::new_v4();
    assert_eq!(drain(&store, leader, 100).await, written);
    assert!(
        store.mark_floor() > *written.last().unwrap(),
        "after a drain the next mark starts above the purged rows, not at {}",
        store.mark_floor()
    );
    // New rows above the floor are found; a new generation starts from the head again.
    let more = write(&store, 5, "k").await;
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), more);
    let next = Uuid::new_v4();
    assert_eq!(ids(&store.mark(next, 10).await.unwrap()), more);
    db.close().await.unwrap();
}

#[tokio::test]
async fn a_late_commit_below_the_floor_is_still_marked() {
    let db = TestDb::new("floor_late").await.unwrap();
    let store = store(&db).await;
    let leader = Uuid::new_v4();
    write(&store, 3, "warm").await;
    drain(&store, leader, 10).await;
    // A writer draws an id and stays open while later rows commit and are harvested.
    let mut late = PgConnection::connect(db.url()).await.unwrap();
    let mut tx = late.begin().await.unwrap();
    let late_ids = store
        .stasher()
        .stash_batch(
            &mut tx,
            &[StashRecord::new("t", b"late".to_vec(), b"v".to_vec())],
        )
        .await
        .unwrap();
    let after = write(&store, 50, "k").await;
    assert!(late_ids[0] < after[0]);
    assert_eq!(drain(&store, leader, 10).await, after);
    assert!(
        store.mark_floor() <= late_ids[0],
        "an open writer holds the floor at or below its id ({}), not at {}",
        late_ids[0],
        store.mark_floor()
    );
    tx.commit().await.unwrap();
    // Committed after the marker passed its id: the next mark finds it.
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), late_ids);
    db.close().await.unwrap();
}

#[tokio::test]
async fn reset_rows_and_rows_another_leader_took_are_marked_again() {
    let db = TestDb::new("floor_reset").await.unwrap();
    let store = store(&db).await;
    let leader = Uuid::new_v4();
    let written = write(&store, 30, "k").await;
    let marked = ids(&store.mark(leader, 30).await.unwrap());
    assert_eq!(marked, written);
    // Reset two rows low in the table: the next mark takes them back.
    assert_eq!(store.reset(&marked[3..5], &[leader]).await.unwrap(), 2);
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), marked[3..5]);
    // Another leader (a stale one) marks a row of ours: our quarantine misses it, and the next
    // mark takes it back from the head of the table.
    let other = Uuid::new_v4();
    sqlx::query(&format!(
        "UPDATE {} SET leader_id = $1 WHERE id = $2",
        db.qualified("outbox")
    ))
    .bind(other)
    .bind(marked[1])
    .execute(&db.pool)
    .await
    .unwrap();
    assert!(!store.quarantine(marked[1], &[leader], "x").await.unwrap());
    assert_eq!(store.mark_floor(), 0);
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), vec![marked[1]]);
    // Acknowledged rows are purged whoever marks them now.
    sqlx::query(&format!(
        "UPDATE {} SET leader_id = $1 WHERE id = $2",
        db.qualified("outbox")
    ))
    .bind(other)
    .bind(marked[2])
    .execute(&db.pool)
    .await
    .unwrap();
    assert_eq!(store.purge(&marked[..3]).await.unwrap(), 3);
    db.close().await.unwrap();
}

#[tokio::test]
async fn an_id_drawn_by_nextval_before_its_insert_is_still_marked() {
    // An application that takes the id first (`SELECT nextval(...)`, then INSERT with it) in
    // one transaction holds the sequence's lock from the nextval on.
    let db = TestDb::new("floor_nextval").await.unwrap();
    let store = store(&db).await;
    let leader = Uuid::new_v4();
    write(&store, 3, "warm").await;
    drain(&store, leader, 10).await;
    let mut app = PgConnection::connect(db.url()).await.unwrap();
    let mut tx = app.begin().await.unwrap();
    let id: i64 = sqlx::query_scalar("SELECT nextval(pg_get_serial_sequence($1, 'id'))")
        .bind(db.qualified("outbox"))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    let after = write(&store, 30, "k").await;
    assert_eq!(drain(&store, leader, 10).await, after);
    sqlx::query(&format!(
        "INSERT INTO {} (id, topic, kafka_key, kafka_value) VALUES ($1, 't', 'late', 'v')",
        db.qualified("outbox")
    ))
    .bind(id)
    .execute(&mut *tx)
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), vec![id]);
    db.close().await.unwrap();
}

#[tokio::test]
async fn with_the_floor_off_every_mark_scans_from_the_head() {
    let db = TestDb::new("floor_off").await.unwrap();
    let store = store_with(&db, false).await;
    let leader = Uuid::new_v4();
    let written = write(&store, 300, "k").await;
    assert_eq!(drain(&store, leader, 100).await, written);
    assert_eq!(store.mark_floor(), 0);
    db.close().await.unwrap();
}

#[tokio::test]
async fn a_sequence_set_back_sends_the_next_mark_to_the_head() {
    let db = TestDb::new("floor_setval").await.unwrap();
    let store = store(&db).await;
    let leader = Uuid::new_v4();
    let written = write(&store, 100, "k").await;
    assert_eq!(drain(&store, leader, 10).await, written);
    assert!(store.mark_floor() > 50);
    // Someone restarts the sequence: new rows get low ids again.
    sqlx::query("SELECT setval(pg_get_serial_sequence($1, 'id'), 1, false)")
        .bind(db.qualified("outbox"))
        .execute(&db.pool)
        .await
        .unwrap();
    let again = write(&store, 5, "k").await;
    assert!(again[0] < 50);
    assert_eq!(ids(&store.mark(leader, 10).await.unwrap()), again);
    db.close().await.unwrap();
}
