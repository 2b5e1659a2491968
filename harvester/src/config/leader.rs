//! `[leader]`: which elector decides who harvests, as a tagged enum (`kind = "neli"` plus that
//! kind's fields), so a new elector is one folder under `election/` plus one variant here.
//!
//! `kind` may be left out and then means `neli`, so files written before there was a choice
//! (and goharvest's reaper files, which only know NELI) keep working unchanged.

use std::sync::Arc;
use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::assign::neli::{NeliAssignor, NeliAssignorConfig};
#[cfg(feature = "etcd")]
use crate::assign::rink::{Rink, RinkConfig};
use crate::assign::Assignor;
#[cfg(feature = "etcd")]
use crate::election::etcd::{Etcd, EtcdConfig};
#[cfg(feature = "nats")]
use crate::election::nats_kv::{NatsKv, NatsKvConfig};
use crate::election::neli::{self, Neli, NeliConfig};
#[cfg(feature = "zookeeper")]
use crate::election::zookeeper::{ZooKeeper, ZooKeeperConfig};
use crate::election::Elector;
use crate::error::ConfigProblem;
use crate::kafka::KafkaConfig;
use crate::Result;

/// The leader elector and its settings: `kind` names it, and `"neli"` when left out (so files
/// written before there was a choice, and goharvest's, keep working); the other fields are that
/// kind's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
// Read once at start and cloned rarely: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum LeaderConfig {
    /// NELI over Kafka's group coordinator (the default): the member that owns partition 0 of
    /// the leader topic leads, and fences itself when it stops reading back its own heartbeats.
    /// Needs nothing but the Kafka cluster the records go to.
    Neli(NeliConfig),
    /// NATS JetStream KV: whoever creates the election key leads and renews it with the
    /// revision it expects; the bucket's `max_age` expires a silent leader (feature `nats`).
    #[cfg(feature = "nats")]
    NatsKv(NatsKvConfig),
    /// ZooKeeper's recipe: ephemeral sequential znodes, the lowest leads, each candidate
    /// watches only its predecessor (feature `zookeeper`).
    #[cfg(feature = "zookeeper")]
    #[serde(rename = "zookeeper")]
    ZooKeeper(ZooKeeperConfig),
    /// etcd: a lease kept alive by the leader and a key per candidacy; the oldest leads
    /// (feature `etcd`).
    #[cfg(feature = "etcd")]
    Etcd(EtcdConfig),
    /// Non-exclusive NELI: the outbox is shared by bucket; buckets follow the partitions of the
    /// leader topic, which Kafka's group coordinator spreads over the members (scale-out).
    NeliBuckets(NeliAssignorConfig),
    /// Rink's sticky ranked ring on etcd: the outbox is shared by bucket; buckets map to the
    /// members' ranks by consistent hashing, joins wait for a rebalance delay (scale-out;
    /// feature `etcd`).
    #[cfg(feature = "etcd")]
    Rink(RinkConfig),
}

/// Every kind, with the cargo feature that builds it (NELI is always there).
const KINDS: &[(&str, &str)] = &[
    ("neli", ""),
    ("nats_kv", "nats"),
    ("zookeeper", "zookeeper"),
    ("etcd", "etcd"),
    ("neli_buckets", ""),
    ("rink", "etcd"),
];

/// What a `[leader]` kind builds: one leader for the whole outbox, or a share of it by bucket.
#[derive(Debug, Clone)]
pub enum Coordinator {
    Elector(Arc<dyn Elector>),
    Assignor(Arc<dyn Assignor>),
}

fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|(k, _)| *k).collect()
}

impl Default for LeaderConfig {
    fn default() -> Self {
        LeaderConfig::Neli(NeliConfig::default())
    }
}

impl From<NeliConfig> for LeaderConfig {
    fn from(c: NeliConfig) -> Self {
        LeaderConfig::Neli(c)
    }
}

impl<'de> Deserialize<'de> for LeaderConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        // serde's derived internally tagged enums cannot default the tag, so read the table,
        // take `kind` out, and hand the rest to the kind's own (deny_unknown_fields) struct.
        let mut table = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let kind = match table.remove("kind") {
            None => "neli".to_owned(),
            Some(serde_json::Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "leader.kind must be one of {:?}, not {other}",
                    kind_names()
                )))
            }
        };
        let rest = serde_json::Value::Object(table);
        match kind.as_str() {
            "neli" => NeliConfig::deserialize(rest)
                .map(LeaderConfig::Neli)
                .map_err(D::Error::custom),
            #[cfg(feature = "nats")]
            "nats_kv" => NatsKvConfig::deserialize(rest)
                .map(LeaderConfig::NatsKv)
                .map_err(D::Error::custom),
            #[cfg(feature = "zookeeper")]
            "zookeeper" => ZooKeeperConfig::deserialize(rest)
                .map(LeaderConfig::ZooKeeper)
                .map_err(D::Error::custom),
            #[cfg(feature = "etcd")]
            "etcd" => EtcdConfig::deserialize(rest)
                .map(LeaderConfig::Etcd)
                .map_err(D::Error::custom),
            "neli_buckets" => NeliAssignorConfig::deserialize(rest)
                .map(LeaderConfig::NeliBuckets)
                .map_err(D::Error::custom),
            #[cfg(feature = "etcd")]
            "rink" => RinkConfig::deserialize(rest)
                .map(LeaderConfig::Rink)
                .map_err(D::Error::custom),
            other => match KINDS.iter().find(|(k, _)| *k == other) {
                Some((_, feature)) => Err(D::Error::custom(format!(
                    "leader.kind {other:?} is not built in: build the harvester with the cargo feature {feature:?} (the reaper and elector binaries have every elector)"
                ))),
                None => Err(D::Error::unknown_variant(
                    other,
                    &["neli", "nats_kv", "zookeeper", "etcd", "neli_buckets", "rink"],
                )),
            },
        }
    }
}

