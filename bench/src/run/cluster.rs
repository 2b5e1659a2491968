//! Faults only a real cluster has, done to a private 3-node Apache Kafka cluster of the run's own
//! (`testkit::broker::PrivateKafka`, `scripts/services/kafka.sh node ...`): a broker killed, paused or
//! restarted, the controller quorum's leader killed, the whole cluster stopped, too few replicas
//! in sync for the data topic's `min.insync.replicas` (raised to 3, one node stopped). Each notes its instants for the timeline, and each ends once the
//! cluster is whole again (every node up, every partition of the data topic led with every
//! replica in sync), so what the run measures afterwards is the harvester's recovery, not the
//! cluster's.

use std::time::{Duration, Instant};

use testkit::broker::{NodeAction, PrivateKafka};

use super::faults::Event;
use crate::scenario::ClusterFault;
use crate::BenchError;

/// How long the cluster may take to be whole again after a node starts (its log recovery, the
/// replicas catching up): generous for 2 cores shared with the run.
const WHOLE_WITHIN: Duration = Duration::from_secs(120);

/// The private cluster's size: replication 3 with `min.insync.replicas` 2 needs three nodes.
pub const NODES: u16 = 3;

/// Starts the run's private cluster.
pub fn start() -> Result<PrivateKafka, BenchError> {
    Ok(PrivateKafka::start(NODES)?)
}

/// Does `fault` to `kafka` (the data topic `topic`; `hold`: how long a stopped or paused node
/// stays so), and waits until the cluster is whole again.
pub async fn inject(
    kafka: &PrivateKafka,
    fault: ClusterFault,
    topic: &str,
    hold: Duration,
) -> Result<Vec<Event>, BenchError> {
    let mut events = Vec::new();
    match fault {
        ClusterFault::None => return Ok(events),
        ClusterFault::KillBusiestLeader => {
            let node = blocking(|| kafka.busiest_leader(topic)).await?;
            act(kafka, &[node], NodeAction::Kill, &mut events, "kill -9").await?;
            tokio::time::sleep(hold).await;
            act(kafka, &[node], NodeAction::Start, &mut events, "start").await?;
        }
        ClusterFault::PauseBroker => {
            let node = blocking(|| kafka.busiest_leader(topic)).await?;
            act(kafka, &[node], NodeAction::Pause, &mut events, "SIGSTOP").await?;
            tokio::time::sleep(hold).await;
            act(kafka, &[node], NodeAction::Resume, &mut events, "SIGCONT").await?;
        }
        ClusterFault::RollBrokers => {
            for node in 1..=kafka.nodes() {
                act(kafka, &[node], NodeAction::Stop, &mut events, "SIGTERM").await?;
                act(kafka, &[node], NodeAction::Start, &mut events, "start").await?;
                whole(kafka, topic, &mut events).await?;
            }
            return Ok(events);
        }
        ClusterFault::KillQuorumLeader => {
            let node = blocking(|| kafka.quorum_leader()).await?;
            let what = "kill -9 (quorum leader)";
            act(kafka, &[node], NodeAction::Kill, &mut events, what).await?;
            tokio::time::sleep(hold).await;
            act(kafka, &[node], NodeAction::Start, &mut events, "start").await?;
        }
        ClusterFault::StopCluster => {
            let all: Vec<u16> = (1..=kafka.nodes()).collect();
            act(kafka, &all, NodeAction::Stop, &mut events, "SIGTERM").await?;
            tokio::time::sleep(hold).await;
            act(kafka, &all, NodeAction::Start, &mut events, "start").await?;
        }
        ClusterFault::MinInsyncUnmet => {
            // Every replica must be in sync, then one node goes: the partitions keep a leader
            // and the quorum (two of three controllers) stays, but each has 2 replicas in sync,
            // fewer than 3, so the brokers refuse produces with NOT_ENOUGH_REPLICAS.
            let node = blocking(|| kafka.quiet_node(topic)).await?;
            let at = Instant::now();
            let insync = [("min.insync.replicas", "3")];
            kafka.broker().set_topic_configs(topic, &insync).await?;
            events.push(("min.insync.replicas=3".to_owned(), at));
            act(kafka, &[node], NodeAction::Stop, &mut events, "SIGTERM").await?;
            tokio::time::sleep(hold).await;
            act(kafka, &[node], NodeAction::Start, &mut events, "start").await?;
        }
    }
    whole(kafka, topic, &mut events).await?;
    Ok(events)
}

/// Does `action` to each of `nodes` at once (a stop or kill returns once the process is gone);
/// notes `what` and the nodes at the instant it began.
async fn act(
    kafka: &PrivateKafka,
    nodes: &[u16],
    action: NodeAction,
    events: &mut Vec<Event>,
    what: &str,
) -> Result<(), BenchError> {
    let at = Instant::now();
    blocking(|| {
        std::thread::scope(|s| {
            let done: Vec<_> = nodes
                .iter()
                .map(|n| s.spawn(move || kafka.node(*n, action)))
                .collect();
            done.into_iter()
                .try_for_each(|d| d.join().expect("a node action thread panicked"))
        })
    })
    .await?;
    let list: Vec<String> = nodes.iter().map(u16::to_string).collect();
    events.push((format!("{what} broker {}", list.join(", ")), at));
    Ok(())
}

/// Waits until the cluster is whole again; notes the instant.
async fn whole(
    kafka: &PrivateKafka,
    topic: &str,
    events: &mut Vec<Event>,
) -> Result<(), BenchError> {
    let started = Instant::now();
    while !blocking(|| kafka.whole(topic)).await.unwrap_or(false) {
        if started.elapsed() > WHOLE_WITHIN {
            return Err(BenchError::Run(format!(
                "the private cluster was not whole again (every node up, every partition of {topic} with {} replicas in sync) within {WHOLE_WITHIN:?}",
                kafka.nodes()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    events.push(("cluster whole".into(), Instant::now()));
    Ok(())
}

/// Runs a blocking call of the cluster (a script, a metadata request) off the runtime's
/// workers.
async fn blocking<T, F>(f: F) -> Result<T, BenchError>
where
    F: FnOnce() -> Result<T, testkit::TestkitError>,
{
    Ok(tokio::task::block_in_place(f)?)
}
