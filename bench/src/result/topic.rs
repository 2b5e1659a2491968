//! The topic a run used and how much verifier lag its broker could hold (sized by
//! `crate::run::sizing`).

use serde::{Deserialize, Serialize};

/// The topic a run used and how much verifier lag its broker could hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TopicSizing {
    /// Partitions the topic was created with.
    pub partitions: i32,
    /// Partitions the scenario asked for.
    pub requested: i32,
    /// One record on the wire (Kafka record format v2, uncompressed, without its batch).
    pub record_bytes: u64,
    /// Records one partition keeps before the broker deletes the oldest (embedded broker).
    pub partition_records: Option<u64>,
    /// Which limit applies ("5 MiB of message sets per partition", or the cluster's retention).
    pub limit: String,
    /// Records the verifier may lag behind before the broker deletes unread ones (embedded).
    pub lag_tolerance: Option<u64>,
    /// The lag tolerance sizing aimed at (backlog scenarios on the embedded broker).
    pub target: Option<u64>,
    /// The verifier read after the drain: the broker had to keep the whole backlog.
    #[serde(default)]
    pub verify_after: bool,
}

impl TopicSizing {
    /// One line for the report.
    pub fn describe(&self) -> String {
        let parts = if self.partitions == self.requested {
            format!("{} partitions", self.partitions)
        } else {
            format!(
                "{} partitions (scenario: {})",
                self.partitions, self.requested
            )
        };
        match (self.partition_records, self.lag_tolerance) {
            (Some(per), Some(tolerance)) => format!(
                "{parts}; embedded broker keeps {} ({per} records of {} B); verifier lag tolerance {tolerance} records{}",
                self.limit,
                self.record_bytes,
                match self.target {
                    Some(t) if self.verify_after && tolerance < t => format!(
                        ", short of the {t}-record backlog the verifier reads after the drain: more than the embedded broker keeps (a run that loses records to its eviction is inconclusive; use --brokers)"
                    ),
                    Some(t) if self.verify_after => format!(
                        " (sized to keep the whole {t}-record backlog: the verifier reads after the drain)"
                    ),
                    Some(t) if tolerance < t => format!(
                        ", short of the {t} this backlog needs: more than the embedded broker can verify (a run that loses records to its eviction is inconclusive; use --brokers)"
                    ),
                    Some(t) => format!(" (sized for {t})"),
                    None => String::new(),
                }
            ),
            _ => format!("{parts}; {}", self.limit),
        }
    }
}
