//! What a service writes: one record for the outbox, before any store has given it an id.
//!
//! Each store has a stasher that inserts these inside the caller's own transaction (for
//! Postgres, [`crate::store::postgres::Stasher`]; for MariaDB/MySQL,
//! [`crate::store::mariadb::Stasher`]; for SQL Server, `crate::store::mssql::Stasher`, feature
//! `mssql`), so the record commits exactly when the business change does.

/// One record to stash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StashRecord {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    /// `None` publishes a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    /// An explicit partition; `None` lets the producer's partitioner choose by key.
    pub partition: Option<i32>,
    /// Milliseconds since the epoch; `None` lets the producer stamp it.
    pub timestamp_ms: Option<i64>,
}

impl StashRecord {
    /// A keyed record with a value and no headers.
    pub fn new(topic: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        StashRecord {
            topic: topic.to_owned(),
            key: Some(key.into()),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// Adds a header.
    pub fn header(mut self, key: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((key.to_owned(), value.into()));
        self
    }
}
