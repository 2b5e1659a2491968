//! Harvester-specific test glue on top of `testkit`: a config for a test's database and broker,
//! and writers that record what they committed in a `Verifier`. A world lives on one backend
//! (`backend.rs`); `World::new` is Postgres's, for the suites that only run there.
#![allow(dead_code)]

pub mod backend;
pub mod bad_rows;
pub mod faults;
pub mod held;
pub mod mssql;
pub mod real;
pub mod reaper;
pub mod sharing;

use std::sync::Arc;
use std::time::Duration;

use harvester::config::{KafkaConfig, Limits};
use harvester::election::neli::NeliConfig;
use harvester::outbox::{StashRecord, TableName};
use harvester::stats::StatsSnapshot;
use harvester::{Config, Harvester, HarvesterHandle};
use parking_lot::Mutex;
use rand::Rng;
use testkit::{envelope, names, Broker, TestDb, Verifier};

pub use backend::Backend;
use backend::Db;

/// How long a test waits for the outbox to shrink before it calls the harvester stuck: well
/// beyond any pause the test configurations allow (a succession, a drain timeout, the
/// producers' delivery timeout), so only a harvester that stopped trips it.
pub const DRAIN_STALL: Duration = Duration::from_secs(60);

/// A config for `db`'s outbox and `broker`, with test-friendly timings.
pub fn config(db: &Db, broker: &Broker, group: &str) -> Config {
    let mut limits = Limits {
        drain_timeout: Some(Duration::from_secs(1)),
        min_metrics_interval: Duration::from_millis(100),
        io_error_backoff: Duration::from_millis(100),
        ..Default::default()
    };
    db.backend().adjust(&mut limits);
    Config {
        kafka: KafkaConfig::with_bootstrap(broker.bootstrap()),
        leader: NeliConfig {
            group_id: Some(group.to_owned()),
            heartbeat_timeout: Duration::from_secs(1),
            min_poll_interval: Duration::from_millis(50),
            ..Default::default()
        }
        .into(),
        database: harvester::config::DatabaseConfig {
            url: db.url(),
            max_connections: 6,
            ..Default::default()
        },
        outbox: harvester::config::OutboxConfig {
            table: db.table(),
            mode: db.backend().mode(),
            ..Default::default()
        },
        limits,
        ..Default::default()
    }
}

/// A test's world: database, broker, topic, run id, expectations.
pub struct World {
    pub db: Db,
    pub broker: Broker,
    pub topic: String,
    pub group: String,
    pub run: String,
    pub verifier: Arc<Mutex<Verifier>>,
}

/// Records of a key in flight in the pipelined suites (the harvester sets the gapless guarantee
/// and no message timeout on its producers for it).
pub const PIPELINED_WINDOW: usize = 16;

/// The world's config with [`PIPELINED_WINDOW`] records of a key in flight. Every other limit is
/// the shipped default ("auto"); the fault tests elect their harvesters off the faulted broker
/// (`faults::elected_off_the_broker`), so injected errors reach the records whatever the limits.
pub fn pipelined(world: &World) -> Config {
    let mut config = world.config();
    config.limits.max_in_flight_per_key = PIPELINED_WINDOW;
    config.validate().unwrap();
    config
}

impl World {
    /// A world on Postgres and the shared broker.
    pub async fn new(prefix: &str, partitions: i32) -> World {
        Self::on(Backend::Postgres, prefix, partitions).await
    }

    /// A world on `backend` and the shared broker.
    pub async fn on(backend: Backend, prefix: &str, partitions: i32) -> World {
        Self::on_broker(backend, prefix, partitions, Broker::discover().unwrap()).await
    }

    /// A world on `backend` and `broker` (e.g. an isolated cluster, for fault injection).
    pub async fn on_broker(
        backend: Backend,
        prefix: &str,
        partitions: i32,
        broker: Broker,
    ) -> World {
        Self::with_topic_configs(backend, prefix, partitions, broker, &[]).await
    }

