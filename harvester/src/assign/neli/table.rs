//! What this member knows about each partition it holds, and every change of ownership, in one
//! place behind one lock.
//!
//! Two threads change it (the group thread on rebalances, the pulse thread on heartbeats and
//! lapses) and callers of `owned()` read it. Each event is sent while the lock is held, so the
//! stream's order is the order the changes happened in: a partition's Revoked can never reach
//! the application after a later Acquired of the same partition.
//!
//! Per partition this is the exclusive elector's state machine (its `Inner`, one per partition),
//! with one addition: a new term waits until two own heartbeats sent a quiet period apart have
//! been read back. The first proves the reader is positioned on the log; every heartbeat another
//! holder appended after it (at least one per poll interval while it leads) is then read before
//! the second, so a holder that is still leading is seen even when the new owner's first
//! heartbeat overtook it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::config::Resolved;
use crate::assign::{Ack, AssignmentEvent, Buckets};
use crate::coordination::neli::heartbeat::Heartbeat;
use crate::election::{ElectorState, Term};

/// One held partition.
#[derive(Debug)]
struct Slot {
    /// The group generation it was assigned in (heartbeats carry it; see `Heartbeat::outranks`).
    generation: i32,
    /// The term being served, if its buckets are this member's (possibly lapsed: `last_seen`).
    leading: Option<Term>,
    /// The term served until an orderly revocation whose barrier is not yet released: its
    /// buckets are no longer owned, but heartbeats still say this member leads the partition.
    revoking: Option<Term>,
    /// The term heartbeats carry while not leading; becomes `leading`.
    pending: Term,
    /// When an own heartbeat for `leading` was last read back (or the term began).
    last_seen: Instant,
    /// Send time of the first own heartbeat for `pending` read back.
    first_read_ms: Option<u64>,
    /// When a heartbeat of another holder that outranks this member was last read.
    outranked: Option<Instant>,
    /// When another member's heartbeat saying it was leading this partition was last read.
    peer_led: Option<Instant>,
    /// When the group assigned it (for logs).
    assigned_at: Instant,
}

impl Slot {
    fn new(generation: i32) -> Self {
        Slot {
            generation,
            leading: None,
            revoking: None,
            pending: Term::new(),
            last_seen: Instant::now(),
            first_read_ms: None,
            outranked: None,
            peer_led: None,
            assigned_at: Instant::now(),
        }
    }

    fn live(&self, timeout: Duration) -> bool {
        self.leading.is_some() && self.last_seen.elapsed() < timeout
    }

