//! One scenario, end to end.
//!
//! Order matters for honest numbers: the topic is sized so the broker can hold the verifier's
//! lag ([`sizing`]), the verifying consumer starts first (it reads from the beginning anyway;
//! a backlog drain on the embedded broker is read only after the outbox emptied, as that
//! broker's reads cost it more the longer the log, see `crate::scenario::VerifyWhen`),
//! the backlog is written and analysed before any harvester exists, the harvesters start and
//! one leads before writers begin, faults fire at fixed offsets, and the drain waits as long as
//! records keep arriving: it ends when every committed record arrived (or every missing one is
//! accounted for by the broker's eviction and the outbox is empty), when nothing arrived for the
//! scenario's no-progress window, or at a cap derived from the backlog and the lowest acceptable
//! rate. Whatever is missing then is split by cause: still in the outbox (undelivered), deleted
//! by the broker before the verifier read it (evicted: the run is inconclusive, not failed), or
//! acknowledged and not in the log (lost by the broker).
//!
//! Over the measured part ([`cpu`]) the broker's, the harvesters' and the database's CPU say
//! what bound the run.
//!
//! Each phase is a module of its own, handing one struct to the next, so a phase can be read
//! without the others: `start` (verifier, backlog, writers, harvesters, meters), `measure`
//! (writers and faults), `drain` (the wait for the last records), `collect` (stop, gather the
//! receipts and the database's figures) and `judge` (figures, loss by cause, verdict).
//!
//! The database is Postgres or MariaDB/MySQL, by the URL's scheme ([`Bench::backend`]): every
//! scenario that makes sense on both runs the same way on both (the ground, writers, pre-fill
//! and ceilings use the backend's own store); Postgres's own figures (WAL, vacuum) are measured
//! on Postgres only, and scenarios that only make sense on Postgres are skipped before they get
//! here ([`crate::scenario::Scenario::unsupported_on`]).

mod cluster;
mod collect;
pub mod cpu;
mod drain;
mod faults;
mod judge;
pub(crate) mod listeners;
mod measure;
mod rewinds;
mod rolling;
pub mod sizing;
mod start;

use std::time::Instant;

use testkit::verify::ClientSettings;
use testkit::Broker;
use workloads::Backend;

use crate::ground::{DataTopic, Ground};
use crate::pg::PrivateCluster;
use crate::result::{Need, Pace, RunResult, TopicSizing, Verdict};
use crate::scenario::{Base, Kind, Listener, Scenario};
use crate::BenchError;
use harvester::store::OutboxMode;

/// What every scenario of a bench run shares.
#[derive(Debug)]
pub struct Bench {
    pub database_url: String,
    /// The backend `database_url` names.
    pub backend: Backend,
    pub broker: Broker,
    pub reaper: std::path::PathBuf,
    pub base: Base,
    /// `--set` pairs from the command line, applied last.
    pub extra: Vec<(String, String)>,
    /// Port of the bench's own Postgres for `pg-restart`.
    pub private_pg_port: u16,
    /// The run's broker's SASL_SSL listener, for scenarios with `listener = "sasl_ssl"`, or why
    /// it has none (said when such a scenario runs).
    pub sasl_ssl: Result<ClientSettings, String>,
    /// The warm topics the scenarios share on the run's broker (none on the embedded broker).
    pub topics: crate::warm::TopicPool,
}

impl Bench {
    /// How every Kafka client of scenario `name` reaches `broker` (the run's, or a mock cluster
    /// of the scenario's own): through the scenario's listener.
    pub fn client(
        &self,
        name: &str,
        scenario: &Scenario,
        broker: &Broker,
    ) -> Result<ClientSettings, BenchError> {
        match scenario.listener {
            Listener::Plaintext => Ok(ClientSettings::plaintext(broker.bootstrap())),
            Listener::SaslSsl => self.sasl_ssl.clone().map_err(|why| BenchError::Scenario {
                scenario: name.to_owned(),
                message: format!("listener = \"sasl_ssl\": {why}"),
            }),
        }
    }
}

/// Sleeps until `at` (no-op when past).
async fn until(at: Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// One run of a scenario's sweeps: a `keys_sweep`, `partitions_sweep` and `harvesters_sweep`
/// value, each if set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Variant {
    pub keys: Option<u32>,
    pub partitions: Option<i32>,
    pub harvesters: Option<usize>,
}