    /// A world whose topic has topic-level `configs` (a real broker only).
    pub async fn with_topic_configs(
        backend: Backend,
        prefix: &str,
        partitions: i32,
        broker: Broker,
        configs: &[(&str, &str)],
    ) -> World {
        testkit::init_tracing();
        let db = Db::create(backend, prefix).await;
        let topic = names::topic(prefix);
        if configs.is_empty() {
            broker.create_topic(&topic, partitions).await.unwrap();
        } else {
            broker
                .create_topic_with(&topic, partitions, configs)
                .await
                .unwrap();
        }
        let group = names::unique(prefix);
        broker
            .create_topic(&format!("{group}.neli"), 1)
            .await
            .unwrap();
        World {
            db,
            broker,
            topic,
            group,
            run: names::unique("run"),
            verifier: Arc::new(Mutex::new(Verifier::new())),
        }
    }

    /// A migrated world on a cluster of its own in the embedded broker (librdkafka's mock,
    /// started beside the real broker by `scripts/services.sh`), for a test that injects
    /// request errors only the mock can inject; a real fault's counterpart runs on a
    /// [`testkit::broker::PrivateKafka`] cluster.
    pub async fn with_faults(backend: Backend, prefix: &str) -> World {
        let mock = Broker::mock().unwrap();
        let world = World::on_broker(backend, prefix, 4, mock.isolated(1).unwrap()).await;
        world.migrate().await;
        world
    }

    pub fn config(&self) -> Config {
        config(&self.db, &self.broker, &self.group)
    }

    /// The bound for a harvester (or reaper) on this world's config to lead once started: its
    /// connection check (limits.connect_timeout), the group forming (NELI's coordinator may
    /// wait a session for members to join), then at most a succession; plus the load margin.
    pub fn first_lead(&self) -> Duration {
        let c = self.config();
        testkit::within(c.limits.connect_timeout + c.leader.succession() * 2)
    }

    /// The bound for a started harvester to publish what is there: its producers connect
    /// (bounded by limits.connect_timeout), then it marks at once; plus the load margin.
    pub fn publishing(&self) -> Duration {
        testkit::within(self.config().limits.connect_timeout)
    }