impl LeaderConfig {
    /// The same settings with every inline secret (passwords, tokens) redacted, for printing.
    pub fn redacted(&self) -> LeaderConfig {
        #[cfg(any(feature = "nats", feature = "etcd"))]
        let hide = |s: &mut Option<crate::secret::Secret>| *s = s.as_ref().map(|s| s.redacted());
        let mut c = self.clone();
        match &mut c {
            LeaderConfig::Neli(_) | LeaderConfig::NeliBuckets(_) => {}
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(n) => {
                hide(&mut n.password);
                hide(&mut n.token);
            }
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(z) => {
                if let Some(auth) = &mut z.auth {
                    auth.password = auth.password.redacted();
                }
            }
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(e) => hide(&mut e.password),
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(r) => hide(&mut r.password),
        }
        c
    }

    /// The defaults of the elector `kind` ("neli", "nats_kv", "zookeeper", "etcd"); an error
    /// names the kinds, or the cargo feature a known kind needs.
    pub fn defaults(kind: &str) -> std::result::Result<LeaderConfig, String> {
        serde_json::from_value(serde_json::json!({ "kind": kind })).map_err(|e| e.to_string())
    }

    /// The elector's name, as written in `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            LeaderConfig::Neli(_) => "neli",
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(_) => "nats_kv",
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(_) => "zookeeper",
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(_) => "etcd",
            LeaderConfig::NeliBuckets(_) => "neli_buckets",
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(_) => "rink",
        }
    }

    /// Whether the kind shares the outbox by bucket (several harvesters work at once).
    pub fn shares_by_bucket(&self) -> bool {
        match self {
            LeaderConfig::NeliBuckets(_) => true,
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(_) => true,
            _ => false,
        }
    }

    /// The NELI settings, when that is the kind.
    pub fn neli(&self) -> Option<&NeliConfig> {
        match self {
            LeaderConfig::Neli(c) => Some(c),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The NELI settings, mutable, when that is the kind.
    pub fn neli_mut(&mut self) -> Option<&mut NeliConfig> {
        match self {
            LeaderConfig::Neli(c) => Some(c),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Every problem with the settings (fields under `leader.`), including Kafka settings the
    /// elector must control.
    pub fn problems(&self, kafka: &KafkaConfig) -> Vec<ConfigProblem> {
        match self {
            LeaderConfig::Neli(c) => {
                let mut p = c.problems("leader");
                p.extend(neli::kafka_problems(kafka, &c.resolve(), "kafka"));
                p
            }
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(c) => c.problems("leader"),
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(c) => c.problems("leader"),
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(c) => c.problems("leader"),
            LeaderConfig::NeliBuckets(c) => {
                let mut p = c.validate("leader");
                p.extend(neli::kafka_problems(kafka, &c.resolve().neli, "kafka"));
                p
            }
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(c) => c.problems("leader"),
        }
    }

    /// How long a leader may go without confirming its leadership before it stops acting on
    /// its own (for NELI, `heartbeat_timeout`; for the others, see each kind's `lease`).
    pub fn lease(&self) -> Duration {
        match self {
            LeaderConfig::Neli(c) => c.heartbeat_timeout,
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(c) => c.lease(),
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(c) => c.lease(),
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(c) => c.lease(),
            LeaderConfig::NeliBuckets(c) => c.heartbeat_timeout,
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(c) => c.resolve().lease(),
        }
    }

    /// How long after a leader falls silent a successor may be elected (for NELI, the group's
    /// session timeout, 3 x `heartbeat_timeout`). Anything a stalled leader could still send
    /// must expire before this.
    pub fn succession(&self) -> Duration {
        match self {
            LeaderConfig::Neli(c) => c.heartbeat_timeout * 3,
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(c) => c.succession(),
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(c) => c.succession(),
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(c) => c.succession(),
            LeaderConfig::NeliBuckets(c) => c.heartbeat_timeout * 3,
            // A vanished member's rank moves only after its key expired with its lease.
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(c) => c.ttl,
        }
    }

    /// The producers' default delivery timeout: what a stalled leader queued within its lease
    /// must fail before a successor can publish, so `succession - lease` (for NELI 2 x
    /// `heartbeat_timeout`, as before there was a choice of electors).
    pub fn delivery_timeout(&self) -> Duration {
        self.succession().saturating_sub(self.lease())
    }

    /// How long an orderly hand-off waits for this member to stop leader work.
    pub fn revoke_timeout(&self) -> Duration {
        match self {
            LeaderConfig::Neli(c) => c.resolve().revoke_timeout,
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(c) => c.revoke_timeout(),
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(c) => c.revoke_timeout(),
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(c) => c.revoke_timeout(),
            LeaderConfig::NeliBuckets(c) => c.resolve().neli.revoke_timeout,
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(c) => c.revoke_timeout(),
        }
    }

    /// How long a closing harvester waits for its elector or assignor to report closed: the
    /// revoke barrier plus what leaving costs, plus 5 s of slack for a loaded machine. NELI's
    /// leave may first wait for a rebalance in progress to finish (up to the group's session
    /// timeout; seen to exceed a 7 s bound under the test suite's load); the other kinds
    /// delete a key or close a session.
    pub fn close_timeout(&self) -> Duration {
        let slack = Duration::from_secs(5);
        match self {
            LeaderConfig::Neli(c) => c.resolve().close_timeout() + slack,
            LeaderConfig::NeliBuckets(c) => c.resolve().neli.close_timeout() + slack,
            // The other kinds exist only with their features.
            #[allow(unreachable_patterns)]
            _ => self.revoke_timeout() + slack,
        }
    }

    /// Starts the elector with the shared Kafka settings; it contends from then on. Electors
    /// that talk to a server of their own connect here, bounded, so an unreachable server is an
    /// error naming the field rather than a hang.
    pub async fn build(&self, kafka: &KafkaConfig) -> Result<Arc<dyn Elector>> {
        match self {
            LeaderConfig::Neli(c) => Ok(Arc::new(Neli::start(kafka, c)?)),
            #[cfg(feature = "nats")]
            LeaderConfig::NatsKv(c) => Ok(Arc::new(NatsKv::start(c).await?)),
            #[cfg(feature = "zookeeper")]
            LeaderConfig::ZooKeeper(c) => Ok(Arc::new(ZooKeeper::start(c).await?)),
            #[cfg(feature = "etcd")]
            LeaderConfig::Etcd(c) => Ok(Arc::new(Etcd::start(c).await?)),
            other => Err(crate::Error::InvalidConfig(vec![ConfigProblem::new(
                "leader.kind",
                format!(
                    "{:?} shares the outbox by bucket and elects no single leader: build it with `build_coordinator` (Harvester::connect does)",
                    other.kind()
                ),
            )])),
        }
    }

    /// Starts what the kind builds: an elector (see [`LeaderConfig::build`]) or, for the kinds
    /// that share the outbox by bucket, an assignor.
    pub async fn build_coordinator(&self, kafka: &KafkaConfig) -> Result<Coordinator> {
        match self {
            LeaderConfig::NeliBuckets(c) => Ok(Coordinator::Assignor(Arc::new(
                NeliAssignor::start(kafka, c)?,
            ))),
            #[cfg(feature = "etcd")]
            LeaderConfig::Rink(c) => Ok(Coordinator::Assignor(Arc::new(Rink::start(c).await?))),
            _ => Ok(Coordinator::Elector(self.build(kafka).await?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_is_a_tag_and_defaults_to_neli() {
        let tagged: LeaderConfig =
            serde_json::from_str(r#"{"kind": "neli", "group_id": "billing"}"#).unwrap();
        let untagged: LeaderConfig = serde_json::from_str(r#"{"group_id": "billing"}"#).unwrap();
        assert_eq!(tagged, untagged);
        assert_eq!(tagged.neli().unwrap().group_id.as_deref(), Some("billing"));
        let json = serde_json::to_value(&tagged).unwrap();
        assert_eq!(json["kind"], "neli");
        assert_eq!(
            serde_json::from_value::<LeaderConfig>(json).unwrap(),
            tagged
        );
    }

    #[test]
    fn unknown_kinds_and_fields_are_errors_naming_them() {
        let e = serde_json::from_str::<LeaderConfig>(r#"{"kind": "raft"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("raft") && e.contains("neli"), "{e}");
        let e = serde_json::from_str::<LeaderConfig>(r#"{"kind": "neli", "heartbeat": "1s"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("heartbeat"), "{e}");
    }

    #[test]
    fn timings_derive_from_the_kind() {
        let c = LeaderConfig::from(NeliConfig {
            heartbeat_timeout: Duration::from_secs(2),
            ..Default::default()
        });
        assert_eq!(c.lease(), Duration::from_secs(2));
        assert_eq!(c.succession(), Duration::from_secs(6));
        assert_eq!(c.revoke_timeout(), Duration::from_secs(4));
        // revoke 4 s + session 6 s + flush 1 s + slack 5 s.
        assert_eq!(c.close_timeout(), Duration::from_secs(16));
    }
}
