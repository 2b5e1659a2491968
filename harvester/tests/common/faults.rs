//! Produce failures injected into the embedded broker while a test runs.

use std::time::Duration;

use harvester::stats::StatsSnapshot;
use harvester::Config;
use testkit::{Broker, Report};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::World;

/// Every 100 ms the next produce request fails, alternating an error librdkafka retries itself
/// (NOT_LEADER_FOR_PARTITION) with one it hands back (INVALID_RECORD: "suspect" to the
/// harvester, which with the gapless guarantee also fails the producer).
pub struct ProduceFaults {
    stop: CancellationToken,
    task: JoinHandle<u64>,
    broker: Broker,
}

impl ProduceFaults {
    pub fn start(broker: &Broker) -> Self {
        let stop = CancellationToken::new();
        let task = {
            let (stop, broker) = (stop.clone(), broker.clone());
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.is_cancelled() {
                    let error = if n.is_multiple_of(2) {
                        "INVALID_RECORD"
                    } else {
                        "NOT_LEADER_FOR_PARTITION"
                    };
                    broker.request_errors("Produce", &[error]).unwrap();
                    n += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                n
            })
        };
        ProduceFaults {
            stop,
            task,
            broker: broker.clone(),
        }
    }

    /// Stops injecting, clears what was not consumed; returns how many errors were injected.
    pub async fn stop(self) -> u64 {
        self.stop.cancel();
        let injected = self.task.await.unwrap();
        self.broker.clear_request_errors("Produce").unwrap();
        injected
    }
}

/// What a harvest under produce faults gave.
pub struct FaultRun {
    pub report: Report,
    /// Errors injected.
    pub injected: u64,
    pub stats: StatsSnapshot,
    pub took: Duration,
}

/// Harvests with `config` while [`ProduceFaults`] runs: writes `keys` keys x `per_key` rows,
/// `batch` per transaction, verifies (up to `timeout`), stops the faults, waits for the outbox to
/// drain and stops the harvester. INVALID_RECORD is "suspect" (it could be a misconfiguration);
/// injected here it is transient, so rows get enough attempts that none is quarantined.
pub async fn harvest_under_faults(
    world: &World,
    mut config: Config,
    (keys, per_key, batch): (usize, u64, usize),
    timeout: Duration,
) -> FaultRun {
    config.limits.max_delivery_attempts = 1000;
    let handle = world.start(config).await;
    let started = std::time::Instant::now();
    let faults = ProduceFaults::start(&world.broker);
    world.write(keys, per_key, batch).await;
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
    }
}
