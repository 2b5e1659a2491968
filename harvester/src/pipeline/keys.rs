//! A shard's per-key ordering state, kept apart from its I/O.
//!
//! Per-key causal order rests on this structure alone: each key's rows wait in a queue sorted by
//! id, only the first `window` of them may be in flight (sent, or acknowledged and not yet
//! purged; `limits.max_in_flight_per_key`, 1 by default: only the front), and a key whose rows
//! were reset stays blocked until those rows come back from the marker. Holding it
//! free of channels, producers and the clock makes it
//! testable on its own and measurable by the micro-benchmarks (the `hotpaths` crate), which is why it
//! is public; embedding the harvester never needs it.
//!
//! It is owned by one shard task, so nothing here locks: keys are partitioned across shards by
//! hash, and the only state shared between shards is the permit semaphore and the counters.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use crate::outbox::OutboxRecord;

/// A record key (`None` for keyless records, which all share one queue).
pub type Key = Option<Vec<u8>>;

/// Where a held record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Waiting behind the key's front, or for the key to unblock.
    Queued,
    /// Handed to the producer; a report is due.
    Sent,
    /// Acknowledged (or bound for quarantine); waiting for the purger.
    Purging,
}

/// A record the shard holds.
#[derive(Debug)]
pub struct Held {
    pub record: OutboxRecord,
    pub state: State,
    /// When the shard took the record from a mark (for the marked -> sent stage).
    pub marked_at: Instant,
    /// When the record was handed to the producer (for the publish latency).
    pub sent_at: Option<Instant>,
    /// The term's generation (leader id) whose mark brought the record, as its place in the
    /// term's list (`TermContext::generations`; its span's `harvester.leader_id`): 0, the
    /// term's first, when admitted without one.
    pub leader: u32,
}

/// A key whose rows were reset: nothing of it is sent until these ids are marked again.
#[derive(Debug)]
struct Blocked {
    awaiting: HashSet<i64>,
    since: Instant,
}

/// What [`KeyQueues::admit`] did with a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Admitted {
    /// The row is already held (re-marked under a fresh leader id): drop this copy.
    Duplicate,
    /// Queued under `key`; `new_key` when the key had nothing held before.
    Queued { key: Key, new_key: bool },
}

/// What [`KeyQueues::reset`] took from a key.
#[derive(Debug, PartialEq, Eq)]
pub struct ResetRows {
    /// Every row dropped (queued or sent), in queue order: the reset statement's ids.
    pub ids: Vec<i64>,
    /// Of those, the rows that were sent (their reports will be ignored).
    pub sent: Vec<i64>,
    /// The key holds nothing now (no acknowledged row left waiting for its purge).
    pub emptied: bool,
}

/// What [`KeyQueues::finish`] did with a row the purger is done with.
#[derive(Debug, PartialEq, Eq)]
pub enum Finished {
    /// Not held (already reset or dropped).
    NotHeld,
    /// The key has nothing left.
    KeyEmpty,
    /// The key has more rows: its new front may go.
    Next(Key),
}

/// Per-key id-ordered queues of one shard, with the id index and the blocked keys.
///
/// `S` hashes keys and ids: the default, randomly seeded, resists keys chosen to collide; the
/// instruction-count gate uses a fixed seed so that its counts repeat exactly.
#[derive(Debug)]
pub struct KeyQueues<S = RandomState> {
    queues: HashMap<Key, VecDeque<Held>, S>,
    /// Row id -> key, for every row held.
    index: HashMap<i64, Key, S>,
    blocked: HashMap<Key, Blocked, S>,
    /// Rows of one key that may be in flight at once (at least 1).
    window: usize,
}

impl<S: BuildHasher + Default> Default for KeyQueues<S> {
    fn default() -> Self {
        KeyQueues {
            queues: HashMap::default(),
            index: HashMap::default(),
            blocked: HashMap::default(),
            window: 1,
        }
    }
}

