//! Writing outbox records from a Rust service, inside the caller's SQL Server transaction.
//!
//! tiberius has no transaction object: a transaction is the state of a connection, opened with
//! `Client::begin_transaction` (or a `BEGIN TRANSACTION` batch) and ended with
//! `commit_transaction`. The stasher takes the caller's [`tiberius::Client`] between the two,
//! so the records commit exactly when the business change does (there is no notification: the
//! harvester polls). It begins and commits nothing itself, and bounds nothing in time: the
//! caller's connection, the caller's rules.
//!
//! Records go in with multi-row inserts of at most [`MAX_RECORDS`] rows whose sizes are powers
//! of two (statements.rs), so the server caches a few shapes, not one per batch size; each
//! insert assigns its identity values in the batch's order (`sql/stash.sql`), so a key's records
//! keep their order. A record the table cannot hold (a timestamp outside `DATETIME2`'s years 1
//! to 9999) is refused with [`Error::Unstashable`] before anything is written.

use std::sync::Arc;

use futures::{AsyncRead, AsyncWrite};
use tiberius::Client;

use super::bind::{self, Bound};
use super::statements::{chunk_sizes, Statements, MAX_RECORDS};
use crate::error::Error;
use crate::outbox::{StashRecord, TableName};
use crate::store::json_headers as headers;
use crate::store::OutboxConfig;
use crate::Result;

/// The timestamps a `DATETIME2(3)` holds, in milliseconds since the epoch: from
/// 0001-01-01 00:00:00 to 9999-12-31 23:59:59.999 UTC.
const DATETIME2_MS: std::ops::RangeInclusive<i64> = -62_135_596_800_000..=253_402_300_799_999;

/// Inserts records into a native SQL Server outbox table.
#[derive(Debug, Clone)]
pub struct Stasher {
    statements: Arc<Statements>,
}

/// Why `record` (number `index` of its batch) cannot be stashed, if it cannot.
fn refusal(index: usize, record: &StashRecord) -> Option<Error> {
    let ts = record.timestamp_ms?;
    (!DATETIME2_MS.contains(&ts)).then(|| Error::Unstashable {
        index,
        reason: format!(
            "its timestamp ({ts} ms) is outside what a SQL Server DATETIME2 holds (years 1 to 9999)"
        ),
    })
}

/// The insert of `chunk`: its SQL and every record's values in order.
fn insert<'a>(statements: &Statements, chunk: &'a [StashRecord]) -> Bound<'a> {
    let args = chunk
        .iter()
        .flat_map(|r| {
            bind::stash_row(
                &r.topic,
                r.key.as_deref(),
                r.value.as_deref(),
                headers::encode(&r.headers),
                r.partition,
                r.timestamp_ms,
            )
        })
        .collect();
    Bound {
        sql: statements.stash(chunk.len()).into(),
        args,
    }
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

    /// Inserts one record on `client`, in its open transaction; returns the record's id.
    pub async fn stash<S>(&self, client: &mut Client<S>, record: &StashRecord) -> Result<i64>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let ids = self
            .stash_batch(client, std::slice::from_ref(record))
            .await?;
        ids.into_iter().next().ok_or_else(|| Error::StoreAnswer {
            what: "an insert of one record returned no id".into(),
        })
    }

    /// Inserts records on `client`, in its open transaction, in order; returns their ids.
    pub async fn stash_batch<S>(
        &self,
        client: &mut Client<S>,
        records: &[StashRecord],
    ) -> Result<Vec<i64>>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send,
    {
        if let Some(e) = records.iter().enumerate().find_map(|(i, r)| refusal(i, r)) {
            return Err(e);
        }
        let mut ids = Vec::with_capacity(records.len());
        let mut rest = records;
        for size in chunk_sizes(records.len(), MAX_RECORDS) {
            let (chunk, after) = rest.split_at(size);
            rest = after;
            let rows = insert(&self.statements, chunk)
                .query()
                .query(client)
                .await
                .map_err(Error::mssql("stash outbox records"))?
                .into_first_result()
                .await
                .map_err(Error::mssql("stash outbox records"))?;
            let mut got = rows
                .iter()
                .map(|r| r.try_get::<i64, _>(0).map(Option::unwrap_or_default))
                .collect::<std::result::Result<Vec<i64>, _>>()
                .map_err(Error::mssql("read the stashed records' ids"))?;
            if got.len() != size {
                return Err(Error::StoreAnswer {
                    what: format!("an insert of {size} records returned {} ids", got.len()),
                });
            }
            // OUTPUT's order is not guaranteed; the ids' order is the records' (stash.sql).
            got.sort_unstable();
            ids.extend(got);
        }
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mssql::bind::Arg;

    #[test]
    fn timestamps_outside_a_datetime2_are_refused() {
        let ok = StashRecord {
            timestamp_ms: Some(1_700_000_000_000),
            ..StashRecord::new("t", "k", "v")
        };
        assert!(refusal(0, &ok).is_none());
        assert!(refusal(0, &StashRecord::new("t", "k", "v")).is_none());
        for ts in [-1, 0, *DATETIME2_MS.start(), *DATETIME2_MS.end()] {
            let fine = StashRecord {
                timestamp_ms: Some(ts),
                ..ok.clone()
            };
            assert!(refusal(0, &fine).is_none(), "{ts}");
        }
        for ts in [DATETIME2_MS.start() - 1, DATETIME2_MS.end() + 1, i64::MIN] {
            let bad = StashRecord {
                timestamp_ms: Some(ts),
                ..ok.clone()
            };
            match refusal(3, &bad) {
                Some(Error::Unstashable { index: 3, reason }) => {
                    assert!(reason.contains("DATETIME2"), "{reason}")
                }
                other => panic!("{ts}: {other:?}"),
            }
        }
        // The limits are the first and the last millisecond of DATETIME2.
        let first = chrono::DateTime::from_timestamp_millis(*DATETIME2_MS.start()).unwrap();
        let last = chrono::DateTime::from_timestamp_millis(*DATETIME2_MS.end()).unwrap();
        assert_eq!(first.to_rfc3339(), "0001-01-01T00:00:00+00:00");
        assert_eq!(
            last.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn records_bind_seven_values_each_in_order() {
        let table = TableName::parse("outbox").unwrap();
        let statements = Statements::new(&table, &table.sibling("_quarantine"));
        let records = vec![
            StashRecord {
                partition: Some(2),
                timestamp_ms: Some(5),
                ..StashRecord::new("t", "k", "v").header("h", vec![0u8, 255])
            },
            StashRecord {
                key: None,
                value: None,
                ..StashRecord::new("u", "", "")
            },
        ];
        let bound = insert(&statements, &records);
        assert_eq!(bind::placeholders(&bound.sql), 14);
        assert_eq!(
            bound.args,
            vec![
                Arg::Text("t".into()),
                Arg::Bytes(Some(b"k")),
                Arg::Bytes(Some(b"v")),
                Arg::Text(r#"["h"]"#.into()),
                Arg::Text(r#"["AP8="]"#.into()),
                Arg::OptI32(Some(2)),
                Arg::OptI64(Some(5)),
                Arg::Text("u".into()),
                Arg::Bytes(None),
                Arg::Bytes(None),
                Arg::Text("[]".into()),
                Arg::Text("[]".into()),
                Arg::OptI32(None),
                Arg::OptI64(None),
            ]
        );
        assert_eq!(bound.query().param_count(), 14);
    }
}
