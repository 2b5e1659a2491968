//! What a scenario does to the system while it runs: kill or stall the leader, break the
//! broker, restart Postgres (a pinned snapshot is the ground's: its SQL is the backend's). Each
//! fault notes its instants for the timeline.

use std::time::{Duration, Instant};

use testkit::process::Signal;
use testkit::Broker;

use crate::fleet::Fleet;
use crate::pg::PrivateCluster;
use crate::BenchError;

/// A labelled instant.
pub type Event = (String, Instant);

/// `kill -9` the leader. Returns (its index, the instant).
pub fn kill_leader(fleet: &Fleet) -> Result<(usize, Event), BenchError> {
    let leader = fleet.wait_leader(Duration::from_secs(10))?;
    let at = Instant::now();
    fleet.members[leader].signal(Signal::Kill)?;
    Ok((leader, ("kill -9 leader".into(), at)))
}

/// `SIGSTOP` the leader for `pause`, then `SIGCONT`.
pub async fn stall_leader(
    fleet: &Fleet,
    pause: Duration,
) -> Result<(usize, Vec<Event>), BenchError> {
    let leader = fleet.wait_leader(Duration::from_secs(10))?;
    let stopped = Instant::now();
    fleet.members[leader].signal(Signal::Stop)?;
    tokio::time::sleep(pause).await;
    fleet.members[leader].signal(Signal::Cont)?;
    Ok((
        leader,
        vec![
            ("SIGSTOP leader".into(), stopped),
            ("SIGCONT".into(), Instant::now()),
        ],
    ))
}

/// `errors` stacked on Produce every 100 ms and +`rtt` on every broker of an isolated cluster,
/// for `span`.
pub async fn broker_faults(
    broker: &Broker,
    span: Duration,
    rtt: Duration,
    errors: &[String],
) -> Result<Vec<Event>, BenchError> {
    let errors: Vec<&str> = errors.iter().map(String::as_str).collect();
    let brokers = broker.embedded().map_or(1, |b| b.brokers.max(1));
    let start = Instant::now();
    for id in 1..=brokers {
        broker.set_rtt(id, rtt)?;
    }
    let mut injected = 0;
    while start.elapsed() < span {
        if !errors.is_empty() {
            broker.request_errors("Produce", &errors)?;
            injected += errors.len();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    broker.clear_request_errors("Produce")?;
    for id in 1..=brokers {
        broker.set_rtt(id, Duration::ZERO)?;
    }
    Ok(vec![
        (
            format!("faults on ({injected} produce errors, +{rtt:?} RTT)"),
            start,
        ),
        ("faults off".into(), Instant::now()),
    ])
}

/// Restarts the bench's own Postgres (fast shutdown).
pub async fn restart_postgres(cluster: &PrivateCluster) -> Result<Vec<Event>, BenchError> {
    let at = Instant::now();
    tokio::task::block_in_place(|| cluster.restart())?;
    Ok(vec![
        ("postgres restart".into(), at),
        ("postgres up".into(), Instant::now()),
    ])
}
