//! The workloads against a real MariaDB (`MARIADB_URL`, from `scripts/services.sh up`): the
//! pre-fill's rows and the writers' rows read back through the harvester's own MariaDB store
//! decode to the keys, sequences and run id the ledger holds, in per-key order by id.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use harvester::outbox::{Decoded, TableName};
use harvester::store::mariadb::{migrate, MariaDbStore};
use harvester::store::{OutboxConfig, OutboxStore};
use testkit::mariadb::TestMariaDb;
use tokio_util::sync::CancellationToken;
use workloads::prefill::{prefill, Backlog};
use workloads::{key_index, Ledger, Mode, WriterConfig, WriterPool};

async fn outbox(db: &TestMariaDb) -> (TableName, MariaDbStore) {
    let table = TableName::parse(&format!("{}.outbox", db.database)).unwrap();
    migrate(&db.pool, &table, &table.sibling("_quarantine"))
        .await
        .unwrap();
    let store = MariaDbStore::on(
        db.pool.clone(),
        &OutboxConfig {
            table: table.clone(),
            ..OutboxConfig::default()
        },
    );
    (table, store)
}

/// Every row of the outbox, marked and decoded: (id, key index, run, seq, value length).
async fn read_back(store: &MariaDbStore, topic: &str) -> Vec<(i64, u32, String, u64, usize)> {
    let marked = store.mark(uuid::Uuid::new_v4(), 10_000).await.unwrap();
    marked
        .into_iter()
        .map(|d: Decoded| {
            let r = d.expect("no poison");
            assert_eq!(r.topic, topic);
            let pairs = r
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), Some(v.as_slice())));
            let (run, seq) = testkit::envelope::parse(pairs).expect("x-run and x-seq");
            let key = key_index(r.key.as_deref().expect("a key")).expect("k<index>");
            (r.id, key, run, seq, r.value.map_or(0, |v| v.len()))
        })
        .collect()
}

#[tokio::test]
async fn prefilled_rows_decode_as_the_store_reads_them() {
    let db = TestMariaDb::new("wl_prefill").await.unwrap();
    let (table, store) = outbox(&db).await;
    let ledger = Arc::new(Ledger::new());
    // More than one INSERT statement (2,000 rows each) and a short last one.
    let backlog = Backlog::uniform(4_101, 7, 33);
    prefill(&db.pool, &table, "t1", "run-a", backlog, &ledger)
        .await
        .unwrap();
    let rows = read_back(&store, "t1").await;
    assert_eq!(rows.len(), 4_101);
    let expected: Vec<_> = backlog.rows().collect();
    for (i, (_, key, run, seq, len)) in rows.iter().enumerate() {
        assert_eq!((*key, *seq), expected[i], "row {i}");
        assert_eq!((run.as_str(), *len), ("run-a", 33));
    }
    let committed: Vec<_> = ledger.take().iter().map(|c| (c.key, c.seq)).collect();
    assert_eq!(committed, expected);
    db.close().await.unwrap();
}

#[tokio::test]
async fn writers_keep_per_key_order_through_the_mariadb_stasher() {
    let db = TestMariaDb::new("wl_writers").await.unwrap();
    let (table, store) = outbox(&db).await;
    let ledger = Arc::new(Ledger::new());
    let config = WriterConfig {
        writers: 4,
        mode: Mode::Closed,
        keys: workloads::KeyDist::Uniform { n: 5 },
        rows_per_tx: 3,
        max_pre_commit_delay: Duration::from_millis(3),
        rollback_ratio: 0.2,
        ..WriterConfig::default()
    };
    let pool = Arc::new(
        WriterPool::new(
            config,
            db.pool.clone(),
            &table,
            "t2",
            "run-b",
            Arc::clone(&ledger),
        )
        .unwrap(),
    );
    let stats = pool.run(CancellationToken::new(), Some(300)).await.unwrap();
    assert!(stats.committed >= 300, "{stats:?}");
    assert!(stats.rolled_back > 0, "some transactions rolled back");
    let rows = read_back(&store, "t2").await;
    assert_eq!(
        rows.len() as u64,
        stats.committed,
        "rolled-back rows are gone"
    );
    // By id, each key's sequence counts up from 0 without a gap.
    let mut next: HashMap<u32, u64> = HashMap::new();
    for (id, key, run, seq, _) in &rows {
        assert_eq!(run, "run-b");
        let want = next.entry(*key).or_default();
        assert_eq!(*seq, *want, "key {key} at id {id}");
        *want += 1;
    }
    assert_eq!(ledger.len() as u64, stats.committed);
    db.close().await.unwrap();
}
