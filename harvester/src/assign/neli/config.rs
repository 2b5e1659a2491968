//! Settings of non-exclusive NELI: the exclusive elector's settings (validated and resolved by
//! its own code, so the two modes cannot drift apart), plus how the buckets map onto the leader
//! topic's partitions.
//!
//! The mapping is fixed per group: bucket `b` follows partition `b % partitions`. Every member
//! must compute the same mapping, which is why `partitions` must divide `buckets`: each partition
//! then carries the same number of buckets, and a member's share of the work is its share of the
//! partitions, which is what the group's (cooperative-sticky) assignor balances.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::assign::{Buckets, DEFAULT_BUCKETS};
use crate::coordination::neli::{self, NeliConfig};
use crate::error::ConfigProblem;
use crate::kafka::KafkaConfig;

/// Settings of the non-exclusive NELI assignor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NeliAssignorConfig {
    /// Consumer group shared by all members. Default: the binary's file name, sanitised.
    pub group_id: Option<String>,
    /// Leader topic, with one partition per share of the buckets. Default:
    /// `<group_id>.neli-buckets`.
    pub topic: Option<String>,
    /// This member's name, carried in heartbeats and logs. Default: `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// A partition's buckets lapse (Fenced) when no own heartbeat on it was read back for this
    /// long. Default 5s. The group session and poll deadlines are 3x this (as for NELI).
    #[serde(with = "humantime_serde")]
    pub heartbeat_timeout: Duration,
    /// Lower bound between heartbeats on each partition. Default 100ms.
    #[serde(with = "humantime_serde")]
    pub min_poll_interval: Duration,
    /// How long a revocation waits for the application's acknowledgement before handing the
    /// partitions over anyway (logged when hit). Default 2x `heartbeat_timeout`; must stay below
    /// the 3x rebalance deadline.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Create the leader topic (with `partitions` partitions) when missing. Default true.
    pub create_topic: bool,
    /// B: how many buckets the outbox is split into; the same for every member (the table
    /// records the first member's, and a member with another count refuses). Default 64.
    pub buckets: u16,
    /// P: partitions of the leader topic, which must have exactly this many (bucket `b`
    /// belongs to partition `b % P` on every member); must divide `buckets`. Default:
    /// `buckets` (one bucket per partition).
    pub partitions: Option<u16>,
}

impl Default for NeliAssignorConfig {
    fn default() -> Self {
        let neli = NeliConfig::default();
        NeliAssignorConfig {
            group_id: None,
            topic: None,
            name: None,
            heartbeat_timeout: neli.heartbeat_timeout,
            min_poll_interval: neli.min_poll_interval,
            revoke_timeout: None,
            create_topic: true,
            buckets: DEFAULT_BUCKETS,
            partitions: None,
        }
    }
}

/// Settings with every default resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// What the exclusive elector would run with (its `topic` is this assignor's topic).
    pub neli: neli::Resolved,
    /// B.
    pub buckets: u16,
    /// P.
    pub partitions: u16,
}

impl NeliAssignorConfig {
    /// The exclusive elector's view of these settings.
    fn as_neli(&self) -> NeliConfig {
        NeliConfig {
            group_id: self.group_id.clone(),
            topic: self.topic.clone(),
            name: self.name.clone(),
            heartbeat_timeout: self.heartbeat_timeout,
            min_poll_interval: self.min_poll_interval,
            revoke_timeout: self.revoke_timeout,
            create_topic: self.create_topic,
        }
    }

    /// Checks the settings; every problem names the field (under `field`, e.g. `leader`) and the
    /// fix.
    pub fn validate(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = self.as_neli().problems(field);
        let b = self.buckets;
        if b == 0 {
            problems.push(ConfigProblem::new(
                format!("{field}.buckets"),
                format!("is 0; use at least 1 ({DEFAULT_BUCKETS} is the default)"),
            ));
        }
        if let Some(p) = self.partitions {
            if p == 0 || (b > 0 && !b.is_multiple_of(p)) {
                problems.push(ConfigProblem::new(
                    format!("{field}.partitions"),
                    format!(
                        "is {p}; it must divide buckets ({b}) so every partition carries as many buckets, e.g. {}",
                        divisor_near(b, p)
                    ),
                ));
            }
        }
        problems
    }

    /// Resolves the defaults.
    pub fn resolve(&self) -> Resolved {
        let mut neli = self.as_neli().resolve();
        if self.topic.is_none() {
            neli.topic = format!("{}.neli-buckets", neli.group_id);
        }
        Resolved {
            neli,
            buckets: self.buckets,
            partitions: self.partitions.unwrap_or(self.buckets),
        }
    }
}

/// The greatest divisor of `b` not above `p` (for the fix in a message).
fn divisor_near(b: u16, p: u16) -> u16 {
    (1..=p.clamp(1, b.max(1)))
        .rev()
        .find(|d| b.is_multiple_of(*d))
        .unwrap_or(1)
}

