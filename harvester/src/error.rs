//! The crate's one error type.
//!
//! Every variant names what was being attempted and keeps the cause as its `source`, so callers
//! can match on the kind (`Error::Election { source, .. }` and then on `*source`) and printers
//! can show the whole chain with [`chain`] instead of flattening causes into strings early.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;

/// One problem found by a `validate()`: which field, what is wrong, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Dotted path of the field, e.g. `limits.max_in_flight_records`.
    pub field: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl ConfigProblem {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigProblem {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Every way the harvester library can fail.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid; each problem names the field and the fix.
    #[error("invalid configuration: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    InvalidConfig(Vec<ConfigProblem>),

    /// A Kafka client operation failed.
    #[error("kafka: cannot {action}")]
    Kafka {
        action: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },

    /// No broker of `kafka."bootstrap.servers"` answered a metadata request within
    /// `limits.connect_timeout`: the addresses are wrong or down, are not Kafka, or expect
    /// another `security.protocol`.
    #[error("kafka: no broker at kafka.\"bootstrap.servers\" = {bootstrap:?} answered a metadata request within {after:?} (limits.connect_timeout): {reason}; check the addresses, that they are Kafka brokers, and the listener's security.protocol")]
    KafkaUnreachable {
        bootstrap: String,
        after: std::time::Duration,
        reason: String,
    },

    /// The cluster at `kafka."bootstrap.servers"` refuses what the harvester needs, and a new
    /// client would be refused the same way (librdkafka's `code`): brokers without idempotent
    /// or transactional producers (an unsupported API version), a transaction timeout above
    /// theirs, or a principal without an ACL (`what` names Kafka's operation and the resource,
    /// `fix` the ACL that allows it). The harvester stops instead of retrying for ever; no row
    /// is deleted that Kafka did not acknowledge.
    #[error("kafka refused: {what} ({}); {fix} (kafka.\"bootstrap.servers\" = {bootstrap:?}: {reason})", code_name(.code))]
    KafkaRefused {
        bootstrap: String,
        code: rdkafka::types::RDKafkaErrorCode,
        what: String,
        fix: String,
        reason: String,
    },

    /// A database operation failed.
    #[error("database: cannot {action}")]
    Database {
        action: String,
        #[source]
        source: sqlx::Error,
    },

    /// A SQL Server operation failed (the `mssql` store; tiberius, not sqlx, speaks to it).
    #[cfg(feature = "mssql")]
    #[error("sql server: cannot {action}")]
    SqlServer {
        action: String,
        #[source]
        source: tiberius::error::Error,
    },

    /// A coordination service's client (NATS, ZooKeeper, etcd: the electors' servers) failed.
    #[error("{system}: cannot {action}")]
    Coordination {
        system: &'static str,
        action: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// The elector failed and can no longer tell who leads. `source` is why: match on it
    /// (e.g. [`Error::Kafka`] when NELI's client could not be created, [`Error::Closed`] when
    /// the elector stopped without saying why, [`Error::Injected`] from a test double).
    #[error("leader election failed ({elector})")]
    Election {
        /// The elector's [`describe`](crate::election::Elector::describe).
        elector: String,
        #[source]
        source: Arc<Error>,
    },

    /// A record cannot be written to the outbox as configured: nothing of the batch was written
    /// (e.g. binary data, a missing key or an explicit partition for a goharvest table, whose
    /// columns are text and which has no partition column).
    #[error("cannot stash record {index} of the batch: {reason}")]
    Unstashable { index: usize, reason: String },

    /// A shard's producer failed fatally (librdkafka's fatal error, `reason` its text): it
    /// fails every record from now on, so the term's pipeline restarts with fresh producers.
    #[error("shard {shard}: producer failed fatally ({reason}); replacing it")]
    ProducerFatal { shard: usize, reason: String },

    /// No delivery of a shard succeeded for `failing` (`failures` in a row; `last` is the
    /// last one's error): the term's pipeline restarts with a fresh producer.
    #[error("shard {shard}: no delivery succeeded for {failing:?} ({failures} failures in a row, the last: {last}); replacing the producer")]
    StuckProducer {
        shard: usize,
        failing: Duration,
        failures: u32,
        last: String,
    },

    /// Row `id` failed while later rows of its key were in flight (a key window above 1): the
    /// pipeline restarts to send the key's rows again in order.
    #[error("shard {shard}: row {id} failed while later rows of its key were in flight; restarting the pipeline to send them again in order")]
    KeyWindowBroken {
        shard: usize,
        id: i64,
        #[source]
        source: rdkafka::error::KafkaError,
    },

    /// Rows of `keys` keys were sent back to the store after failed deliveries and did not come
    /// back within `patience`, while later rows of those keys may be waiting or on their way:
    /// sending those first would reorder the keys, so the pipeline restarts and reads every
    /// key's rows again in id order.
    #[error("shard {shard}: the rows of {keys} key(s) sent back after failed deliveries did not come back within {patience:?}; restarting the pipeline to read them again in order")]
    ResetRowsNotBack {
        shard: usize,
        keys: usize,
        patience: std::time::Duration,
    },

    /// Kafka refused row `id` in a way the harvester has no named refusal for
    /// ([`Error::KafkaRefused`] is used when it has one).
    #[error("shard {shard}: row {id} refused")]
    RowRefused {
        shard: usize,
        id: i64,
        #[source]
        source: rdkafka::error::KafkaError,
    },

    /// A transactional producer's `call` failed in a way only fresh producers recover from.
    #[error(
        "shard {shard}: cannot {call} a transaction ({reason}); restarting with fresh producers"
    )]
    Transaction {
        shard: usize,
        call: TxnCall,
        reason: String,
    },

    /// A stage of the term's pipeline stopped while another still needed it (its channel
    /// closed): the stage that stopped reports its own error.
    #[error("the pipeline's {stage} stopped")]
    StageGone { stage: &'static str },

    /// A task the harvester spawned panicked or was cancelled.
    #[error("the {task} task failed")]
    TaskFailed {
        task: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },

    /// The leadership term ended while `during` was under way, which then stopped.
    #[error("the term ended while {during}")]
    TermEnded { during: &'static str },

    /// The database answered something the store or the pipeline cannot use (a count out of
    /// range, fewer rows or ids than asked for, an unknown return code, a marked row outside the
    /// term's scope); `what` says what came back. A store's own write that got such an answer
    /// was rolled back; marked rows are re-marked under a fresh leader id when the term restarts.
    #[error("unexpected answer from the database: {what}")]
    StoreAnswer { what: String },

    /// A statement would need more leader ids than `store` can bind in one statement (a term
    /// that re-marked more often than `max` times).
    #[error("{count} leader ids in one statement; {store} takes at most {max}")]
    TooManyLeaderIds {
        store: &'static str,
        count: usize,
        max: usize,
    },

    /// A bounded wait ran out.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout { what: String, after: Duration },

    /// The component was closed.
    #[error("{0} is closed")]
    Closed(&'static str),

    /// An I/O operation failed.
    #[error("i/o: cannot {action}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },

    /// A failure injected by a test double ([`crate::election::mock::MockElector::fail`], the
    /// fault plans of [`crate::store::memory::MemoryStore`]).
    #[error("injected failure: {0}")]
    Injected(String),
}

impl Error {
    /// The configuration problems behind this error, also when an elector or assignor ended
    /// with them (e.g. a group session the cluster refused): a caller exits as for a bad config.
    pub fn config_problems(&self) -> Option<&[ConfigProblem]> {
        match self {
            Error::InvalidConfig(problems) => Some(problems),
            Error::Election { source, .. } => source.config_problems(),
            _ => None,
        }
    }

    /// Whether the harvester must stop rather than restart its pipeline: a restart would meet
    /// the same refusal ([`Error::KafkaRefused`]).
    pub fn ends_harvest(&self) -> bool {
        matches!(self, Error::KafkaRefused { .. })
    }

    pub(crate) fn kafka(
        action: impl Into<String>,
    ) -> impl FnOnce(rdkafka::error::KafkaError) -> Error {
        let action = action.into();
        move |source| Error::Kafka { action, source }
    }

    /// Maps a coordination client's error: `.map_err(Error::coordination("etcd", "grant a lease"))`.
    #[allow(dead_code)] // used by the electors behind the nats, zookeeper and etcd features
    pub(crate) fn coordination<E>(
        system: &'static str,
        action: impl Into<String>,
    ) -> impl FnOnce(E) -> Error
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let action = action.into();
        move |source| Error::Coordination {
            system,
            action,
            source: Box::new(source),
        }
    }

    pub(crate) fn db(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> Error {
        let action = action.into();
        move |source| Error::Database { action, source }
    }

    /// Maps a SQL Server client's error: `.map_err(Error::mssql("purge acknowledged rows"))`.
    #[cfg(feature = "mssql")]
    pub(crate) fn mssql(action: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> Error {
        let action = action.into();
        move |source| Error::SqlServer { action, source }
    }
}

/// A transactional producer's call, for [`Error::Transaction`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnCall {
    Begin,
    Commit,
    Abort,
}

impl fmt::Display for TxnCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TxnCall::Begin => "begin",
            TxnCall::Commit => "commit",
            TxnCall::Abort => "abort",
        })
    }
}