impl Variant {
    /// `name`, `name/10-keys`, `name/64-partitions`, `name/4-harvesters`, or several.
    pub fn label(&self, name: &str) -> String {
        let mut label = name.to_owned();
        if let Some(k) = self.keys {
            label.push_str(&format!("/{k}-keys"));
        }
        if let Some(p) = self.partitions {
            label.push_str(&format!("/{p}-partitions"));
        }
        if let Some(h) = self.harvesters {
            label.push_str(&format!("/{h}-harvesters"));
        }
        label
    }

    /// Every variant of `scenario`'s sweeps (one without any).
    pub fn all(scenario: &Scenario) -> Vec<Variant> {
        fn each<T: Copy>(sweep: &[T]) -> Vec<Option<T>> {
            if sweep.is_empty() {
                vec![None]
            } else {
                sweep.iter().copied().map(Some).collect()
            }
        }
        let mut out = Vec::new();
        for keys in each(&scenario.keys_sweep) {
            for partitions in each(&scenario.partitions_sweep) {
                for harvesters in each(&scenario.harvesters_sweep) {
                    out.push(Variant {
                        keys,
                        partitions,
                        harvesters,
                    });
                }
            }
        }
        out
    }
}

/// Runs one scenario (one variant of its sweeps).
pub async fn run(
    bench: &Bench,
    name: &str,
    scenario: &Scenario,
    variant: Variant,
) -> Result<RunResult, BenchError> {
    let label = variant.label(name);
    let keys = variant.keys;
    let mut scenario = scenario.clone();
    if let Some(h) = variant.harvesters {
        scenario.harvesters = h;
    }
    if let Some(p) = variant.partitions {
        scenario.partitions = p;
    }
    let scenario = &scenario;
    let started_at = chrono::Utc::now().to_rfc3339();
    // Ground: the bench's own Postgres for pg-restart, an isolated mock cluster for broker
    // faults (even when the run is on a real cluster: only the mock injects request errors)
    // and for topics resized for the mock.
    let cluster = if scenario.kind == Kind::PgRestart {
        Some(tokio::task::block_in_place(|| {
            PrivateCluster::start(bench.private_pg_port)
        })?)
    } else {
        None
    };
    let url = cluster
        .as_ref()
        .map_or(bench.database_url.clone(), PrivateCluster::url);
    let run_id = testkit::names::unique("run");
    // A cluster fault gets a private 3-node cluster; the shared broker is never broken.
    let kafka = if scenario.kind == Kind::ClusterFault {
        eprintln!(
            "[{label}] starting a private {}-node Kafka cluster",
            cluster::NODES
        );
        Some(tokio::task::block_in_place(cluster::start)?)
    } else {
        None
    };
    let faults_on_mock = scenario.kind == Kind::BrokerFaults;
    let on_mock = kafka.is_none() && (faults_on_mock || bench.broker.embedded().is_some());
    let topic = sizing::size_topic(scenario, &run_id, on_mock);
    let broker = topic_broker(bench, kafka.as_ref(), faults_on_mock, &topic, &label)?;
    let writers_n = scenario.writers.as_ref().map_or(1, |w| {
        (w.writers + w.long_transactions.as_ref().map_or(0, |l| l.writers)) as u32
    });
    let mode = outbox_mode(bench, scenario);
    let client = bench.client(name, scenario, &broker)?;
    let need = Need {
        partitions: topic.partitions,
        transactional: scenario.transactional(&bench.base, &bench.extra),
    };
    // The run's warm topic of this shape, where the scenario publishes to the run's broker.
    let data = match bench.topics.get(need) {
        Some(warm) if kafka.is_none() && !faults_on_mock && topic.partitions == topic.requested => {
            DataTopic::Shared {
                name: warm.name.clone(),
                partitions: topic.partitions,
            }
        }
        _ => DataTopic::Own {
            partitions: topic.partitions,
        },
    };
    let ground = Ground::new(&url, &broker, data, writers_n + 4, mode).await?;
    let case = Case {
        label: &label,
        scenario,
        keys,
        run_id: &run_id,
        topic,
        client,
    };
    let outcome = run_on(
        bench,
        case,
        &ground,
        &broker,
        cluster.as_ref(),
        kafka.as_ref(),
    )
    .await;
    ground.drop_topics(&broker).await;
    ground.drop_schema().await;
    let mut result = outcome?;
    result.started_at = started_at;

    if faults_on_mock && bench.broker.embedded().is_none() {
        result.broker_note = Some("on the mock: injected request errors".into());
    }
    if let Some(kafka) = &kafka {
        result.broker_note = Some(format!(
            "on a private {}-node Apache Kafka cluster ({}; replication 3, min.insync.replicas 2)",
            kafka.nodes(),
            kafka.bootstrap()
        ));
    }
    if result.verdict != Verdict::Passed {
        eprintln!("[{label}] {}", result.verdict_note);
    }
    if let Some(p) = result.pace.filter(Pace::fell_behind) {
        eprintln!("[{label}] {}", p.describe());
    }
    Ok(result)
}

