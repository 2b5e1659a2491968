//! The harvesters' acknowledgement logs (`audit.ack_log`, one file per member) read back after
//! they stopped, and what they prove about a loss: a record missing from the topic whose row is
//! gone counts as the broker's loss only where a log shows Kafka acknowledged a record of its
//! key at an offset the verifier never read. Any other such record was deleted without an
//! acknowledgement: the harvester's loss, which fails the run.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::BenchError;

/// One acknowledgement: the record's key (the workload's index) and where Kafka put it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ack {
    pub key: u32,
    pub partition: i32,
    pub offset: i64,
}

/// Where each member of a run writes its log.
pub fn path(dir: &Path, member: &str) -> PathBuf {
    dir.join(format!("{member}.acks"))
}

/// Every acknowledgement in the logs under `dir` (a member that never wrote one has none).
/// Lines whose key is not the workload's are skipped; a line that cannot be read is an error.
pub fn read(dir: &Path) -> Result<Vec<Ack>, BenchError> {
    let mut acks = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(acks);
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path())
            .map_err(|e| BenchError::Run(format!("read {}: {e}", entry.path().display())))?;
        // A member that died mid-write leaves its last line unterminated: not evidence.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in whole.lines() {
            let ack = parse(line).ok_or_else(|| {
                BenchError::Run(format!(
                    "{}: not an acknowledgement line: {line:?}",
                    entry.path().display()
                ))
            })?;
            acks.extend(ack);
        }
    }
    Ok(acks)
}

/// `<row id> <partition> <offset> <key as JSON>`; `Some(None)` for a key not the workload's.
fn parse(line: &str) -> Option<Option<Ack>> {
    let mut words = line.splitn(4, ' ');
    let _id: i64 = words.next()?.parse().ok()?;
    let partition = words.next()?.parse().ok()?;
    let offset = words.next()?.parse().ok()?;
    let key: String = serde_json::from_str(words.next()?).ok()?;
    Some(workloads::key_index(key.as_bytes()).map(|key| Ack {
        key,
        partition,
        offset,
    }))
}

/// Of the missing records whose rows are gone (`gone`, by key), how many the logs account for:
/// per key, at most as many as its acknowledgements at offsets the verifier did not `read`
/// (each offset once), and those without an offset (librdkafka reports none for a batch the
/// broker answered as a duplicate: acknowledged, never shown where).
pub fn acknowledged(gone: &HashMap<u32, u64>, acks: &[Ack], read: &HashSet<(i32, i64)>) -> u64 {
    let mut per_key: HashMap<u32, u64> = HashMap::new();
    let mut counted = HashSet::new();
    for a in acks {
        let unread = a.offset < 0 || !read.contains(&(a.partition, a.offset));
        if unread && (a.offset < 0 || counted.insert(*a)) {
            *per_key.entry(a.key).or_default() += 1;
        }
    }
    gone.iter()
        .map(|(k, n)| (*n).min(per_key.get(k).copied().unwrap_or(0)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(key: u32, partition: i32, offset: i64) -> Ack {
        Ack {
            key,
            partition,
            offset,
        }
    }

    #[test]
    fn reads_a_line() {
        let key = workloads::key_name(3);
        let line = format!("17 2 40 {}", serde_json::to_string(&key).unwrap());
        assert_eq!(parse(&line), Some(Some(ack(3, 2, 40))));
        assert_eq!(parse("17 2 40 \"other\""), Some(None));
        assert_eq!(parse("17 2"), None);
    }

    #[test]
    fn an_unterminated_last_line_is_not_read() {
        let dir = std::env::temp_dir().join(format!("acks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = serde_json::to_string(&workloads::key_name(1)).unwrap();
        std::fs::write(path(&dir, "reaper-0"), format!("1 0 5 {key}\n2 0 6 ")).unwrap();
        assert_eq!(read(&dir).unwrap(), vec![ack(1, 0, 5)]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn only_acknowledged_unread_offsets_explain_a_loss() {
        let gone = HashMap::from([(1, 2), (2, 1)]);
        let read = HashSet::from([(0, 5)]);
        // Key 1: one acknowledged offset unread (the other was read): one of its two explained.
        // Key 2: no acknowledgement at all: deleted without one, explained by nothing.
        let acks = [ack(1, 0, 5), ack(1, 0, 6), ack(1, 0, 6)];
        assert_eq!(acknowledged(&gone, &acks, &read), 1);
        assert_eq!(acknowledged(&gone, &[], &read), 0);
        // Acknowledged without an offset: each counts.
        let unknown = [ack(1, 0, -1001), ack(1, 0, -1001)];
        assert_eq!(acknowledged(&gone, &unknown, &read), 2);
    }
}