    /// The bound for a successor to lead after a graceful stop or a crash: the succession, then
    /// NELI's coordinator waits (session - 1 s) for the survivors to rejoin, at most another
    /// succession; plus the load margin.
    pub fn failover(&self) -> Duration {
        testkit::within(self.config().leader.succession() * 2)
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// The Postgres schema of a world on Postgres (for the suites that only run there).
    pub fn pg(&self) -> &TestDb {
        self.db.pg()
    }

    pub fn table(&self) -> TableName {
        self.db.table()
    }

    /// The quarantine table.
    pub fn quarantine(&self) -> TableName {
        self.config().outbox.quarantine()
    }

    /// Creates the outbox (migrations) without starting a harvester.
    pub async fn migrate(&self) {
        self.db.migrate(&self.config().outbox).await
    }

    /// (outbox id, reason) of each quarantined row, by id.
    pub async fn quarantined(&self) -> Vec<(i64, String)> {
        self.db.quarantined(&self.quarantine()).await
    }

    /// Stashes `records` in one committed transaction (expecting nothing); their ids.
    pub async fn stash(&self, records: &[StashRecord]) -> Vec<i64> {
        self.db.writer(&self.table()).commit(records).await
    }

    pub fn record(&self, key: &str, seq: u64, value_len: usize) -> StashRecord {
        let mut r = StashRecord::new(&self.topic, key, vec![b'v'; value_len]);
        for (k, v) in envelope::headers(&self.run, seq) {
            r = r.header(k, v);
        }
        r
    }

    /// Expects sequence `seq` of `key` (for rows written with [`World::stash`]).
    pub fn expect(&self, key: &str, seq: u64) {
        self.verifier
            .lock()
            .expect(&self.topic, key.as_bytes(), seq);
    }

    /// One writer: `per_key` records for each of `keys` keys, `batch` per transaction, committed.
    pub async fn write(&self, keys: usize, per_key: u64, batch: usize) {
        self.write_keys("k", keys, per_key, batch).await
    }

    /// As [`World::write`], with keys named `<prefix><n>`.
    pub async fn write_keys(&self, prefix: &str, keys: usize, per_key: u64, batch: usize) {
        let writer = self.db.writer(&self.table());
        let mut pending = Vec::new();
        for seq in 0..per_key {
            for k in 0..keys {
                pending.push((format!("{prefix}{k}"), seq));
            }
        }
        for chunk in pending.chunks(batch.max(1)) {
            let records: Vec<_> = chunk.iter().map(|(k, s)| self.record(k, *s, 32)).collect();
            writer.commit(&records).await;
            let mut v = self.verifier.lock();
            for (k, s) in chunk {
                v.expect(&self.topic, k.as_bytes(), *s);
            }
        }
    }

    /// Writes sequence `seq` of every key `<prefix><n>` in one transaction.
    pub async fn write_round(&self, prefix: &str, keys: usize, seq: u64) {
        let records: Vec<_> = (0..keys)
            .map(|k| self.record(&format!("{prefix}{k}"), seq, 32))
            .collect();
        self.stash(&records).await;
        let mut v = self.verifier.lock();
        for k in 0..keys {
            v.expect(&self.topic, format!("{prefix}{k}").as_bytes(), seq);
        }
    }

    /// `writers` concurrent writers, each owning `keys_per_writer` keys; transactions of 1-5
    /// rows, random pre-commit delays (so commits land out of id order) and `rollback` share.
    /// Returns (committed, rolled back) record counts.
    pub async fn write_concurrently(
        &self,
        writers: usize,
        keys_per_writer: usize,
        txs_per_writer: usize,
        rollback: f64,
    ) -> (u64, u64) {
        let mut tasks = Vec::new();
        for w in 0..writers {
            let writer = self.db.writer(&self.table());
            let verifier = Arc::clone(&self.verifier);
            let (topic, run) = (self.topic.clone(), self.run.clone());
            tasks.push(tokio::spawn(async move {
                let mut next_seq = vec![0u64; keys_per_writer];
                let (mut committed, mut rolled_back) = (0u64, 0u64);
                for _ in 0..txs_per_writer {
                    let (rows, delay, abort) = {
                        let mut rng = rand::thread_rng();
                        (
                            rng.gen_range(1..=5usize),
                            rng.gen_range(0..8u64),
                            rng.gen_bool(rollback),
                        )
                    };
                    let mut tx = writer.begin().await;
                    let mut written = Vec::new();
                    for _ in 0..rows {
                        let k = rand::thread_rng().gen_range(0..keys_per_writer);
                        let key = format!("w{w}k{k}");
                        let seq = next_seq[k];
                        next_seq[k] += 1;
                        let mut r = StashRecord::new(&topic, key.clone(), vec![b'x'; 16]);
                        for (hk, hv) in envelope::headers(&run, seq) {
                            r = r.header(hk, hv);
                        }
                        tx.stash(std::slice::from_ref(&r)).await;
                        written.push((key, seq));
                    }
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    if abort {
                        tx.rollback().await;
                        rolled_back += written.len() as u64;
                    } else {
                        tx.commit().await;
                        committed += written.len() as u64;
                        let mut v = verifier.lock();
                        for (key, seq) in written {
                            v.expect(&topic, key.as_bytes(), seq);
                        }
                    }
                }
                (committed, rolled_back)
            }));
        }
        let mut totals = (0, 0);
        for t in tasks {
            let (c, r) = t.await.unwrap();
            totals.0 += c;
            totals.1 += r;
        }
        totals
    }

    /// Consumes the topic until everything expected arrived, or until `stall` passes without a
    /// further expected record (a slow machine delivers slowly, a stuck harvester not at all),
    /// and reports.
    pub async fn verify(&self, stall: Duration) -> testkit::Report {
        let mut options = testkit::verify::ConsumeOptions::new(
            self.broker.bootstrap(),
            &[&self.topic],
            &self.run,
        );
        options.timeout = Duration::MAX;
        options.stall = Some(stall);
        options.settle = Duration::from_millis(500);
        let verifier = std::mem::take(&mut *self.verifier.lock());
        let verifier = testkit::verify::consume(options, verifier, |_, _, _| {})
            .await
            .unwrap();
        verifier.report()
    }

    /// Verifies what the topic holds as a consumer reading through `client` would (another
    /// listener, another principal), keeping the expectations for a later [`World::verify`];
    /// `stall` as there.
    pub async fn verify_through(
        &self,
        client: &testkit::verify::ClientSettings,
        stall: Duration,
    ) -> Result<testkit::Report, testkit::TestkitError> {
        let mut options = testkit::verify::ConsumeOptions::new(
            self.broker.bootstrap(),
            &[&self.topic],
            &self.run,
        )
        .through(client);
        options.timeout = Duration::MAX;
        options.stall = Some(stall);
        let verifier = self.verifier.lock().clone();
        let verifier = testkit::verify::consume(options, verifier, |_, _, _| {}).await?;
        Ok(verifier.report())
    }

    pub async fn outbox_rows(&self) -> i64 {
        self.db.count(&self.table()).await
    }

    /// Waits until the outbox is empty for as long as it keeps shrinking: fails only when no
    /// row has left it for `stall` (a slow machine drains slowly, a stuck harvester not at all).
    pub async fn drained_while_progressing(&self, stall: Duration) {
        self.shrinks_to(0, stall).await
    }

    /// Waits until the outbox holds `target` rows, for as long as it keeps shrinking: fails
    /// only when no row has left it for `stall`.
    pub async fn shrinks_to(&self, target: i64, stall: Duration) {
        let mut least = i64::MAX;
        let mut progressed = std::time::Instant::now();
        loop {
            let rows = self.outbox_rows().await;
            if rows <= target {
                return;
            }
            if rows < least {
                least = rows;
                progressed = std::time::Instant::now();
            }
            assert!(
                progressed.elapsed() < stall,
                "the outbox stopped draining: {rows} rows left, none removed for {stall:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the outbox is empty, failing only when no row has left it for
    /// [`DRAIN_STALL`].
    pub async fn drained(&self) {
        self.drained_while_progressing(DRAIN_STALL).await
    }

    /// Starts a harvester with `config` on what is already written, verifies the topic, waits
    /// for the outbox to empty, stops it; returns the report and its counters.
    pub async fn harvest_all(&self, config: Config) -> (testkit::Report, StatsSnapshot) {
        let handle = self.start(config).await;
        let report = self.verify(Duration::from_secs(60)).await;
        self.drained().await;
        let stats = handle.harvester.stats();
        handle.stop().await.unwrap();
        (report, stats)
    }

    pub async fn start(&self, config: Config) -> HarvesterHandle {
        let h = Arc::new(Harvester::connect(config).await.unwrap());
        h.spawn()
    }

    /// Starts a harvester under the mock elector, leading at once: for faults injected into
    /// the broker's Produce requests, which would otherwise also land on NELI's heartbeats
    /// (fencing the member) and miss the outbox's producers.
    pub async fn start_leading(&self, config: Config) -> HarvesterHandle {
        let store = harvester::store::connect(&config.database, &config.outbox)
            .await
            .unwrap();
        let elector = harvester::election::mock::MockElector::new();
        let harvester = Harvester::new(config, store, Arc::new(elector.clone()))
            .await
            .unwrap();
        let handle = Arc::new(harvester).spawn();
        elector.acquire();
        handle
    }
}
