//! What the purger gathers in one wake-up, and how it is split back to the shards.
//!
//! The purger turns a burst of acknowledgements into one `DELETE ... = ANY($1)`, then tells each
//! shard which of its rows are gone. That gathering runs once per record on the purger's single
//! task, so it is kept apart from the SQL to be measured on its own (the `hotpaths` crate); it is
//! public for that reason only.

/// A row to quarantine, with the shard waiting for it (if any) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    pub shard: Option<usize>,
    pub id: i64,
    pub reason: String,
}

/// Messages gathered in one purger wake-up.
#[derive(Debug, Default)]
pub struct PurgeBatch {
    /// Acknowledged rows, as (shard, id).
    acks: Vec<(usize, i64)>,
    resets: Vec<i64>,
    quarantines: Vec<Quarantine>,
}

impl PurgeBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Kafka acknowledged row `id` of `shard`.
    pub fn ack(&mut self, shard: usize, id: i64) {
        self.acks.push((shard, id));
    }

    /// These rows are to be reset for re-marking.
    pub fn reset(&mut self, ids: Vec<i64>) {
        if self.resets.is_empty() {
            self.resets = ids;
        } else {
            self.resets.extend(ids);
        }
    }

    pub fn quarantine(&mut self, q: Quarantine) {
        self.quarantines.push(q);
    }

    /// Whether the rows gathered reach `max` (the statement size limit).
    pub fn is_full(&self, max: usize) -> bool {
        self.acks.len() + self.resets.len() >= max
    }

    pub fn resets(&self) -> &[i64] {
        &self.resets
    }

    pub fn take_quarantines(&mut self) -> Vec<Quarantine> {
        std::mem::take(&mut self.quarantines)
    }

    /// Ids of the acknowledged rows, for the purge statement.
    pub fn ack_ids(&self) -> Vec<i64> {
        self.acks.iter().map(|(_, id)| *id).collect()
    }

    pub fn has_acks(&self) -> bool {
        !self.acks.is_empty()
    }

    /// The acknowledged ids grouped by shard, in arrival order within a shard; shards without
    /// rows are left out. Every ack's shard must be below `shards`.
    pub fn acks_by_shard(&mut self, shards: usize) -> Vec<(usize, Vec<i64>)> {
        // Indexed by shard rather than hashed: shards are few and dense.
        let mut per_shard: Vec<Vec<i64>> = vec![Vec::new(); shards];
        for (shard, id) in self.acks.drain(..) {
            per_shard[shard].push(id);
        }
        per_shard
            .into_iter()
            .enumerate()
            .filter(|(_, ids)| !ids.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_are_purged_together_and_returned_to_their_shards_in_order() {
        let mut b = PurgeBatch::new();
        for (shard, id) in [(0, 1), (2, 2), (0, 3), (1, 4), (2, 5)] {
            b.ack(shard, id);
        }
        b.reset(vec![9]);
        assert!(b.is_full(6) && !b.is_full(7));
        assert_eq!(b.ack_ids(), vec![1, 2, 3, 4, 5]);
        let groups = b.acks_by_shard(4);
        assert_eq!(
            groups,
            vec![(0, vec![1, 3]), (1, vec![4]), (2, vec![2, 5])],
            "shard 3 had nothing"
        );
        assert!(!b.has_acks());
        assert_eq!(b.resets(), &[9]);
    }

    #[test]
    fn resets_accumulate() {
        let mut b = PurgeBatch::new();
        b.reset(vec![1, 2]);
        b.reset(vec![3]);
        assert_eq!(b.resets(), &[1, 2, 3]);
        b.quarantine(Quarantine {
            shard: None,
            id: 4,
            reason: "bad".into(),
        });
        assert_eq!(b.take_quarantines().len(), 1);
        assert!(b.take_quarantines().is_empty());
    }
}
