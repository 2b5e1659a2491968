//! Writing outbox records from a Rust service, inside the caller's transaction.
//!
//! The record becomes visible to the harvester exactly when the business change commits, and the
//! insert trigger's NOTIFY (delivered at commit) wakes the harvester without polling. Both table
//! shapes are written: a goharvest table keeps text columns, so a record that does not fit one
//! (binary key, value or header, no key, an explicit partition or timestamp) is refused with
//! [`Error::Unstashable`] before anything is written, never mangled.

use sqlx::{Postgres, Transaction};

use super::Statements;
use crate::error::Error;
use crate::outbox::{Shape, StashRecord, TableName};
use crate::store::OutboxConfig;
use crate::Result;

/// Inserts records into an outbox table of either shape.
#[derive(Debug, Clone)]
pub struct Stasher {
    sql: String,
    shape: Shape,
}

fn header_keys(r: &StashRecord) -> Vec<&str> {
    r.headers.iter().map(|(k, _)| k.as_str()).collect()
}

/// A goharvest table's columns are text: the record's bytes as text, or why not.
fn text<'a>(index: usize, what: &str, bytes: &'a [u8]) -> Result<&'a str> {
    std::str::from_utf8(bytes).map_err(|_| Error::Unstashable {
        index,
        reason: format!("its {what} is not UTF-8, and a goharvest table stores text"),
    })
}

impl Stasher {
    /// A stasher for a native table (see [`Stasher::with_shape`] for goharvest's).
    pub fn new(table: &TableName) -> Self {
        Self::with_shape(table, Shape::Native)
    }

    /// A stasher for `table` laid out as `shape`.
    pub fn with_shape(table: &TableName, shape: Shape) -> Self {
        let statements = Statements::new(table, &table.sibling("_quarantine"), shape);
        Stasher {
            sql: statements.stash,
            shape,
        }
    }

    /// A stasher for the configured outbox (`outbox.table` and `outbox.shape`).
    pub fn for_outbox(outbox: &OutboxConfig) -> Self {
        Self::with_shape(&outbox.table, outbox.shape)
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
        let query = match self.shape {
            Shape::Native => {
                let keys: Vec<Option<&[u8]>> = records.iter().map(|r| r.key.as_deref()).collect();
                let values: Vec<Option<&[u8]>> =
                    records.iter().map(|r| r.value.as_deref()).collect();
                let headers: Vec<serde_json::Value> = records
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "keys": header_keys(r),
                            "values": r.headers.iter().map(|(_, v)| crate::base64::encode(v)).collect::<Vec<_>>(),
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
            }
            Shape::Goharvest => {
                let (keys, values, headers) = goharvest_columns(records)?;
                sqlx::query_scalar(&self.sql)
                    .bind(topics)
                    .bind(keys)
                    .bind(values)
                    .bind(headers)
            }
        };
        query
            .fetch_all(&mut **tx)
            .await
            .map_err(Error::db("stash outbox records"))
    }
}

/// The key, value and header columns of a goharvest table, or the first record that does not fit.
#[allow(clippy::type_complexity)]
fn goharvest_columns(
    records: &[StashRecord],
) -> Result<(Vec<&str>, Vec<Option<&str>>, Vec<serde_json::Value>)> {
    let (mut keys, mut values, mut headers) = (Vec::new(), Vec::new(), Vec::new());
    for (index, r) in records.iter().enumerate() {
        let refuse = |reason: &str| Error::Unstashable {
            index,
            reason: reason.to_owned(),
        };
        if r.partition.is_some() || r.timestamp_ms.is_some() {
            return Err(refuse(
                "it sets a partition or timestamp, which a goharvest table has no column for",
            ));
        }
        let key = r.key.as_deref().ok_or_else(|| {
            refuse("it has no key, and a goharvest table's kafka_key is NOT NULL")
        })?;
        keys.push(text(index, "key", key)?);
        values.push(
            r.value
                .as_deref()
                .map(|v| text(index, "value", v))
                .transpose()?,
        );
        let header_values = r
            .headers
            .iter()
            .map(|(k, v)| text(index, &format!("header {k:?}"), v))
            .collect::<Result<Vec<_>>>()?;
        headers.push(serde_json::json!({"keys": header_keys(r), "values": header_values}));
    }
    Ok((keys, values, headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_context_fits_goharvest_text_headers() {
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let r = StashRecord::new("t", "k", "v").trace_context(traceparent, Some("a=1"));
        let (_, _, headers) = goharvest_columns(std::slice::from_ref(&r)).unwrap();
        assert_eq!(
            headers[0]["keys"],
            serde_json::json!(["traceparent", "tracestate"])
        );
        assert_eq!(
            headers[0]["values"],
            serde_json::json!([traceparent, "a=1"])
        );
    }

    #[test]
    fn goharvest_rows_must_be_text_with_a_key_and_no_partition() {
        let ok = StashRecord::new("t", "k", "v").header("h", "x");
        let (keys, values, headers) = goharvest_columns(std::slice::from_ref(&ok)).unwrap();
        assert_eq!((keys, values), (vec!["k"], vec![Some("v")]));
        assert_eq!(headers[0]["values"][0], "x");
        let cases = [
            (StashRecord::new("t", vec![0xff], "v"), "key is not UTF-8"),
            (
                StashRecord::new("t", "k", "v").header("h", vec![0xfe]),
                "header \"h\"",
            ),
            (
                StashRecord {
                    key: None,
                    ..ok.clone()
                },
                "no key",
            ),
            (
                StashRecord {
                    partition: Some(1),
                    ..ok.clone()
                },
                "partition",
            ),
        ];
        for (bad, why) in cases {
            match goharvest_columns(&[ok.clone(), bad]) {
                Err(Error::Unstashable { index: 1, reason }) => {
                    assert!(reason.contains(why), "{reason}")
                }
                other => panic!("expected record 1 refused for {why}, got {other:?}"),
            }
        }
    }
}
