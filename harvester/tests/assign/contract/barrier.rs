//! The hand-over barrier: a closing member's buckets go to no one while its revocation is
//! held, and to the others once it is acknowledged. Each member's events are handled as an
//! application would on a task of its own: revocations acknowledged at once, or held when the
//! test says so.

use std::sync::Arc;
use std::time::Duration;

use harvester::assign::{all_buckets, Ack, AssignmentEvent, Assignor, Buckets};
use parking_lot::Mutex;

use super::rig::{Rig, B};

#[derive(Default)]
struct Seen {
    hold: bool,
    held: Vec<Ack>,
    revoked: Buckets,
}

/// See the module.
#[derive(Clone)]
struct Watch(Arc<Mutex<Seen>>);

impl Watch {
    /// Takes `member`'s events and handles them from now on.
    fn on(member: &Arc<dyn Assignor>) -> Watch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut events = member.take_events().expect("the events, once");
        let s = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                if let AssignmentEvent::Revoked { buckets, ack } = e {
                    let mut s = s.lock();
                    if s.hold {
                        s.revoked.extend(buckets);
                        s.held.push(ack);
                    } else {
                        ack.ack();
                    }
                }
            }
        });
        Watch(seen)
    }

    /// From now on revocations are held, not acknowledged.
    fn hold(&self) {
        self.0.lock().hold = true;
    }

    /// The buckets of the revocations held.
    fn held(&self) -> Buckets {
        self.0.lock().revoked.clone()
    }

    /// Acknowledges every revocation held, and those to come.
    fn release(&self) {
        let acks = {
            let mut s = self.0.lock();
            s.hold = false;
            std::mem::take(&mut s.held)
        };
        acks.into_iter().for_each(Ack::ack);
    }
}

/// Two members; the one owning bucket 0 closes with its revocations held: for half the revoke
/// timeout the other takes none of the buckets held, and once they are acknowledged it comes to
/// own every bucket.
pub async fn a_successor_waits_for_the_barrier(rig: Rig) {
    let all = all_buckets(B);
    let members = [rig.member("a").await, rig.member("b").await];
    let watches = [Watch::on(&members[0]), Watch::on(&members[1])];
    testkit::wait_for("every bucket owned", rig.settle_bound() * 2, || async {
        let mut union = members[0].owned();
        union.extend(members[1].owned());
        union == all
    })
    .await
    .unwrap();
    let closing = usize::from(!members[0].owns(0));
    let staying = &members[1 - closing];
    watches[closing].hold();
    members[closing].close();
    testkit::wait_for(
        "the revocation of bucket 0",
        testkit::LOAD_MARGIN,
        || async { watches[closing].held().contains(&0) },
    )
    .await
    .unwrap();
    testkit::assert_holds_for(
        "the other takes no bucket held",
        rig.revoke_timeout() / 2,
        Duration::from_millis(5),
        || async { staying.owned().is_disjoint(&watches[closing].held()) },
    )
    .await;
    watches[closing].release();
    rig.owns_every_bucket(staying, "the other owns every bucket")
        .await;
    for m in &members {
        rig.close(m).await;
    }
}
