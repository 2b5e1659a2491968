//! What a run did to the broker before measuring anything (filled by `crate::warm`): reported
//! apart from every scenario, and never charged to one.

use serde::{Deserialize, Serialize};

/// What a scenario needs of a warm topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Need {
    pub partitions: i32,
    pub transactional: bool,
}

/// One load round: what producing and reading back its records cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Round {
    pub records: u64,
    pub produce_seconds: f64,
    pub read_seconds: f64,
    /// The broker's CPU per record produced (µs); `None` when its processes are not here.
    pub produce_broker_us: Option<f64>,
    /// The broker's CPU per record read back (µs): what a consumer such as the verifier costs it.
    pub read_broker_us: Option<f64>,
}

impl Round {
    pub fn produce_rate(&self) -> f64 {
        self.records as f64 / self.produce_seconds.max(1e-9)
    }

    /// What the warm-up compares round to round: the broker's CPU per record, else wall µs per
    /// record.
    pub fn cost(&self) -> f64 {
        self.produce_broker_us
            .unwrap_or(self.produce_seconds * 1e6 / self.records.max(1) as f64)
    }
}

/// A topic's warm-up: every round, how long it took, and whether the cost settled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Warming {
    pub topic: String,
    pub partitions: i32,
    pub rounds: Vec<Round>,
    pub seconds: f64,
    /// The cost stopped falling (else the rounds or the time ran out first).
    pub settled: bool,
}

impl Warming {
    pub fn records(&self) -> u64 {
        self.rounds.iter().map(|r| r.records).sum()
    }

    /// One phrase: rounds, records, time, the cost from the first round to the last.
    pub fn describe(&self) -> String {
        let (Some(first), Some(last)) = (self.rounds.first(), self.rounds.last()) else {
            return "not warmed".into();
        };
        let cost = |r: &Round| match r.produce_broker_us {
            Some(us) => format!("{us:.1} µs/rec of broker CPU"),
            None => format!("{:.0} rec/s", r.produce_rate()),
        };
        format!(
            "{} rounds, {} records in {:.1} s; producing cost {} in the first round, {} in the last ({:.0} rec/s){}",
            self.rounds.len(),
            self.records(),
            self.seconds,
            cost(first),
            cost(last),
            last.produce_rate(),
            if self.settled {
                ""
            } else {
                "; NOT SETTLED (the rounds or the time ran out first)"
            }
        )
    }

    /// The broker's CPU per record read, over the rounds after the first (a reader's steady
    /// cost), when it was measured.
    pub fn read_broker_us(&self) -> Option<f64> {
        let later: Vec<f64> = self
            .rounds
            .iter()
            .skip(1)
            .filter_map(|r| r.read_broker_us)
            .collect();
        (!later.is_empty()).then(|| later.iter().sum::<f64>() / later.len() as f64)
    }
}

/// A topic the run's scenarios share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmTopic {
    pub name: String,
    pub need: Need,
    /// From the create request until every partition had a leader.
    pub created_seconds: f64,
    pub warming: Warming,
}

/// The run's warm-up as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WarmUp {
    /// The broker's, on a topic of its own, by listener (`plaintext`, and `sasl_ssl` when a
    /// scenario uses it).
    pub broker: Vec<(String, Warming)>,
    pub topics: Vec<WarmTopic>,
}

impl WarmUp {
    /// The broker's CPU per record a reader costs (the verifier's load on it), from the
    /// broker's plaintext warm-up.
    pub fn read_broker_us(&self) -> Option<f64> {
        self.broker.first().and_then(|(_, w)| w.read_broker_us())
    }

    /// Seconds spent warming, broker and topics (creation included).
    pub fn seconds(&self) -> f64 {
        self.broker.iter().map(|(_, w)| w.seconds).sum::<f64>()
            + self
                .topics
                .iter()
                .map(|t| t.created_seconds + t.warming.seconds)
                .sum::<f64>()
    }

    pub fn is_empty(&self) -> bool {
        self.broker.is_empty() && self.topics.is_empty()
    }
}
