//! The Postgres backlog: rows written with `COPY` (the fastest way into Postgres), then
//! `ANALYZE`.

use std::sync::Arc;

use harvester::outbox::TableName;
use sqlx::PgPool;

use super::Backlog;
use crate::ledger::Ledger;
use crate::{key_name, WorkloadError};

/// Rows per COPY statement (one transaction each).
pub(super) const CHUNK: u64 = 100_000;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One row in COPY text format: topic, key, value, header keys, header values.
fn copy_line(out: &mut String, topic: &str, key: &str, value_hex: &str, run_hex: &str, seq: u64) {
    use std::fmt::Write;
    // bytea in COPY text: \\x<hex>; inside an array literal the backslash is escaped once more.
    let _ = writeln!(
        out,
        "{topic}\t\\\\x{}\t\\\\x{value_hex}\t{{x-run,x-seq}}\t{{\"\\\\\\\\x{run_hex}\",\"\\\\\\\\x{}\"}}",
        hex(key.as_bytes()),
        hex(seq.to_string().as_bytes()),
    );
}

/// Writes the backlog into a native Postgres outbox table and analyses it.
pub(super) async fn prefill(
    pool: &PgPool,
    table: &TableName,
    topic: &str,
    run: &str,
    backlog: Backlog,
    ledger: &Arc<Ledger>,
) -> Result<(), WorkloadError> {
    let value_hex = hex(&vec![b'v'; backlog.value_bytes]);
    let run_hex = hex(run.as_bytes());
    let statement = format!(
        "COPY {} (topic, kafka_key, kafka_value, header_keys, header_values) FROM STDIN",
        table.quoted()
    );
    let line = |out: &mut String, k: u32, seq: u64| {
        copy_line(out, topic, &key_name(k), &value_hex, &run_hex, seq);
    };
    copy_rows(
        pool,
        &statement,
        backlog,
        value_hex.len() + 80,
        line,
        Some(ledger),
    )
    .await?;
    analyze(pool, table).await
}

/// COPYs `backlog`'s rows through `statement` in chunks of [`CHUNK`] rows (a transaction
/// each), each row's text written by `line` (about `row_bytes` long); a chunk's rows go into
/// `ledger`, when given, once committed.
pub(super) async fn copy_rows(
    pool: &PgPool,
    statement: &str,
    backlog: Backlog,
    row_bytes: usize,
    line: impl Fn(&mut String, u32, u64),
    ledger: Option<&Arc<Ledger>>,
) -> Result<(), WorkloadError> {
    let mut rows = backlog.rows();
    loop {
        let chunk = super::chunk(&mut rows, CHUNK);
        if chunk.is_empty() {
            return Ok(());
        }
        let mut text = String::with_capacity(chunk.len() * row_bytes);
        for &(k, seq) in &chunk {
            line(&mut text, k, seq);
        }
        let deadline = copy_deadline(text.len());
        super::copy_once::copy_in(pool, statement, text.as_bytes(), deadline).await?;
        if let Some(ledger) = ledger {
            Backlog::committed(&chunk, ledger);
        }
    }
}

/// How long one COPY of `bytes` may take: 30 s, and a second per 2 MB (the server takes about
/// 20 MB/s here when busy).
fn copy_deadline(bytes: usize) -> std::time::Duration {
    std::time::Duration::from_secs(30 + (bytes / 2_000_000) as u64)
}

/// `ANALYZE` the outbox, so the harvester's first mark is planned on its statistics.
pub(super) async fn analyze(pool: &PgPool, table: &TableName) -> Result<(), WorkloadError> {
    sqlx::query(&format!("ANALYZE {}", table.quoted()))
        .execute(pool)
        .await
        .map_err(WorkloadError::db("analyze the outbox"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_copy_gets_more_time_the_more_it_sends() {
        assert_eq!(super::copy_deadline(0).as_secs(), 30);
        assert_eq!(super::copy_deadline(55_000_000).as_secs(), 57);
    }
}
