//! The harvester end to end on a real MariaDB (`MARIADB_URL`) and the embedded broker, checked
//! by the verifying consumer: zero lost, zero reordered per key. The pipeline is the same as on
//! Postgres; what differs is the store (marks as READ COMMITTED transactions, polling instead of
//! NOTIFY), so these are harvest.rs's simplest cases: one writer under the mock elector, and
//! concurrent writers committing out of id order with rollbacks under NELI through
//! `Harvester::connect` and a `mariadb://` URL, and the `reaper` binary itself from a config
//! file.

use std::sync::Arc;
use std::time::Duration;

use harvester::config::{KafkaConfig, Limits};
use harvester::election::mock::MockElector;
use harvester::election::neli::NeliConfig;
use harvester::outbox::{StashRecord, TableName};
use harvester::store::mariadb::{MariaDbStore, Stasher};
use harvester::store::{DatabaseConfig, OutboxConfig};
use harvester::{Config, Harvester};
use parking_lot::Mutex;
use rand::Rng;
use testkit::mariadb::TestMariaDb;
use testkit::process::{Observed, Signal};
use testkit::{envelope, names, wait_for, Broker, Verifier};

/// A test's world: its database, the broker, a topic, a run id and what was committed.
struct World {
    db: TestMariaDb,
    broker: Broker,
    topic: String,
    group: String,
    run: String,
    verifier: Arc<Mutex<Verifier>>,
}

