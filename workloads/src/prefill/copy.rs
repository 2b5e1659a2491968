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
    let mut rows = backlog.rows();
    loop {
        let chunk = super::chunk(&mut rows, CHUNK);
        if chunk.is_empty() {
            break;
        }
        let mut text = String::with_capacity(chunk.len() * (value_hex.len() + 80));
        for &(k, seq) in &chunk {
            copy_line(&mut text, topic, &key_name(k), &value_hex, &run_hex, seq);
        }
        copy_in(pool, &statement, text).await?;
        Backlog::committed(&chunk, ledger);
    }
    analyze(pool, table).await
}

/// Runs one `COPY ... FROM STDIN` of `text` (its own transaction).
pub(super) async fn copy_in(
    pool: &PgPool,
    statement: &str,
    text: String,
) -> Result<(), WorkloadError> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(WorkloadError::db("connect for COPY"))?;
    let mut copy = conn
        .copy_in_raw(statement)
        .await
        .map_err(WorkloadError::db("start COPY"))?;
    copy.send(text.into_bytes())
        .await
        .map_err(WorkloadError::db("send COPY data"))?;
    copy.finish()
        .await
        .map_err(WorkloadError::db("finish COPY"))?;
    Ok(())
}

/// `ANALYZE` the outbox, so the harvester's first mark is planned on its statistics.
pub(super) async fn analyze(pool: &PgPool, table: &TableName) -> Result<(), WorkloadError> {
    sqlx::query(&format!("ANALYZE {}", table.quoted()))
        .execute(pool)
        .await
        .map_err(WorkloadError::db("analyze the outbox"))?;
    Ok(())
}
