//! A shard's transaction bookkeeping in transactional mode (`publish.mode = "transactional"`).
//!
//! A shard has at most one transaction open, and commits it once every record of it is
//! acknowledged and waiting gains nothing: the shard has nothing more to send (group commit:
//! records that arrive while a transaction awaits its acknowledgements join it, so
//! transactions grow with the load by themselves), or the transaction holds
//! `publish.max_records`, has been open for `publish.linger`, the shard drains, or the
//! pipeline is nearly out of permits. Only then are its rows purged. A row in an open
//! transaction holds its permit until then, so lingering for more records would cap the rate
//! at `max_in_flight_records` per linger (measured: committing only when full, lingered or
//! starved drained at 0.6-0.75 of the idempotent rate; committing when idle, 0.8-0.9; one hot
//! key's p99 fell from ~400 ms to ~120 ms). A record that fails dooms the whole transaction:
//! it is aborted and the rows of every key it touched are reset, so no later record of a key can
//! become visible without an earlier one (a read_committed consumer sees all of a transaction or
//! none of it). Each transaction has a number that tags its sends, so a report that arrives for
//! an aborted transaction is told apart from one for the same row sent again later.
//!
//! An aborted transaction does not say which row was at fault: librdkafka fails a whole produce
//! batch, purges the rest of the transaction, and may only report the cause at commit. So the
//! rows of an aborted transaction are *isolated*: each is sent again in a transaction of its
//! own, where a failure can only be that row's, and is counted against it (a row that can never
//! be written is quarantined, as in idempotent mode, instead of aborting every transaction it
//! joins). A row leaves isolation when its transaction commits.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

/// What the shards need of `publish.mode = "transactional"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transactions {
    pub max_records: usize,
    pub linger: Duration,
    /// Bound of one commit or abort call (the coordinator's round trip, plus, for a commit,
    /// the wait for the transaction's records).
    pub timeout: Duration,
}

/// The open transaction.
#[derive(Debug)]
pub struct Open {
    pub began: Instant,
    /// Rows sent in it, in send order.
    pub ids: Vec<i64>,
}

/// What the shard knows, beyond the transaction itself, when it asks whether to commit.
#[derive(Debug, Clone, Copy, Default)]
pub struct Occasion {
    /// The shard is draining: nothing more will join the transaction.
    pub draining: bool,
    /// The pipeline is nearly out of permits: the transaction's rows wait for commits to free
    /// them.
    pub starved: bool,
    /// The shard has sent everything it holds that may be sent: records that arrive later
    /// would only make this transaction's rows wait for them, while a commit now frees their
    /// keys' next records (natural batching: under load, records arrive while the commit's
    /// acknowledgements are awaited, and transactions grow by themselves).
    pub idle: bool,
}

/// One shard's transactions.
///
/// `S` hashes row ids: the default is randomly seeded; the instruction-count gate uses a fixed
/// seed so that its counts repeat exactly.
#[derive(Debug)]
pub struct TxnState<S = RandomState> {
    pub settings: Transactions,
    /// Number of the open (or last) transaction; bumped on begin and on abort.
    seq: u64,
    open: Option<Open>,
    /// Rows of aborted transactions, sent one per transaction until committed.
    isolated: HashSet<i64, S>,
}

impl<S: BuildHasher + Default> TxnState<S> {
    pub fn new(settings: Transactions) -> Self {
        TxnState {
            settings,
            seq: 0,
            open: None,
            isolated: HashSet::default(),
        }
    }

    /// The tag of sends and reports that belong to the open (or last committed) transaction.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether row `id` may join a transaction now: none open, or the open one has room (an
    /// isolated row goes alone).
    pub fn has_room(&self, id: i64) -> bool {
        let Some(o) = self.open.as_ref() else {
            return true;
        };
        if o.ids.is_empty() {
            return true;
        }
        !self.isolated.contains(&id)
            && !self.isolated.contains(&o.ids[0])
            && o.ids.len() < self.settings.max_records
    }

    /// The row of the open transaction when it is an isolated row alone, whose failure is its
    /// own.
    pub fn alone(&self) -> Option<i64> {
        let o = self.open.as_ref()?;
        match o.ids.as_slice() {
            [id] if self.isolated.contains(id) => Some(*id),
            _ => None,
        }
    }

    /// Rows of an aborted transaction: each goes alone from now on.
    pub fn isolate(&mut self, ids: impl IntoIterator<Item = i64>) {
        self.isolated.extend(ids);
    }

    /// A row left the pipeline's hands for good (committed, quarantined): no longer isolated.
    pub fn release(&mut self, id: i64) {
        if !self.isolated.is_empty() {
            self.isolated.remove(&id);
        }
    }

    /// Whether a transaction must be begun before the next send.
    pub fn needs_begin(&self) -> bool {
        self.open.is_none()
    }

    /// A transaction was begun.
    pub fn began(&mut self, now: Instant) {
        self.seq += 1;
        self.open = Some(Open {
            began: now,
            ids: Vec::new(),
        });
    }

    /// A row was sent in the open transaction.
    pub fn sent(&mut self, id: i64) {
        if let Some(o) = self.open.as_mut() {
            o.ids.push(id);
        }
    }

    /// Whether the open transaction should commit now: full, open for `linger`, or the
    /// `occasion` says waiting gains nothing (see [`Occasion`]).
    pub fn due(&self, now: Instant, occasion: Occasion) -> bool {
        self.open.as_ref().is_some_and(|o| {
            !o.ids.is_empty()
                && (occasion.draining
                    || occasion.starved
                    || occasion.idle
                    || o.ids.len() >= self.settings.max_records
                    || self.isolated.contains(&o.ids[0])
                    || now.duration_since(o.began) >= self.settings.linger)
        })
    }

