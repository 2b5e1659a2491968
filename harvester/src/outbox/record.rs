//! The record the pipeline publishes, decoded from either table shape.
//!
//! Decoding is where malformed rows are caught (header arrays of different lengths, a missing
//! key where keys are required): such a row becomes a [`Poison`] naming its id and cause, bound
//! for the quarantine, instead of an error that would stop marking.

use sqlx::postgres::PgRow;
use sqlx::Row;

/// One outbox row, ready to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRecord {
    pub id: i64,
    pub topic: String,
    pub key: Option<Vec<u8>>,
    /// `None` is a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub partition: Option<i32>,
    /// Milliseconds since the epoch.
    pub timestamp_ms: Option<i64>,
    /// When the row was written (for latency and oldest-row age).
    pub create_time: chrono::DateTime<chrono::Utc>,
}

impl OutboxRecord {
    /// Size in bytes of what goes to Kafka.
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }
}

/// A row that can never be published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poison {
    pub id: i64,
    pub reason: String,
}

/// Decoded row: publishable, or poison.
pub type Decoded = Result<OutboxRecord, Poison>;

fn poison(id: i64, reason: impl Into<String>) -> Decoded {
    Err(Poison {
        id,
        reason: reason.into(),
    })
}

fn zip_headers<V>(
    id: i64,
    keys: Vec<String>,
    values: Vec<V>,
    conv: impl Fn(V) -> Vec<u8>,
) -> Result<Vec<(String, Vec<u8>)>, Poison> {
    if keys.len() != values.len() {
        return Err(Poison {
            id,
            reason: format!(
                "row {id}: header arrays differ in length ({} keys, {} values)",
                keys.len(),
                values.len()
            ),
        });
    }
    Ok(keys.into_iter().zip(values.into_iter().map(conv)).collect())
}

fn check(record: OutboxRecord, require_key: bool) -> Decoded {
    if record.topic.trim().is_empty() {
        return poison(record.id, format!("row {}: empty topic", record.id));
    }
    if require_key && record.key.is_none() {
        return poison(
            record.id,
            format!(
                "row {}: key is NULL but keys are required (outbox.require_key)",
                record.id
            ),
        );
    }
    Ok(record)
}

/// Decodes a row returned by the native mark query.
pub fn decode_native(row: &PgRow, require_key: bool) -> Result<Decoded, sqlx::Error> {
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
    Ok(check(record, require_key))
}

/// Decodes a row returned by the goharvest-shape mark query (text columns, text header arrays).
pub fn decode_goharvest(row: &PgRow, require_key: bool) -> Result<Decoded, sqlx::Error> {
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
    Ok(check(record, require_key))
}
