//! Request failures injected into the embedded broker while a test runs.

use std::time::Duration;

use harvester::config::LeaderConfig;
use harvester::election::etcd::EtcdConfig;
use harvester::stats::StatsSnapshot;
use harvester::Config;
use testkit::{Broker, Report};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::World;

/// Which requests fail, with what (in turn), and how often.
#[derive(Clone, Copy)]
pub struct Faults {
    pub api: &'static str,
    pub errors: &'static [&'static str],
    pub spacing: Spacing,
}

/// When the next error is injected.
#[derive(Clone, Copy)]
pub enum Spacing {
    /// One every 100 ms, whatever the harvester does: for errors it rides out without
    /// stopping its pipeline.
    Steady,
    /// The next one once the last has failed a delivery and the harvester has since published
    /// this many records: for errors that stop the pipeline (a gapless producer's refusal),
    /// which every 100 ms would leave no term time to make progress in, so the run would test
    /// nothing but its own livelock.
    AfterProgress { records: u64 },
}

/// Produce requests, alternating an error librdkafka retries itself (NOT_LEADER_FOR_PARTITION)
/// with one it hands back (INVALID_RECORD: "suspect" to the harvester, which with the gapless
/// guarantee also fails the producer). Every Produce request of a faulted cluster is the
/// outbox's: its harvesters are elected elsewhere ([`elected_off_the_broker`]).
pub const PRODUCE: Faults = Faults {
    api: "Produce",
    errors: &["INVALID_RECORD", "NOT_LEADER_FOR_PARTITION"],
    spacing: Spacing::Steady,
};

/// Produce requests refused with INVALID_RECORD alone: "suspect" to the harvester, and with the
/// gapless guarantee fatal to the producer. A retriable error (NOT_LEADER_FOR_PARTITION) is left
/// out because the mock, which checks no sequence numbers for idempotent producers, may then
/// acknowledge a later request of the partition while the refused one is never written, and
/// librdkafka takes the refused records as implicitly acknowledged (a loss the mock makes, not
/// the harvester; a real broker answers OUT_OF_ORDER_SEQUENCE_NUMBER). It stays rare in
/// [`PRODUCE`]'s tests, whose requests carry more records than librdkafka keeps in flight per
/// partition; a key with many records in flight (pipelined) sends smaller ones.
pub const REFUSED: Faults = Faults {
    api: "Produce",
    errors: &["INVALID_RECORD"],
    spacing: Spacing::AfterProgress { records: 200 },
};

/// A transactional producer's registration of a partition with its transaction: the
/// transaction can then only abort. Only the outbox's transactional producers send these, and
/// no record of the partition has been written yet, so librdkafka need not bump its epoch (after
/// a bump librdkafka's mock cluster acknowledges the new epoch's first records without writing
/// them: its sequence window per partition outlives the epoch).
pub const ADD_PARTITIONS_TO_TXN: Faults = Faults {
    api: "AddPartitionsToTxn",
    errors: &["TOPIC_AUTHORIZATION_FAILED"],
    spacing: Spacing::Steady,
};

/// The next requests of `faults.api` fail, spaced as `faults.spacing` says (see [`Faults`]).
pub struct RequestFaults {
    stop: CancellationToken,
    task: JoinHandle<u64>,
    broker: Broker,
    api: &'static str,
}

impl RequestFaults {
    /// Starts injecting into `broker`'s requests; `stats` reads the harvester's counters (for
    /// [`Spacing::AfterProgress`]).
    pub fn start(
        broker: &Broker,
        faults: Faults,
        stats: impl Fn() -> StatsSnapshot + Send + Sync + 'static,
    ) -> Self {
        let stop = CancellationToken::new();
        let task = {
            let (stop, broker) = (stop.clone(), broker.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.is_cancelled() {
                    let error = faults.errors[n as usize % faults.errors.len()];
                    let failures = stats().delivery_failures;
                    broker.request_errors(faults.api, &[error]).unwrap();
                    n += 1;
                    match faults.spacing {
                        Spacing::Steady => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Spacing::AfterProgress { records } => {
                            until(&stop, &stats, |s| s.delivery_failures > failures).await;
                            let published = stats().published;
                            until(&stop, &stats, |s| s.published >= published + records).await;
                        }
                    }
                }
                n
            })
        };
        RequestFaults {
            stop,
            task,
            broker: broker.clone(),
            api: faults.api,
        }
    }

    /// Stops injecting, clears what was not consumed; returns how many errors were injected.
    pub async fn stop(self) -> u64 {
        self.stop.cancel();
        let injected = self.task.await.unwrap();
        self.broker.clear_request_errors(self.api).unwrap();
        injected
    }
}

