//! A backlog of rows written with `COPY` (the fastest way into Postgres), then `ANALYZE`: a
//! freshly bulk-loaded, never-analysed table can give the mark query a bad plan until
//! autoanalyze runs, which would measure the planner, not the harvester.
//!
//! Row i is key `k(i mod keys)` with sequence `i div keys`, so per-key order is id order.

use std::sync::Arc;
use std::time::Instant;

use harvester::outbox::TableName;
use sqlx::PgPool;

use crate::ledger::{Committed, Ledger};
use crate::{key_name, WorkloadError};

/// Rows per COPY statement (one transaction each).
const CHUNK: u64 = 100_000;

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

/// How big a backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    pub rows: u64,
    pub keys: u32,
    pub value_bytes: usize,
}

/// Writes the backlog into a native outbox table and analyses it. Every row is recorded in
/// `ledger` as committed when its chunk committed.
pub async fn prefill(
    pool: &PgPool,
    table: &TableName,
    topic: &str,
    run: &str,
    backlog: Backlog,
    ledger: &Arc<Ledger>,
) -> Result<(), WorkloadError> {
    let Backlog {
        rows,
        keys,
        value_bytes,
    } = backlog;
    if keys == 0 {
        return Err(WorkloadError::Invalid(
            "prefill needs at least one key".into(),
        ));
    }
    let value_hex = hex(&vec![b'v'; value_bytes]);
    let run_hex = hex(run.as_bytes());
    let statement = format!(
        "COPY {} (topic, kafka_key, kafka_value, header_keys, header_values) FROM STDIN",
        table.quoted()
    );
    let mut start = 0;
    while start < rows {
        let end = (start + CHUNK).min(rows);
        let mut text = String::with_capacity(((end - start) as usize) * (value_hex.len() + 80));
        for i in start..end {
            let k = (i % u64::from(keys)) as u32;
            copy_line(
                &mut text,
                topic,
                &key_name(k),
                &value_hex,
                &run_hex,
                i / u64::from(keys),
            );
        }
        let mut conn = pool
            .acquire()
            .await
            .map_err(WorkloadError::db("connect for COPY"))?;
        let mut copy = conn
            .copy_in_raw(&statement)
            .await
            .map_err(WorkloadError::db("start COPY"))?;
        copy.send(text.into_bytes())
            .await
            .map_err(WorkloadError::db("send COPY data"))?;
        copy.finish()
            .await
            .map_err(WorkloadError::db("finish COPY"))?;
        let now = Instant::now();
        ledger.push_all((start..end).map(|i| Committed {
            key: (i % u64::from(keys)) as u32,
            seq: i / u64::from(keys),
            committed: now,
            intended: None,
        }));
        start = end;
    }
    sqlx::query(&format!("ANALYZE {}", table.quoted()))
        .execute(pool)
        .await
        .map_err(WorkloadError::db("analyze the outbox"))?;
    Ok(())
}
