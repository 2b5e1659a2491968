//! Key routing: FNV-1a 32-bit, as goharvest, so a key always lands on the same producer shard
//! (its per-key order then only has to hold within one shard and one producer).

pub use crate::hash::fnv1a32;

/// The shard for a key (`None` keys all go to shard 0).
pub fn shard_for(key: Option<&[u8]>, shards: usize) -> usize {
    match key {
        Some(k) => fnv1a32(k) as usize % shards.max(1),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_is_stable_and_spread() {
        let mut counts = [0usize; 8];
        for i in 0..8000 {
            let k = format!("key-{i}");
            let s = shard_for(Some(k.as_bytes()), 8);
            assert_eq!(s, shard_for(Some(k.as_bytes()), 8));
            counts[s] += 1;
        }
        assert!(counts.iter().all(|c| *c > 700), "{counts:?}");
        assert_eq!(shard_for(None, 8), 0);
    }
}
