//! One store implementation set up for a contract clause: the store as the pipeline sees it
//! (`Arc<dyn OutboxStore>`), a writer committing rows as an application would, and the few raw
//! reads a clause checks the store's word against (leaders by id, the table's rows, the
//! quarantine).

use std::sync::Arc;

use harvester::outbox::{Shape, StashRecord, TableName};
use harvester::store::memory::MemoryStore;
use harvester::store::postgres::{self, PgStore};
use harvester::store::{DatabaseConfig, OutboxConfig, OutboxStore};
use testkit::TestDb;
use uuid::Uuid;

use crate::common::backend::{Backend, Db, Tx, Writer};
use crate::common::bad_rows::Bad;
use harvester::store::memory::Row;

/// The implementations of the store port that keep MP/R's promises (snapshot mode keeps them
/// its own way: `store::snapshot`). Adding one: a variant here, an arm in [`Rig::new`] and the
/// raw reads, and a line in `on_every_store!` (`contract/mod.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    /// Postgres, the native table.
    Postgres,
    /// Postgres, an unchanged goharvest table (text key and value, text header arrays).
    Goharvest,
    MariaDb,
    /// SQL Server (feature `mssql`): runs only where `MSSQL_URL` was set at build time.
    Mssql,
    /// The in-memory store.
    Memory,
}

enum Backing {
    Sql { db: Db, writer: Writer },
    Memory(MemoryStore),
}

pub struct Rig {
    pub imp: Impl,
    pub store: Arc<dyn OutboxStore>,
    pub outbox: OutboxConfig,
    backing: Backing,
}

impl Rig {
    /// A fresh, migrated store of `imp` in a database (schema) of its own; `None` (after saying
    /// why) where its server is not configured.
    pub async fn new(imp: Impl, prefix: &str) -> Option<Rig> {
        Rig::new_with(imp, prefix, true).await
    }

    /// [`Rig::new`], the harvester's migrations run or not (a goharvest table, the application's,
    /// exists either way).
    pub async fn new_with(imp: Impl, prefix: &str, migrate: bool) -> Option<Rig> {
        let backend = match imp {
            Impl::Postgres | Impl::Goharvest => Backend::Postgres,
            Impl::MariaDb => Backend::MariaDb,
            Impl::Mssql => Backend::Mssql,
            Impl::Memory => return Some(Rig::memory()),
        };
        if let Some(why) = backend.unavailable() {
            testkit::skip::skip(&format!("{} ({why})", backend.name()));
            return None;
        }
        let db = Db::create(backend, prefix).await;
        let mut outbox = OutboxConfig {
            table: db.table(),
            ..OutboxConfig::default()
        };
        let (store, writer): (Arc<dyn OutboxStore>, Writer) = if imp == Impl::Goharvest {
            let pg = goharvest(db.pg(), &mut outbox, migrate).await;
            let writer = Writer::Postgres(pg.pool().clone(), pg.stasher());
            (Arc::new(pg), writer)
        } else {
            let database = DatabaseConfig {
                url: db.url(),
                ..DatabaseConfig::default()
            };
            let store = harvester::store::connect(&database, &outbox).await.unwrap();
            if migrate {
                store.migrate().await.unwrap();
            }
            (store, db.writer(&outbox.table))
        };
        Some(Rig {
            imp,
            store,
            outbox,
            backing: Backing::Sql { db, writer },
        })
    }

    fn memory() -> Rig {
        let memory = MemoryStore::new();
        Rig {
            imp: Impl::Memory,
            store: Arc::new(memory.clone()),
            outbox: OutboxConfig::default(),
            backing: Backing::Memory(memory),
        }
    }

    /// Whether rows carry a partition and a timestamp (a goharvest table has neither).
    pub fn carries_partition_and_timestamp(&self) -> bool {
        self.imp != Impl::Goharvest
    }

    /// Whether the store announces commits to a waiting marker: Postgres's native table (an
    /// insert trigger's NOTIFY) and the memory store; a goharvest table has no trigger, MariaDB
    /// and SQL Server have no notifications: they poll.
    pub fn announces(&self) -> bool {
        matches!(self.imp, Impl::Postgres | Impl::Memory)
    }

    /// Whether header values may be any bytes (a goharvest table stores text).
    pub fn carries_binary_headers(&self) -> bool {
        self.imp != Impl::Goharvest
    }

    /// Whether a timestamp before the epoch is stored (a MariaDB TIMESTAMP starts at 1970).
    pub fn carries_timestamps_before_the_epoch(&self) -> bool {
        self.carries_partition_and_timestamp() && self.imp != Impl::MariaDb
    }

    /// `records` in one committed transaction; their ids, ascending.
    pub async fn commit(&self, records: &[StashRecord]) -> Vec<i64> {
        match &self.backing {
            Backing::Sql { writer, .. } => writer.commit(records).await,
            Backing::Memory(m) => m.insert(records),
        }
    }