    /// Stops leading; returns whether it was leading.
    fn stand_down(&mut self) -> bool {
        self.first_read_ms = None;
        if self.leading.take().is_some() {
            self.pending = Term::new();
            true
        } else {
            false
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Table {
    config: Resolved,
    lifecycle: ElectorState,
    slots: BTreeMap<i32, Slot>,
    events: Option<mpsc::UnboundedSender<AssignmentEvent>>,
}

impl Table {
    pub fn new(config: Resolved, events: mpsc::UnboundedSender<AssignmentEvent>) -> Self {
        Table {
            config,
            lifecycle: ElectorState::Live,
            slots: BTreeMap::new(),
            events: Some(events),
        }
    }

    fn timeout(&self) -> Duration {
        self.config.neli.heartbeat_timeout
    }

    fn name(&self) -> &str {
        &self.config.neli.name
    }

    fn emit(&self, event: AssignmentEvent) {
        tracing::info!(
            member = %self.config.neli.name,
            event = event.name(),
            buckets = ?event.buckets(),
            "assignment event"
        );
        if let Some(tx) = &self.events {
            let _ = tx.send(event);
        }
    }

    pub fn lifecycle(&self) -> ElectorState {
        self.lifecycle
    }

    /// Stops vouching for anything: `owned()` is empty from now on.
    pub fn closing(&mut self) {
        if self.lifecycle == ElectorState::Live {
            self.lifecycle = ElectorState::Closing;
        }
    }

    /// The buckets this member may act on now (deadline-checked).
    pub fn owned(&self) -> Buckets {
        if self.lifecycle != ElectorState::Live {
            return Buckets::new();
        }
        let timeout = self.timeout();
        self.slots
            .iter()
            .filter(|(_, slot)| slot.live(timeout))
            .flat_map(|(p, _)| self.config.buckets_of(*p))
            .collect()
    }

    /// Whether this member may act on `bucket` now.
    pub fn owns(&self, bucket: u16) -> bool {
        let p = i32::from(bucket % self.config.partitions.max(1));
        self.lifecycle == ElectorState::Live
            && bucket < self.config.buckets
            && self
                .slots
                .get(&p)
                .is_some_and(|slot| slot.live(self.timeout()))
    }

    /// Whether this member may act on every one of `buckets` now (one deadline per partition).
    pub fn owns_all(&self, buckets: &[u16]) -> bool {
        buckets.iter().all(|b| self.owns(*b))
    }

    /// Partitions held (assigned), leading or not.
    pub fn held(&self) -> BTreeSet<i32> {
        self.slots.keys().copied().collect()
    }

    /// The group assigned `partitions` to this member in `generation`. Each starts without a
    /// term: its buckets are acquired once its heartbeats say so (see [`Table::on_heartbeat`]).
    pub fn assign(&mut self, partitions: &[i32], generation: i32) {
        let mut stale = Buckets::new();
        for &p in partitions {
            if p < 0 || p >= i32::from(self.config.partitions) {
                continue;
            }
            if let Some(mut old) = self.slots.insert(p, Slot::new(generation)) {
                if old.stand_down() {
                    stale.extend(self.config.buckets_of(p));
                }
            }
        }
        if !stale.is_empty() {
            self.emit(AssignmentEvent::Fenced { buckets: stale });
        }
    }

    /// The group takes `partitions` away. An orderly revocation emits Revoked for the buckets
    /// being served and returns the barrier to wait on (outside the lock); until
    /// [`Table::release`], their heartbeats go on saying this member leads, so a member the
    /// broker assigned them to early (one whose rebalance timed out the barrier) waits too. A
    /// lost assignment (the session or poll deadline passed: the partitions may be someone
    /// else's already) is Fenced and has no barrier.
    pub fn revoke(&mut self, partitions: &[i32], lost: bool) -> Option<oneshot::Receiver<()>> {
        let mut served = Buckets::new();
        for p in partitions {
            let Some(slot) = self.slots.get_mut(p) else {
                continue;
            };
            let term = slot.leading;
            if slot.stand_down() {
                served.extend(self.config.buckets_of(*p));
                if !lost {
                    slot.revoking = term;
                    continue;
                }
            }
            self.slots.remove(p);
        }
        if served.is_empty() {
            return None;
        }
        if lost {
            self.emit(AssignmentEvent::Fenced { buckets: served });
            return None;
        }
        let (ack, acked) = Ack::new();
        self.emit(AssignmentEvent::Revoked {
            buckets: served,
            ack,
        });
        Some(acked)
    }

    /// The barrier of a revocation of `partitions` was released: they are no longer held.
    pub fn release(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.slots.remove(p);
        }
    }

    /// Closed: whatever is still held is fenced and the event stream ends.
    pub fn finish(&mut self) {
        let all: Vec<i32> = self.slots.keys().copied().collect();
        let _ = self.revoke(&all, true);
        self.lifecycle = ElectorState::Closed;
        self.events = None;
    }

    /// The heartbeats to publish this cycle, one per held partition.
    pub fn heartbeats(&self) -> Vec<(i32, Heartbeat)> {
        self.slots
            .iter()
            .map(|(p, slot)| {
                let acting = slot.leading.or(slot.revoking);
                let term = acting.unwrap_or(slot.pending);
                let hb = Heartbeat::new(self.name(), term.id(), slot.generation, acting.is_some());
                (*p, hb)
            })
            .collect()
    }

    /// A heartbeat read on `partition`, sent at `hb.sent_ms`, compared against `now_ms`.
    pub fn on_heartbeat(&mut self, partition: i32, hb: &Heartbeat, now_ms: u64) {
        if hb.member != self.config.neli.name {
            self.on_peer_heartbeat(partition, hb, now_ms);
            return;
        }
        self.check_lapses();
        let timeout = self.timeout();
        let quiet = quiet(&self.config);
        let live = self.lifecycle == ElectorState::Live;
        let name = self.config.neli.name.clone();
        let Some(slot) = self.slots.get_mut(&partition) else {
            return;
        };
        if !live
            || slot.revoking.is_some()
            || slot.outranked.is_some_and(|at| at.elapsed() < timeout)
        {
            return;
        }
        match slot.leading {
            Some(term) => {
                if hb.vouches_for(&name, term.id(), now_ms, timeout) {
                    slot.last_seen = Instant::now();
                }
            }
            None => {
                if !hb.vouches_for(&name, slot.pending.id(), now_ms, timeout) {
                    return;
                }
                let first = *slot.first_read_ms.get_or_insert_with(|| {
                    tracing::debug!(member = %name, partition, since_assigned = ?slot.assigned_at.elapsed(), "first own heartbeat read back");
                    hb.sent_ms
                });
                let settled = hb.sent_ms >= first + quiet.as_millis() as u64;
                let peers_quiet = slot.peer_led.is_none_or(|at| at.elapsed() >= quiet);
                if settled && peers_quiet {
                    slot.leading = Some(slot.pending);
                    slot.last_seen = Instant::now();
                    tracing::debug!(member = %name, partition, since_assigned = ?slot.assigned_at.elapsed(), "term started");
                    let buckets = self.config.buckets_of(partition);
                    self.emit(AssignmentEvent::Acquired { buckets });
                }
            }
        }
    }

    /// Another member's heartbeat on a partition this member holds: the group gave it to both
    /// (a broker that gets coordination wrong), or a previous holder's heartbeat is still in
    /// flight. Stand down if it outranks this member; wait while it says it leads.
    fn on_peer_heartbeat(&mut self, partition: i32, hb: &Heartbeat, now_ms: u64) {
        let timeout = self.timeout();
        let name = self.config.neli.name.clone();
        let Some(slot) = self.slots.get_mut(&partition) else {
            return;
        };
        if hb.peer_leading(&name, now_ms, timeout) {
            slot.peer_led = Some(Instant::now());
        }
        if !hb.outranks(&name, slot.generation, now_ms, timeout) {
            return;
        }
        slot.outranked = Some(Instant::now());
        if slot.stand_down() {
            tracing::warn!(
                member = %name,
                partition,
                generation = slot.generation,
                peer = %hb.member,
                peer_generation = hb.generation,
                "another member holds the partition and outranks this one: fencing its buckets"
            );
            let buckets = self.config.buckets_of(partition);
            self.emit(AssignmentEvent::Fenced { buckets });
        }
    }

    /// Fences every partition whose own heartbeats stopped coming back.
    pub fn check_lapses(&mut self) {
        let timeout = self.timeout();
        let mut lapsed = Buckets::new();
        for (p, slot) in &mut self.slots {
            if slot.leading.is_some() && slot.last_seen.elapsed() >= timeout {
                slot.stand_down();
                lapsed.extend(self.config.buckets_of(*p));
            }
        }
        if !lapsed.is_empty() {
            tracing::warn!(
                member = %self.config.neli.name,
                "no own heartbeat for {timeout:?}: fencing"
            );
            self.emit(AssignmentEvent::Fenced { buckets: lapsed });
        }
    }
}

/// The exclusive elector's quiet period: how long after another member's last leading heartbeat
/// (and here also after this member's first heartbeat read back) a term may start.
fn quiet(config: &Resolved) -> Duration {
    crate::coordination::neli::quiet(&config.neli)
}

#[cfg(test)]
mod tests {
    use super::super::config::NeliAssignorConfig;
    use super::*;
    use crate::coordination::neli::heartbeat::now_ms;

    const HT: Duration = Duration::from_millis(400);

    fn table(name: &str) -> (Table, mpsc::UnboundedReceiver<AssignmentEvent>) {
        let config = NeliAssignorConfig {
            name: Some(name.into()),
            group_id: Some("g".into()),
            buckets: 8,
            partitions: Some(4),
            heartbeat_timeout: HT,
            min_poll_interval: Duration::from_millis(20),
            ..Default::default()
        }
        .resolve();
        let (tx, rx) = mpsc::unbounded_channel();
        (Table::new(config, tx), rx)
    }

    /// Reads back this member's own heartbeats for `partition`, `quiet` apart, as the broker
    /// would return them.
    fn read_own_twice(t: &mut Table, partition: i32) {
        let hb = t.heartbeats().into_iter().find(|(p, _)| *p == partition);
        let (_, mut hb) = hb.expect("held");
        t.on_heartbeat(partition, &hb, now_ms());
        hb.sent_ms += quiet(&t.config).as_millis() as u64;
        t.on_heartbeat(partition, &hb, hb.sent_ms);
    }

    #[test]
    fn a_partition_is_acquired_on_its_own_heartbeats_and_lapses_by_itself() {
        let (mut t, mut rx) = table("me");
        t.assign(&[1, 3], 5);
        assert!(t.owned().is_empty(), "the assignment alone is not trusted");
        let (_, hb) = t.heartbeats()[0].clone();
        t.on_heartbeat(1, &hb, now_ms());
        assert!(t.owned().is_empty(), "one heartbeat proves nothing yet");
        read_own_twice(&mut t, 1);
        assert_eq!(t.owned(), Buckets::from([1, 5]));
        assert!(t.owns(5) && !t.owns(3) && !t.owns(9));
        match rx.try_recv() {
            Ok(AssignmentEvent::Acquired { buckets }) => assert_eq!(buckets, Buckets::from([1, 5])),
            other => panic!("expected acquired, got {other:?}"),
        }
        assert!(t.heartbeats().iter().any(|(p, hb)| *p == 1 && hb.leading));
        std::thread::sleep(HT);
        assert!(t.owned().is_empty(), "the deadline alone empties owned()");
        assert!(rx.try_recv().is_err(), "before any thread noticed");
        // A late own heartbeat of the lapsed term does not revive it.
        let (_, hb) = t.heartbeats().into_iter().find(|(p, _)| *p == 1).unwrap();
        t.on_heartbeat(1, &hb, now_ms());
        assert!(t.owned().is_empty());
        assert!(matches!(rx.try_recv(), Ok(AssignmentEvent::Fenced { .. })));
    }

    #[test]
    fn revocation_carries_a_barrier_and_a_lost_assignment_is_fenced() {
        let (mut t, mut rx) = table("me");
        t.assign(&[0, 1, 2], 1);
        for p in [0, 1, 2] {
            read_own_twice(&mut t, p);
        }
        while rx.try_recv().is_ok() {}
        let acked = t.revoke(&[0], false).expect("a barrier");
        assert!(!t.owns(0) && t.owns(1), "other partitions keep flowing");
        let still = |t: &Table| t.heartbeats().into_iter().find(|(p, _)| *p == 0);
        assert!(
            still(&t).is_some_and(|(_, hb)| hb.leading),
            "until released, heartbeats say it leads"
        );
        read_own_twice(&mut t, 0);
        assert!(!t.owns(0), "a revoked partition is not acquired again");
        match rx.try_recv() {
            Ok(AssignmentEvent::Revoked { buckets, ack }) => {
                assert_eq!(buckets, Buckets::from([0, 4]));
                ack.ack();
            }
            other => panic!("expected revoked, got {other:?}"),
        }
        assert!(acked.blocking_recv().is_ok());
        t.release(&[0]);
        assert!(still(&t).is_none() && !t.held().contains(&0));
        assert!(t.revoke(&[1], true).is_none(), "no barrier when lost");
        assert!(matches!(rx.try_recv(), Ok(AssignmentEvent::Fenced { .. })));
        assert!(
            t.revoke(&[3], false).is_none(),
            "nothing served, nothing to wait for"
        );
        t.closing();
        assert!(t.owned().is_empty(), "closing vouches for nothing");
        t.finish();
        assert!(
            matches!(rx.try_recv(), Ok(AssignmentEvent::Fenced { buckets }) if buckets == Buckets::from([2, 6]))
        );
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn a_leading_peer_delays_the_term_and_an_outranking_one_fences_it() {
        let (mut t, mut rx) = table("m");
        t.assign(&[2], 7);
        let peer = |member: &str, generation: i32, leading: bool| {
            Heartbeat::new(member, uuid::Uuid::new_v4(), generation, leading)
        };
        // An older holder still says it leads: no term while it does.
        t.on_heartbeat(2, &peer("a", 6, true), now_ms());
        read_own_twice(&mut t, 2);
        assert!(t.owned().is_empty(), "a peer led within the quiet period");
        std::thread::sleep(quiet(&t.config));
        read_own_twice(&mut t, 2);
        assert_eq!(t.owned(), Buckets::from([2, 6]));
        while rx.try_recv().is_ok() {}
        // A lower-ranked peer changes nothing; a newer generation fences at once.
        t.on_heartbeat(2, &peer("z", 6, true), now_ms());
        assert!(t.owns(2));
        t.on_heartbeat(2, &peer("a", 8, false), now_ms());
        assert!(!t.owns(2));
        assert!(matches!(rx.try_recv(), Ok(AssignmentEvent::Fenced { .. })));
        read_own_twice(&mut t, 2);
        assert!(t.owned().is_empty(), "no new term while outranked");
    }
}
