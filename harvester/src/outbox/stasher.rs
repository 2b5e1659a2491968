//! Writing outbox records from a Rust service, inside the caller's transaction.
//!
//! The record becomes visible to the harvester exactly when the business change commits, and the
//! insert trigger's NOTIFY (delivered at commit) wakes the harvester without polling.

use sqlx::{Postgres, Transaction};

use super::{Shape, Statements, TableName};
use crate::error::Error;
use crate::Result;

/// One record to stash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StashRecord {
    pub topic: String,
    pub key: Option<Vec<u8>>,
    /// `None` publishes a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub partition: Option<i32>,
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

/// Inserts records into a native outbox table.
#[derive(Debug, Clone)]
pub struct Stasher {
    sql: String,
}

fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Stasher {
    /// A stasher for `table` (native shape).
    pub fn new(table: &TableName) -> Self {
        let statements = Statements::new(table, &table.sibling("_quarantine"), Shape::Native);
        Stasher {
            sql: statements.stash,
        }
    }

    /// Inserts one record in the caller's transaction; returns its id.
    pub async fn stash(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        record: &StashRecord,
    ) -> Result<i64> {
        let ids = self.stash_batch(tx, std::slice::from_ref(record)).await?;
        ids.into_iter().next().ok_or_else(|| Error::Database {
            action: "stash a record".into(),
            source: sqlx::Error::RowNotFound,
        })
    }

    /// Inserts records in the caller's transaction, in order, with one statement; returns ids.
    pub async fn stash_batch(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        records: &[StashRecord],
    ) -> Result<Vec<i64>> {
        let topics: Vec<&str> = records.iter().map(|r| r.topic.as_str()).collect();
        let keys: Vec<Option<&[u8]>> = records.iter().map(|r| r.key.as_deref()).collect();
        let values: Vec<Option<&[u8]>> = records.iter().map(|r| r.value.as_deref()).collect();
        let headers: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                serde_json::json!({
                    "keys": r.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                    "values": r.headers.iter().map(|(_, v)| b64(v)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let partitions: Vec<Option<i32>> = records.iter().map(|r| r.partition).collect();
        let timestamps: Vec<Option<i64>> = records.iter().map(|r| r.timestamp_ms).collect();
        sqlx::query_scalar(&self.sql)
            .bind(topics)
            .bind(keys)
            .bind(values)
            .bind(headers)
            .bind(partitions)
            .bind(timestamps)
            .fetch_all(&mut **tx)
            .await
            .map_err(Error::db("stash outbox records"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(super::b64(b""), "");
        assert_eq!(super::b64(b"f"), "Zg==");
        assert_eq!(super::b64(b"fo"), "Zm8=");
        assert_eq!(super::b64(b"foobar"), "Zm9vYmFy");
    }
}
