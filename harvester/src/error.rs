use std::fmt;
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

    /// A database operation failed.
    #[error("database: cannot {action}")]
    Database {
        action: String,
        #[source]
        source: sqlx::Error,
    },

    /// Applying the outbox migrations failed.
    #[error("database: cannot apply outbox migrations")]
    Migrate(#[source] sqlx::migrate::MigrateError),

    /// The elector failed and can no longer tell who leads.
    #[error("leader election failed: {0}")]
    Election(String),

    /// A pipeline stage failed unexpectedly.
    #[error("pipeline: {0}")]
    Pipeline(String),

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
}

impl Error {
    pub(crate) fn kafka(
        action: impl Into<String>,
    ) -> impl FnOnce(rdkafka::error::KafkaError) -> Error {
        let action = action.into();
        move |source| Error::Kafka { action, source }
    }

    pub(crate) fn db(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> Error {
        let action = action.into();
        move |source| Error::Database { action, source }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