/// An error and its causes on one line, `outer: cause: root cause`, for logs and exit messages.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// librdkafka's name of an error code (`TOPIC_AUTHORIZATION_FAILED`), as Kafka's protocol and
/// its tools spell it.
pub fn code_name(code: &rdkafka::types::RDKafkaErrorCode) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Restart reasons are logged with [`chain`]: a variant whose cause is its `source` must not
    /// print it in its own text too.
    #[test]
    fn restart_reasons_print_their_cause_once() {
        let cause = rdkafka::error::KafkaError::MessageProduction(
            rdkafka::types::RDKafkaErrorCode::MessageTimedOut,
        );
        let cause_text = cause.to_string();
        for e in [
            Error::KeyWindowBroken {
                shard: 1,
                id: 7,
                source: cause.clone(),
            },
            Error::RowRefused {
                shard: 1,
                id: 7,
                source: cause.clone(),
            },
        ] {
            let text = chain(&e);
            assert_eq!(text.matches(&cause_text).count(), 1, "{text}");
            assert!(text.contains("row 7"), "{text}");
        }
    }

    #[test]
    fn election_errors_keep_a_matchable_cause_and_print_the_chain() {
        let e = Error::Election {
            elector: "mock elector".into(),
            source: Arc::new(Error::Injected("boom".into())),
        };
        match &e {
            Error::Election { source, .. } => {
                assert!(matches!(source.as_ref(), Error::Injected(m) if m == "boom"))
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            chain(&e),
            "leader election failed (mock elector): injected failure: boom"
        );
    }
}
