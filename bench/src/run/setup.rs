//! A scenario's private ground: a schema (dropped afterwards), topics, the outbox, and the
//! reaper config file.

use std::path::PathBuf;
use std::time::Duration;

use harvester::config::{DatabaseConfig, KafkaConfig, OutboxConfig};
use harvester::election::neli::NeliConfig;
use harvester::outbox::{Shape, TableName};
use harvester::store::postgres::migrate;
use harvester::Config;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Executor, PgPool};
use testkit::{names, Broker};

use crate::BenchError;

/// A schema with its outbox table; dropped on [`Ground::drop_schema`].
#[derive(Debug)]
pub struct Ground {
    pub url: String,
    pub schema: String,
    pub table: TableName,
    pub pool: PgPool,
    pub topic: String,
    pub group: String,
}

impl Ground {
    pub async fn new(
        url: &str,
        broker: &Broker,
        partitions: i32,
        pool_size: u32,
    ) -> Result<Ground, BenchError> {
        let schema = names::schema("bench");
        let options: PgConnectOptions = url
            .parse()
            .map_err(BenchError::db("parse the database URL"))?;
        let mut admin = options
            .clone()
            .connect()
            .await
            .map_err(BenchError::db(format!("connect to {url}")))?;
        admin
            .execute(format!("CREATE SCHEMA {schema}").as_str())
            .await
            .map_err(BenchError::db("create the scenario schema"))?;
        let pool = PgPoolOptions::new()
            .max_connections(pool_size)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await
            .map_err(BenchError::db("open the bench pool"))?;
        let table = TableName::parse(&format!("{schema}.outbox")).map_err(BenchError::Run)?;
        migrate(&pool, &table, &table.sibling("_quarantine"), Shape::Native).await?;
        let topic = names::topic("bench");
        broker.create_topic(&topic, partitions).await?;
        let group = names::unique("bench");
        broker.create_topic(&format!("{group}.neli"), 1).await?;
        // For `leader.kind = "neli_buckets"` (scale-out): its leader topic, one partition per
        // bucket at the default 64 (the embedded broker cannot create topics on request).
        broker
            .create_topic(
                &format!("{group}.neli-buckets"),
                i32::from(harvester::assign::DEFAULT_BUCKETS),
            )
            .await?;
        Ok(Ground {
            url: url.to_owned(),
            schema,
            table,
            pool,
            topic,
            group,
        })
    }

    /// The reaper config file for this ground: a [`Config`] with the library's defaults for
    /// this ground's broker, group, database and table (HTTP on a free port), serialised, so the
    /// file says exactly what the library would do; scenario settings go on top with `--set`.
    pub fn reaper_config(&self, bootstrap: &str) -> Result<PathBuf, BenchError> {
        let config = Config {
            kafka: KafkaConfig::with_bootstrap(bootstrap),
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

    /// (rows left in the outbox, rows quarantined, up to 5 quarantine reasons).
    pub async fn leftovers(&self) -> Result<(i64, i64, Vec<String>), BenchError> {
        let left: i64 =
            sqlx::query_scalar(&format!("SELECT count(*) FROM {}", self.table.quoted()))
                .fetch_one(&self.pool)
                .await
                .map_err(BenchError::db("count rows left in the outbox"))?;
        let quarantine = self.table.sibling("_quarantine").quoted();
        let quarantined: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {quarantine}"))
            .fetch_one(&self.pool)
            .await
            .map_err(BenchError::db("count quarantined rows"))?;
        let reasons: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT reason FROM {quarantine} ORDER BY outbox_id LIMIT 5"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(BenchError::db("read quarantine reasons"))?;
        Ok((left, quarantined, reasons))
    }

    /// (key, seq) of every row still in the outbox.
    pub async fn remaining(&self) -> Result<std::collections::HashSet<(u32, u64)>, BenchError> {
        let rows: Vec<(Vec<u8>, Option<String>)> = sqlx::query_as(&format!(
            "SELECT kafka_key, convert_from(header_values[array_position(header_keys, 'x-seq')], 'UTF8') FROM {}",
            self.table.quoted()
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(BenchError::db("read the rows left in the outbox"))?;
        Ok(rows
            .into_iter()
            .filter_map(|(k, s)| Some((workloads::key_index(&k)?, s?.parse().ok()?)))
            .collect())
    }

    pub async fn drop_schema(self) {
        let _ = self
            .pool
            .execute(format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema).as_str())
            .await;
        self.pool.close().await;
    }
}
