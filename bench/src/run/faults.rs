//! What a scenario does to the system while it runs: kill or stall the leader, break the
//! broker, pin a snapshot (Postgres's xmin, InnoDB's purge), restart Postgres. Each fault notes
//! its instants for the timeline.

use std::time::{Duration, Instant};

use sqlx::{ConnectOptions, Connection, Executor, MySqlConnection, PgConnection};
use testkit::process::Signal;
use testkit::Broker;

use crate::fleet::Fleet;
use crate::pg::PrivateCluster;
use crate::run::setup::Ground;
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

/// A repeatable-read transaction that has taken its snapshot of the outbox, held open until
/// [`Pinner::release`]: on Postgres it pins xmin (VACUUM keeps every row version it might
/// see), on MariaDB it holds back InnoDB's purge (deleted rows stay in the index as
/// delete-marked records, which the mark's scan from the head walks over).
#[derive(Debug)]
pub enum Pinner {
    Postgres(PgConnection),
    MariaDb(MySqlConnection),
}

impl Pinner {
    /// Ends the transaction (the connection closes).
    pub async fn release(self) {
        match self {
            Pinner::Postgres(conn) => {
                let _ = conn.close().await;
            }
            Pinner::MariaDb(conn) => {
                let _ = conn.close().await;
            }
        }
    }
}

/// Opens the [`Pinner`] on the ground's outbox.
pub async fn pin_snapshot(ground: &Ground) -> Result<Pinner, BenchError> {
    match ground.backend() {
        workloads::Backend::Postgres => {
            let table = ground.table.quoted();
            let mut conn = PgConnection::connect(&ground.url)
                .await
                .map_err(BenchError::db("connect the xmin pinner"))?;
            sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
                .execute(&mut conn)
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            sqlx::query(&format!("SELECT count(*) FROM {table}"))
                .execute(&mut conn)
                .await
                .map_err(BenchError::db("take the pinning snapshot"))?;
            Ok(Pinner::Postgres(conn))
        }
        workloads::Backend::MariaDb => {
            let table = harvester::store::mariadb::quoted(&ground.table);
            let mut conn = harvester::store::mariadb::connect_options(&ground.url)?
                .connect()
                .await
                .map_err(BenchError::db("connect the snapshot pinner"))?;
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            conn.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
                .await
                .map_err(BenchError::db("begin the pinning transaction"))?;
            conn.execute(format!("SELECT COUNT(*) FROM {table}").as_str())
                .await
                .map_err(BenchError::db("take the pinning snapshot"))?;
            Ok(Pinner::MariaDb(conn))
        }
    }
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
