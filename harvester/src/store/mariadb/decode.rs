//! Rows read back by a mark, as records. Validation is shared with every store
//! ([`OutboxRecord::checked`], and the header rule through `headers.rs`); only the column
//! mapping is MariaDB's. A column of the wrong type is an error (the table is not the one the
//! migrations made); a row the table holds but Kafka cannot take is poison.

use sqlx::mysql::MySqlRow;
use sqlx::Row;

use crate::outbox::{Decoded, OutboxRecord};
use crate::store::json_headers as headers;

/// Decodes a row of `marked.sql`.
pub(super) fn decode(row: &MySqlRow, require_key: bool) -> Result<Decoded, sqlx::Error> {
    let id: i64 = row.try_get("id")?;
    let keys: Vec<u8> = row.try_get("header_keys")?;
    let values: Vec<u8> = row.try_get("header_values")?;
    let headers = match headers::decode(id, &keys, &values) {
        Ok(h) => h,
        Err(p) => return Ok(Err(p)),
    };
    let record = OutboxRecord {
        id,
        topic: row.try_get("topic")?,
        key: row.try_get("kafka_key")?,
        value: row.try_get("kafka_value")?,
        headers,
        partition: row.try_get("kafka_partition")?,
        timestamp_ms: row.try_get("kafka_timestamp_ms")?,
        create_time: row.try_get("create_time")?,
    };
    Ok(record.checked(require_key))
}
