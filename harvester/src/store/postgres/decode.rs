//! Rows returned by the mark statements, as records: the native table's bytes and arrays, or
//! goharvest's text columns. Validation is shared with every store
//! ([`OutboxRecord::checked`], [`zip_headers`]); only the column mapping is Postgres's.
//!
//! A batch's columns are found by name once, from its first row, and every row is read by
//! position: a lookup by name hashes the name on each read, nine times a record on the hot path.

use sqlx::postgres::PgRow;
use sqlx::{Column, Row};

use crate::outbox::{zip_headers, Decoded, OutboxRecord, Shape};

/// Decodes every row of one statement's result (rows of one shape, so of one column layout).
/// A row without an id is no record (the one row a mark that marked nothing returns) and is
/// left out.
pub(crate) fn decode_rows(
    rows: &[PgRow],
    shape: Shape,
    require_key: bool,
) -> Result<Vec<Decoded>, sqlx::Error> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let at = Columns::of(first, shape)?;
    let decode = match shape {
        Shape::Native => decode_native,
        Shape::Goharvest => decode_goharvest,
    };
    let mut decoded = Vec::with_capacity(rows.len());
    for row in rows {
        if let Some(id) = row.try_get::<Option<i64>, _>(at.id)? {
            decoded.push(decode(row, id, &at, require_key)?);
        }
    }
    Ok(decoded)
}

/// Where each column of a record is in a result row.
struct Columns {
    id: usize,
    topic: usize,
    key: usize,
    value: usize,
    header_keys: usize,
    header_values: usize,
    create_time: usize,
    /// The native shape's only.
    partition: Option<usize>,
    timestamp_ms: Option<usize>,
}

impl Columns {
    fn of(row: &PgRow, shape: Shape) -> Result<Self, sqlx::Error> {
        let at = |name: &str| row.try_column(name).map(Column::ordinal);
        Ok(match shape {
            Shape::Native => Columns {
                id: at("id")?,
                topic: at("topic")?,
                key: at("kafka_key")?,
                value: at("kafka_value")?,
                header_keys: at("header_keys")?,
                header_values: at("header_values")?,
                create_time: at("create_time")?,
                partition: Some(at("kafka_partition")?),
                timestamp_ms: Some(at("kafka_timestamp_ms")?),
            },
            Shape::Goharvest => Columns {
                id: at("id")?,
                topic: at("kafka_topic")?,
                key: at("kafka_key")?,
                value: at("kafka_value")?,
                header_keys: at("kafka_header_keys")?,
                header_values: at("kafka_header_values")?,
                create_time: at("create_time")?,
                partition: None,
                timestamp_ms: None,
            },
        })
    }
}

/// Decodes a row of the native table (bytes, header arrays, partition, timestamp).
fn decode_native(
    row: &PgRow,
    id: i64,
    at: &Columns,
    require_key: bool,
) -> Result<Decoded, sqlx::Error> {
    let keys: Vec<String> = row.try_get(at.header_keys)?;
    let values: Vec<Vec<u8>> = row.try_get(at.header_values)?;
    let headers = match zip_headers(id, keys, values, |v| v) {
        Ok(h) => h,
        Err(p) => return Ok(Err(p)),
    };
    let record = OutboxRecord {
        id,
        topic: row.try_get(at.topic)?,
        key: row.try_get(at.key)?,
        value: row.try_get(at.value)?,
        headers,
        partition: nullable(row, at.partition)?,
        timestamp_ms: nullable(row, at.timestamp_ms)?,
        create_time: row.try_get(at.create_time)?,
    };
    Ok(record.checked(require_key))
}

/// A nullable column the shape may not have (then NULL).
fn nullable<T>(row: &PgRow, column: Option<usize>) -> Result<Option<T>, sqlx::Error>
where
    T: for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    match column {
        Some(c) => row.try_get(c),
        None => Ok(None),
    }
}

/// Decodes a row of goharvest's table (text columns, text header arrays).
fn decode_goharvest(
    row: &PgRow,
    id: i64,
    at: &Columns,
    require_key: bool,
) -> Result<Decoded, sqlx::Error> {
    let keys: Vec<String> = row.try_get(at.header_keys)?;
    let values: Vec<String> = row.try_get(at.header_values)?;
    let headers = match zip_headers(id, keys, values, String::into_bytes) {
        Ok(h) => h,
        Err(p) => return Ok(Err(p)),
    };
    let key: Option<String> = row.try_get(at.key)?;
    let value: Option<String> = row.try_get(at.value)?;
    let record = OutboxRecord {
        id,
        topic: row.try_get(at.topic)?,
        key: key.map(String::into_bytes),
        value: value.map(String::into_bytes),
        headers,
        partition: None,
        timestamp_ms: None,
        create_time: row.try_get(at.create_time)?,
    };
    Ok(record.checked(require_key))
}
