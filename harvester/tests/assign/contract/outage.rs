//! Ownership that can no longer be vouched for ends by itself: the assignor's server goes away.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use harvester::assign::{all_buckets, AssignmentEvent};

use super::rig::{Rig, B};

/// A lone member whose server stops (Rink: a private etcd; the NELI kinds: their own cluster of
/// the embedded broker, its broker down) owns nothing within the succession, the time after
/// which another member could take its buckets, and is told `Fenced`; once the server is back
/// it owns every bucket again.
pub async fn a_lost_server_lapses_the_member_and_it_owns_again(rig: Rig) {
    let mut rig = rig.with_own_server().await;
    let all = all_buckets(B);
    let member = rig.member("solo").await;
    let fences = Arc::new(AtomicUsize::new(0));
    let mut events = member.take_events().expect("the events");
    tokio::spawn({
        let fences = Arc::clone(&fences);
        async move {
            while let Some(e) = events.recv().await {
                match e {
                    AssignmentEvent::Revoked { ack, .. } => ack.ack(),
                    AssignmentEvent::Fenced { .. } => {
                        fences.fetch_add(1, Ordering::SeqCst);
                    }
                    AssignmentEvent::Acquired { .. } => {}
                }
            }
        }
    });
    testkit::wait_for("every bucket owned", rig.settle_bound(), || async {
        member.owned() == all
    })
    .await
    .unwrap();

    rig.own_server().stop();
    let stopped = Instant::now();
    testkit::wait_until("it owns nothing", stopped + rig.settle_bound(), || async {
        member.owned().is_empty()
    })
    .await
    .unwrap();
    testkit::wait_for("a Fenced event", testkit::LOAD_MARGIN, || async {
        fences.load(Ordering::SeqCst) >= 1
    })
    .await
    .unwrap();

    rig.own_server().start();
    testkit::wait_for("every bucket owned again", rig.return_bound(), || async {
        member.owned() == all
    })
    .await
    .unwrap();
    rig.close(&member).await;
}
