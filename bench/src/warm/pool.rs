//! The run's warm topics: one per partition count (and publishing mode) its scenarios use on the
//! run's broker, created, led, written and read before any scenario is measured, shared by
//! every scenario of that shape and deleted when the run ends.
//!
//! Production relays publish to topics that have existed for months. A topic created a moment
//! before its drain costs the broker many times more per record for its first seconds (256
//! partitions: 59-127 µs against 8-9 warm, issue 52), which a scenario would otherwise charge to
//! the harvester. Transactional scenarios get topics of their own: a transaction a harvester
//! left open would hold back every read_committed reader of its partitions, including the next
//! scenario's verifier.

use std::time::Instant;

use rdkafka::consumer::BaseConsumer;
use testkit::verify::ClientSettings;
use testkit::Broker;

use super::load::{self, Rule, Writer};
use crate::result::{Need, WarmTopic, Warming};
use crate::BenchError;

/// The run's warm topics (none on the embedded broker, which has nothing to warm).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopicPool {
    topics: Vec<WarmTopic>,
    bootstrap: String,
}

impl TopicPool {
    /// Creates and warms a topic for each of `needs` on `broker` (a real one), through its
    /// plaintext listener; `broker_cpu` reads the broker's CPU seconds so far.
    pub async fn prepare(
        broker: &Broker,
        needs: &[Need],
        value_bytes: usize,
        rule: &Rule,
        broker_cpu: &(dyn Fn() -> Option<f64> + Sync),
    ) -> Result<TopicPool, BenchError> {
        let client = ClientSettings::plaintext(broker.bootstrap());
        let mut pool = TopicPool {
            topics: Vec::new(),
            bootstrap: broker.bootstrap().to_owned(),
        };
        for need in needs {
            let name = testkit::names::topic(&format!(
                "bench-warm-p{}{}",
                need.partitions,
                if need.transactional { "-txn" } else { "" }
            ));
            let t0 = Instant::now();
            if let Err(e) = create(broker, &name, need.partitions).await {
                pool.delete().await;
                return Err(e);
            }
            let created_seconds = t0.elapsed().as_secs_f64();
            let writer = if need.transactional {
                Writer::Transactional
            } else {
                Writer::Idempotent
            };
            let round = Rule {
                round_records: rule
                    .round_records
                    .max(u64::try_from(need.partitions).unwrap_or(0) * 100),
                ..*rule
            };
            let warming = tokio::task::block_in_place(|| {
                load::warm(
                    &client,
                    &name,
                    need.partitions,
                    value_bytes,
                    writer,
                    &round,
                    broker_cpu,
                )
            });
            // The topic exists from here on: it goes with the pool, warmed or not.
            pool.topics.push(WarmTopic {
                name,
                need: *need,
                created_seconds,
                warming: Warming::default(),
            });
            match warming {
                Ok(w) => {
                    eprintln!(
                        "== warm-up: topic of {} partitions{}: created and led in {created_seconds:.1} s; {}",
                        need.partitions,
                        if need.transactional { " (transactional)" } else { "" },
                        w.describe()
                    );
                    if let Some(t) = pool.topics.last_mut() {
                        t.warming = w;
                    }
                }
                Err(e) => {
                    pool.delete().await;
                    return Err(e);
                }
            }
        }
        Ok(pool)
    }

    /// The warm topic for `need`, if the run made one.
    pub fn get(&self, need: Need) -> Option<&WarmTopic> {
        self.topics.iter().find(|t| t.need == need)
    }

    pub fn topics(&self) -> &[WarmTopic] {
        &self.topics
    }

    /// Deletes every topic of the pool (kept with `BENCH_KEEP_TOPICS`, as a ground's are).
    pub async fn delete(&self) {
        if self.topics.is_empty() || std::env::var_os("BENCH_KEEP_TOPICS").is_some() {
            return;
        }
        let names: Vec<String> = self.topics.iter().map(|t| t.name.clone()).collect();
        crate::broker::delete_topics(&self.bootstrap, &names).await;
    }
}

/// Creates `topic` as a data topic and waits until every partition's leader serves it (answers
/// for its log end).
pub(super) async fn create(
    broker: &Broker,
    topic: &str,
    partitions: i32,
) -> Result<(), BenchError> {
    crate::ground::create_data_topic(broker, topic, partitions).await?;
    let consumer: BaseConsumer = ClientSettings::plaintext(broker.bootstrap())
        .client_config()?
        .create()
        .map_err(|source| BenchError::Kafka {
            action: "create a metadata client".into(),
            source,
        })?;
    tokio::task::block_in_place(|| load::ends(&consumer, topic, partitions)).map(|_| ())
}
