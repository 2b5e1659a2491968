//! A limit the harvester sets by itself unless the user fixes it.
//!
//! goharvest's fixed defaults (1000 in flight, marks of 100, 8 producers) were measured here at
//! half the throughput of the values `bench tune` found, and those values belong to one machine
//! and one load. So the limits that depend on the load or the machine default to `"auto"`, and a
//! number pins them: `max_in_flight_records = 5000` in a file, `--set
//! limits.max_in_flight_records=auto` to go back. What "auto" means for each is documented on the
//! field and in `pipeline::adapt`.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// `max_in_flight_records = "auto"`: the window never goes below this (goharvest's default).
pub const AUTO_WINDOW_MIN: usize = 1000;
/// `max_in_flight_records = "auto"`: the window a term starts with, so that a backlog found at
/// the start (after an outage, a failover) is marked in batches of [`AUTO_BATCH_MAX`] from the
/// first mark; unused, it shrinks to [`AUTO_WINDOW_MIN`] within about a second.
pub const AUTO_WINDOW_START: usize = 4000;
/// `max_in_flight_records = "auto"`: the most it grows to.
pub const AUTO_WINDOW_MAX: usize = 16_000;
/// `mark_query_records = "auto"`: the smallest mark (a quarter of the window, at least this).
/// Not lower: a mark's `LIMIT` costs nothing when fewer rows are there (an idle harvester woken
/// by a commit's NOTIFY marks that one row at once whatever the limit), while a lower one splits
/// rows committed together into several statements.
pub const AUTO_BATCH_MIN: usize = 100;
/// `mark_query_records = "auto"`: the largest mark (the database's mark+purge ceiling here was
/// best at 1000).
pub const AUTO_BATCH_MAX: usize = 1000;

/// `send_concurrency = "auto"`: one producer per two cores, 1 to 8, in either publishing mode. On
/// a 2-core machine one idempotent producer delivered 1.3x more than eight at half the CPU per
/// record (`results/notes-first-runs-20261122/README.md`); each producer brings its own
/// librdkafka threads, which earn their keep only with cores to run on. Transactional producers
/// cost the broker per transaction (AddPartitionsToTxn, EndTxn, a marker per partition
/// written), so fewer, larger transactions pay there too: on a just-started Kafka 4.1 the
/// transactional drain reached 0.71 of the idempotent one with 2 shards and 0.48-0.50 with 8
/// against 0.84-0.99 with 1 (`results/txn-default2/README.md`), and 0.53-0.62 with 1 on a warm
/// broker (`results/txn-1df68c8/`). Members of one outbox may
/// run different counts: every transactional term registers the ids of 8 shards
/// ([`super::publish::FENCED_SHARD_IDS`]), so any predecessor running up to 8 is fenced.
pub fn auto_shards(cores: usize) -> usize {
    (cores / 2).clamp(1, 8)
}

/// The machine's cores as the process sees them (cgroup limits included), 1 when unknown.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// `"auto"` (the harvester chooses, within documented bounds) or a fixed number that wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Adaptive {
    /// Chosen by the harvester.
    #[default]
    Auto,
    /// Fixed by the user.
    Fixed(usize),
}

impl Adaptive {
    /// The fixed value, if the user set one.
    pub fn fixed(self) -> Option<usize> {
        match self {
            Adaptive::Auto => None,
            Adaptive::Fixed(n) => Some(n),
        }
    }

    /// The fixed value, else `auto`.
    pub fn or(self, auto: usize) -> usize {
        self.fixed().unwrap_or(auto)
    }

    pub fn is_auto(self) -> bool {
        self == Adaptive::Auto
    }
}

impl From<usize> for Adaptive {
    fn from(n: usize) -> Self {
        Adaptive::Fixed(n)
    }
}

impl fmt::Display for Adaptive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Adaptive::Auto => f.write_str("auto"),
            Adaptive::Fixed(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for Adaptive {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Adaptive::Auto => s.serialize_str("auto"),
            Adaptive::Fixed(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Adaptive {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Adaptive;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number, or \"auto\" to let the harvester choose")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Adaptive, E> {
                usize::try_from(v)
                    .map(Adaptive::Fixed)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Adaptive, E> {
                u64::try_from(v)
                    .map_err(|_| {
                        E::custom(format!("{v} is negative; use a whole number or \"auto\""))
                    })
                    .and_then(|v| self.visit_u64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Adaptive, E> {
                let v = v.trim();
                if v.eq_ignore_ascii_case("auto") {
                    return Ok(Adaptive::Auto);
                }
                v.parse::<usize>()
                    .map(Adaptive::Fixed)
                    .map_err(|_| E::custom(format!("{v:?} is neither a whole number nor \"auto\"")))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    struct Holder {
        v: Adaptive,
    }

    #[test]
    fn reads_numbers_and_auto_and_writes_them_back() {
        for (text, want) in [
            (r#"{"v": 5}"#, Adaptive::Fixed(5)),
            (r#"{"v": "auto"}"#, Adaptive::Auto),
            (r#"{"v": "AUTO"}"#, Adaptive::Auto),
            (r#"{"v": "12"}"#, Adaptive::Fixed(12)),
        ] {
            let h: Holder = serde_json::from_str(text).unwrap();
            assert_eq!(h.v, want, "{text}");
            let back: Holder = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
            assert_eq!(back, h);
        }
        assert_eq!(
            serde_json::to_string(&Holder { v: Adaptive::Auto }).unwrap(),
            r#"{"v":"auto"}"#
        );
    }

    #[test]
    fn anything_else_names_both_forms() {
        for text in [r#"{"v": "soon"}"#, r#"{"v": -3}"#, r#"{"v": 1.5}"#] {
            let e = serde_json::from_str::<Holder>(text)
                .unwrap_err()
                .to_string();
            assert!(e.contains("auto"), "{text}: {e}");
        }
    }

    #[test]
    fn toml_takes_both() {
        let h: Holder = toml::from_str("v = 7").unwrap();
        assert_eq!(h.v, Adaptive::Fixed(7));
        let h: Holder = toml::from_str("v = \"auto\"").unwrap();
        assert_eq!(h.v, Adaptive::Auto);
    }
}
