//! The rows a shard has finished, remembered while a mark that read them may still be on its
//! way.
//!
//! Under one leader generation a mark never returns a row the shards hold: MP/R marks only rows
//! not marked by the generation, and snapshot mode reads each row once per generation (a reset
//! row comes back, but the shard dropped it when it reset it, so it was never finished). A
//! forced re-mark starts a fresh generation whose marks read every row still in the table, held
//! ones included. A held row's purge can then commit after such a mark read the row and before
//! the mark's batch reaches the shard, and the purger's word that the row is gone can arrive
//! first: the shard forgets the row, sends its key's next record, and the copy then looks new.
//! Admitted, it would be published again after newer records of its key (a rewind).
//!
//! A mark that begins after a row was deleted cannot return it, so a finished row needs
//! remembering only until the marks that began before its finish was seen have delivered their
//! batches. Marks are counted as they begin ([`MarksBegun`]) and each batch carries its mark's
//! number; a finish is stamped with the count when the shard sees it, and forgotten once a
//! batch of a later mark arrives: the marker hands one mark's batches to the shards before it
//! begins the next, and a shard's channel keeps their order. So the set holds at most what the
//! shard held when its last batch's mark began plus that batch, and nothing at all in a term
//! that never re-marked.

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Mark statements begun in a term, counted by the marker just before each begins; the
/// count is that mark's number.
pub type MarksBegun = Arc<AtomicU64>;

/// Finished rows a mark on its way may still bring back (see the module docs).
///
/// `S` hashes row ids: the default is randomly seeded; the instruction-count gate uses a fixed
/// seed so that its counts repeat exactly.
#[derive(Debug, Default)]
pub struct Gone<S = RandomState> {
    /// (marks begun when the finish was seen, row id), in the order seen: stamps never fall.
    stamped: VecDeque<(u64, i64)>,
    ids: HashSet<i64, S>,
}

impl<S: BuildHasher> Gone<S> {
    /// Row `id` finished when `begun` marks had begun.
    pub fn finished(&mut self, id: i64, begun: u64) {
        if self.ids.insert(id) {
            self.stamped.push_back((begun, id));
        }
    }

    /// A batch of mark number `mark` arrived: every mark before it has delivered its batches
    /// here, and later ones began after the finishes stamped below `mark`.
    pub fn batch_of(&mut self, mark: u64) {
        while let Some(&(begun, id)) = self.stamped.front() {
            if begun >= mark {
                break;
            }
            self.stamped.pop_front();
            self.ids.remove(&id);
        }
    }

    /// Whether row `id` is finished and may still come back from a mark on its way.
    pub fn contains(&self, id: i64) -> bool {
        !self.ids.is_empty() && self.ids.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finish_is_remembered_until_a_later_marks_batch_arrives() {
        let mut gone: Gone = Gone::default();
        // Marks 1 and 2 began; rows 7 and 8 finish; mark 3 begins; row 9 finishes.
        gone.finished(7, 2);
        gone.finished(8, 2);
        gone.finished(9, 3);
        gone.batch_of(2);
        assert!(
            gone.contains(7) && gone.contains(8),
            "mark 2 read them before"
        );
        gone.batch_of(3);
        assert!(!gone.contains(7) && !gone.contains(8), "mark 3 began after");
        assert!(gone.contains(9), "mark 3 began before 9 finished");
        assert_eq!(gone.ids.len(), 1);
        gone.batch_of(4);
        assert_eq!(gone.ids.len(), 0);
        assert!(!gone.contains(9));
    }

    #[test]
    fn a_row_is_remembered_once() {
        let mut gone: Gone = Gone::default();
        gone.finished(1, 5);
        gone.finished(1, 6);
        gone.batch_of(6);
        assert_eq!(gone.ids.len(), 0);
        assert!(gone.stamped.is_empty());
    }
}
