//! The record the pipeline publishes, whatever store it came from.
//!
//! Every store decodes its rows through [`zip_headers`] and [`OutboxRecord::checked`], so
//! malformed rows (header arrays of different lengths, an empty topic, a missing key where keys
//! are required) are caught the same way everywhere: such a row becomes a [`Poison`] naming its
//! id and cause, bound for the quarantine, instead of an error that would stop marking.

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

/// Pairs a row's parallel header arrays, or names the row as poison when their lengths differ.
pub fn zip_headers<V>(
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

impl OutboxRecord {
    /// The record if it can be published, else poison naming the row and the cause.
    pub fn checked(self, require_key: bool) -> Decoded {
        if self.topic.trim().is_empty() {
            return poison(self.id, format!("row {}: empty topic", self.id));
        }
        if require_key && self.key.is_none() {
            return poison(
                self.id,
                format!(
                    "row {}: key is NULL but keys are required (outbox.require_key)",
                    self.id
                ),
            );
        }
        Ok(self)
    }
}

#[cfg(test)]
impl OutboxRecord {
    /// Row `id` of `key` to topic `t`, with nothing else (for the pipeline's unit tests).
    pub(crate) fn keyed(id: i64, key: &str) -> Self {
        OutboxRecord {
            id,
            topic: "t".into(),
            key: Some(key.as_bytes().to_vec()),
            value: None,
            headers: Vec::new(),
            partition: None,
            timestamp_ms: None,
            create_time: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(topic: &str, key: Option<&[u8]>) -> OutboxRecord {
        OutboxRecord {
            topic: topic.into(),
            key: key.map(<[u8]>::to_vec),
            ..OutboxRecord::keyed(7, "")
        }
    }

    #[test]
    fn malformed_rows_become_poison_naming_the_row() {
        let p = zip_headers(7, vec!["a".into(), "b".into()], vec![vec![1u8]], |v| v).unwrap_err();
        assert!(p.reason.contains("row 7") && p.reason.contains("header arrays differ"));
        let p = record("", Some(b"k")).checked(true).unwrap_err();
        assert!(p.reason.contains("empty topic"), "{}", p.reason);
        let p = record("t", None).checked(true).unwrap_err();
        assert!(p.reason.contains("key is NULL"), "{}", p.reason);
        assert!(record("t", None).checked(false).is_ok());
    }
}
