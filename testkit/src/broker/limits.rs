//! How much the embedded broker keeps, and what a record costs against it.
//!
//! librdkafka's mock cluster keeps each partition's log in memory and, on every append, deletes
//! the oldest message sets while the partition holds more than [`MOCK_PARTITION_MAX_BYTES`] or
//! more than [`MOCK_PARTITION_MAX_MESSAGE_SETS`] (`rd_kafka_mock_msgset_new` in
//! `rdkafka_mock.c`; neither limit is configurable through any API). It tells nobody: a
//! consumer that falls further behind than that gets `OFFSET_OUT_OF_RANGE` and can never read
//! what was deleted, although every one of those records was acknowledged. A benchmark that
//! verifies deliveries must therefore size its topics so that the verifier's lag fits, and must
//! tell eviction apart from loss; the figures here let it do both without guessing.
//!
//! Sizes follow Kafka's record batch format v2 (the only one an idempotent producer writes),
//! uncompressed: a batch header of [`RECORD_BATCH_OVERHEAD`] bytes, then each record with
//! zig-zag varint lengths. The unit tests check the arithmetic against a real mock cluster.

/// Bytes of message sets a mock partition keeps (`mpart->max_size`, 5 MiB).
pub const MOCK_PARTITION_MAX_BYTES: u64 = 5 * 1024 * 1024;

/// Message sets (record batches) a mock partition keeps (`mpart->max_cnt`).
pub const MOCK_PARTITION_MAX_MESSAGE_SETS: u64 = 100_000;

/// Bytes of a v2 record batch header: base offset 8, length 4, leader epoch 4, magic 1, CRC 4,
/// attributes 2, last offset delta 4, first and max timestamps 16, producer id 8, producer epoch
/// 2, base sequence 4, record count 4.
pub const RECORD_BATCH_OVERHEAD: u64 = 61;

/// Bytes of a zig-zag varint (Kafka's encoding of record lengths and deltas).
pub fn varint_len(n: i64) -> u64 {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    let mut len = 1;
    while z >= 0x80 {
        z >>= 7;
        len += 1;
    }
    len
}

/// The shape of one record: key and value lengths (`None` = null) and each header's name and
/// value lengths.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecordShape {
    pub key: Option<usize>,
    pub value: Option<usize>,
    pub headers: Vec<(usize, usize)>,
}

impl RecordShape {
    /// Bytes of the record inside a v2 batch, its length prefix included, with one-byte
    /// offset and timestamp deltas (a batch's first record, or any of a batch under 64 records
    /// produced within 64 ms).
    pub fn wire_bytes(&self) -> u64 {
        let bytes = |len: Option<usize>| match len {
            None => varint_len(-1),
            Some(n) => varint_len(n as i64) + n as u64,
        };
        let headers: u64 = self
            .headers
            .iter()
            .map(|(k, v)| bytes(Some(*k)) + bytes(Some(*v)))
            .sum();
        // attributes, timestamp delta, offset delta
        let body = 1
            + varint_len(0)
            + varint_len(0)
            + bytes(self.key)
            + bytes(self.value)
            + varint_len(self.headers.len() as i64)
            + headers;
        varint_len(body as i64) + body
    }
}

/// Which of the mock's two per-partition limits stops the log growing first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockLimit {
    /// [`MOCK_PARTITION_MAX_BYTES`].
    Bytes,
    /// [`MOCK_PARTITION_MAX_MESSAGE_SETS`].
    MessageSets,
}

impl std::fmt::Display for MockLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MockLimit::Bytes => write!(
                f,
                "{} MiB of message sets per partition",
                MOCK_PARTITION_MAX_BYTES / 1024 / 1024
            ),
            MockLimit::MessageSets => write!(
                f,
                "{MOCK_PARTITION_MAX_MESSAGE_SETS} message sets per partition"
            ),
        }
    }
}

/// How many records one mock partition holds before it starts deleting the oldest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionCapacity {
    pub records: u64,
    pub limit: MockLimit,
}

