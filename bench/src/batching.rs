//! How the harvesters' producers batched: records per produce request and per partition batch
//! (message set), from the `harvester_kafka_*` counters their `/metrics` export (librdkafka's
//! statistics), scraped with the stages once a run's records have arrived.
//!
//! A broker's cost per record follows its batches (Kafka 4.1 here: 3.7 µs with filled batches,
//! 26 with about four records per partition per request), so a shape's cost reads against them:
//! few keys over many partitions leave few records per partition in each request.

use harvester::metrics::names;
use serde::{Deserialize, Serialize};

/// Totals over every member.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batching {
    pub requests: u64,
    pub records: u64,
    pub batches: u64,
    pub batch_records: u64,
}

impl Batching {
    pub fn records_per_request(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.records as f64 / self.requests as f64)
    }

    pub fn records_per_batch(&self) -> Option<f64> {
        (self.batches > 0).then(|| self.batch_records as f64 / self.batches as f64)
    }

    /// Partition batches per produce request.
    pub fn batches_per_request(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.batches as f64 / self.requests as f64)
    }

    /// `12.3 records per produce request (3.1 partition batches of 4.0 records)`.
    pub fn describe(&self) -> String {
        match (self.records_per_request(), self.records_per_batch()) {
            (Some(r), Some(b)) => format!(
                "{r:.1} records per produce request ({:.1} partition batches of {b:.1} records; {} requests)",
                self.batches_per_request().unwrap_or(0.0),
                self.requests
            ),
            _ => "no produce request counted".into(),
        }
    }
}

/// A counter's value in a Prometheus text exposition.
fn counter(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let v = line.strip_prefix(name)?.strip_prefix(' ')?;
        v.trim().parse::<f64>().ok().map(|v| v as u64)
    })
}

/// The totals over the expositions of every member; `None` when none exported them (an older
/// reaper).
pub fn from_expositions(texts: &[String]) -> Option<Batching> {
    let mut total = Batching::default();
    let mut seen = false;
    for text in texts {
        let Some(requests) = counter(text, names::PRODUCE_REQUESTS) else {
            continue;
        };
        seen = true;
        total.requests += requests;
        total.records += counter(text, names::RECORDS_SENT).unwrap_or(0);
        total.batches += counter(text, names::PARTITION_BATCHES).unwrap_or(0);
        total.batch_records += counter(text, names::PARTITION_BATCH_RECORDS).unwrap_or(0);
    }
    seen.then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_add_up() {
        let text = |req: u64, rec: u64, b: u64, br: u64| {
            format!(
                "# TYPE {r} counter\n{r} {req}\n{s} {rec}\n{pb} {b}\n{pbr} {br}\n{r}_other 9\n",
                r = names::PRODUCE_REQUESTS,
                s = names::RECORDS_SENT,
                pb = names::PARTITION_BATCHES,
                pbr = names::PARTITION_BATCH_RECORDS
            )
        };
        let b = from_expositions(&[text(10, 400, 40, 400), text(10, 200, 10, 200)]).unwrap();
        assert_eq!(b.records_per_request(), Some(30.0));
        assert_eq!(b.records_per_batch(), Some(12.0));
        assert_eq!(b.batches_per_request(), Some(2.5));
        assert!(b.describe().starts_with("30.0 records per produce request"));
        assert_eq!(from_expositions(&["harvester_up 1\n".into()]), None);
    }
}
