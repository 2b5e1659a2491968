//! A scenario's private ground: a schema (Postgres) or a database (MariaDB/MySQL) of its own,
//! dropped afterwards, with the outbox table, topics, and the reaper config file.
//!
//! The data topic is the ground's own (created here, deleted with it), or on a real broker a
//! warm topic the bench run's scenarios share (`crate::warm`): then the ground notes where each
//! partition's log ends as it is laid, and the run's records are those after.
//!
//! It sits below both the run and the ceilings, which measure on the same ground. The backend
//! is the URL's scheme, looked at once here ([`Ground::new`], [`server`]); everything that
//! differs between backends is a [`Database`] method (a scenario's schema) or a [`Server`]
//! method (the server as a whole), each backend's in its own file.

mod database;
mod mariadb;
mod postgres;
mod server;

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use harvester::config::{DatabaseConfig, KafkaConfig, OutboxConfig};
use harvester::election::neli::NeliConfig;
use harvester::outbox::TableName;
use harvester::store::{OutboxMode, OutboxStore};
use harvester::Config;
use testkit::verify::ClientSettings;
use testkit::{names, Broker};
use workloads::{Backend, Db};

use crate::BenchError;
pub use database::{Database, Leftovers, Pinner};
pub use server::{Restore, Server, ServerSettings};

/// The server a database URL names, by its scheme.
pub fn server(backend: Backend) -> Box<dyn Server> {
    match backend {
        Backend::Postgres => Box::new(postgres::PostgresServer),
        Backend::MariaDb => Box::new(mariadb::MariaDbServer),
    }
}

/// Where a ground's records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataTopic {
    /// A topic of its own, created with this many partitions and deleted with the ground.
    Own { partitions: i32 },
    /// A topic that exists and stays (a warm topic of the run), with its partitions.
    Shared { name: String, partitions: i32 },
}

/// A schema (Postgres) or database (MariaDB) with its outbox table; dropped on
/// [`Ground::drop_schema`].
#[derive(Debug)]
pub struct Ground {
    pub url: String,
    /// The schema (Postgres) or database (MariaDB) holding the tables.
    pub schema: String,
    pub table: TableName,
    pub db: Db,
    pub topic: String,
    /// Per partition of `topic`, the offset this ground's records begin at (all 0 on a topic
    /// of its own).
    pub starts: Vec<i64>,
    /// Whether `topic` is the ground's own, deleted with it.
    owns_topic: bool,
    pub group: String,
    /// The backend's side of everything above.
    database: Arc<dyn Database>,
}

impl Ground {
    pub async fn new(
        url: &str,
        broker: &Broker,
        data: DataTopic,
        pool_size: u32,
        mode: OutboxMode,
    ) -> Result<Ground, BenchError> {
        let schema = names::schema("bench");
        let database: Arc<dyn Database> = match Backend::of(url)? {
            Backend::Postgres => {
                Arc::new(postgres::Postgres::create(url, &schema, pool_size).await?)
            }
            Backend::MariaDb => Arc::new(mariadb::MariaDb::create(url, &schema, pool_size).await?),
        };
        let table = database.table("outbox").await?;
        database.prepare(&table, mode).await?;
        let (topic, starts, owns_topic) = match data {
            DataTopic::Own { partitions } => {
                let topic = names::topic("bench");
                create_data_topic(broker, &topic, partitions).await?;
                (
                    topic,
                    vec![0; usize::try_from(partitions).unwrap_or(0)],
                    true,
                )
            }
            DataTopic::Shared { name, partitions } => {
                let client = ClientSettings::plaintext(broker.bootstrap());
                let starts = tokio::task::block_in_place(|| {
                    crate::receipts::log_ends(&client, &name, partitions)
                })?;
                (name, starts, false)
            }
        };
        let group = names::unique("bench");
        broker.create_topic(&format!("{group}.neli"), 1).await?;
        // For `leader.kind = "neli_buckets"` (scale-out) on the embedded broker, which cannot
        // create topics on request: its leader topic, one partition per bucket at the default
        // 64. A real broker's is created by the first member, with the scenario's count.
        if broker.embedded().is_some() {
            broker
                .create_topic(
                    &format!("{group}.neli-buckets"),
                    i32::from(harvester::assign::DEFAULT_BUCKETS),
                )
                .await?;
        }
        Ok(Ground {
            url: url.to_owned(),
            schema,
            table,
            db: database.db(),
            topic,
            starts,
            owns_topic,
            group,
            database,
        })
    }

