//! Where a record's time goes inside the harvester, stage by stage, from the members' own
//! histograms (`/metrics`, scraped once the run's records have all arrived, before the members
//! stop).
//!
//! The verifier measures commit -> receipt end to end; these say which part of it the harvester
//! spent marking, queueing behind a key, waiting for Kafka, or purging. They are Prometheus
//! histograms, so a percentile is the upper bound of the bucket it falls in (buckets of 1-2.5-5
//! steps, from 100 µs): coarse, but the same figures a dashboard shows. Their counts cover each
//! member's whole life, so a failover's re-marked rows count twice.

use std::net::SocketAddr;

use harvester::metrics::names;
use serde::{Deserialize, Serialize};

/// The stages, in order: (label, metric base name). Together: commit -> purged.
pub const STAGES: [(&str, &str); 4] = [
    ("commit -> marked", names::COMMIT_TO_MARKED_SECONDS),
    ("marked -> sent", names::MARKED_TO_SENT_SECONDS),
    ("sent -> acknowledged", names::PUBLISH_SECONDS),
    ("acknowledged -> purged", names::ACKED_TO_PURGED_SECONDS),
];

/// commit -> acknowledged as a whole, for the part after it: acknowledged -> received by the
/// consumer is the run's mean commit -> receipt less this mean (no per-record acknowledgement
/// time reaches the consumer). The harvester measures from the row's `create_time`, which is
/// when the writer's transaction began; where writers hold transactions open before committing
/// (out-of-order) or a failover re-sends, the two means do not cover the same span, and a
/// difference below zero is not printed.
pub const TO_ACK: (&str, &str) = ("commit -> acknowledged", names::COMMIT_TO_ACK_SECONDS);

/// One stage over every member.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub name: String,
    pub count: u64,
    pub mean_ms: f64,
    /// Upper bounds of the buckets the 50th and 99th percentiles fall in.
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// The stage called `name`, if the harvesters reported it.
pub fn named<'a>(stages: &'a [Stage], name: &str) -> Option<&'a Stage> {
    stages.iter().find(|x| x.name == name)
}

/// A histogram read back from the exposition: cumulative (upper bound, count) pairs, sum, count.
#[derive(Debug, Default, Clone, PartialEq)]
struct Scraped {
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

impl Scraped {
    /// Adds another member's histogram (same bounds).
    fn add(&mut self, other: &Scraped) {
        if self.buckets.is_empty() {
            self.buckets = other.buckets.clone();
        } else {
            for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
                mine.1 += theirs.1;
            }
        }
        self.sum += other.sum;
        self.count += other.count;
    }

    /// The upper bound of the bucket quantile `q` falls in (the largest finite bound when it is
    /// past them all).
    fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q * self.count as f64).ceil().max(1.0) as u64;
        let finite = self.buckets.iter().filter(|(b, _)| b.is_finite());
        let mut last = None;
        for (bound, cumulative) in finite {
            last = Some(*bound);
            if *cumulative >= rank {
                return Some(*bound);
            }
        }
        last
    }
}

/// Reads histogram `name` out of a Prometheus text exposition.
fn parse(text: &str, name: &str) -> Option<Scraped> {
    let bucket = format!("{name}_bucket{{le=\"");
    let mut h = Scraped::default();
    let mut seen = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix(&bucket) {
            let (le, count) = rest.split_once("\"} ")?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            h.buckets.push((bound, count.trim().parse().ok()?));
            seen = true;
        } else if let Some(v) = line.strip_prefix(&format!("{name}_sum ")) {
            h.sum = v.trim().parse().ok()?;
        } else if let Some(v) = line.strip_prefix(&format!("{name}_count ")) {
            h.count = v.trim().parse().ok()?;
        }
    }
    seen.then_some(h)
}

/// The stages summed over the expositions of every member (`texts`); `None` when no member
/// exported them (an older reaper).
pub fn from_expositions(texts: &[String]) -> Option<Vec<Stage>> {
    let mut stages = Vec::new();
    for (label, name) in STAGES.into_iter().chain([TO_ACK]) {
        let mut total = Scraped::default();
        for text in texts {
            if let Some(h) = parse(text, name) {
                total.add(&h);
            }
        }
        if total.buckets.is_empty() {
            return None;
        }
        let ms = |s: f64| s * 1000.0;
        stages.push(Stage {
            name: label.to_owned(),
            count: total.count,
            mean_ms: if total.count > 0 {
                ms(total.sum / total.count as f64)
            } else {
                0.0
            },
            p50_ms: total.quantile(0.5).map_or(0.0, ms),
            p99_ms: total.quantile(0.99).map_or(0.0, ms),
        });
    }
    Some(stages)
}

