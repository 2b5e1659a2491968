//! What tests that share an outbox by bucket while writers run have in common: a steady stream
//! (a round over a set of keys every 10 ms, one transaction per round, each key's next seq,
//! until stopped), non-exclusive NELI with the tests' timings, and its leader topic.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::World;

/// Writers running on `world`; [`Steady::stop`] ends them.
pub struct Steady {
    writing: Arc<AtomicBool>,
    task: JoinHandle<u64>,
}

impl Steady {
    /// Starts writing rounds of `keys` keys named `<prefix><n>`.
    pub fn start(world: &Arc<World>, prefix: &str, keys: usize) -> Steady {
        let writing = Arc::new(AtomicBool::new(true));
        let (world, going, prefix) = (Arc::clone(world), Arc::clone(&writing), prefix.to_owned());
        let task = tokio::spawn(async move {
            let mut seq = 0;
            while going.load(Ordering::Relaxed) {
                world.write_round(&prefix, keys, seq).await;
                seq += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            seq
        });
        Steady { writing, task }
    }

    /// Stops after the round in progress; returns how many rounds were written.
    pub async fn stop(self) -> u64 {
        self.writing.store(false, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

impl World {
    /// Non-exclusive NELI over this world's group with `buckets` buckets and the tests'
    /// timings (heartbeat 1 s, poll 50 ms).
    pub fn neli_buckets(&self, buckets: u16) -> harvester::config::LeaderConfig {
        harvester::config::LeaderConfig::NeliBuckets(harvester::assign::neli::NeliAssignorConfig {
            group_id: Some(self.group.clone()),
            heartbeat_timeout: Duration::from_secs(1),
            min_poll_interval: Duration::from_millis(50),
            buckets,
            ..Default::default()
        })
    }

    /// The leader topic of non-exclusive NELI (`<group>.neli-buckets`) with `buckets`
    /// partitions (the embedded broker has no CreateTopics: made through its control there).
    pub async fn create_bucket_topic(&self, buckets: u16) {
        self.broker
            .create_topic(&format!("{}.neli-buckets", self.group), i32::from(buckets))
            .await
            .unwrap();
    }
}
