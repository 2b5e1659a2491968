//! A backlog in goharvest's own table (text key and value, text header arrays,
//! `create_time`, `leader_id`), so goharvest's reaper and ours harvest the very same
//! rows in a side-by-side run. Row i is as in the native backlog: key `k(i mod keys)`, sequence
//! `i div keys`, the run and sequence in the `x-run`/`x-seq` headers, then `ANALYZE`.

use harvester::outbox::TableName;
use sqlx::PgPool;

use super::Backlog;
use crate::{key_name, WorkloadError};

/// One row in COPY text format. Keys, topics, run ids and values of the bench are plain ASCII
/// without tabs, backslashes, quotes or commas, so nothing needs escaping.
fn copy_line(out: &mut String, topic: &str, key: &str, value: &str, run: &str, seq: u64) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "now\t{topic}\t{key}\t{value}\t{{x-run,x-seq}}\t{{{run},{seq}}}"
    );
}

/// Creates `table` with goharvest's DDL and writes the backlog into it with `COPY`.
pub async fn prefill_goharvest(
    pool: &PgPool,
    table: &TableName,
    topic: &str,
    run: &str,
    backlog: Backlog,
) -> Result<(), WorkloadError> {
    let plain = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    if backlog.keys == 0 || !plain(topic) || !plain(run) {
        return Err(WorkloadError::Invalid(format!(
            "a goharvest backlog needs at least one key and a topic and run id of letters, digits, '-', '_' and '.' (topic {topic:?}, run {run:?}, {} keys)",
            backlog.keys
        )));
    }
    sqlx::query(&harvester::store::postgres::goharvest_table(table))
        .execute(pool)
        .await
        .map_err(WorkloadError::db("create goharvest's outbox table"))?;
    let value = "v".repeat(backlog.value_bytes);
    let statement = format!(
        "COPY {} (create_time, kafka_topic, kafka_key, kafka_value, kafka_header_keys, kafka_header_values) FROM STDIN",
        table.quoted()
    );
    let line = |out: &mut String, k: u32, seq: u64| {
        copy_line(out, topic, &key_name(k), &value, run, seq);
    };
    super::copy::copy_rows(pool, &statement, backlog, value.len() + 60, line, None).await?;
    super::copy::analyze(pool, table).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_in_copy_text() {
        let mut s = String::new();
        copy_line(&mut s, "t1", "k7", "vv", "r1", 3);
        assert_eq!(s, "now\tt1\tk7\tvv\t{x-run,x-seq}\t{r1,3}\n");
    }
}