impl KeyQueues {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<S: BuildHasher + Default> KeyQueues<S> {
    /// Lets up to `window` rows of a key be in flight at once (at least 1).
    pub fn with_window(mut self, window: usize) -> Self {
        self.window = window.max(1);
        self
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Keys with at least one row held.
    pub fn keys(&self) -> usize {
        self.queues.len()
    }

    /// The keys with rows held (only those in `among`, when given). Off the per-record path:
    /// asked when buckets are handed over.
    pub fn held_keys(&self, among: Option<&HashSet<Key>>) -> Vec<Key> {
        self.queues
            .keys()
            .filter(|k| among.is_none_or(|among| among.contains(*k)))
            .cloned()
            .collect()
    }

    pub fn contains(&self, id: i64) -> bool {
        self.index.contains_key(&id)
    }

    pub fn key_of(&self, id: i64) -> Option<&Key> {
        self.index.get(&id)
    }

    /// Queues a marked record in id order within its key, marked now.
    pub fn admit(&mut self, record: OutboxRecord) -> Admitted {
        self.admit_at(record, Instant::now())
    }

    /// Queues a marked record in id order within its key, marked at `now` (a batch reads the
    /// clock once).
    pub fn admit_at(&mut self, record: OutboxRecord, now: Instant) -> Admitted {
        self.admit_marked(record, now, 0)
    }

    /// Queues a record marked at `now` under the term's `leader`-th generation, in id order
    /// within its key.
    pub fn admit_marked(&mut self, record: OutboxRecord, now: Instant, leader: u32) -> Admitted {
        if self.index.contains_key(&record.id) {
            return Admitted::Duplicate;
        }
        let key = record.key.clone();
        self.index.insert(record.id, key.clone());
        if !self.blocked.is_empty() {
            if let Some(b) = self.blocked.get_mut(&key) {
                b.awaiting.remove(&record.id);
            }
        }
        let mut new_key = false;
        let queue = self.queues.entry(key.clone()).or_insert_with(|| {
            new_key = true;
            VecDeque::new()
        });
        // Rows coming back after a reset sort before later rows of the key that arrived while
        // it was blocked. Usually the row is the newest, so check the back first and only
        // search otherwise.
        let at = match queue.back() {
            Some(last) if last.record.id > record.id => queue
                .iter()
                .position(|h| h.state == State::Queued && h.record.id > record.id)
                .unwrap_or(queue.len()),
            _ => queue.len(),
        };
        queue.insert(
            at,
            Held {
                record,
                state: State::Queued,
                marked_at: now,
                sent_at: None,
                leader,
            },
        );
        Admitted::Queued { key, new_key }
    }

    /// The key's next row to send, if one may go now: the first queued row among the key's first
    /// `window` rows (with a window of 1, the front), and the key not blocked (a block whose
    /// rows have all come back is lifted here). Rows are sent in queue order, so every row before
    /// it is in flight.
    pub fn sendable(&mut self, key: &Key) -> Option<&mut Held> {
        if !self.blocked.is_empty() {
            if let Some(b) = self.blocked.get(key) {
                if !b.awaiting.is_empty() {
                    return None;
                }
                self.blocked.remove(key);
            }
        }
        let queue = self.queues.get_mut(key)?;
        if self.window == 1 {
            return queue
                .front_mut()
                .filter(|front| front.state == State::Queued);
        }
        // The producer keeps order within one partition only: a row bound elsewhere (another
        // topic, an explicit partition) waits until the rows before it are finished.
        let (topic, partition) = {
            let front = queue.front()?;
            (front.record.topic.clone(), front.record.partition)
        };
        queue
            .iter_mut()
            .take(self.window)
            .find(|h| h.state == State::Queued)
            .filter(|h| h.record.topic == topic && h.record.partition == partition)
    }

    /// Whether a row of `id`'s key after it is in flight (sent, or acknowledged and not purged).
    pub fn later_in_flight(&self, id: i64) -> bool {
        let Some(queue) = self.index.get(&id).and_then(|key| self.queues.get(key)) else {
            return false;
        };
        queue
            .iter()
            .any(|h| h.record.id > id && h.state != State::Queued)
    }

    /// The topic of a held record, any: names the resource of a refusal no record carries
    /// (an idempotent producer refused before it sent anything).
    pub fn a_topic(&self) -> Option<&str> {
        self.queues
            .values()
            .find_map(VecDeque::front)
            .map(|h| h.record.topic.as_str())
    }

    /// The held record with this id.
    pub fn held_mut(&mut self, id: i64) -> Option<&mut Held> {
        let key = self.index.get(&id)?;
        self.queues
            .get_mut(key)?
            .iter_mut()
            .find(|h| h.record.id == id)
    }

    /// The transaction that carried `id` committed: a sent record is acknowledged and waits for
    /// the purger. `None` when the record is not held or was not in flight (reset since, or
    /// acknowledged already), so nothing is purged twice.
    pub fn commit_sent(&mut self, id: i64) -> Option<&Held> {
        let h = self.held_mut(id)?;
        if h.state != State::Sent {
            return None;
        }
        h.state = State::Purging;
        Some(h)
    }

    /// Drops the key's rows that are not acknowledged (queued or sent) and blocks the key until
    /// they are admitted again; returns what went (for the reset statement), or `None` when the
    /// key holds nothing to reset. Acknowledged rows stay: the purger deletes them and reports
    /// them finished, and they will not come back from the marker (with a window of one record
    /// per key there are none behind a failure).
    pub fn reset(&mut self, key: &Key) -> Option<ResetRows> {
        let queue = self.queues.get_mut(key)?;
        let mut ids = Vec::new();
        let mut sent = Vec::new();
        queue.retain(|h| match h.state {
            State::Purging => true,
            State::Sent => {
                sent.push(h.record.id);
                ids.push(h.record.id);
                false
            }
            State::Queued => {
                ids.push(h.record.id);
                false
            }
        });
        let emptied = queue.is_empty();
        if emptied {
            self.queues.remove(key);
        }
        if ids.is_empty() {
            return None;
        }
        for id in &ids {
            self.index.remove(id);
        }
        let blocked = self.blocked.entry(key.clone()).or_insert_with(|| Blocked {
            awaiting: HashSet::new(),
            since: Instant::now(),
        });
        blocked.awaiting.extend(ids.iter().copied());
        blocked.since = Instant::now();
        Some(ResetRows { ids, sent, emptied })
    }

    /// Forgets a row the purger is done with (deleted, quarantined or no longer ours). Every
    /// outcome but [`Finished::NotHeld`] means a row left the pipeline.
    pub fn finish(&mut self, id: i64) -> Finished {
        let Some(key) = self.index.remove(&id) else {
            return Finished::NotHeld;
        };
        let Some(queue) = self.queues.get_mut(&key) else {
            // Unreachable (index and queues change together); the row still leaves.
            debug_assert!(false, "row {id} indexed without a queue");
            return Finished::KeyEmpty;
        };
        // The front, nearly always (a key's rows finish in order); otherwise a quarantined or
        // acknowledged row further back.
        if queue.front().is_some_and(|h| h.record.id == id) {
            queue.pop_front();
        } else {
            queue.retain(|h| h.record.id != id);
        }
        if queue.is_empty() {
            self.queues.remove(&key);
            Finished::KeyEmpty
        } else {
            Finished::Next(key)
        }
    }

    /// Unblocks keys whose reset rows have not come back within `patience` and returns them.
    /// The caller must not send their later rows then (the reset rows may still come back,
    /// after them): it restarts the pipeline.
    pub fn unblock_stale(&mut self, patience: Duration) -> Vec<Key> {
        let stale: Vec<Key> = self
            .blocked
            .iter()
            .filter(|(_, b)| !b.awaiting.is_empty() && b.since.elapsed() > patience)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &stale {
            self.blocked.remove(key);
        }
        stale
    }

    /// Drops every row never sent (on drain they stay marked for the next leader); returns how
    /// many rows were dropped and how many keys were left with nothing.
    pub fn drop_queued(&mut self) -> (usize, usize) {
        let mut dropped = Vec::new();
        for queue in self.queues.values_mut() {
            queue.retain(|h| {
                let keep = h.state != State::Queued;
                if !keep {
                    dropped.push(h.record.id);
                }
                keep
            });
        }
        let before = self.queues.len();
        self.queues.retain(|_, q| !q.is_empty());
        for id in &dropped {
            self.index.remove(id);
        }
        (dropped.len(), before - self.queues.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: i64, key: &str) -> OutboxRecord {
        OutboxRecord::keyed(id, key)
    }

    fn k(s: &str) -> Key {
        Some(s.as_bytes().to_vec())
    }

    fn send(q: &mut KeyQueues, key: &str) -> Option<i64> {
        let h = q.sendable(&k(key))?;
        h.state = State::Sent;
        Some(h.record.id)
    }

    #[test]
    fn only_the_front_of_a_key_goes_and_the_next_after_finish() {
        let mut q = KeyQueues::new();
        assert_eq!(
            q.admit(rec(1, "a")),
            Admitted::Queued {
                key: k("a"),
                new_key: true
            }
        );
        assert_eq!(
            q.admit(rec(2, "a")),
            Admitted::Queued {
                key: k("a"),
                new_key: false
            }
        );
        q.admit(rec(3, "b"));
        assert_eq!(send(&mut q, "a"), Some(1));
        assert_eq!(send(&mut q, "a"), None, "front already sent");
        assert_eq!(send(&mut q, "b"), Some(3), "other keys are not blocked");
        q.held_mut(1).unwrap().state = State::Purging;
        assert_eq!(q.finish(1), Finished::Next(k("a")));
        assert_eq!(send(&mut q, "a"), Some(2));
        assert_eq!(q.finish(2), Finished::KeyEmpty);
        assert_eq!(q.finish(2), Finished::NotHeld);
        assert_eq!((q.len(), q.keys()), (1, 1));
    }

    #[test]
    fn a_commit_acknowledges_only_the_sent_records_and_each_once() {
        let mut q = KeyQueues::new();
        q.admit(rec(1, "a"));
        q.admit(rec(2, "a"));
        q.admit(rec(3, "b"));
        assert_eq!(send(&mut q, "a"), Some(1));
        assert_eq!(q.commit_sent(2).map(|h| h.record.id), None, "2 is queued");
        assert!(q.commit_sent(9).is_none(), "9 is not held");
        assert_eq!(q.commit_sent(1).map(|h| h.state), Some(State::Purging));
        assert_eq!(
            q.commit_sent(1).map(|h| h.record.id),
            None,
            "1 committed already"
        );
        assert_eq!(q.held_mut(2).map(|h| h.state), Some(State::Queued));
        assert_eq!(q.held_mut(3).map(|h| h.state), Some(State::Queued));
    }

    #[test]
    fn a_window_lets_that_many_rows_of_a_key_go_in_order() {
        let mut q = KeyQueues::new().with_window(3);
        for id in 1..=5 {
            q.admit(rec(id, "a"));
        }
        assert_eq!(send(&mut q, "a"), Some(1));
        assert_eq!(send(&mut q, "a"), Some(2));
        assert_eq!(send(&mut q, "a"), Some(3));
        assert_eq!(send(&mut q, "a"), None, "three in flight");
        // Acknowledged but not purged still counts: a crash re-sends at most the window.
        q.held_mut(1).unwrap().state = State::Purging;
        assert_eq!(send(&mut q, "a"), None, "1 acknowledged, not yet purged");
        assert_eq!(q.finish(1), Finished::Next(k("a")));
        assert_eq!(send(&mut q, "a"), Some(4));
        assert_eq!(send(&mut q, "a"), None);
        // A reset takes the whole key, in flight or not, and blocks it until its rows return.
        q.held_mut(2).unwrap().state = State::Purging;
        assert!(q.later_in_flight(3), "4 is sent after 3");
        assert!(!q.later_in_flight(4));
        let reset = q.reset(&k("a")).unwrap();
        assert_eq!(
            reset.ids,
            vec![3, 4, 5],
            "the acknowledged row 2 stays for its purge"
        );
        assert_eq!(reset.sent, vec![3, 4]);
        assert!(!reset.emptied);
        assert_eq!(send(&mut q, "a"), None, "blocked until 3, 4 and 5 return");
        assert_eq!(q.finish(2), Finished::KeyEmpty);
        for id in [5, 3, 4] {
            q.admit(rec(id, "a"));
        }
        assert_eq!(send(&mut q, "a"), Some(3), "returned rows go in id order");
        assert_eq!(send(&mut q, "a"), Some(4));
        assert_eq!(send(&mut q, "a"), Some(5));
        assert_eq!(send(&mut q, "a"), None);
    }

    #[test]
    fn a_window_stops_at_a_row_bound_for_another_partition() {
        let mut q = KeyQueues::new().with_window(4);
        q.admit(rec(1, "a"));
        let mut elsewhere = rec(2, "a");
        elsewhere.partition = Some(3);
        q.admit(elsewhere);
        q.admit(rec(3, "a"));
        assert_eq!(send(&mut q, "a"), Some(1));
        assert_eq!(
            send(&mut q, "a"),
            None,
            "2 goes to another partition: it waits for 1"
        );
        q.finish(1);
        assert_eq!(send(&mut q, "a"), Some(2));
        assert_eq!(
            send(&mut q, "a"),
            None,
            "3 goes back to the key's partition: it waits"
        );
        q.finish(2);
        assert_eq!(send(&mut q, "a"), Some(3));
    }

    #[test]
    fn a_row_behind_the_front_can_finish_too() {
        let mut q = KeyQueues::new();
        for id in 1..=3 {
            q.admit(rec(id, "a"));
        }
        assert_eq!(q.finish(2), Finished::Next(k("a")));
        assert_eq!(send(&mut q, "a"), Some(1));
        q.finish(1);
        assert_eq!(send(&mut q, "a"), Some(3));
        assert_eq!(q.finish(3), Finished::KeyEmpty);
        assert!(q.is_empty());
    }

    #[test]
    fn a_re_marked_row_is_a_duplicate() {
        let mut q = KeyQueues::new();
        q.admit(rec(1, "a"));
        assert_eq!(q.admit(rec(1, "a")), Admitted::Duplicate);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn a_reset_key_is_blocked_until_its_rows_return_and_they_go_first() {
        let mut q = KeyQueues::new();
        q.admit(rec(1, "a"));
        q.admit(rec(2, "a"));
        assert_eq!(send(&mut q, "a"), Some(1));
        let reset = q.reset(&k("a")).unwrap();
        assert_eq!(
            (reset.ids, reset.sent, reset.emptied),
            (vec![1, 2], vec![1], true)
        );
        assert!(q.is_empty());
        // A later row of the key arrives from an earlier mark before the reset rows return.
        q.admit(rec(5, "a"));
        assert_eq!(send(&mut q, "a"), None, "blocked while 1 and 2 are away");
        q.admit(rec(2, "a"));
        assert_eq!(send(&mut q, "a"), None, "still waiting for 1");
        q.admit(rec(1, "a"));
        assert_eq!(send(&mut q, "a"), Some(1), "reset rows sort before 5");
        q.finish(1);
        assert_eq!(send(&mut q, "a"), Some(2));
        q.finish(2);
        assert_eq!(send(&mut q, "a"), Some(5));
    }

    #[test]
    fn stale_blocks_are_lifted_and_reported() {
        let mut q = KeyQueues::new();
        q.admit(rec(1, "a"));
        q.reset(&k("a"));
        assert!(q.unblock_stale(Duration::from_secs(60)).is_empty());
        assert_eq!(q.unblock_stale(Duration::ZERO), vec![k("a")]);
        q.admit(rec(7, "a"));
        assert_eq!(send(&mut q, "a"), Some(7));
    }

    #[test]
    fn drop_queued_keeps_what_is_in_flight() {
        let mut q = KeyQueues::new();
        q.admit(rec(1, "a"));
        q.admit(rec(2, "a"));
        q.admit(rec(3, "b"));
        send(&mut q, "a");
        assert_eq!(q.drop_queued(), (2, 1));
        assert!(q.contains(1) && !q.contains(2) && !q.contains(3));
        assert_eq!(q.keys(), 1);
    }
}
