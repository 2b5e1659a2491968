//! Warm the broker and the run's topics before anything is measured.
//!
//! A just-started broker JVM halved the quick drain (27.9k against 57-66k rec/s once warm; 28
//! against 4-5 µs of broker CPU per record), and a topic created a moment before its drain cost
//! the broker 59-127 µs per record against 8-9 once it had taken some load (issue 52). A relay in
//! production publishes to a broker that has run for days and to topics that have existed for
//! months, so both are warmed first: the broker by drains of the workload itself until its CPU
//! per record stops falling (through every listener the run's scenarios use; the command does
//! that, `crate::cli`, as it runs scenarios), then a topic per partition count the scenarios use
//! ([`pool`]), each created, led, written and read back by [`load`]'s rounds. The report says
//! how long each took and what the cost fell to, apart from the scenarios; the scenarios then
//! share the warm topics, each reading only its own records.
//!
//! The embedded broker (librdkafka's mock: C, no JIT, nothing on disk) is not warmed.

pub mod load;
pub mod pool;

use std::time::Duration;

pub use load::{settled, Rule, Writer};
pub use pool::TopicPool;

/// The broker's warm-up: drains (each a round) until the median of the last 3 is within 10 % of
/// the median of the 3 before, at least 10, at most 30 drains or 5 minutes. One drain's broker
/// CPU per record moved by 2-3x from one drain to the next on a warming JVM here (a collection,
/// a compilation burst), hence medians; and after 8 drains from a cold start the next drain was
/// still 17 % slower than the ones after it (45.8k against 49.6-59.7k rec/s), hence 10.
/// `round_records` is the drain's backlog's business.
pub const BROKER_RULE: Rule = Rule {
    round_records: 0,
    min_rounds: 10,
    max_rounds: 30,
    max_time: Duration::from_secs(300),
    tolerance: 0.1,
    window: 3,
};

/// A topic's warm-up: rounds of 20,000 records (at least 100 a partition) until the median of
/// the last 2 is within 10 % of the 2 before, at least 4, at most 20 rounds or 2 minutes.
pub const TOPIC_RULE: Rule = Rule {
    round_records: 20_000,
    min_rounds: 4,
    max_rounds: 20,
    max_time: Duration::from_secs(120),
    tolerance: 0.1,
    window: 2,
};

/// Value bytes of the warm topics' records: the scenarios' default.
pub const VALUE_BYTES: usize = 200;