    /// A transaction of the writer's, left open (dropped open: rolled back). Not on the memory
    /// store, which has no transactions.
    pub async fn begin(&self) -> Tx {
        match &self.backing {
            Backing::Sql { writer, .. } => writer.begin().await,
            Backing::Memory(_) => panic!("the memory store has no transactions"),
        }
    }

    /// The malformed rows this implementation's table can hold (`common::bad_rows`): a goharvest
    /// table's key is NOT NULL, the memory store holds the same faults as Postgres.
    pub fn bads(&self) -> Vec<Bad> {
        match self.imp {
            Impl::Postgres | Impl::Memory => Bad::on(Backend::Postgres),
            Impl::Goharvest => vec![Bad::HeaderLengths, Bad::EmptyTopic],
            Impl::MariaDb => Bad::on(Backend::MariaDb),
            Impl::Mssql => Bad::on(Backend::Mssql),
        }
    }

    /// Inserts one `bad` row (topic `t`), committed; its id.
    pub async fn insert_bad(&self, bad: Bad) -> i64 {
        let topic = if bad == Bad::EmptyTopic { "" } else { "t" };
        match (&self.backing, self.imp) {
            (Backing::Sql { db, .. }, Impl::Goharvest) => {
                goharvest_bad(db.pg(), &self.outbox.table, topic, bad).await
            }
            (Backing::Sql { db, .. }, _) => db.insert_bad(&self.outbox.table, "t", bad).await,
            (Backing::Memory(m), _) => {
                let mut row = Row::from(&StashRecord::new(topic, format!("bad-{bad:?}"), "v"));
                match bad {
                    Bad::HeaderLengths => {
                        row.header_keys = vec!["a".into(), "b".into()];
                        row.header_values = vec![vec![1]];
                    }
                    Bad::NullKey => row.key = None,
                    Bad::EmptyTopic => {}
                    other => panic!("the memory store does not hold {other:?}"),
                }
                m.insert_raw(row)
            }
        }
    }

    /// `leader_id` of every row still in the outbox, by id.
    pub async fn leaders(&self) -> Vec<Option<Uuid>> {
        match &self.backing {
            Backing::Sql { db, .. } => db.leaders(&self.outbox.table).await,
            Backing::Memory(m) => m.rows().iter().map(|r| r.leader_id).collect(),
        }
    }

    /// The ids still in the outbox, ascending.
    pub async fn ids(&self) -> Vec<i64> {
        match &self.backing {
            Backing::Sql { db, .. } => db.ids(&self.outbox.table).await,
            Backing::Memory(m) => m.rows().iter().map(|r| r.id).collect(),
        }
    }

    /// (outbox id, reason) of every quarantined row, by outbox id.
    pub async fn quarantined(&self) -> Vec<(i64, String)> {
        match &self.backing {
            Backing::Sql { db, .. } => db.quarantined(&self.outbox.quarantine()).await,
            Backing::Memory(m) => {
                let mut q: Vec<(i64, String)> = m
                    .quarantined()
                    .into_iter()
                    .map(|q| (q.row.id, q.reason))
                    .collect();
                q.sort();
                q
            }
        }
    }
}

/// goharvest's own DDL in the test's schema, and a store on it (`migrate`: the harvester's
/// migrations add only what it needs beside goharvest's columns).
async fn goharvest(db: &TestDb, outbox: &mut OutboxConfig, migrate: bool) -> PgStore {
    let table: &TableName = &outbox.table;
    sqlx::query(&postgres::goharvest_table(table))
        .execute(&db.pool)
        .await
        .unwrap();
    outbox.shape = Shape::Goharvest;
    let store = PgStore::on(db.pool.clone(), outbox);
    if migrate {
        store.migrate().await.unwrap();
    }
    store
}

/// A malformed row in a goharvest table (its own column names; text header arrays).
async fn goharvest_bad(db: &TestDb, table: &TableName, topic: &str, bad: Bad) -> i64 {
    let (names, values): (Vec<&str>, Vec<&str>) = match bad {
        Bad::HeaderLengths => (vec!["a", "b"], vec!["1"]),
        Bad::EmptyTopic => (Vec::new(), Vec::new()),
        other => panic!("a goharvest table cannot hold {other:?}"),
    };
    sqlx::query_scalar(&format!(
        "INSERT INTO {} (create_time, kafka_topic, kafka_key, kafka_value, kafka_header_keys, \
         kafka_header_values) VALUES (now(), $1, $2, 'v', $3, $4) RETURNING id",
        table.quoted()
    ))
    .bind(topic)
    .bind(format!("bad-{bad:?}"))
    .bind(names)
    .bind(values)
    .fetch_one(&db.pool)
    .await
    .unwrap()
}
