//! NELI settings, with goNELI's names and defaults, and the Kafka settings NELI must force. The
//! elector takes them as they are and the bucket assignor derives them from its own; both
//! validate and resolve them here, so the two modes cannot drift apart.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::coordination::naming;
pub use crate::coordination::naming::sanitise;
use crate::error::ConfigProblem;
use crate::kafka::KafkaConfig;

/// Settings of the NELI elector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NeliConfig {
    /// Consumer group shared by all contenders. Default: the binary's file name, sanitised.
    pub group_id: Option<String>,
    /// Leader topic. Default: `<group_id>.neli`.
    pub topic: Option<String>,
    /// This member's name, carried in heartbeats and logs. Default: `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// Leadership lapses (Fenced) when no own heartbeat was read back for this long. Default 5s.
    /// The consumer's `session.timeout.ms` and `max.poll.interval.ms` are set to 3x this, and
    /// `heartbeat.interval.ms` to 1/5 of it. Kafka brokers refuse sessions under 6 s by default
    /// (`group.min.session.timeout.ms`), so keep this at 2s or more against them: a session the
    /// cluster refuses ends the elector with a configuration error naming both values.
    #[serde(with = "humantime_serde")]
    pub heartbeat_timeout: Duration,
    /// Lower bound between polls (and heartbeats). Default 100ms.
    #[serde(with = "humantime_serde")]
    pub min_poll_interval: Duration,
    /// How long a revocation waits for the application's acknowledgement before handing over
    /// anyway (logged when hit). Default 2x `heartbeat_timeout`; must stay below the 3x
    /// rebalance deadline.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Create the leader topic with one partition when missing. Default true.
    pub create_topic: bool,
}

impl Default for NeliConfig {
    fn default() -> Self {
        NeliConfig {
            group_id: None,
            topic: None,
            name: None,
            heartbeat_timeout: Duration::from_secs(5),
            min_poll_interval: Duration::from_millis(100),
            revoke_timeout: None,
            create_topic: true,
        }
    }
}

fn default_group() -> String {
    naming::binary_name()
}

/// Settings with every default resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub group_id: String,
    pub topic: String,
    pub name: String,
    pub heartbeat_timeout: Duration,
    pub min_poll_interval: Duration,
    pub revoke_timeout: Duration,
    pub create_topic: bool,
}

impl NeliConfig {
    /// Checks the settings; every problem names the field and the fix.
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let ht = self.heartbeat_timeout;
        if ht < Duration::from_millis(200) {
            problems.push(ConfigProblem::new(
                format!("{field}.heartbeat_timeout"),
                format!("is {ht:?}; use at least 200ms (5s is the default)"),
            ));
        }
        if self.min_poll_interval.is_zero() || self.min_poll_interval * 2 > ht {
            problems.push(ConfigProblem::new(
                format!("{field}.min_poll_interval"),
                format!(
                    "is {:?}; it must be above zero and at most half of heartbeat_timeout ({ht:?}) so heartbeats can arrive in time",
                    self.min_poll_interval
                ),
            ));
        }
        if let Some(rt) = self.revoke_timeout {
            if rt >= ht * 3 {
                problems.push(ConfigProblem::new(
                    format!("{field}.revoke_timeout"),
                    format!("is {rt:?}; keep it below 3x heartbeat_timeout ({:?}), the group's rebalance deadline", ht * 3),
                ));
            }
        }
        for (name, value) in [("group_id", &self.group_id), ("topic", &self.topic)] {
            if let Some(v) = value {
                if v.is_empty() || sanitise(v) != *v || v.len() > 249 {
                    problems.push(ConfigProblem::new(
                        format!("{field}.{name}"),
                        format!("{v:?} is not a valid Kafka name; use 1-249 characters from [a-zA-Z0-9._-], e.g. {:?}", sanitise(v)),
                    ));
                }
            }
        }
        problems
    }

    /// Resolves the defaults.
    pub fn resolve(&self) -> Resolved {
        let group_id = self.group_id.clone().unwrap_or_else(default_group);
        let topic = self
            .topic
            .clone()
            .unwrap_or_else(|| format!("{group_id}.neli"));
        Resolved {
            topic,
            name: self.name.clone().unwrap_or_else(naming::member_name),
            heartbeat_timeout: self.heartbeat_timeout,
            min_poll_interval: self.min_poll_interval,
            revoke_timeout: self.revoke_timeout.unwrap_or(self.heartbeat_timeout * 2),
            create_topic: self.create_topic,
            group_id,
        }
    }
}

impl Resolved {
    /// The group consumer's session timeout (and poll interval bound): three heartbeat
    /// timeouts. The coordinator may take this long to finish a rebalance a leaving member
    /// finds in progress.
    pub fn session_timeout(&self) -> Duration {
        self.heartbeat_timeout * 3
    }