/// The broker a scenario's topic lives on: the scenario's private cluster, a mock cluster for
/// injected faults, a mock cluster of its own for a resized topic, or the run's broker.
fn topic_broker(
    bench: &Bench,
    kafka: Option<&testkit::broker::PrivateKafka>,
    faults_on_mock: bool,
    topic: &TopicSizing,
    label: &str,
) -> Result<Broker, BenchError> {
    // The mock never deletes a topic and keeps up to 5 MiB per partition: a topic resized for a
    // large backlog gets a cluster of its own, dropped (memory and all) when the run ends. A
    // real cluster keeps everything: sizing never resizes there.
    let resized = topic.partitions != topic.requested;
    let broker = if let Some(kafka) = kafka {
        kafka.broker()
    } else if faults_on_mock {
        fault_cluster(&bench.broker)?
    } else if resized {
        let brokers = bench.broker.embedded().map_or(1, |b| b.brokers.max(1));
        bench.broker.isolated(brokers)?
    } else {
        bench.broker.clone()
    };
    let short = topic
        .target
        .zip(topic.lag_tolerance)
        .is_some_and(|(t, l)| l < t);
    if resized || short {
        eprintln!(
            "[{label}] topic: {}{}",
            topic.describe(),
            if resized {
                " (on a mock cluster of its own)"
            } else {
                ""
            }
        );
    }
    Ok(broker)
}

/// The harvesters' `outbox.mode` (the command line's `--set` wins): snapshot mode's column is
/// migrated with the table, as a deployment would before its writers start.
fn outbox_mode(bench: &Bench, scenario: &Scenario) -> OutboxMode {
    scenario
        .settings(&bench.base)
        .iter()
        .chain(bench.extra.iter())
        .rev()
        .find(|(k, _)| k == "outbox.mode")
        .map_or(OutboxMode::MarkPurge, |(_, v)| {
            if v == "snapshot" {
                OutboxMode::Snapshot
            } else {
                OutboxMode::MarkPurge
            }
        })
}

/// An isolated cluster of the mock for a scenario that injects request errors: of the run's
/// broker when that is the mock, else of the embedded broker `scripts/services.sh` runs beside
/// the real one.
fn fault_cluster(broker: &Broker) -> Result<Broker, BenchError> {
    let mock = match broker.embedded() {
        Some(_) => broker.clone(),
        None => Broker::mock()?,
    };
    Ok(mock.isolated(1)?)
}

/// One run of a scenario: what it is called, its run id (the `x-run` header) and its topic.
#[derive(Debug)]
struct Case<'a> {
    label: &'a str,
    scenario: &'a Scenario,
    /// The `keys_sweep` variant.
    keys: Option<u32>,
    run_id: &'a str,
    topic: TopicSizing,
    /// How the harvesters and the verifier reach the broker (the scenario's listener).
    client: ClientSettings,
}

/// The run's phases on its ground, in order: start, measure, drain, collect, judge.
async fn run_on(
    bench: &Bench,
    case: Case<'_>,
    ground: &Ground,
    broker: &Broker,
    cluster: Option<&PrivateCluster>,
    kafka: Option<&testkit::broker::PrivateKafka>,
) -> Result<RunResult, BenchError> {
    let mut started = start::start(bench, &case, ground, broker).await?;
    let targets = measure::Targets {
        broker,
        cluster,
        kafka,
    };
    let measured = measure::measure(bench, &case, ground, targets, &mut started).await?;
    let (mut drained, ends) =
        drain::wait_for_records(&case, ground, &started, measured.committed).await?;
    let evidence = collect::collect(&case, ground, started, &measured, &mut drained).await?;
    judge::judge(case, broker, measured, evidence, drained, ends)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_are_labelled_by_their_sweeps() {
        let v = |keys, harvesters| {
            Variant {
                keys,
                partitions: None,
                harvesters,
            }
            .label("s")
        };
        assert_eq!(v(None, None), "s");
        assert_eq!(v(Some(10), None), "s/10-keys");
        assert_eq!(v(None, Some(4)), "s/4-harvesters");
        assert_eq!(v(Some(1), Some(2)), "s/1-keys/2-harvesters");
        let shaped = Variant {
            keys: Some(1000),
            partitions: Some(64),
            harvesters: None,
        };
        assert_eq!(shaped.label("shapes"), "shapes/1000-keys/64-partitions");
    }
}
