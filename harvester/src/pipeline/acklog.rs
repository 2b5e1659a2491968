//! The acknowledgement log (`audit.ack_log`): a line per record Kafka acknowledged, written from
//! the producer's delivery report, before the record's row can be purged. It is evidence kept
//! apart from the outbox: a record missing from the topic whose row is gone was lost by the
//! broker only if this log shows the broker acknowledged it; otherwise the harvester deleted a
//! row it had no acknowledgement for.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::Error;
use crate::Result;

/// An open acknowledgement log, shared by every producer of a harvester; flushed when the last
/// holder lets it go.
#[derive(Debug)]
pub struct AckLog(Mutex<BufWriter<File>>);

impl AckLog {
    /// Opens `path` for appending (created if absent).
    pub fn open(path: &Path) -> Result<Arc<AckLog>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::Io {
                action: format!("open the acknowledgement log {}", path.display()),
                source,
            })?;
        Ok(Arc::new(AckLog(Mutex::new(BufWriter::with_capacity(
            1 << 16,
            file,
        )))))
    }

    /// Appends one acknowledged record: its row id, partition, offset and key. A write that
    /// fails is logged, not raised: the log is evidence about the pipeline, never a reason to
    /// stop it (a reader then finds fewer acknowledgements, which errs against the harvester).
    pub fn record(&self, id: i64, partition: i32, offset: i64, key: Option<&[u8]>) {
        let key = key.map(String::from_utf8_lossy).unwrap_or_default();
        let key = serde_json::to_string(&key).unwrap_or_default();
        if let Err(e) = writeln!(self.0.lock(), "{id} {partition} {offset} {key}") {
            tracing::warn!("cannot write the acknowledgement log: {e}");
        }
    }
}

impl AckLog {
    /// Writes what is buffered to the file (a term's end; the last holder's drop).
    pub fn flush(&self) {
        if let Err(e) = self.0.lock().flush() {
            tracing::warn!("cannot flush the acknowledgement log: {e}");
        }
    }
}

impl Drop for AckLog {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_acknowledgement_flushed_at_the_end() {
        let path = std::env::temp_dir().join(format!("acklog-{}", uuid::Uuid::new_v4()));
        let log = AckLog::open(&path).unwrap();
        log.record(7, 2, 40, Some(b"k1"));
        log.record(8, 0, 3, None);
        drop(log);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "7 2 40 \"k1\"\n8 0 3 \"\"\n");
        std::fs::remove_file(path).unwrap();
    }
}
