use thiserror::Error;

/// Every way a workload can fail.
#[derive(Debug, Error)]
pub enum WorkloadError {
    #[error("database: cannot {action}")]
    Database {
        action: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("harvester: cannot {action}")]
    Harvester {
        action: String,
        #[source]
        source: Box<harvester::Error>,
    },
    #[error("invalid workload: {0}")]
    Invalid(String),
}

impl WorkloadError {
    pub(crate) fn db(action: impl Into<String>) -> impl FnOnce(sqlx::Error) -> WorkloadError {
        let action = action.into();
        move |source| WorkloadError::Database { action, source }
    }
}
