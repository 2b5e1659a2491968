//! Load rounds on one topic: produce a fixed number of records over every partition, read
//! them back, and measure what each cost the broker, round after round, until the produce cost
//! per record stops falling.
//!
//! The rule is the decision a person makes reading the rounds, made robust to a noisy round (a
//! garbage collection, a compilation burst): the cost has stopped falling once the median of the
//! last [`Rule::window`] rounds is not below the median of the window before it by more than
//! [`Rule::tolerance`]. Where the broker's processes are not on this machine (no CPU to read),
//! a round's cost is its wall time per record instead.

use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use testkit::verify::ClientSettings;

use crate::result::{Round, Warming};
use crate::BenchError;

/// When warming stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// Records per round, spread evenly over the partitions.
    pub round_records: u64,
    /// Rounds before the cost may count as settled.
    pub min_rounds: usize,
    /// Rounds at most, settled or not.
    pub max_rounds: usize,
    /// Time at most, settled or not (a round under way finishes).
    pub max_time: Duration,
    /// The last window's median cost beats the one before when it is below `(1 - tolerance)`
    /// of it.
    pub tolerance: f64,
    /// Rounds per window.
    pub window: usize,
}

/// Whether the rounds so far (their costs, in order) have stopped falling under `rule`.
pub fn settled(costs: &[f64], rule: &Rule) -> bool {
    let (n, w) = (costs.len(), rule.window.max(1));
    if n < rule.min_rounds.max(2 * w) {
        return false;
    }
    median(&costs[n - w..]) > median(&costs[n - 2 * w..n - w]) * (1.0 - rule.tolerance)
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// How a topic is written while warming: the producer's settings besides the client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Idempotent, `acks=all`, as the harvester's producers.
    Idempotent,
    /// Transactional (a transaction per round), for a topic transactional scenarios use.
    Transactional,
}

/// Warms `topic` (its `partitions`) on the broker `client` reaches, by `rule`; `broker_cpu`
/// reads the broker's CPU seconds so far (`None`: not on this machine). Blocking.
pub fn warm(
    client: &ClientSettings,
    topic: &str,
    partitions: i32,
    value_bytes: usize,
    writer: Writer,
    rule: &Rule,
    broker_cpu: &dyn Fn() -> Option<f64>,
) -> Result<Warming, BenchError> {
    let producer = producer(client, writer)?;
    let consumer = consumer(client)?;
    let started = Instant::now();
    let mut warming = Warming {
        topic: topic.to_owned(),
        partitions,
        ..Warming::default()
    };
    let value = vec![b'w'; value_bytes];
    loop {
        let round = one_round(
            &producer, &consumer, topic, partitions, &value, writer, rule, broker_cpu,
        )?;
        if record(&mut warming, round, rule, started) {
            break;
        }
    }
    Ok(warming)
}

/// Adds `round` to `warming` and says whether warming is over: the cost settled under `rule`,
/// or its rounds or its time (from `started`) ran out. Keeps `warming.seconds` current.
pub fn record(warming: &mut Warming, round: Round, rule: &Rule, started: Instant) -> bool {
    warming.rounds.push(round);
    let costs: Vec<f64> = warming.rounds.iter().map(Round::cost).collect();
    warming.settled = settled(&costs, rule);
    warming.seconds = started.elapsed().as_secs_f64();
    warming.settled || warming.rounds.len() >= rule.max_rounds || started.elapsed() >= rule.max_time
}

/// A drain round's line on stderr: `round 3: 53130 rec/s, broker 8.9 µs/rec`.
pub fn round_line(n: usize, round: &Round) -> String {
    format!(
        "round {n}: {:.0} rec/s, broker {}",
        round.produce_rate(),
        round
            .produce_broker_us
            .map_or_else(|| "CPU not measured".into(), |us| format!("{us:.1} µs/rec"))
    )
}

/// Produces one round (partition by partition in turn) and reads it back.
#[allow(clippy::too_many_arguments)]
fn one_round(
    producer: &BaseProducer,
    consumer: &BaseConsumer,
    topic: &str,
    partitions: i32,
    value: &[u8],
    writer: Writer,
    rule: &Rule,
    broker_cpu: &dyn Fn() -> Option<f64>,
) -> Result<Round, BenchError> {
    let start = ends(consumer, topic, partitions)?;
    let cpu0 = broker_cpu();
    let t0 = Instant::now();
    if writer == Writer::Transactional {
        producer
            .begin_transaction()
            .map_err(kafka("begin a warm-up transaction"))?;
    }
    for i in 0..rule.round_records {
        let partition = (i % partitions.max(1) as u64) as i32;
        let key = format!("w{i}");
        let mut record = BaseRecord::to(topic)
            .key(key.as_bytes())
            .payload(value)
            .partition(partition);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, r)) if is_queue_full(&e) => {
                    record = r;
                    producer.poll(Duration::from_millis(1));
                }
                Err((source, _)) => {
                    return Err(BenchError::Kafka {
                        action: "send a warm-up record".into(),
                        source,
                    })
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    match writer {
        Writer::Idempotent => producer
            .flush(Duration::from_secs(120))
            .map_err(kafka("flush the warm-up records"))?,
        Writer::Transactional => producer
            .commit_transaction(Duration::from_secs(120))
            .map_err(kafka("commit a warm-up transaction"))?,
    }
    let produce_seconds = t0.elapsed().as_secs_f64();
    let cpu1 = broker_cpu();
    let end = ends(consumer, topic, partitions)?;
    let t1 = Instant::now();
    read_back(consumer, topic, &start, &end)?;
    let read_seconds = t1.elapsed().as_secs_f64();
    let cpu2 = broker_cpu();
    let records = rule.round_records;
    let per_record = |a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .map(|(a, b)| (b - a).max(0.0) * 1e6 / records.max(1) as f64)
    };
    Ok(Round {
        records,
        produce_seconds,
        read_seconds,
        produce_broker_us: per_record(cpu0, cpu1),
        read_broker_us: per_record(cpu1, cpu2),
    })
}