impl Resolved {
    /// The buckets partition `partition` carries (none outside `0..P`).
    pub fn buckets_of(&self, partition: i32) -> Buckets {
        match u16::try_from(partition) {
            Ok(p) if p < self.partitions => (p..self.buckets)
                .step_by(usize::from(self.partitions))
                .collect(),
            _ => Buckets::new(),
        }
    }

    /// The heartbeat reader's group id (see [`Resolved::forced_reader`]).
    pub fn reader_group(&self) -> String {
        format!("{}.reader", self.neli.group_id)
    }

    /// Settings of the consumer that reads heartbeats back from the partitions this member
    /// holds. It is assigned partitions by hand and never joins a group; librdkafka still wants
    /// a group id for that, one no member subscribes with.
    pub fn forced_reader(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        vec![
            ("group.id", self.reader_group()),
            ("enable.auto.commit", "false".into()),
            ("auto.offset.reset", "latest".into()),
            ("enable.partition.eof", "false".into()),
            ("fetch.wait.max.ms", ms(self.neli.min_poll_interval)),
        ]
    }
}

/// Validates the Kafka pass-through against every setting this assignor forces.
pub(crate) fn kafka_problems(
    kafka: &KafkaConfig,
    resolved: &Resolved,
    field: &str,
) -> Vec<ConfigProblem> {
    let mut problems = neli::kafka_problems(kafka, &resolved.neli, field);
    if let Err(p) = kafka.client_config(field, "heartbeat reader", &resolved.forced_reader()) {
        problems.extend(p);
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_neli_and_the_bucket_count() {
        let r = NeliAssignorConfig {
            group_id: Some("billing".into()),
            ..Default::default()
        }
        .resolve();
        assert_eq!(r.neli.topic, "billing.neli-buckets");
        assert_eq!((r.buckets, r.partitions), (64, 64));
        assert_eq!(r.neli.heartbeat_timeout, Duration::from_secs(5));
        assert_eq!(r.neli.revoke_timeout, Duration::from_secs(10));
        let forced = r.neli.forced_consumer();
        assert!(forced.contains(&("partition.assignment.strategy", "cooperative-sticky".into())));
    }

    #[test]
    fn buckets_follow_their_partition_modulo_p() {
        let r = NeliAssignorConfig {
            buckets: 16,
            partitions: Some(4),
            ..Default::default()
        }
        .resolve();
        assert_eq!(r.buckets_of(1), Buckets::from([1, 5, 9, 13]));
        assert!(r.buckets_of(4).is_empty() && r.buckets_of(-1).is_empty());
        let all: Buckets = (0..4).flat_map(|p| r.buckets_of(p)).collect();
        assert_eq!(all.len(), 16);
        let one_each = NeliAssignorConfig {
            buckets: 16,
            ..Default::default()
        }
        .resolve();
        assert_eq!(one_each.buckets_of(15), Buckets::from([15]));
    }

    #[test]
    fn problems_name_the_field_and_the_fix() {
        let c = NeliAssignorConfig {
            buckets: 64,
            partitions: Some(12),
            heartbeat_timeout: Duration::from_millis(100),
            ..Default::default()
        };
        let p = c.validate("leader");
        assert!(
            p.iter()
                .any(|p| p.field == "leader.partitions" && p.message.contains("e.g. 8")),
            "{p:?}"
        );
        assert!(p.iter().any(|p| p.field == "leader.heartbeat_timeout"));
        let zero = NeliAssignorConfig {
            buckets: 0,
            partitions: Some(0),
            ..Default::default()
        };
        let p = zero.validate("leader");
        assert!(p.iter().any(|p| p.field == "leader.buckets"));
        assert!(p.iter().any(|p| p.field == "leader.partitions"));
        assert!(NeliAssignorConfig::default().validate("leader").is_empty());
    }

    #[test]
    fn unknown_keys_and_humane_durations() {
        let c: NeliAssignorConfig =
            serde_json::from_str(r#"{"heartbeat_timeout":"2s","partitions":8}"#).unwrap();
        assert_eq!(c.heartbeat_timeout, Duration::from_secs(2));
        assert_eq!(c.partitions, Some(8));
        assert!(serde_json::from_str::<NeliAssignorConfig>(r#"{"partition":8}"#).is_err());
    }

    #[test]
    fn overriding_a_forced_key_is_rejected() {
        let r = NeliAssignorConfig {
            group_id: Some("g".into()),
            ..Default::default()
        }
        .resolve();
        let kafka = KafkaConfig::with_bootstrap("b").set("auto.offset.reset", "earliest");
        let p = kafka_problems(&kafka, &r, "kafka");
        assert!(!p.is_empty() && p.iter().all(|p| p.field.contains("auto.offset.reset")));
    }
}
