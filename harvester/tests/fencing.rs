//! Fencing shown where it can fail: a transactional leader, and separately a bucket owner, is cut
//! off and frozen *while its produce requests are on the wire*, its successor takes over and
//! publishes newer records of the same keys, and only then do the frozen member's requests reach
//! the broker. On Apache Kafka (a private one-node cluster), through a relay in front of a
//! listener of its own ([`testkit::broker::relay`]), real `reaper` processes on real Postgres.
//!
//! The freeze is provable: the relay, armed, forwards until the zombie sends a Produce request
//! to the outbox's topic, then holds that request and everything after it from every one of the
//! zombie's connections (its group heartbeats too: it is partitioned whole); the test freezes
//! the zombie (SIGSTOP) only once the relay holds at least one such request and the zombie's own
//! meter reports records in flight, and it asserts both counts. The held bytes are the zombie's
//! late sends: they reach the broker after the successor's records, whatever the zombie's own
//! timeouts say, because they are already in the network.
//!
//! - **Transactional** (`publish.mode = "transactional"`): the successor registers the same
//!   transactional id (the shard's, or `<id>-b<bucket>` for each bucket it takes), which bumps
//!   the epoch and aborts what the zombie left open. The test asserts the broker refused every
//!   held Produce request to the topic (the relay reads each answer's error codes) and that the
//!   verifier, reading read_committed, sees 0 rewinds, 0 lost, 0 reordered.
//! - **Idempotent**, the control that shows the test sees what fencing prevents: the same freeze
//!   in idempotent mode must end with the held requests written (error code 0) and at least one
//!   rewind. If the control stops rewinding, the transactional assertions prove nothing, so it
//!   is asserted too.
//!
//! **With fencing switched off it fails.** `HARVEST_TEST_UNFENCED=1` gives each member a
//! transactional id of its own (nobody's registration fences anybody: a mutation of the
//! configuration, not of the code), and both transactional tests then fail their first
//! assertion: the broker writes the zombie's held requests (error code 0) into its transaction,
//! which is still open. That transaction is aborted later (it never commits), so the
//! read_committed verifier alone would not notice (0 rewinds in that run): the broker's answers
//! are what catch it. Run:
//! `HARVEST_TEST_UNFENCED=1 cargo test -p harvester --test fencing -- --nocapture` (recorded in
//! `results/fencing-0cff770/README.md`, "Fencing in CI").

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::backend::Backend;
use common::reaper::{Reaper, TempFile};
use common::sharing::Steady;
use common::World;
use harvester::config::LeaderConfig;
use harvester::kafka::KafkaConfig;
use testkit::broker::relay::Relay;
use testkit::broker::PrivateKafka;
use testkit::process::Signal;
use testkit::wait_for;

const KEYS: usize = 40;
const BUCKETS: u16 = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// One leader (NELI), its successor waiting as a candidate.
    Leader,
    /// Two members sharing the outbox by bucket (non-exclusive NELI).
    Buckets,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Publish {
    Transactional,
    Idempotent,
}

fn leader(world: &World, kind: Kind) -> LeaderConfig {
    let base = world.config().leader;
    match (kind, base) {
        (Kind::Leader, l) => l,
        (Kind::Buckets, _) => world.neli_buckets(BUCKETS),
    }
}

/// Whether `HARVEST_TEST_UNFENCED=1` switched fencing off (see the module's doc).
fn unfenced() -> bool {
    std::env::var("HARVEST_TEST_UNFENCED").is_ok_and(|v| v == "1")
}

/// A member's config: through `bootstrap`, publishing as `publish` under transactional id
/// `txn_id`.
fn config(world: &World, kind: Kind, publish: Publish, bootstrap: &str, txn_id: &str) -> TempFile {
    let mut c = world.config();
    c.leader = leader(world, kind);
    c.kafka = KafkaConfig::with_bootstrap(bootstrap);
    if publish == Publish::Transactional {
        c.publish = serde_json::from_value(serde_json::json!({
            "mode": "transactional",
            "transactional_id": txn_id,
            "linger": "20ms",
        }))
        .unwrap();
    }
    c.validate().unwrap();
    c.http.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    c.limits.min_metrics_interval = Duration::from_millis(50);
    c.limits.max_in_flight_records = 200.into();
    TempFile::write(
        &format!("{}-{}.toml", world.group, testkit::names::unique("fence")),
        &toml::to_string(&c).unwrap(),
    )
}

