//! The MariaDB/MySQL backlog: multi-row `INSERT`s of a few thousand rows each (one prepared
//! shape, bound, far below the protocol's 65,535 parameters), a transaction per chunk, then
//! `ANALYZE TABLE`. The header columns are encoded by the harvester's own function
//! ([`harvester::store::mariadb::encode_headers`]), so the store decodes them as it decodes
//! what its stasher wrote.

use std::sync::Arc;

use harvester::outbox::TableName;
use harvester::store::mariadb::{encode_headers, quoted};
use sqlx::{Executor, MySqlPool};

use super::Backlog;
use crate::ledger::Ledger;
use crate::{key_name, WorkloadError};

/// Rows per INSERT statement (5 parameters each).
const ROWS_PER_INSERT: u64 = 2_000;
/// Rows per transaction.
const CHUNK: u64 = 50_000;

/// The two header columns of a record of run `run` with sequence `seq`: header names, and
/// header values in base64, each a JSON array (`testkit::envelope`'s headers).
pub fn header_columns(run: &str, seq: u64) -> (String, String) {
    let headers: Vec<(String, Vec<u8>)> = testkit::envelope::headers(run, seq)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into_bytes()))
        .collect();
    encode_headers(&headers)
}

/// The INSERT of `rows` rows into `table`.
fn statement(table: &TableName, rows: u64) -> String {
    let values = vec!["(?, ?, ?, ?, ?)"; rows as usize].join(", ");
    include_str!("insert.sql")
        .replace("{{outbox}}", &quoted(table))
        .replace("{{rows}}", &values)
}

/// Writes the backlog into a native MariaDB outbox table and analyses it.
pub(super) async fn prefill(
    pool: &MySqlPool,
    table: &TableName,
    topic: &str,
    run: &str,
    backlog: Backlog,
    ledger: &Arc<Ledger>,
) -> Result<(), WorkloadError> {
    let value = vec![b'v'; backlog.value_bytes];
    let full = statement(table, ROWS_PER_INSERT);
    let mut rows = backlog.rows();
    loop {
        let chunk = super::chunk(&mut rows, CHUNK);
        if chunk.is_empty() {
            break;
        }
        let mut tx = pool
            .begin()
            .await
            .map_err(WorkloadError::db("begin a pre-fill transaction"))?;
        for part in chunk.chunks(ROWS_PER_INSERT as usize) {
            let short;
            let sql = if part.len() as u64 == ROWS_PER_INSERT {
                &full
            } else {
                short = statement(table, part.len() as u64);
                &short
            };
            let mut query = sqlx::query(sql);
            for &(k, seq) in part {
                let (names, values) = header_columns(run, seq);
                query = query
                    .bind(topic)
                    .bind(key_name(k).into_bytes())
                    .bind(&value[..])
                    .bind(names)
                    .bind(values);
            }
            query
                .execute(&mut *tx)
                .await
                .map_err(WorkloadError::db("insert pre-fill rows"))?;
        }
        tx.commit()
            .await
            .map_err(WorkloadError::db("commit pre-fill rows"))?;
        Backlog::committed(&chunk, ledger);
    }
    pool.execute(format!("ANALYZE TABLE {}", quoted(table)).as_str())
        .await
        .map_err(WorkloadError::db("analyze the outbox"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_columns_are_json_arrays_of_names_and_base64() {
        let (names, values) = header_columns("run-1", 42);
        assert_eq!(names, r#"["x-run","x-seq"]"#);
        // base64("run-1"), base64("42")
        assert_eq!(values, r#"["cnVuLTE=","NDI="]"#);
        let decoded =
            harvester::store::mariadb::decode_headers(7, names.as_bytes(), values.as_bytes())
                .unwrap();
        let pairs = decoded
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_slice())));
        assert_eq!(
            testkit::envelope::parse(pairs),
            Some(("run-1".to_owned(), 42))
        );
    }

    #[test]
    fn one_statement_shape_per_size_with_five_parameters_a_row() {
        let table = TableName::parse("bench_x.outbox").unwrap();
        let sql = statement(&table, 3);
        assert!(
            sql.contains("INSERT INTO `bench_x`.`outbox` (topic, kafka_key, kafka_value, header_keys, header_values)"),
            "{sql}"
        );
        assert_eq!(sql.matches('?').count(), 15);
        assert!(statement(&table, ROWS_PER_INSERT).matches('?').count() < 65_535);
    }
}