    /// How long closing may take: the revoke barrier, a rebalance in progress finishing
    /// (the session timeout), and the heartbeat producer's flush (1 s).
    pub fn close_timeout(&self) -> Duration {
        self.revoke_timeout + self.session_timeout() + Duration::from_secs(1)
    }

    /// Settings NELI's consumer must have; users may not override them.
    pub fn forced_consumer(&self) -> Vec<(&'static str, String)> {
        let ms = |d: Duration| d.as_millis().to_string();
        let session = self.session_timeout();
        vec![
            ("group.id", self.group_id.clone()),
            ("enable.auto.commit", "false".into()),
            ("auto.offset.reset", "latest".into()),
            ("enable.partition.eof", "false".into()),
            ("session.timeout.ms", ms(session)),
            ("max.poll.interval.ms", ms(session)),
            (
                "heartbeat.interval.ms",
                ms((self.heartbeat_timeout / 5).max(Duration::from_millis(50))),
            ),
            // A contender joining must not cost the leader its term: cooperative rebalancing
            // revokes only partitions that move.
            ("partition.assignment.strategy", "cooperative-sticky".into()),
            ("fetch.wait.max.ms", ms(self.min_poll_interval)),
        ]
    }

    /// Settings NELI's heartbeat producer must have.
    pub fn forced_producer(&self) -> Vec<(&'static str, String)> {
        vec![
            ("linger.ms", "0".into()),
            (
                "delivery.timeout.ms",
                self.heartbeat_timeout.as_millis().to_string(),
            ),
        ]
    }
}

/// How long after another member's last heartbeat saying it led this member may start a term.
/// The other member stops leading when it reads this member's (outranking) heartbeat or loses
/// partition 0, and says so in its next heartbeat, one poll interval later; two poll intervals
/// plus 100 ms for the round trip through the broker cover that, assuming the other member polls
/// as often. Without a recent leading peer (a crash a session ago, an orderly hand-off), a term
/// starts with the first own heartbeat read back.
pub(crate) fn quiet(config: &Resolved) -> Duration {
    config.min_poll_interval * 2 + Duration::from_millis(100)
}

/// Validates the Kafka pass-through against NELI's forced settings.
pub(crate) fn kafka_problems(
    kafka: &KafkaConfig,
    neli: &Resolved,
    field: &str,
) -> Vec<ConfigProblem> {
    let mut problems = kafka.problems(field);
    if let Err(p) = kafka.client_config(field, "leader-election consumer", &neli.forced_consumer())
    {
        problems.extend(p);
    }
    if let Err(p) = kafka.client_config(field, "heartbeat producer", &neli.forced_producer()) {
        problems.extend(p);
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_goneli() {
        let c = NeliConfig::default();
        assert_eq!(c.heartbeat_timeout, Duration::from_secs(5));
        assert_eq!(c.min_poll_interval, Duration::from_millis(100));
        let r = NeliConfig {
            group_id: Some("billing-api".into()),
            ..c
        }
        .resolve();
        assert_eq!(r.topic, "billing-api.neli");
        assert_eq!(r.revoke_timeout, Duration::from_secs(10));
    }

    #[test]
    fn sanitises_like_goneli() {
        assert_eq!(sanitise("my app/v1:x"), "my_app_v1_x");
        assert_eq!(sanitise("ok.name_-1"), "ok.name_-1");
    }

    #[test]
    fn timeouts_are_coherent() {
        let r = NeliConfig {
            heartbeat_timeout: Duration::from_secs(2),
            ..Default::default()
        }
        .resolve();
        let forced = r.forced_consumer();
        let get = |k: &str| forced.iter().find(|(key, _)| *key == k).unwrap().1.clone();
        assert_eq!(get("session.timeout.ms"), "6000");
        assert_eq!(get("max.poll.interval.ms"), "6000");
        assert_eq!(get("heartbeat.interval.ms"), "400");
    }

    #[test]
    fn problems_name_field_and_fix() {
        let c = NeliConfig {
            heartbeat_timeout: Duration::from_millis(100),
            topic: Some("bad topic".into()),
            ..Default::default()
        };
        let p = c.problems("leader");
        assert!(p.iter().any(|p| p.field == "leader.heartbeat_timeout"));
        assert!(p
            .iter()
            .any(|p| p.field == "leader.topic" && p.message.contains("bad_topic")));
        assert!(p.iter().any(|p| p.field == "leader.min_poll_interval"));
    }

    #[test]
    fn overriding_a_forced_key_is_rejected() {
        let r = NeliConfig {
            group_id: Some("g".into()),
            ..Default::default()
        }
        .resolve();
        let kafka = KafkaConfig::with_bootstrap("b").set("session.timeout.ms", "30000");
        let p = kafka_problems(&kafka, &r, "kafka");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].field.contains("session.timeout.ms"));
    }
}