/// `/metrics` of every member that answers (a killed one does not).
pub fn scrape(members: &[SocketAddr]) -> Vec<String> {
    members
        .iter()
        .filter_map(|addr| testkit::http::get(*addr, "/metrics").ok())
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body)
        .collect()
}

/// One line for the report: each stage's p50 / p99 (and mean) in ms, then acknowledged ->
/// received by the consumer (mean, by difference; see [`TO_ACK`]) when the run's mean commit ->
/// receipt is known.
pub fn describe(stages: &[Stage], commit_to_receipt_mean_ms: Option<f64>) -> String {
    let mut parts: Vec<String> = stages
        .iter()
        .filter(|s| s.name != TO_ACK.0)
        .map(|s| {
            format!(
                "{} {} / {} (mean {:.1})",
                s.name,
                fmt_ms(s.p50_ms),
                fmt_ms(s.p99_ms),
                s.mean_ms
            )
        })
        .collect();
    let to_ack = stages.iter().find(|s| s.name == TO_ACK.0);
    if let (Some(ack), Some(receipt)) = (to_ack, commit_to_receipt_mean_ms) {
        let after = receipt - ack.mean_ms;
        if after >= 0.0 {
            parts.push(format!(
                "acknowledged -> received (mean, by difference) {after:.1}"
            ));
        }
    }
    format!(
        "harvester stages, p50 / p99 ms (bucket upper bounds): {}",
        parts.join("; ")
    )
}

fn fmt_ms(v: f64) -> String {
    if v >= 10.0 {
        format!("≤{v:.0}")
    } else {
        format!("≤{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposition(name: &str, buckets: &[(&str, u64)], sum: f64) -> String {
        let mut s = String::new();
        for (le, c) in buckets {
            s.push_str(&format!("{name}_bucket{{le=\"{le}\"}} {c}\n"));
        }
        let count = buckets.last().map_or(0, |b| b.1);
        s.push_str(&format!("{name}_sum {sum}\n{name}_count {count}\n"));
        s
    }

    #[test]
    fn members_add_up_and_percentiles_are_bucket_bounds() {
        let texts: Vec<String> = [(90, 0.2), (10, 0.9)]
            .iter()
            .map(|(fast, sum)| {
                STAGES
                    .iter()
                    .chain([&TO_ACK])
                    .map(|(_, name)| {
                        exposition(
                            name,
                            &[
                                ("0.001", *fast),
                                ("0.005", *fast),
                                ("0.1", 100),
                                ("+Inf", 100),
                            ],
                            *sum,
                        )
                    })
                    .collect()
            })
            .collect();
        let stages = from_expositions(&texts).unwrap();
        assert_eq!(stages.len(), 5);
        let s = &stages[0];
        assert_eq!(s.count, 200);
        // 100 of 200 at or below 1 ms: p50 is the 1 ms bucket; p99 falls in the 100 ms one.
        assert_eq!((s.p50_ms, s.p99_ms), (1.0, 100.0));
        assert!((s.mean_ms - 5.5).abs() < 1e-9, "{}", s.mean_ms);
        let line = describe(&stages, Some(8.0));
        assert!(
            line.contains("commit -> marked ≤1 / ≤100 (mean 5.5)"),
            "{line}"
        );
        // The run's mean commit -> receipt (8.0) less commit -> acknowledged's (5.5).
        assert!(
            line.ends_with("acknowledged -> received (mean, by difference) 2.5"),
            "{line}"
        );
        assert!(!describe(&stages, None).contains("received"));
        // A commit -> receipt mean below commit -> acknowledged's says the spans differ.
        assert!(!describe(&stages, Some(1.0)).contains("received"));
    }

    #[test]
    fn a_reaper_without_the_stages_gives_none() {
        assert_eq!(from_expositions(&["harvester_up 1\n".to_owned()]), None);
        assert_eq!(from_expositions(&[]), None);
    }
}