/// Returns once `stats` satisfy `done`, or `stop` is cancelled (polled every 10 ms).
async fn until(
    stop: &CancellationToken,
    stats: &impl Fn() -> StatsSnapshot,
    done: impl Fn(&StatsSnapshot) -> bool,
) {
    while !stop.is_cancelled() && !done(&stats()) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a harvest under produce faults gave.
pub struct FaultRun {
    pub report: Report,
    /// Errors injected.
    pub injected: u64,
    pub stats: StatsSnapshot,
    pub took: Duration,
    /// Rounds written (each `keys` x `per_key` rows) before the faults were seen.
    pub rounds: u64,
}

/// At most this many rounds are written waiting for an injected fault to reach the pipeline: a
/// round can take less than the injector's 100 ms and slip between two errors, but ten in a row
/// is a harness fault worth a failure.
const MAX_ROUNDS: u64 = 10;

/// An etcd elector (the shared etcd, a prefix of the world's own) in place of NELI, for
/// harvesters on a faulted cluster. NELI's heartbeats are Produce requests to the cluster the
/// records go to, and an injected error goes to whichever request comes next: with the shipped
/// limits' fewer, larger produce requests the heartbeats took every error of some runs, and
/// the test then checked nothing. Off the broker, every injected error lands on the data path
/// whatever the limits, so the fault tests run with the shipped defaults.
pub fn elected_off_the_broker(world: &World) -> LeaderConfig {
    LeaderConfig::Etcd(EtcdConfig {
        endpoints: vec![testkit::coord::etcd_endpoint()],
        prefix: Some(format!("/harvester-tests/faults/{}", world.group)),
        ..Default::default()
    })
}

/// Harvests with `config`, elected off the broker ([`elected_off_the_broker`]), while
/// [`RequestFaults`] inject `faults`: writes rounds of `keys` keys x
/// `per_key` rows (`batch` per transaction, keys named anew each round), each once the outbox
/// drained of the last, until `reached` says the faults reached the pipeline (at most
/// [`MAX_ROUNDS`]); then verifies (up to `timeout`), stops the faults and the harvester. INVALID_RECORD is
/// "suspect" (it could be a misconfiguration); injected here it is transient, so rows get enough
/// attempts that none is quarantined.
pub async fn harvest_under_faults(
    world: &World,
    mut config: Config,
    faults: Faults,
    (keys, per_key, batch): (usize, u64, usize),
    timeout: Duration,
    reached: fn(&StatsSnapshot) -> bool,
) -> FaultRun {
    config.limits.max_delivery_attempts = 1000;
    config.leader = elected_off_the_broker(world);
    let handle = world.start(config).await;
    let started = std::time::Instant::now();
    let harvester = handle.harvester.clone();
    let faults = RequestFaults::start(&world.broker, faults, move || harvester.stats());
    let mut rounds = 0;
    loop {
        world
            .write_keys(&format!("r{rounds}k"), keys, per_key, batch)
            .await;
        rounds += 1;
        world.drained().await;
        if reached(&handle.harvester.stats()) || rounds == MAX_ROUNDS {
            break;
        }
    }
    let report = world.verify(timeout).await;
    let injected = faults.stop().await;
    let took = started.elapsed();
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    FaultRun {
        report,
        injected,
        stats,
        took,
        rounds,
    }
}