/// The last value `field` had in `r`'s meter events.
fn meter(r: &Reaper, field: &str) -> i64 {
    r.proc
        .lines_of("meter")
        .last()
        .and_then(|l| l.value[field].as_i64())
        .unwrap_or(0)
}

/// Whether `r` acts now: it leads (one leader) or owns buckets (`all`: every bucket).
async fn acts(r: &Reaper, kind: Kind, all: bool) -> bool {
    match kind {
        Kind::Leader => r.is_leader().await,
        Kind::Buckets => {
            let (status, body) = r.get("/buckets").await;
            let owned = serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["owned"].as_array().map(Vec::len))
                .unwrap_or(0);
            status == 200
                && if all {
                    owned == usize::from(BUCKETS)
                } else {
                    owned > 0
                }
        }
    }
}

/// What one freeze showed.
struct Outcome {
    report: testkit::Report,
    /// The zombie's records in flight at the freeze (its last meter).
    in_flight: i64,
    /// Produce requests to the outbox's topic held at the freeze.
    held: u64,
    /// The broker's answers to them, after the release.
    answers: Vec<testkit::broker::relay::ProduceAnswer>,
}

async fn freeze(kind: Kind, publish: Publish, prefix: &str) -> Outcome {
    let _one = ONE_AT_A_TIME.lock().await;
    let relay = Relay::bind().unwrap();
    let at = relay.addr();
    let (cluster, relayed) = tokio::task::spawn_blocking(move || PrivateKafka::start_relayed(at))
        .await
        .unwrap()
        .unwrap();
    relay.start(relayed).unwrap();
    let world = Arc::new(World::on_broker(Backend::Postgres, prefix, 4, cluster.broker()).await);
    world.migrate().await;
    if kind == Kind::Buckets {
        world.create_bucket_topic(BUCKETS).await;
    }
    let txn = format!("{}-txn", world.group);
    let (txn_a, txn_b) = if unfenced() {
        (format!("{txn}-a"), format!("{txn}-b"))
    } else {
        (txn.clone(), txn)
    };
    let zombie_cfg = config(&world, kind, publish, &relay.addr().to_string(), &txn_a);
    let successor_cfg = config(&world, kind, publish, cluster.bootstrap(), &txn_b);
    let succession = leader(&world, kind).succession();
    let settle = testkit::within(succession * 5);

    // The zombie-to-be acts first; the successor joins once it does.
    let a = Reaper::spawn("zombie", &zombie_cfg).await;
    wait_for("the first member acts", world.first_lead(), || {
        acts(&a, kind, true)
    })
    .await
    .unwrap();
    let b = Reaper::spawn("successor", &successor_cfg).await;
    if kind == Kind::Buckets {
        wait_for("both members own buckets", settle, || async {
            acts(&a, kind, false).await && acts(&b, kind, false).await
        })
        .await
        .unwrap();
    }
    let writers = Steady::start(&world, "k", KEYS);
    wait_for("the zombie-to-be publishes", world.publishing(), || async {
        meter(&a, "published") > 0
    })
    .await
    .unwrap();

    // Cut it off at its next Produce request, and freeze it while that request is held and its
    // meter (emitted after the cut, so counting what can no longer be acknowledged) shows
    // records in flight. Its producers send within their linger (20 ms; 5 ms idempotent) of
    // a record, and the writers write every 10 ms: the bound is the load margin.
    let topic = world.topic.clone();
    relay.arm(&topic);
    let meters_at_cut = a.proc.lines_of("meter").len();
    wait_for(
        "a Produce request to the topic held",
        testkit::LOAD_MARGIN,
        || async {
            relay.held().produce_to(&topic) > 0
                && a.proc.lines_of("meter").len() > meters_at_cut
                && meter(&a, "in_flight_records") > 0
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e:?}: held {:?}; the zombie's last meter {:?}",
            relay.held(),
            a.proc.lines_of("meter").last().map(|l| l.value.to_string())
        )
    });
    a.proc.signal(Signal::Stop).unwrap();
    let in_flight = meter(&a, "in_flight_records");
    let held = relay.held().produce_to(&topic);
    // Every key had newer rows written between the held request and the freeze (the writers
    // kept going while the relay held, at least a meter interval): once the successor purged
    // every row up to the freeze's newest, it has published them, ahead of the held records.
    let newest = *world.db.ids(&world.table()).await.last().unwrap();

    // The successor takes over and goes ahead of what the zombie holds.
    wait_for("the successor takes over", settle, || acts(&b, kind, true))
        .await
        .unwrap();
    wait_for(
        "the successor publishes every row written before the freeze",
        common::DRAIN_STALL,
        || async {
            world
                .db
                .ids(&world.table())
                .await
                .first()
                .is_none_or(|oldest| *oldest > newest)
        },
    )
    .await
    .unwrap();

    // The zombie's held requests reach the broker now; the broker answers each within its
    // request timeout (librdkafka's request.timeout.ms, 30 s by default).
    relay.release();
    wait_for(
        "the broker answers the held requests",
        testkit::within(Duration::from_secs(30)),
        || async { relay.answers().iter().filter(|x| x.topic == topic).count() as u64 >= held },
    )
    .await
    .unwrap();
    a.proc.signal(Signal::Cont).unwrap();
    writers.stop().await;
    world
        .drained_while_progressing(succession + Duration::from_secs(30))
        .await;
    let report = world.verify(Duration::from_secs(60)).await;
    for r in [&a, &b] {
        let _ = r.proc.signal(Signal::Term);
    }
    for mut r in [a, b] {
        let _ = r.proc.wait_exit(testkit::within(succession * 2));
    }
    drop(cluster);
    let answers = relay
        .answers()
        .into_iter()
        .filter(|x| x.topic == world.topic)
        .collect();
    Outcome {
        report,
        in_flight,
        held,
        answers,
    }
}

