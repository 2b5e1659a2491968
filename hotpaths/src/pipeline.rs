//! The pipeline's per-record bookkeeping without its I/O: a shard's per-key queues driven
//! through admit, send, acknowledge and finish, and the purger's gathering of acknowledgements.
//!
//! The cycle mirrors what a shard does per record, minus librdkafka and Postgres: the marker
//! takes permits for a batch, the shard queues it per key and sends each key's front, a round
//! trip later the fronts are acknowledged, purged and finished, and each key's next record
//! goes. With few keys the queues run deep, which is where their ordering costs show.

use std::hash::{BuildHasherDefault, DefaultHasher};
use std::sync::atomic::Ordering;

use harvester::outbox::OutboxRecord;
use harvester::pipeline::batch::PurgeBatch;
use harvester::pipeline::keys::{Admitted, Finished, KeyQueues, State};
use harvester::stats::Stats;
use tokio::sync::Semaphore;

/// What the shards of one pipeline share: the in-flight permits and the counters.
#[derive(Debug)]
pub struct Shared {
    pub permits: Semaphore,
    pub stats: Stats,
}

impl Shared {
    /// Room for `window` records in flight (`max_in_flight_records`).
    pub fn new(window: usize) -> Self {
        Shared {
            permits: Semaphore::new(window),
            stats: Stats::default(),
        }
    }
}

/// A fixed hash seed for the library's hashed structures, so that callgrind counts repeat
/// exactly (the harvester seeds randomly; SipHash costs the same either way).
pub type Fixed = BuildHasherDefault<DefaultHasher>;

/// Records the marker hands over per batch.
const BATCH: usize = 100;

pub(crate) fn record(id: i64, key: &[u8]) -> OutboxRecord {
    OutboxRecord {
        id,
        topic: "orders".into(),
        key: Some(key.to_vec()),
        value: None,
        headers: Vec::new(),
        partition: None,
        timestamp_ms: None,
        create_time: chrono::DateTime::<chrono::Utc>::UNIX_EPOCH,
    }
}

/// Runs `n` records over `keys` distinct keys through one shard's bookkeeping, with at most
/// `window` records held; returns the number finished (always `n`).
pub fn shard_cycle(n: usize, keys: usize, window: usize, shared: &Shared) -> u64 {
    let names: Vec<Vec<u8>> = (0..keys)
        .map(|k| format!("customer-{k:08}").into_bytes())
        .collect();
    let stats = &shared.stats;
    let mut q = KeyQueues::<Fixed>::default();
    let mut in_flight: Vec<i64> = Vec::new();
    let mut next_id = 0usize;
    let mut finished = 0u64;
    while (finished as usize) < n {
        // The marker: a batch when the window has room.
        let room = (n - next_id).min(BATCH);
        if room > 0 && q.len() + room <= window {
            if let Ok(p) = shared.permits.try_acquire_many(room as u32) {
                p.forget();
                stats
                    .in_flight_records
                    .fetch_add(room as i64, Ordering::Relaxed);
                for _ in 0..room {
                    let id = next_id as i64;
                    let key = &names[next_id % keys];
                    next_id += 1;
                    if let Admitted::Queued { key, new_key } = q.admit(record(id, key)) {
                        if new_key {
                            stats.in_flight_keys.fetch_add(1, Ordering::Relaxed);
                        }
                        if let Some(front) = q.sendable(&key) {
                            front.state = State::Sent;
                            in_flight.push(front.record.id);
                        }
                    }
                }
            }
        }
        // A round trip later: acknowledged, purged, finished; each key's next front goes.
        let mut batch = PurgeBatch::new();
        for id in in_flight.drain(..) {
            if let Some(h) = q.held_mut(id) {
                h.state = State::Purging;
                Stats::add(&stats.published, 1);
                batch.ack(0, id);
            }
        }
        let ids = batch.ack_ids();
        for id in ids {
            match q.finish(id) {
                Finished::NotHeld => continue,
                Finished::KeyEmpty => {
                    stats.in_flight_keys.fetch_sub(1, Ordering::Relaxed);
                }
                Finished::Next(key) => {
                    if let Some(front) = q.sendable(&key) {
                        front.state = State::Sent;
                        in_flight.push(front.record.id);
                    }
                }
            }
            shared.permits.add_permits(1);
            stats.in_flight_records.fetch_sub(1, Ordering::Relaxed);
            finished += 1;
        }
    }
    finished
}

/// Gathers `n` acknowledgements from 8 shards into purge batches of `max` rows and splits each
/// back per shard, as the purger does; returns the number of ids handed back.
pub fn purge_batches(n: usize, max: usize) -> u64 {
    let mut handed = 0u64;
    let mut id = 0i64;
    while (id as usize) < n {
        let mut batch = PurgeBatch::new();
        while !batch.is_full(max) && (id as usize) < n {
            batch.ack((id % 8) as usize, id);
            id += 1;
        }
        let ids = batch.ack_ids();
        std::hint::black_box(&ids);
        for (_, group) in batch.acks_by_shard(8) {
            handed += group.len() as u64;
        }
    }
    handed
}