/// Records of `record_bytes` each (see [`RecordShape::wire_bytes`]) a mock partition keeps
/// when every batch carries `records_per_set` of them (at least 1).
pub fn mock_partition_capacity(record_bytes: u64, records_per_set: u64) -> PartitionCapacity {
    let per_set = records_per_set.max(1);
    let set_bytes = RECORD_BATCH_OVERHEAD + per_set * record_bytes;
    // The mock deletes while the log exceeds a limit after an append, so it keeps floor(max/set).
    let by_bytes = (MOCK_PARTITION_MAX_BYTES / set_bytes).max(1);
    if by_bytes <= MOCK_PARTITION_MAX_MESSAGE_SETS {
        PartitionCapacity {
            records: by_bytes * per_set,
            limit: MockLimit::Bytes,
        }
    } else {
        PartitionCapacity {
            records: MOCK_PARTITION_MAX_MESSAGE_SETS * per_set,
            limit: MockLimit::MessageSets,
        }
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib's `crc32`), which librdkafka's partitioners use.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The partition librdkafka's default partitioner (`consistent_random`) picks for a non-empty
/// key: `crc32(key) % partitions`.
pub fn default_partition(key: &[u8], partitions: i32) -> i32 {
    let n = u32::try_from(partitions.max(1)).unwrap_or(1);
    // The remainder is below `partitions`, an i32.
    (crc32(key) % n) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
    use rdkafka::ClientConfig;

    #[test]
    fn varints_and_crc_match_their_references() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(-1), 1);
        assert_eq!(varint_len(63), 1);
        assert_eq!(varint_len(64), 2);
        assert_eq!(varint_len(200), 2);
        assert_eq!(varint_len(8191), 2);
        assert_eq!(varint_len(8192), 3);
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn capacity_picks_the_binding_limit() {
        let c = mock_partition_capacity(250, 1);
        assert_eq!(c.limit, MockLimit::Bytes);
        assert_eq!(c.records, MOCK_PARTITION_MAX_BYTES / 311);
        // Batches of 10: the header is amortised.
        assert_eq!(
            mock_partition_capacity(250, 10).records,
            MOCK_PARTITION_MAX_BYTES / 2561 * 10
        );
        // A set never fits under 52 bytes (5 MiB / 100k), so the count limit needs a set
        // smaller than a v2 batch header: only reachable in arithmetic.
        assert_eq!(mock_partition_capacity(0, 1).limit, MockLimit::Bytes);
    }

    fn producer(bootstrap: &str, one_per_batch: bool) -> ThreadedProducer<DefaultProducerContext> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("linger.ms", "0");
        if one_per_batch {
            config.set("batch.num.messages", "1");
        }
        config.create().unwrap()
    }

    /// The arithmetic against a real mock: one-record batches of a bench-like record, produced
    /// past the predicted capacity, leave exactly the predicted number in the log.
    #[test]
    fn a_mock_partition_keeps_what_the_arithmetic_predicts() {
        let cluster = MockCluster::new(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("limits", 1, 1).unwrap();
        let (key, value, run, seq) = ("k123", vec![b'v'; 200], "run-4242-7-0badcafe", "517");
        let shape = RecordShape {
            key: Some(key.len()),
            value: Some(value.len()),
            headers: vec![(5, run.len()), (5, seq.len())],
        };
        let predicted = mock_partition_capacity(shape.wire_bytes(), 1);
        let p = producer(&bootstrap, true);
        let extra = 500;
        for _ in 0..predicted.records + extra {
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "x-run",
                    value: Some(run.as_bytes()),
                })
                .insert(Header {
                    key: "x-seq",
                    value: Some(seq.as_bytes()),
                });
            let mut record = BaseRecord::to("limits")
                .key(key)
                .payload(&value)
                .headers(headers);
            loop {
                match p.send(record) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        record = r;
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        p.flush(Duration::from_secs(30)).unwrap();
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .create()
            .unwrap();
        let (low, high) = c
            .fetch_watermarks("limits", 0, Duration::from_secs(10))
            .unwrap();
        assert_eq!(high as u64, predicted.records + extra);
        assert_eq!(
            (high - low) as u64,
            predicted.records,
            "record {} B on the wire",
            shape.wire_bytes()
        );
    }

    /// librdkafka's default partitioner is what [`default_partition`] computes.
    #[test]
    fn the_default_partitioner_is_crc32_modulo() {
        let cluster = MockCluster::new(1).unwrap();
        let bootstrap = cluster.bootstrap_servers();
        cluster.create_topic("parts", 7, 1).unwrap();
        let p = producer(&bootstrap, false);
        for k in 0..50 {
            let key = format!("k{k}");
            p.send(BaseRecord::<str, str>::to("parts").key(&key).payload("v"))
                .unwrap();
        }
        p.flush(Duration::from_secs(10)).unwrap();
        let c: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &bootstrap)
            .set("group.id", "parts")
            .create()
            .unwrap();
        let mut tpl = rdkafka::TopicPartitionList::new();
        for partition in 0..7 {
            tpl.add_partition_offset("parts", partition, rdkafka::Offset::Beginning)
                .unwrap();
        }
        c.assign(&tpl).unwrap();
        let (mut seen, deadline) = (0, std::time::Instant::now() + Duration::from_secs(20));
        while seen < 50 && std::time::Instant::now() < deadline {
            let Some(Ok(m)) = c.poll(Duration::from_millis(100)) else {
                continue;
            };
            use rdkafka::Message;
            let key = m.key().unwrap();
            assert_eq!(
                m.partition(),
                default_partition(key, 7),
                "{}",
                String::from_utf8_lossy(key)
            );
            seen += 1;
        }
        assert_eq!(seen, 50);
    }
}
