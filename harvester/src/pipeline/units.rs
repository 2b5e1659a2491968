//! Which shard publishes a record: by key hash, or, for members sharing the outbox by bucket in
//! transactional mode, by the record's bucket (a fencing unit).
//!
//! Transactional fencing protects only what a successor registers again: the broker fences a
//! producer when another registers its transactional id. A single leader's shards take ids its
//! successor takes again (`<id>-<shard>`). Members sharing by bucket cannot: their shards would
//! register the same ids and fence one another, and what moves between members is a bucket, not a
//! shard. So there each owned bucket is a fencing unit: a shard of its own, registered as
//! `<publish.transactional_id>-b<bucket>` and fed only with that bucket's records. The bucket's
//! next owner registers the same id before it sends anything, which fences this member's
//! producer for it and aborts any transaction it left open: a member that stalls past its
//! revocation and resumes cannot make a record of the bucket visible after its successor's.
//!
//! The bucket is the store's function of the key (`OutboxStore::buckets_of`, the same
//! computation a scoped mark filters by), asked once per key not yet known, in one statement per
//! mark, and remembered (bounded) for the term: keys repeat, so a steady load asks for almost
//! none.

use std::collections::HashMap;

use crate::outbox::OutboxRecord;
use crate::store::OutboxStore;
use crate::Result;

use super::route::shard_for;

/// Most keys whose bucket a term remembers; past it the memory starts over.
const KNOWN_KEYS_MAX: usize = 100_000;

/// How a term routes records to its shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Routing {
    /// FNV-1a of the key over the shards (every mode but the one below).
    ByKey,
    /// Shard `i` publishes bucket `units[i]` of `count` (transactional mode, shared by bucket).
    ByBucket { count: u16, units: Vec<u16> },
}

/// The marker's router: [`Routing`] plus the buckets of keys seen this term.
#[derive(Debug)]
pub(crate) struct Router {
    routing: Routing,
    shard_of: HashMap<u16, usize>,
    known: HashMap<Option<Vec<u8>>, u16>,
}

impl Router {
    pub fn new(routing: Routing) -> Self {
        let shard_of = match &routing {
            Routing::ByKey => HashMap::new(),
            Routing::ByBucket { units, .. } => {
                units.iter().enumerate().map(|(i, b)| (*b, i)).collect()
            }
        };
        Router {
            routing,
            shard_of,
            known: HashMap::new(),
        }
    }

    /// Learns the buckets of `records`' keys not known yet (nothing to do when routing by key).
    pub async fn prepare<'a>(
        &mut self,
        store: &dyn OutboxStore,
        records: impl Iterator<Item = &'a OutboxRecord>,
    ) -> Result<()> {
        let Routing::ByBucket { count, .. } = &self.routing else {
            return Ok(());
        };
        let mut unknown: Vec<Option<Vec<u8>>> = Vec::new();
        for r in records {
            if !self.known.contains_key(&r.key) && !unknown.contains(&r.key) {
                unknown.push(r.key.clone());
            }
        }
        if unknown.is_empty() {
            return Ok(());
        }
        let buckets = store.buckets_of(&unknown, *count).await?;
        if buckets.len() != unknown.len() {
            return Err(crate::Error::StoreAnswer {
                what: format!(
                    "the store gave {} buckets for {} keys",
                    buckets.len(),
                    unknown.len()
                ),
            });
        }
        if self.known.len() + unknown.len() > KNOWN_KEYS_MAX {
            self.known.clear();
        }
        self.known.extend(unknown.into_iter().zip(buckets));
        Ok(())
    }

    /// The shard of `record` among `shards`; `None` when its bucket is not one of this term's
    /// units (never, for a record of the term's scope, once [`prepare`](Self::prepare)d).
    pub fn shard(&self, record: &OutboxRecord, shards: usize) -> Option<usize> {
        match &self.routing {
            Routing::ByKey => Some(shard_for(record.key.as_deref(), shards)),
            Routing::ByBucket { .. } => self
                .known
                .get(&record.key)
                .and_then(|b| self.shard_of.get(b))
                .copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn record(key: &str) -> OutboxRecord {
        OutboxRecord::keyed(1, key)
    }

    #[tokio::test]
    async fn a_record_goes_to_the_shard_of_its_bucket_as_the_store_computes_it() {
        let store = MemoryStore::new();
        let keys: Vec<String> = (0..200).map(|i| format!("key-{i}")).collect();
        let records: Vec<OutboxRecord> = keys.iter().map(|k| record(k)).collect();
        let owned = vec![1u16, 3, 6];
        let mut router = Router::new(Routing::ByBucket {
            count: 8,
            units: owned.clone(),
        });
        router.prepare(&store, records.iter()).await.unwrap();
        let buckets = store
            .buckets_of(
                &keys
                    .iter()
                    .map(|k| Some(k.as_bytes().to_vec()))
                    .collect::<Vec<_>>(),
                8,
            )
            .await
            .unwrap();
        let mut routed = 0;
        for (r, b) in records.iter().zip(buckets) {
            let expected = owned.iter().position(|o| *o == b);
            assert_eq!(router.shard(r, owned.len()), expected, "{:?}", r.key);
            routed += usize::from(expected.is_some());
        }
        assert!(routed > 0 && routed < records.len(), "{routed}");
    }

    #[tokio::test]
    async fn an_unprepared_key_has_no_shard_when_routing_by_bucket_and_one_by_key() {
        let r = record("k");
        let by_bucket = Router::new(Routing::ByBucket {
            count: 4,
            units: vec![0, 1, 2, 3],
        });
        assert_eq!(by_bucket.shard(&r, 4), None);
        let by_key = Router::new(Routing::ByKey);
        assert_eq!(by_key.shard(&r, 4), Some(shard_for(Some(b"k"), 4)));
    }
}
