//! Produce failures injected into the embedded broker while a test runs.

use std::time::Duration;

use testkit::Broker;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

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
