//! The clauses: a lone member's life (every bucket, an orderly close, the stream's end), and
//! members that never own a bucket at once and hand every bucket over when one closes.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use harvester::assign::{all_buckets, AssignmentEvent, Assignor, Buckets};
use parking_lot::Mutex;

use super::rig::{Rig, B};
use crate::overlap::overlap;

/// The bound for what a member does at once (an event after `close()`, the stream's end).
const PROMPT: Duration = testkit::LOAD_MARGIN;

/// A lone member acquires every bucket (within the group's settling bound), owns them, and on
/// `close` has them revoked with a barrier, closes `Ok`, owns nothing, and its stream ends;
/// `close` again changes nothing.
pub async fn a_lone_member_owns_every_bucket_until_it_closes(rig: Rig) {
    let member = rig.member("solo").await;
    let mut events = member.take_events().expect("the events");
    assert!(member.take_events().is_none(), "a single consumer");
    assert_eq!(member.bucket_count(), B);
    let all = all_buckets(B);
    let mut acquired = Buckets::new();
    tokio::time::timeout(rig.settle_bound(), async {
        while acquired != all {
            match events.recv().await.expect("the stream is open") {
                AssignmentEvent::Acquired { buckets } => acquired.extend(buckets),
                AssignmentEvent::Revoked { ack, .. } => ack.ack(),
                other => panic!("a lone member: {other:?}"),
            }
        }
    })
    .await
    .expect("every bucket acquired in time");
    assert_eq!(member.owned(), all);
    let every: Vec<u16> = all.iter().copied().collect();
    assert!(
        member.owns_all(&every) && !member.owns(B),
        "owns below the count only"
    );

    member.close();
    let mut revoked = Buckets::new();
    tokio::time::timeout(rig.close_bound(), async {
        while revoked != all {
            match events
                .recv()
                .await
                .expect("the stream is open until revoked")
            {
                AssignmentEvent::Revoked { buckets, ack } => {
                    revoked.extend(buckets);
                    ack.ack();
                }
                other => panic!("closing: {other:?}"),
            }
        }
    })
    .await
    .expect("every bucket revoked in time");
    tokio::time::timeout(rig.close_bound(), member.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    assert!(member.owned().is_empty(), "a closed member owns nothing");
    let end = tokio::time::timeout(PROMPT, events.recv()).await;
    assert!(
        end.expect("the stream ends").is_none(),
        "no event after closing"
    );
    member.close();
    assert!(member.owned().is_empty());
}

/// Acknowledges every revocation of `member` at once, on a task of its own.
fn acknowledge(member: &Arc<dyn Assignor>) {
    let mut events = member.take_events().expect("the events");
    tokio::spawn(async move {
        while let Some(e) = events.recv().await {
            if let AssignmentEvent::Revoked { ack, .. } = e {
                ack.ack();
            }
        }
    });
}

/// Samples two members every 2 ms on a thread of its own, both ways round, until stopped.
struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicUsize>,
    found: Arc<Mutex<Option<Buckets>>>,
    handle: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(a: &Arc<dyn Assignor>, b: &Arc<dyn Assignor>) -> Sampler {
        let (a, b) = (Arc::clone(a), Arc::clone(b));
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(AtomicUsize::new(0));
        let found = Arc::new(Mutex::new(None));
        let handle = std::thread::spawn({
            let (stop, samples, found) = (stop.clone(), samples.clone(), found.clone());
            move || {
                while !stop.load(Ordering::SeqCst) {
                    if let Some((both, _, _)) = overlap(&[&*a, &*b]) {
                        found.lock().get_or_insert(both);
                    }
                    samples.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        });
        Sampler {
            stop,
            samples,
            found,
            handle,
        }
    }

    /// (buckets owned twice at once if ever, samples taken)
    fn finish(self) -> (Option<Buckets>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap();
        let found = self.found.lock().take();
        (found, self.samples.load(Ordering::SeqCst))
    }
}

/// Two members: together they come to own every bucket, never one bucket at once (sampled
/// every 2 ms throughout), and when one closes the other comes to own every bucket.
pub async fn members_never_share_a_bucket_and_hand_over_on_close(rig: Rig) {
    let all = all_buckets(B);
    let (a, b) = (rig.member("a").await, rig.member("b").await);
    acknowledge(&a);
    acknowledge(&b);
    let sampler = Sampler::start(&a, &b);
    let covered = || {
        let mut union = a.owned();
        union.extend(b.owned());
        union == all
    };
    testkit::wait_for("every bucket owned", rig.settle_bound() * 2, || async {
        covered()
    })
    .await
    .unwrap();
    // The member owning bucket 0 closes (the exclusive assignor's leader: every bucket).
    let (closing, staying) = if a.owns(0) { (&a, &b) } else { (&b, &a) };
    closing.close();
    rig.owns_every_bucket(staying, "the other owns every bucket")
        .await;
    rig.close(closing).await;
    let (found, samples) = sampler.finish();
    assert!(samples > 0);
    assert_eq!(
        found, None,
        "a bucket owned by both at once ({samples} samples)"
    );
    rig.close(staying).await;
}