    /// The reaper config file for this ground: a [`Config`] with the library's defaults for
    /// this ground's broker, group, database and table (HTTP on a free port), serialised, so the
    /// file says exactly what the library would do; scenario settings go on top with `--set`.
    /// Every Kafka client of the harvesters reaches the broker through `client` (its
    /// properties under `kafka`, a password as the file naming it: the file holds no secret).
    pub fn reaper_config(&self, client: &ClientSettings) -> Result<PathBuf, BenchError> {
        let kafka = client.properties.iter().fold(
            KafkaConfig::with_bootstrap(&client.bootstrap),
            |k, (p, v)| k.set(p, v.clone()),
        );
        let config = Config {
            kafka,
            leader: NeliConfig {
                group_id: Some(self.group.clone()),
                ..Default::default()
            }
            .into(),
            database: DatabaseConfig {
                url: self.url.clone(),
                ..Default::default()
            },
            outbox: OutboxConfig {
                table: self.table.clone(),
                ..Default::default()
            },
            http: harvester::config::HttpConfig {
                listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            },
            ..Default::default()
        };
        let text = toml::to_string(&config)
            .map_err(|e| BenchError::Run(format!("cannot write the reaper config: {e}")))?;
        let path = std::env::temp_dir().join(format!("{}.toml", self.group));
        std::fs::write(&path, text).map_err(BenchError::io(format!("write {}", path.display())))?;
        Ok(path)
    }

    /// Partitions of the data topic.
    pub fn partitions(&self) -> i32 {
        i32::try_from(self.starts.len()).unwrap_or(i32::MAX)
    }

    /// The database's backend.
    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// The backend's side of the ground, for work spread over tasks.
    pub fn database(&self) -> &Arc<dyn Database> {
        &self.database
    }

    /// A further native outbox table `name` beside the outbox (for the ceilings), migrated.
    pub async fn scratch_table(&self, name: &str) -> Result<TableName, BenchError> {
        self.database.table(name).await
    }

    /// The harvester's own store on `table`, connected as the reaper connects.
    pub async fn store(&self, table: &TableName) -> Result<Arc<dyn OutboxStore>, BenchError> {
        self.database.store(&self.url, table).await
    }

    /// Deletes every row of `table`.
    pub async fn truncate(&self, table: &TableName) -> Result<(), BenchError> {
        self.database.truncate(table).await
    }

    /// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
    pub async fn leftovers(&self) -> Result<Leftovers, BenchError> {
        self.database.leftovers(&self.table).await
    }

    /// (key, seq) of every row still in the outbox.
    pub async fn remaining(&self) -> Result<HashSet<(u32, u64)>, BenchError> {
        self.database.remaining(&self.table).await
    }

    /// Whether the outbox has no rows left (the harvester deleted every one it published).
    pub async fn is_empty(&self) -> Result<bool, BenchError> {
        Ok(self.lowest_id().await?.is_none())
    }

    /// The lowest id left in the outbox (`None`: empty): the harvesters delete oldest first, so
    /// its first move is their first purge.
    pub async fn lowest_id(&self) -> Result<Option<i64>, BenchError> {
        self.database.lowest_id(&self.table).await
    }

    /// Opens a [`Pinner`] on the outbox: a transaction holding its snapshot until released.
    pub async fn pin_snapshot(&self) -> Result<Pinner, BenchError> {
        self.database.pin_snapshot(&self.url, &self.table).await
    }

    /// Deletes this ground's topics from a real cluster, which would keep them (and every
    /// record) for its retention; the mock's clusters are dropped whole instead. With
    /// `BENCH_KEEP_TOPICS` set they stay, for reading a run's log afterwards
    /// (`kafka-dump-log`: which producer and epoch wrote each record).
    pub async fn drop_topics(&self, broker: &Broker) {
        if broker.embedded().is_some() || std::env::var_os("BENCH_KEEP_TOPICS").is_some() {
            tracing::info!(topic = %self.topic, "topics kept");
            return;
        }
        let mut topics = vec![
            format!("{}.neli", self.group),
            format!("{}.neli-buckets", self.group),
        ];
        if self.owns_topic {
            topics.push(self.topic.clone());
        }
        crate::broker::delete_topics(broker.bootstrap(), &topics).await;
    }

    /// Drops the schema (or database) with everything in it.
    pub async fn drop_schema(self) {
        self.database.drop_schema().await;
    }
}

/// Creates a data topic: on a real cluster kept whole whatever the cluster's own retention (the
/// verifier reads every record, and a capacity run's backlog can outlast a short
/// `log.retention.ms` or `.bytes`).
pub async fn create_data_topic(
    broker: &Broker,
    topic: &str,
    partitions: i32,
) -> Result<(), BenchError> {
    if broker.embedded().is_some() {
        broker.create_topic(topic, partitions).await?;
    } else {
        broker
            .create_topic_with(
                topic,
                partitions,
                &[("retention.ms", "-1"), ("retention.bytes", "-1")],
            )
            .await?;
    }
    Ok(())
}
