//! Rows returned by a mark, as records. Validation is shared with every store
//! ([`OutboxRecord::checked`], and the header rule through `headers.rs`); only the column
//! mapping is SQL Server's. A column of the wrong type is an error (the table is not the one the
//! migrations made); a row the table holds but Kafka cannot take is poison.
//!
//! Instants come as integers the mark computes on the server (`sql/mark.sql`): the Kafka
//! timestamp in milliseconds and `create_time` in microseconds since the Unix epoch, both UTC,
//! so no date type crosses the wire.

use tiberius::Row;

use crate::outbox::{Decoded, OutboxRecord};
use crate::store::json_headers as headers;

fn conversion(message: String) -> tiberius::error::Error {
    tiberius::error::Error::Conversion(message.into())
}

/// Decodes a row of the mark's OUTPUT.
pub(super) fn decode(row: &Row, require_key: bool) -> Result<Decoded, tiberius::error::Error> {
    let id: i64 = row
        .try_get("id")?
        .ok_or_else(|| conversion("a marked row has no id".into()))?;
    let keys: &str = row.try_get("header_keys")?.unwrap_or("[]");
    let values: &str = row.try_get("header_values")?.unwrap_or("[]");
    let headers = match headers::decode(id, keys.as_bytes(), values.as_bytes()) {
        Ok(h) => h,
        Err(p) => return Ok(Err(p)),
    };
    let micros: i64 = row
        .try_get("create_time_us")?
        .ok_or_else(|| conversion(format!("row {id} has no create_time")))?;
    let create_time = chrono::DateTime::from_timestamp_micros(micros)
        .ok_or_else(|| conversion(format!("row {id}: create_time {micros} us is out of range")))?;
    let record = OutboxRecord {
        id,
        topic: row.try_get::<&str, _>("topic")?.unwrap_or("").to_owned(),
        key: row.try_get::<&[u8], _>("kafka_key")?.map(<[u8]>::to_vec),
        value: row.try_get::<&[u8], _>("kafka_value")?.map(<[u8]>::to_vec),
        headers,
        partition: row.try_get("kafka_partition")?,
        timestamp_ms: row.try_get("kafka_timestamp_ms")?,
        create_time,
    };
    Ok(record.checked(require_key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tiberius::{ColumnData, ColumnType};

    /// A row as the mark returns it.
    fn row(key: Option<&[u8]>, keys: &str, values: &str, topic: &str) -> Row {
        Row::builder()
            .column("id", ColumnType::Int8, ColumnData::I64(Some(7)))
            .column(
                "topic",
                ColumnType::NVarchar,
                ColumnData::String(Some(topic.to_owned().into())),
            )
            .column(
                "kafka_key",
                ColumnType::BigVarBin,
                ColumnData::Binary(key.map(|k| k.to_vec().into())),
            )
            .column(
                "kafka_value",
                ColumnType::BigVarBin,
                ColumnData::Binary(None),
            )
            .column(
                "header_keys",
                ColumnType::NVarchar,
                ColumnData::String(Some(keys.to_owned().into())),
            )
            .column(
                "header_values",
                ColumnType::NVarchar,
                ColumnData::String(Some(values.to_owned().into())),
            )
            .column(
                "kafka_partition",
                ColumnType::Int4,
                ColumnData::I32(Some(3)),
            )
            .column(
                "kafka_timestamp_ms",
                ColumnType::Int8,
                ColumnData::I64(Some(1_700_000_000_123)),
            )
            .column(
                "create_time_us",
                ColumnType::Int8,
                ColumnData::I64(Some(1_700_000_000_123_456)),
            )
            .build()
    }

    #[test]
    fn rows_become_records() {
        let r = decode(&row(Some(b"k"), r#"["h"]"#, r#"["AP8="]"#, "t"), true)
            .unwrap()
            .unwrap();
        assert_eq!(r.id, 7);
        assert_eq!(r.topic, "t");
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value, None, "a tombstone");
        assert_eq!(r.headers, vec![("h".to_owned(), vec![0, 255])]);
        assert_eq!(
            (r.partition, r.timestamp_ms),
            (Some(3), Some(1_700_000_000_123))
        );
        assert_eq!(r.create_time.timestamp_micros(), 1_700_000_000_123_456);
    }

    #[test]
    fn bad_rows_are_poison_and_wrong_columns_errors() {
        let p = decode(&row(None, "[]", "[]", "t"), true)
            .unwrap()
            .unwrap_err();
        assert!(p.reason.contains("key is NULL"), "{}", p.reason);
        assert!(decode(&row(None, "[]", "[]", "t"), false).unwrap().is_ok());
        let p = decode(&row(Some(b"k"), r#"["a","b"]"#, "[]", "t"), true)
            .unwrap()
            .unwrap_err();
        assert!(
            p.reason.contains("header arrays differ in length"),
            "{}",
            p.reason
        );
        let p = decode(&row(Some(b"k"), "[]", "[]", " "), true)
            .unwrap()
            .unwrap_err();
        assert!(p.reason.contains("empty topic"), "{}", p.reason);
        let wrong = Row::builder()
            .column(
                "id",
                ColumnType::NVarchar,
                ColumnData::String(Some("7".into())),
            )
            .build();
        assert!(decode(&wrong, true).is_err());
    }
}
