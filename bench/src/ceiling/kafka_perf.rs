//! Kafka's own producer benchmark, `org.apache.kafka.tools.ProducerPerformance` (the Java
//! client, run with `scripts/services/kafka.sh tool`), on the run's real broker.
//!
//! The bench's producer-only ceiling is librdkafka driven by the bench: it says what our client
//! gets out of the broker. Kafka's reference client, with the same acks (`all`), idempotence,
//! linger (5 ms) and value size, says what the broker gives a producer its own project tunes,
//! so a drain also reads as a share of that. It is a reference, not a bound: the JVM's warm-up
//! counts in a short run, and on a small machine the Java client can fall below librdkafka.
//! Its records carry no key (the tool has no key option; the sticky partitioner fills batches,
//! which favours it), and it runs on the same number of records and partitions as the drain's
//! topic. The mock is not measured:
//! a Java client against librdkafka's mock says nothing about a broker anyone deploys.

use serde::{Deserialize, Serialize};
use testkit::Broker;

use super::Ceiling;
use crate::BenchError;

/// The producer settings besides `bootstrap.servers`: the harvester's (idempotent, hence
/// `acks=all`) and librdkafka's default linger.
pub const PRODUCER_PROPS: [&str; 3] = ["acks=all", "enable.idempotence=true", "linger.ms=5"];

/// One ProducerPerformance run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct KafkaProducerPerf {
    pub ceiling: Ceiling,
    pub mb_per_second: f64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: f64,
    /// The tool's 99th percentile send latency.
    pub p99_latency_ms: Option<f64>,
    /// Value bytes per record (`--record-size`).
    pub record_bytes: usize,
    /// Partitions of its topic.
    pub partitions: i32,
}

/// The figures of one summary line: `N records sent, X records/sec (Y MB/sec), A ms avg
/// latency, M ms max latency, P ms 50th, ...`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub records: u64,
    pub per_second: f64,
    pub mb_per_second: f64,
    pub avg_latency_ms: f64,
    pub max_latency_ms: f64,
    pub p99_latency_ms: Option<f64>,
}

/// The last summary line of the tool's output (the final one, with percentiles; the tool also
/// prints one every 5 s while it runs).
pub fn parse_summary(output: &str) -> Option<Summary> {
    output.lines().rev().find_map(parse_line)
}

fn parse_line(line: &str) -> Option<Summary> {
    let line = line.trim().trim_end_matches('.');
    let mut parts = line.split(", ");
    let records = parts.next()?.strip_suffix(" records sent")?.parse().ok()?;
    let (rate, mb) = parts.next()?.split_once(" records/sec (")?;
    let mb = mb.strip_suffix(" MB/sec)")?;
    let avg = parts.next()?.strip_suffix(" ms avg latency")?;
    let max = parts.next()?.strip_suffix(" ms max latency")?;
    let p99 = parts.find_map(|p| p.strip_suffix(" ms 99th"));
    Some(Summary {
        records,
        per_second: rate.parse().ok()?,
        mb_per_second: mb.parse().ok()?,
        avg_latency_ms: avg.parse().ok()?,
        max_latency_ms: max.parse().ok()?,
        p99_latency_ms: p99.and_then(|p| p.parse().ok()),
    })
}

/// Runs ProducerPerformance for `records` records of `record_bytes` to `topic` (of
/// `partitions`, the ceilings' topic: warm on a run that warmed its broker) on `broker` (a real
/// cluster).
pub async fn measure(
    broker: &Broker,
    topic: &str,
    records: u64,
    record_bytes: usize,
    partitions: i32,
) -> Result<KafkaProducerPerf, BenchError> {
    let args = arguments(topic, records, record_bytes, broker.bootstrap());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(crate::workspace_root().join("scripts/services/kafka.sh"))
            .args(&args)
            .output()
    })
    .await
    .map_err(|e| BenchError::Run(format!("the ProducerPerformance thread failed: {e}")))?
    .map_err(BenchError::io(
        "run scripts/services/kafka.sh tool ProducerPerformance",
    ))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = parse_summary(&stdout)
        .filter(|_| output.status.success())
        .ok_or_else(|| {
            BenchError::Run(format!(
                "ProducerPerformance ({}) gave no summary line: {} {}",
                output.status,
                tail(&stdout),
                tail(&String::from_utf8_lossy(&output.stderr))
            ))
        })?;
    Ok(KafkaProducerPerf {
        ceiling: Ceiling {
            records: summary.records,
            seconds: summary.records as f64 / summary.per_second.max(1e-9),
            per_second: summary.per_second,
        },
        mb_per_second: summary.mb_per_second,
        avg_latency_ms: summary.avg_latency_ms,
        max_latency_ms: summary.max_latency_ms,
        p99_latency_ms: summary.p99_latency_ms,
        record_bytes,
        partitions,
    })
}

/// `scripts/services/kafka.sh`'s arguments for one run.
fn arguments(topic: &str, records: u64, record_bytes: usize, bootstrap: &str) -> Vec<String> {
    let mut args: Vec<String> = [
        "tool",
        "ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        &records.to_string(),
        "--record-size",
        &record_bytes.to_string(),
        "--throughput",
        "-1",
        "--producer-props",
        &format!("bootstrap.servers={bootstrap}"),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.extend(PRODUCER_PROPS.iter().map(|p| (*p).to_owned()));
    args
}

/// The last few lines of a tool's output, for an error message.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_summary_line_is_parsed() {
        let out = "20000 records sent, 4000.0 records/sec (0.76 MB/sec), 300.1 ms avg latency, 900.0 ms max latency.\n\
                   100000 records sent, 39200.3 records/sec (7.48 MB/sec), 378.26 ms avg latency, 821.00 ms max latency, 432 ms 50th, 545 ms 95th, 564 ms 99th, 584 ms 99.9th.\n";
        let s = parse_summary(out).unwrap();
        assert_eq!(
            s,
            Summary {
                records: 100_000,
                per_second: 39200.3,
                mb_per_second: 7.48,
                avg_latency_ms: 378.26,
                max_latency_ms: 821.0,
                p99_latency_ms: Some(564.0),
            }
        );
        // A periodic line alone (the tool stopped early) still parses, without percentiles.
        let early = parse_summary(out.lines().next().unwrap()).unwrap();
        assert_eq!((early.records, early.p99_latency_ms), (20_000, None));
        assert_eq!(parse_summary("Exception in thread main\n"), None);
    }

    #[test]
    fn the_tool_gets_the_harvesters_producer_settings() {
        let args = arguments("t", 5000, 200, "127.0.0.1:19092").join(" ");
        assert_eq!(
            args,
            "tool ProducerPerformance --topic t --num-records 5000 --record-size 200 --throughput -1 --producer-props bootstrap.servers=127.0.0.1:19092 acks=all enable.idempotence=true linger.ms=5"
        );
    }
}