/// Prints the freeze, and asserts what every freeze must show: sends held at it, and nothing
/// lost, reordered or unexpected.
fn held_and_verified(kind: Kind, publish: Publish, o: &Outcome) {
    print(kind, publish, o);
    assert!(o.held >= 1 && o.in_flight >= 1, "the freeze held sends");
    let r = &o.report;
    assert!(
        r.lost == 0 && r.reordered == 0 && r.unexpected == 0,
        "verification failed:\n{r}"
    );
}

fn print(kind: Kind, publish: Publish, o: &Outcome) {
    let codes: Vec<&Vec<i16>> = o.answers.iter().map(|a| &a.errors).collect();
    println!(
        "{kind:?}, {publish:?}{}: {} records in flight and {} Produce requests held at the freeze; \
         the broker's error codes for them: {codes:?}; {}",
        if unfenced() { " (UNFENCED)" } else { "" },
        o.in_flight,
        o.held,
        o.report
    );
}

/// The transactional zombie's late sends are refused, and nothing it held becomes visible.
async fn fenced(kind: Kind, prefix: &str) {
    let o = freeze(kind, Publish::Transactional, prefix).await;
    held_and_verified(kind, Publish::Transactional, &o);
    assert!(
        o.answers.iter().all(|a| !a.written()),
        "the broker wrote a fenced zombie's held Produce requests: {:?}",
        o.answers
    );
    let r = &o.report;
    assert_eq!(
        r.rewinds, 0,
        "a fenced zombie's records became visible:\n{r}"
    );
}

/// The same freeze unfenced: the held requests are written after the successor's records.
async fn control(kind: Kind, prefix: &str) {
    let o = freeze(kind, Publish::Idempotent, prefix).await;
    held_and_verified(kind, Publish::Idempotent, &o);
    assert!(
        o.answers.iter().any(|a| a.written()),
        "the broker refused an unfenced zombie's held requests: {:?}",
        o.answers
    );
    let r = &o.report;
    assert!(
        r.rewinds >= 1,
        "the unfenced zombie's late records did not land after its successor's: the test \
         cannot see what fencing prevents\n{r}"
    );
}

/// One freeze at a time: each starts a broker of its own (a JVM), and a freeze's bounds assume
/// the machine is not running three more.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_transactional_leader_is_fenced() {
    fenced(Kind::Leader, "hvfencel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_transactional_bucket_owner_is_fenced() {
    fenced(Kind::Buckets, "hvfenceb").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_idempotent_leader_rewinds() {
    control(Kind::Leader, "hvzombiel").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_idempotent_bucket_owner_rewinds() {
    control(Kind::Buckets, "hvzombieb").await;
}
