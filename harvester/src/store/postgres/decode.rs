//! Rows returned by the mark statements, as records: the native table's bytes and arrays, or
//! goharvest's text columns. Validation is shared with every store
//! ([`OutboxRecord::checked`], [`zip_headers`]); only the column mapping is Postgres's.

use sqlx::postgres::PgRow;
use sqlx::Row;

use crate::outbox::{zip_headers, Decoded, OutboxRecord};

/// Decodes a row returned by the native mark query.
pub(crate) fn decode_native(row: &PgRow, require_key: bool) -> Result<Decoded, sqlx::Error> {
    let id: i64 = row.try_get("id")?;
    let keys: Vec<String> = row.try_get("header_keys")?;
    let values: Vec<Vec<u8>> = row.try_get("header_values")?;
    let headers = match zip_headers(id, keys, values, |v| v) {
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

/// Decodes a row returned by the goharvest-shape mark query (text columns, text header arrays).
pub(crate) fn decode_goharvest(row: &PgRow, require_key: bool) -> Result<Decoded, sqlx::Error> {
    let id: i64 = row.try_get("id")?;
    let keys: Vec<String> = row.try_get("kafka_header_keys")?;
    let values: Vec<String> = row.try_get("kafka_header_values")?;
    let headers = match zip_headers(id, keys, values, String::into_bytes) {
        Ok(h) => h,
        Err(p) => return Ok(Err(p)),
    };
    let key: Option<String> = row.try_get("kafka_key")?;
    let value: Option<String> = row.try_get("kafka_value")?;
    let record = OutboxRecord {
        id,
        topic: row.try_get("kafka_topic")?,
        key: key.map(String::into_bytes),
        value: value.map(String::into_bytes),
        headers,
        partition: None,
        timestamp_ms: None,
        create_time: row.try_get("create_time")?,
    };
    Ok(record.checked(require_key))
}
