//! `[publish]`: how records reach Kafka, as a tagged enum (`mode = "idempotent"` or
//! `"transactional"` plus that mode's fields).
//!
//! Idempotent stays the default: it needs nothing from the cluster or the consumers. Transactional
//! mode is what closes the last window MP/R leaves open, a stalled leader that resumes and writes
//! what it built before it stalled: a successor's producers take over the same transactional ids,
//! and the broker refuses anything the previous owner still sends. It also lets more than one
//! record of a key be in flight without librdkafka's gapless guarantee, because a transaction
//! with a failed record is aborted as a whole.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;

/// How the shards publish. Default: `mode = "idempotent"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "mode", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PublishConfig {
    /// One idempotent producer per shard; a record's row is purged once Kafka acknowledged it.
    #[default]
    Idempotent,
    /// One transactional producer per shard; records go out in transactions and a row is purged
    /// once its transaction committed. Consumers must read with
    /// `isolation.level = read_committed` (librdkafka's default; the Java client's default is
    /// `read_uncommitted`, which shows aborted records too).
    Transactional(TransactionalConfig),
}

/// The settings of `mode = "transactional"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransactionalConfig {
    /// Required. The prefix of the shards' `transactional.id`s (shard `i` uses
    /// `<transactional_id>-<i>`). Every harvester of this outbox must use the same value, so a
    /// successor fences its predecessor; no other producer on the cluster may use it. For
    /// example `"orders-outbox"`. A successor fences only the ids of its own shards: before
    /// lowering `limits.send_concurrency`, stop every harvester of the outbox (or wait the
    /// producers' `transaction.timeout.ms`), or a stalled leader's shards above the new count
    /// could still commit after it.
    #[serde(default)]
    pub transactional_id: String,
    /// Most records in one transaction. Default 1000.
    #[serde(default = "default_max_records")]
    pub max_records: usize,
    /// Longest a transaction stays open while its shard keeps receiving records. A transaction
    /// commits sooner once every record of it is acknowledged and the shard has nothing more to
    /// send (so transactions grow with the load by themselves, and a lone record is not held
    /// back), or when it is full or the pipeline is nearly out of permits. Longer means fewer
    /// commits (each a round trip to the transaction coordinator plus a marker per partition)
    /// under a steady trickle, and more latency. Default 100ms.
    #[serde(default = "default_linger", with = "humantime_serde")]
    pub linger: Duration,
}

fn default_max_records() -> usize {
    1000
}

fn default_linger() -> Duration {
    Duration::from_millis(100)
}

impl PublishConfig {
    /// The mode's settings at their defaults (`transactional_id` left empty: it must be set),
    /// or why the mode is unknown.
    pub fn defaults(mode: &str) -> Result<PublishConfig, String> {
        match mode {
            "idempotent" => Ok(PublishConfig::Idempotent),
            "transactional" => Ok(PublishConfig::Transactional(TransactionalConfig {
                transactional_id: String::new(),
                max_records: default_max_records(),
                linger: default_linger(),
            })),
            other => Err(format!(
                "publish.mode must be \"idempotent\" or \"transactional\", not {other:?}"
            )),
        }
    }

    /// The transactional settings, when that is the mode.
    pub fn transactional(&self) -> Option<&TransactionalConfig> {
        match self {
            PublishConfig::Transactional(t) => Some(t),
            PublishConfig::Idempotent => None,
        }
    }

    /// The mode's name, as configured.
    pub fn mode(&self) -> &'static str {
        match self {
            PublishConfig::Idempotent => "idempotent",
            PublishConfig::Transactional(_) => "transactional",
        }
    }

    /// Problems with the section itself (fields under `publish.`).
    pub fn problems(&self) -> Vec<ConfigProblem> {
        let Some(t) = self.transactional() else {
            return Vec::new();
        };
        let mut p = Vec::new();
        let id = t.transactional_id.trim();
        if id.is_empty() {
            p.push(ConfigProblem::new(
                "publish.transactional_id",
                "is required in transactional mode: name the outbox, e.g. \"orders-outbox\"; every harvester of this outbox must use the same value and no other producer on the cluster may",
            ));
        } else if id.len() > 200 {
            p.push(ConfigProblem::new(
                "publish.transactional_id",
                "is longer than 200 characters; keep it short (the shard index is appended)",
            ));
        }
        if t.max_records == 0 {
            p.push(ConfigProblem::new(
                "publish.max_records",
                "must be at least 1",
            ));
        }
        if t.linger > Duration::from_secs(10) {
            p.push(ConfigProblem::new(
                "publish.linger",
                format!("({:?}) is above 10s: every record of a transaction waits that long before its commit; use milliseconds (default 100ms)", t.linger),
            ));
        }
        p
    }
}

impl TransactionalConfig {
    /// The `transactional.id` of shard `shard`.
    pub fn shard_id(&self, shard: usize) -> String {
        format!("{}-{shard}", self.transactional_id.trim())
    }

    /// The shard ids a term with `shards` producers registers without using them, to fence
    /// whatever a predecessor with more shards left behind: `<id>-<shards>` up to
    /// `<id>-`[`FENCED_SHARD_IDS`]` - 1`. Empty when the term's own shards reach that far.
    pub fn fence_only_ids(&self, shards: usize) -> Vec<String> {
        (shards..FENCED_SHARD_IDS)
            .map(|i| self.shard_id(i))
            .collect()
    }

    /// The `transactional.id` of bucket `bucket`'s fencing unit (members sharing the outbox by
    /// bucket: the id follows the bucket to its next owner).
    pub fn unit_id(&self, bucket: u16) -> String {
        format!("{}-b{bucket}", self.transactional_id.trim())
    }
}

/// Shard ids every transactional term routing by key registers, used or not (`<id>-0` to
/// `<id>-7`): a predecessor with up to this many shards (any count `"auto"` gives) is fenced on
/// every one of its ids, so the shard count can be lowered
/// without leaving a stalled predecessor's higher ids able to commit. A fixed
/// `limits.send_concurrency` above it registers its own ids; lowering such a count leaves the
/// ids above the new count unfenced, so stop every member running the higher count first.
pub const FENCED_SHARD_IDS: usize = 8;