fn is_queue_full(e: &rdkafka::error::KafkaError) -> bool {
    matches!(
        e,
        rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull)
    )
}

fn kafka(action: &str) -> impl Fn(rdkafka::error::KafkaError) -> BenchError + '_ {
    move |source| BenchError::Kafka {
        action: action.to_owned(),
        source,
    }
}

fn producer(client: &ClientSettings, writer: Writer) -> Result<BaseProducer, BenchError> {
    let mut config = client.client_config()?;
    config
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5");
    if writer == Writer::Transactional {
        config.set("transactional.id", testkit::names::unique("bench-warm-txn"));
    }
    let producer: BaseProducer = config
        .create()
        .map_err(kafka("create the warm-up producer"))?;
    if writer == Writer::Transactional {
        producer
            .init_transactions(Duration::from_secs(60))
            .map_err(kafka("init the warm-up producer's transactions"))?;
    }
    Ok(producer)
}

/// A reader as the verifier reads (no group, read_committed by librdkafka's default).
fn consumer(client: &ClientSettings) -> Result<BaseConsumer, BenchError> {
    client
        .client_config()?
        .set("group.id", testkit::names::unique("bench-warm"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("fetch.wait.max.ms", "100")
        .create()
        .map_err(kafka("create the warm-up reader"))
}

/// Each partition's end offset (its high watermark); a partition whose leader does not serve
/// yet is asked again for up to 30 s.
pub fn ends(consumer: &BaseConsumer, topic: &str, partitions: i32) -> Result<Vec<i64>, BenchError> {
    Ok(crate::receipts::watermarks(consumer, topic, partitions)?
        .into_iter()
        .map(|(_, high)| high)
        .collect())
}

/// Reads every partition from `start` to `end`; an error if that takes over a minute.
fn read_back(
    consumer: &BaseConsumer,
    topic: &str,
    start: &[i64],
    end: &[i64],
) -> Result<(), BenchError> {
    let mut assignment = TopicPartitionList::new();
    let mut left = 0i64;
    for (p, (s, e)) in start.iter().zip(end).enumerate() {
        let p = i32::try_from(p).unwrap_or(i32::MAX);
        assignment
            .add_partition_offset(topic, p, Offset::Offset(*s))
            .map_err(kafka("assign the warm-up reader"))?;
        left += (e - s).max(0);
    }
    consumer
        .assign(&assignment)
        .map_err(kafka("assign the warm-up reader"))?;
    let mut next = start.to_vec();
    let deadline = Instant::now() + Duration::from_secs(60);
    while next.iter().zip(end).any(|(n, e)| n < e) {
        if Instant::now() >= deadline {
            return Err(BenchError::Run(format!(
                "the warm-up reader read {} of {left} records of {topic} in 60 s",
                next.iter().zip(start).map(|(n, s)| n - s).sum::<i64>()
            )));
        }
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            advance(&mut next, m.partition(), m.offset() + 1);
        }
        // A transactional topic ends each partition with a commit marker, an offset no message
        // carries: the reader's position moves past it.
        let position = consumer
            .position()
            .map_err(kafka("read the warm-up reader's position"))?;
        for e in position.elements_for_topic(topic) {
            if let Offset::Offset(o) = e.offset() {
                advance(&mut next, e.partition(), o);
            }
        }
    }
    Ok(())
}

/// Records that the reader is at `offset` of `partition` or beyond.
fn advance(next: &mut [i64], partition: i32, offset: i64) {
    if let Some(n) = usize::try_from(partition)
        .ok()
        .and_then(|p| next.get_mut(p))
    {
        *n = (*n).max(offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> Rule {
        Rule {
            round_records: 1,
            min_rounds: 6,
            max_rounds: 30,
            max_time: Duration::from_secs(60),
            tolerance: 0.1,
            window: 3,
        }
    }

    #[test]
    fn warming_stops_once_a_window_s_median_no_longer_beats_the_one_before_by_ten_percent() {
        let r = rule();
        // Falling: not settled (medians 28 -> 9, then 15 -> 5.5).
        assert!(!settled(&[43.8, 28.0, 22.0, 9.0, 6.0, 5.5], &r));
        assert!(!settled(&[43.8, 28.0, 15.0, 9.0, 6.0, 5.5, 5.3], &r));
        // Medians 6.0 -> 5.5: not 10 % lower, settled.
        assert!(settled(&[28.0, 15.0, 9.0, 6.0, 5.5, 6.1, 5.2, 5.5], &r));
        // A noisy round among falling ones does not stop it (medians 20.8 -> 13.8), and a
        // lucky one does not either once the rest still fall.
        assert!(!settled(&[24.8, 15.0, 20.8, 8.6, 13.8, 24.8], &r));
        assert!(!settled(&[30.0, 25.0, 20.0, 4.0, 18.0, 15.0], &r));
        // Never before the minimum.
        assert!(!settled(&[5.0, 5.0, 5.0, 5.0, 5.0], &r));
        assert!(settled(&[5.0; 6], &r));
    }

    #[test]
    fn a_round_without_broker_cpu_is_judged_by_its_wall_time() {
        let r = Round {
            records: 1000,
            produce_seconds: 0.5,
            ..Round::default()
        };
        assert_eq!(r.cost(), 500.0);
        assert_eq!(r.produce_rate(), 2000.0);
        let with = Round {
            produce_broker_us: Some(4.0),
            ..r
        };
        assert_eq!(with.cost(), 4.0);
    }
}
