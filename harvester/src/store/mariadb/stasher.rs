//! Writing outbox records from a Rust service, inside the caller's MySQL transaction.
//!
//! The record becomes visible to the harvester exactly when the business change commits (there
//! is no notification: the harvester polls). Records go in with multi-row inserts whose sizes
//! are powers of two (statements.rs), so a service's statement cache holds a few shapes, not
//! one per batch size. A record the table cannot hold (an explicit timestamp outside MariaDB's
//! `TIMESTAMP` range) is refused with [`Error::Unstashable`] before anything is written, never
//! silently stored without its timestamp (which `FROM_UNIXTIME` would do). An explicit timestamp
//! goes through the session's `time_zone`, so it is exact for a fixed offset (sqlx's connections
//! use `+00:00`) and may be an hour off around a DST change of a named zone.

use std::sync::Arc;

use sqlx::{MySql, Transaction};

use super::statements::{chunk_sizes, Statements};
use crate::error::Error;
use crate::outbox::{StashRecord, TableName};
use crate::store::json_headers as headers;
use crate::store::OutboxConfig;
use crate::Result;

/// The timestamps a `TIMESTAMP(3)` holds, in milliseconds since the epoch: from
/// 1970-01-01 00:00:01 to 2038-01-19 03:14:07.999 UTC.
const TIMESTAMP_MS: std::ops::RangeInclusive<i64> = 1_000..=2_147_483_647_999;

/// Inserts records into a native MariaDB/MySQL outbox table.
#[derive(Debug, Clone)]
pub struct Stasher {
    statements: Arc<Statements>,
}

/// Why `record` (number `index` of its batch) cannot be stashed, if it cannot.
fn refusal(index: usize, record: &StashRecord) -> Option<Error> {
    let ts = record.timestamp_ms?;
    (!TIMESTAMP_MS.contains(&ts)).then(|| Error::Unstashable {
        index,
        reason: format!(
            "its timestamp ({ts} ms) is outside what a MariaDB TIMESTAMP holds (1970-01-01 00:00:01 to 2038-01-19 03:14:07 UTC)"
        ),
    })
}

impl Stasher {
    /// A stasher for `table`.
    pub fn new(table: &TableName) -> Self {
        Stasher {
            statements: Arc::new(Statements::new(table, &table.sibling("_quarantine"))),
        }
    }

    pub(super) fn on(statements: Arc<Statements>) -> Self {
        Stasher { statements }
    }

    /// A stasher for the configured outbox (`outbox.table`).
    pub fn for_outbox(outbox: &OutboxConfig) -> Self {
        Self::new(&outbox.table)
    }

    /// Inserts one record in the caller's transaction; returns its id.
    pub async fn stash(
        &self,
        tx: &mut Transaction<'_, MySql>,
        record: &StashRecord,
    ) -> Result<i64> {
        let ids = self.stash_batch(tx, std::slice::from_ref(record)).await?;
        ids.into_iter().next().ok_or_else(|| Error::Database {
            action: "stash a record".into(),
            source: sqlx::Error::RowNotFound,
        })
    }

    /// Inserts records in the caller's transaction, in order; returns their ids.
    pub async fn stash_batch(
        &self,
        tx: &mut Transaction<'_, MySql>,
        records: &[StashRecord],
    ) -> Result<Vec<i64>> {
        if let Some(e) = records.iter().enumerate().find_map(|(i, r)| refusal(i, r)) {
            return Err(e);
        }
        let mut ids = Vec::with_capacity(records.len());
        let mut increment = None;
        let mut rest = records;
        for size in chunk_sizes(records.len()) {
            let (chunk, after) = rest.split_at(size);
            rest = after;
            let sql = self.statements.stash(size);
            let mut query = sqlx::query(&sql);
            for r in chunk {
                let (keys, values) = headers::encode(&r.headers);
                query = query
                    .bind(r.topic.as_str())
                    .bind(r.key.as_deref())
                    .bind(r.value.as_deref())
                    .bind(keys)
                    .bind(values)
                    .bind(r.partition)
                    .bind(r.timestamp_ms);
            }
            let done = query
                .execute(&mut **tx)
                .await
                .map_err(Error::db("stash outbox records"))?;
            let first = i64::try_from(done.last_insert_id()).map_err(|_| Error::StoreAnswer {
                what: format!("insert id {} out of range", done.last_insert_id()),
            })?;
            let step = if size > 1 {
                match increment {
                    Some(step) => step,
                    None => {
                        let step: i64 = sqlx::query_scalar(
                            "SELECT CAST(@@SESSION.auto_increment_increment AS SIGNED)",
                        )
                        .fetch_one(&mut **tx)
                        .await
                        .map_err(Error::db("read auto_increment_increment"))?;
                        *increment.get_or_insert(step)
                    }
                }
            } else {
                1
            };
            ids.extend((0..size as i64).map(|i| first + i * step));
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_outside_a_mariadb_timestamp_are_refused() {
        let ok = StashRecord {
            timestamp_ms: Some(1_700_000_000_000),
            ..StashRecord::new("t", "k", "v")
        };
        assert!(refusal(0, &ok).is_none());
        assert!(refusal(0, &StashRecord::new("t", "k", "v")).is_none());
        for ts in [0, -1, 2_147_483_648_000] {
            let bad = StashRecord {
                timestamp_ms: Some(ts),
                ..ok.clone()
            };
            match refusal(3, &bad) {
                Some(Error::Unstashable { index: 3, reason }) => {
                    assert!(reason.contains("TIMESTAMP"), "{reason}")
                }
                other => panic!("{ts}: {other:?}"),
            }
        }
    }
}
