use thiserror::Error;

/// Everything the test kit can fail with.
#[derive(Debug, Error)]
pub enum TestkitError {
    #[error("postgres: {0}")]
    Postgres(#[from] sqlx::Error),
    #[error("mariadb: {0}")]
    MariaDb(#[source] sqlx::Error),
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    #[error("broker: {0}")]
    Broker(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("coordination server: {0}")]
    Server(String),
    #[error("verifier: {0}")]
    Verify(String),
    #[error("containers: {0}")]
    Containers(String),
    #[error("tls material: {0}")]
    Tls(#[from] rcgen::Error),
}
