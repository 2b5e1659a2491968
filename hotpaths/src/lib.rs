//! The CPU-bound hot paths as fixed, deterministic workloads, shared by the criterion benches
//! (wall-clock) and the regression gate (instruction counts under callgrind, which do not care
//! how busy the machine is).
//!
//! Each workload calls the real library code: key routing, metrics histogram recording, record
//! to Kafka header conversion, a shard's per-key queues over many keys and over a few hot ones,
//! purge batch building, the verifier's bookkeeping, the test envelope parser, the adaptive
//! window's control loop, the finished rows' memory, a transactional shard's bookkeeping (with
//! every transaction committing, and with one in 50 aborting), the snapshot reader's pages and
//! a fetched row's decoding.

pub mod adaptive;
pub mod decode;
pub mod gone;
pub mod pipeline;
pub mod snapshot;
pub mod transactional;

use std::hint::black_box;

use harvester::outbox::OutboxRecord;
use harvester::stats::histogram::{self, Histogram};
use testkit::Verifier;

/// Workload names, in a stable order.
pub const WORKLOADS: &[&str] = &[
    "route",
    "histogram",
    "headers",
    "keys",
    "hot_keys",
    "purge_batch",
    "verifier",
    "envelope",
    "adapt",
    "gone",
    "txn_shard",
    "txn_abort",
    "snapshot",
    "decode",
];

/// Records a shard may hold in the `keys` workloads (goharvest's `MaxInFlightRecords`).
pub const WINDOW: usize = 1000;

fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("customer-{i:08}").into_bytes())
        .collect()
}

/// Routes `n` keys to 8 shards.
pub fn route(n: usize) -> usize {
    let keys = keys(1024);
    let mut acc = 0;
    for i in 0..n {
        acc += harvester::pipeline::route::shard_for(Some(&keys[i % keys.len()]), 8);
    }
    acc
}

/// Records `n` latencies into a stage histogram.
pub fn histogram(n: usize) -> u64 {
    let h = Histogram::new(histogram::SECONDS);
    for i in 0..n {
        h.observe((i % 5000) as f64 * 1e-5);
    }
    h.snapshot().count
}

fn record(i: usize) -> OutboxRecord {
    OutboxRecord {
        id: i as i64,
        topic: "orders".into(),
        key: Some(format!("k{}", i % 1000).into_bytes()),
        value: Some(vec![b'v'; 200]),
        headers: vec![
            ("x-run".into(), b"run-1".to_vec()),
            ("x-seq".into(), i.to_string().into_bytes()),
            (
                "trace".into(),
                b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_vec(),
            ),
        ],
        partition: None,
        timestamp_ms: None,
        create_time: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
    }
}

/// Converts `n` records' headers to Kafka headers.
pub fn headers(n: usize) -> usize {
    let records: Vec<OutboxRecord> = (0..256).map(record).collect();
    let mut acc = 0;
    for i in 0..n {
        let h = harvester::pipeline::message_headers(&records[i % records.len()]);
        acc += black_box(rdkafka::message::Headers::count(&h));
    }
    acc
}

/// Expects and observes `n` records over 1000 keys, in order.
pub fn verifier(n: usize) -> u64 {
    let names: Vec<Vec<u8>> = (0..1000).map(|k| format!("k{k}").into_bytes()).collect();
    let mut v = Verifier::new();
    for i in 0..n {
        v.expect("t", &names[i % 1000], (i / 1000) as u64);
    }
    for i in 0..n {
        v.observe("t", &names[i % 1000], (i / 1000) as u64);
    }
    v.report().delivered
}

/// Parses `n` run/seq envelopes from headers.
pub fn envelope(n: usize) -> u64 {
    let mut acc = 0;
    for i in 0..n {
        let seq = (i as u64).to_string();
        let pairs = [
            (testkit::envelope::RUN_HEADER, Some(&b"run-1"[..])),
            (testkit::envelope::SEQ_HEADER, Some(seq.as_bytes())),
        ];
        acc += testkit::envelope::parse(pairs).map_or(0, |(_, s)| s);
    }
    acc
}

/// Runs a workload by name with `n` iterations; `None` for an unknown name.
pub fn run(name: &str, n: usize) -> Option<u64> {
    Some(match name {
        "route" => route(n) as u64,
        "histogram" => histogram(n),
        "headers" => headers(n) as u64,
        "keys" => pipeline::shard_cycle(n, 1000, WINDOW, &pipeline::Shared::new(WINDOW)),
        "hot_keys" => pipeline::shard_cycle(n, 4, WINDOW, &pipeline::Shared::new(WINDOW)),
        "purge_batch" => pipeline::purge_batches(n, 1000),
        "verifier" => verifier(n),
        "envelope" => envelope(n),
        "adapt" => adaptive::adaptive_window(n),
        "gone" => gone::gone(n),
        "txn_shard" => transactional::txn_shard(n, 250, 0),
        "txn_abort" => transactional::txn_shard(n, 250, transactional::ABORT_EVERY),
        "snapshot" => snapshot::snapshot_reads(n),
        "decode" => decode::decode_rows(n),
        _ => return None,
    })
}
