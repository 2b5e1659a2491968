//! A fetched row turned into a record, as the Postgres store's `decode_native` does once it has
//! the row's columns: the header arrays zipped (`zip_headers`) and the record checked
//! (`OutboxRecord::checked`). Every mark and every snapshot read does this per row.
//!
//! Left out, as it needs a database: sqlx's decoding of the columns (`try_get`); the columns
//! are cloned from templates instead, standing for what sqlx allocates.

use harvester::outbox::{zip_headers, Decoded, OutboxRecord};

/// A row's columns as sqlx hands them over.
#[derive(Debug)]
pub struct Columns {
    topic: String,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    header_keys: Vec<String>,
    header_values: Vec<Vec<u8>>,
}

/// Rows shaped as the `headers` workload's records: a key, 200 bytes of value, three headers.
pub fn templates() -> Vec<Columns> {
    (0..256)
        .map(|i| Columns {
            topic: "orders".into(),
            key: Some(format!("k{}", i % 1000).into_bytes()),
            value: Some(vec![b'v'; 200]),
            header_keys: vec!["x-run".into(), "x-seq".into(), "trace".into()],
            header_values: vec![
                b"run-1".to_vec(),
                i.to_string().into_bytes(),
                b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_vec(),
            ],
        })
        .collect()
}

/// Row `id`, its columns taken from `columns`, decoded.
pub fn decode(id: i64, columns: &[Columns]) -> Decoded {
    let c = &columns[id as usize % columns.len()];
    let headers = zip_headers(id, c.header_keys.clone(), c.header_values.clone(), |v| v)?;
    OutboxRecord {
        id,
        topic: c.topic.clone(),
        key: c.key.clone(),
        value: c.value.clone(),
        headers,
        partition: None,
        timestamp_ms: None,
        create_time: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
    }
    .checked(true)
}

/// Decodes `n` rows; returns how many are publishable.
pub fn decode_rows(n: usize) -> u64 {
    let columns = templates();
    (0..n as i64)
        .map(|id| std::hint::black_box(decode(id, &columns)))
        .filter(Result::is_ok)
        .count() as u64
}