impl World {
    async fn new(prefix: &str, partitions: i32) -> World {
        testkit::init_tracing();
        let db = TestMariaDb::new(prefix).await.unwrap();
        let broker = Broker::discover().unwrap();
        let topic = names::topic(prefix);
        broker.create_topic(&topic, partitions).await.unwrap();
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

    fn table(&self) -> TableName {
        TableName::parse(&format!("{}.outbox", self.db.database)).unwrap()
    }

    /// A config for this world's database and broker, with test-friendly timings.
    fn config(&self) -> Config {
        Config {
            kafka: KafkaConfig::with_bootstrap(self.broker.bootstrap()),
            leader: NeliConfig {
                group_id: Some(self.group.clone()),
                heartbeat_timeout: Duration::from_secs(1),
                min_poll_interval: Duration::from_millis(50),
                ..Default::default()
            }
            .into(),
            database: DatabaseConfig {
                url: self.db.url().replacen("mysql://", "mariadb://", 1),
                max_connections: 6,
                ..Default::default()
            },
            outbox: OutboxConfig {
                table: self.table(),
                ..Default::default()
            },
            limits: Limits {
                drain_timeout: Duration::from_secs(1),
                min_metrics_interval: Duration::from_millis(100),
                io_error_backoff: Duration::from_millis(100),
                idle_poll_interval: Duration::from_millis(100),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn record(&self, key: &str, seq: u64) -> StashRecord {
        let mut r = StashRecord::new(&self.topic, key, vec![b'v'; 32]);
        for (k, v) in envelope::headers(&self.run, seq) {
            r = r.header(k, v);
        }
        r
    }

    /// One writer: `per_key` records for each of `keys` keys, `batch` per transaction.
    async fn write(&self, keys: usize, per_key: u64, batch: usize) {
        let stasher = Stasher::new(&self.table());
        let pending: Vec<(String, u64)> = (0..per_key)
            .flat_map(|seq| (0..keys).map(move |k| (format!("k{k}"), seq)))
            .collect();
        for chunk in pending.chunks(batch) {
            let records: Vec<_> = chunk.iter().map(|(k, s)| self.record(k, *s)).collect();
            let mut tx = self.db.pool.begin().await.unwrap();
            stasher.stash_batch(&mut tx, &records).await.unwrap();
            tx.commit().await.unwrap();
            let mut v = self.verifier.lock();
            for (k, s) in chunk {
                v.expect(&self.topic, k.as_bytes(), *s);
            }
        }
    }

    /// `writers` concurrent writers, each with keys of its own; transactions of 1-5 rows with
    /// random pre-commit delays (so commits land out of id order) and a `rollback` share.
    /// Returns (committed, rolled back) record counts.
    async fn write_concurrently(&self, writers: usize, txs: usize, rollback: f64) -> (u64, u64) {
        let mut tasks = Vec::new();
        for w in 0..writers {
            let pool = self.db.pool.clone();
            let stasher = Stasher::new(&self.table());
            let verifier = Arc::clone(&self.verifier);
            let (topic, run) = (self.topic.clone(), self.run.clone());
            tasks.push(tokio::spawn(async move {
                let mut next_seq = [0u64; 4];
                let (mut committed, mut rolled_back) = (0u64, 0u64);
                for _ in 0..txs {
                    let (rows, delay, abort) = {
                        let mut rng = rand::thread_rng();
                        (
                            rng.gen_range(1..=5usize),
                            rng.gen_range(0..8u64),
                            rng.gen_bool(rollback),
                        )
                    };
                    let mut tx = pool.begin().await.unwrap();
                    let mut written = Vec::new();
                    for _ in 0..rows {
                        let k = rand::thread_rng().gen_range(0..next_seq.len());
                        let key = format!("w{w}k{k}");
                        let seq = next_seq[k];
                        next_seq[k] += 1;
                        let mut r = StashRecord::new(&topic, key.clone(), vec![b'x'; 16]);
                        for (hk, hv) in envelope::headers(&run, seq) {
                            r = r.header(hk, hv);
                        }
                        stasher.stash(&mut tx, &r).await.unwrap();
                        written.push((key, seq));
                    }
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                    if abort {
                        tx.rollback().await.unwrap();
                        rolled_back += written.len() as u64;
                        // The rolled-back sequence numbers are not reused: the verifier expects
                        // each key's committed ones in order, gaps allowed.
                    } else {
                        tx.commit().await.unwrap();
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

    /// Consumes the topic until everything expected arrived (or `timeout`) and reports.
    async fn verify(&self, timeout: Duration) -> testkit::Report {
        let mut options = testkit::verify::ConsumeOptions::new(
            self.broker.bootstrap(),
            &[&self.topic],
            &self.run,
        );
        options.timeout = timeout;
        options.settle = Duration::from_millis(500);
        let verifier = std::mem::take(&mut *self.verifier.lock());
        testkit::verify::consume(options, verifier, |_, _, _| {})
            .await
            .unwrap()
            .report()
    }

    async fn outbox_rows(&self) -> i64 {
        sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM {}",
            self.db.qualified("outbox")
        ))
        .fetch_one(&self.db.pool)
        .await
        .unwrap()
    }

    async fn drained(&self) {
        wait_for("outbox drained", Duration::from_secs(120), || async {
            self.outbox_rows().await == 0
        })
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn one_writer_under_the_mock_elector() {
    let world = World::new("mdbhv1", 4).await;
    let config = world.config();
    let store = MariaDbStore::connect(&config.database, &config.outbox)
        .await
        .unwrap();
    let elector = MockElector::new();
    let h = Arc::new(
        Harvester::new(config, Arc::new(store), Arc::new(elector.clone()))
            .await
            .unwrap(),
    );
    let handle = Arc::clone(&h).spawn();
    world.write(20, 25, 10).await;
    assert_eq!(h.store().backlog().await.unwrap().rows, 500);
    elector.acquire();
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = h.stats();
    handle.stop().await.unwrap();
    println!("mariadb, one writer: {report}stats: {stats:?}");
    report.assert_correct();
    assert_eq!(report.delivered, 500);
    assert_eq!(stats.purged, 500);
}

#[tokio::test]
async fn concurrent_writers_out_of_order_with_rollbacks_through_connect() {
    let world = World::new("mdbhv4", 4).await;
    let handle = Arc::new(Harvester::connect(world.config()).await.unwrap()).spawn();
    let (committed, rolled_back) = world.write_concurrently(4, 60, 0.1).await;
    let report = world.verify(Duration::from_secs(90)).await;
    world.drained().await;
    handle.stop().await.unwrap();
    println!("mariadb, 4 writers: committed {committed}, rolled back {rolled_back}: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, committed);
    assert!(rolled_back > 0, "the workload must include rollbacks");
}

#[tokio::test]
async fn the_reaper_sidecar_harvests_a_mariadb_outbox() {
    let world = World::new("mdbreaper", 4).await;
    let mut config = world.config();
    config.http.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let file = std::env::temp_dir().join(format!("{}.toml", names::unique("mdbreaper")));
    std::fs::write(&file, toml::to_string(&config).unwrap()).unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_reaper"));
    cmd.args(["--config", file.to_str().unwrap(), "--events-json"])
        .env("RUST_LOG", "warn");
    let mut reaper = Observed::spawn("reaper", cmd).unwrap();
    wait_for(
        "the reaper's http endpoint",
        Duration::from_secs(30),
        || async { !reaper.lines_of("http").is_empty() },
    )
    .await
    .unwrap();
    let http: std::net::SocketAddr = reaper.lines_of("http")[0].value["addr"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let get = |path: &'static str| async move {
        tokio::task::spawn_blocking(move || testkit::http::get(http, path))
            .await
            .unwrap()
            .unwrap_or((0, String::new()))
    };
    wait_for("it leads", Duration::from_secs(30), || async {
        get("/leader").await.0 == 200
    })
    .await
    .unwrap();
    world.write(10, 20, 25).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    assert_eq!(get("/readyz").await.0, 200);
    let (status, metrics) = get("/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("harvester_"), "{metrics}");
    reaper.signal(Signal::Term).unwrap();
    let exit = reaper.wait_exit(Duration::from_secs(20)).expect("exits");
    let _ = std::fs::remove_file(&file);
    println!("mariadb, reaper: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 200);
    assert!(exit.success(), "{exit}");
}
