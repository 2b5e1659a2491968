use thiserror::Error;

/// Every way a benchmark run can fail.
#[derive(Debug, Error)]
pub enum BenchError {
    #[error("database: cannot {action}")]
    Database {
        action: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("kafka: cannot {action}")]
    Kafka {
        action: String,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("workload failed")]
    Workload(#[from] workloads::WorkloadError),
    #[error("harvester library")]
    Harvester(#[from] harvester::Error),
    #[error("test services")]
    Testkit(#[from] testkit::TestkitError),
    #[error("i/o: cannot {action}")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid scenario {scenario}: {message}")]
    Scenario { scenario: String, message: String },
    #[error("{0}")]
    Run(String),
}

impl BenchError {
    pub(crate) fn db(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> BenchError {
        let action = action.into();
        move |source| BenchError::Database { action, source }
    }

    pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
        let action = action.into();
        move |source| BenchError::Io { action, source }
    }
}