    /// How long the open transaction has been open.
    pub fn age(&self, now: Instant) -> Duration {
        self.open
            .as_ref()
            .map_or(Duration::ZERO, |o| now.duration_since(o.began))
    }

    /// Takes the open transaction to commit it.
    pub fn take(&mut self) -> Option<Open> {
        self.open.take()
    }

    /// Puts a transaction taken for a commit back (the commit failed and it is to be aborted).
    pub fn restore(&mut self, open: Open) {
        self.open = Some(open);
    }

    /// Takes the open transaction to abort it; reports of its sends no longer match [`seq`].
    ///
    /// [`seq`]: TxnState::seq
    pub fn take_aborted(&mut self) -> Option<Open> {
        self.seq += 1;
        self.open.take()
    }

    /// Whether a transaction is open.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }
}

/// How the shard answers a failed transaction call (librdkafka's classification).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CallFailure {
    /// Call it again (a timeout, a coordinator moving).
    Retry,
    /// The transaction cannot commit: abort it and send its rows again.
    Abort,
    /// The producer is unusable (fenced by a newer instance of its id, or broken): the
    /// pipeline restarts with fresh producers.
    Fatal,
}

/// Classifies a failed `commit_transaction`/`abort_transaction`.
pub(crate) fn classify_call(error: &rdkafka::error::KafkaError) -> CallFailure {
    match error {
        // rdkafka's commit flushes first: a flush that timed out leaves the commit to resume.
        rdkafka::error::KafkaError::Flush(_) => CallFailure::Retry,
        rdkafka::error::KafkaError::Transaction(e) if e.is_fatal() => CallFailure::Fatal,
        rdkafka::error::KafkaError::Transaction(e) if e.txn_requires_abort() => CallFailure::Abort,
        rdkafka::error::KafkaError::Transaction(e) if e.is_retriable() => CallFailure::Retry,
        _ => CallFailure::Fatal,
    }
}

/// Whether a record's failure is librdkafka's own bookkeeping after its transaction failed
/// (purged from the queue or in flight, refused in an aborting transaction): it says nothing
/// about the record.
pub(crate) fn is_collateral(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode as C;
    matches!(
        error.rdkafka_error_code(),
        Some(C::PurgeQueue | C::PurgeInflight | C::State)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(max_records: usize, linger_ms: u64) -> TxnState {
        TxnState::new(Transactions {
            max_records,
            linger: Duration::from_millis(linger_ms),
            timeout: Duration::from_secs(5),
        })
    }

    fn draining() -> Occasion {
        Occasion {
            draining: true,
            ..Occasion::default()
        }
    }

    #[test]
    fn a_transaction_is_due_when_full_lingered_idle_or_draining() {
        let mut t = state(3, 100);
        let now = Instant::now();
        assert!(t.needs_begin() && t.has_room(1));
        assert!(!t.due(now, draining()), "nothing open");
        t.began(now);
        assert!(
            !t.due(now, draining()),
            "an empty transaction has nothing to commit"
        );
        t.sent(1);
        assert!(!t.due(now, Occasion::default()));
        assert!(t.due(now, draining()), "draining");
        assert!(
            t.due(
                now,
                Occasion {
                    idle: true,
                    ..Occasion::default()
                }
            ),
            "nothing more to send"
        );
        assert!(
            t.due(now + Duration::from_millis(100), Occasion::default()),
            "lingered"
        );
        assert!(
            t.due(
                now,
                Occasion {
                    starved: true,
                    ..Occasion::default()
                }
            ),
            "the pipeline is starved of permits"
        );
        t.sent(2);
        t.sent(3);
        assert!(!t.has_room(4));
        assert!(t.due(now, Occasion::default()), "full");
        let open = t.take().unwrap();
        assert_eq!(open.ids, vec![1, 2, 3]);
        assert!(t.needs_begin() && t.has_room(4));
    }

    #[test]
    fn rows_of_an_aborted_transaction_go_alone_until_committed() {
        let mut t = state(100, 100);
        let now = Instant::now();
        t.began(now);
        t.sent(1);
        t.sent(2);
        assert_eq!(
            t.alone(),
            None,
            "two rows: a failure is nobody's in particular"
        );
        let open = t.take_aborted().unwrap();
        t.isolate(open.ids);
        t.began(now);
        assert!(t.has_room(2), "an empty transaction takes an isolated row");
        t.sent(2);
        assert_eq!(t.alone(), Some(2));
        assert!(!t.has_room(3), "nothing joins an isolated row");
        assert!(
            t.due(now, Occasion::default()),
            "an isolated row commits at once"
        );
        t.take();
        t.release(2);
        t.began(now);
        t.sent(3);
        assert!(!t.has_room(1), "an isolated row does not join others");
        assert!(t.has_room(4));
        assert_eq!(t.alone(), None);
    }

    #[test]
    fn an_abort_retags_so_old_reports_no_longer_match() {
        let mut t = state(10, 100);
        t.began(Instant::now());
        let first = t.seq();
        t.sent(7);
        let open = t.take_aborted().unwrap();
        assert_eq!(open.ids, vec![7]);
        assert_ne!(t.seq(), first);
        t.began(Instant::now());
        assert_ne!(t.seq(), first, "the next transaction has a new tag too");
        assert!(t.is_open());
    }
}
