//! Observing in-process electors of any kind: their events, and how many lead at once.
//! Included by the per-elector test files with `#[path]`, so they compile nothing else.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::election::{ElectionEvent, Elector, EventStream, Term};
use parking_lot::Mutex;

/// The bound for what an elector does at once on a call or an event it watches (an event after
/// `close()`, a watch firing, a re-entry): no configured wait, only the load margin.
pub const PROMPT: Duration = testkit::LOAD_MARGIN;

pub async fn next_event(events: &mut EventStream, timeout: Duration) -> ElectionEvent {
    tokio::time::timeout(timeout, events.recv())
        .await
        .expect("an event in time")
        .expect("the stream is open")
}

pub async fn acquired(events: &mut EventStream, timeout: Duration) -> Term {
    match next_event(events, timeout).await {
        ElectionEvent::Acquired { term } => term,
        other => panic!("expected acquired, got {other:?}"),
    }
}

/// Indices of the electors that say they lead.
pub fn leaders<E: Elector + ?Sized>(electors: &[Arc<E>]) -> Vec<usize> {
    (0..electors.len())
        .filter(|&i| electors[i].is_leader())
        .collect()
}

/// Samples on a thread of its own while running; records the most leaders seen at once and,
/// per elector, the last instant it was seen leading.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
    samples: Arc<AtomicUsize>,
    last_leading: Arc<Vec<Mutex<Option<Instant>>>>,
    handle: std::thread::JoinHandle<()>,
}

impl Sampler {
    pub fn start<E: Elector + ?Sized>(electors: &[Arc<E>], every: Duration) -> Sampler {
        let electors = electors.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let samples = Arc::new(AtomicUsize::new(0));
        let last_leading: Arc<Vec<_>> =
            Arc::new(electors.iter().map(|_| Mutex::new(None)).collect());
        let handle = std::thread::spawn({
            let (stop, most, samples) = (stop.clone(), most.clone(), samples.clone());
            let last_leading = Arc::clone(&last_leading);
            move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut n = 0;
                    for (e, last) in electors.iter().zip(last_leading.iter()) {
                        // Taken before asking: a yes at any later moment was true at `at` too.
                        let at = Instant::now();
                        if e.is_leader() {
                            n += 1;
                            *last.lock() = Some(at);
                        }
                    }
                    most.fetch_max(n, Ordering::SeqCst);
                    samples.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(every);
                }
            }
        });
        Sampler {
            stop,
            most,
            samples,
            last_leading,
            handle,
        }
    }

    /// The last instant elector `i` was seen leading (a lower bound of when it stopped): its
    /// deadline was later, whatever the load on the sampling thread.
    pub fn last_leading(&self, i: usize) -> Option<Instant> {
        *self.last_leading[i].lock()
    }

    /// (most leaders at once, samples taken)
    pub fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap();
        (
            self.most.load(Ordering::SeqCst),
            self.samples.load(Ordering::SeqCst),
        )
    }
}

/// Waits for a leader, failing on two at once or none within `timeout`.
pub async fn wait_leader<E: Elector + ?Sized>(electors: &[Arc<E>], timeout: Duration) -> usize {
    let found = Mutex::new(None);
    testkit::wait_for("a leader", timeout, || async {
        let l = leaders(electors);
        assert!(l.len() <= 1, "two leaders at once: {l:?}");
        *found.lock() = l.first().copied();
        found.lock().is_some()
    })
    .await
    .unwrap();
    let leader = found.lock().expect("a leader");
    leader
}

/// Asserts that exactly `leader` leads at every poll over `window`; the polls taken.
pub async fn assert_sole_leader<E: Elector + ?Sized>(
    electors: &[Arc<E>],
    leader: usize,
    window: Duration,
) -> usize {
    testkit::assert_holds_for(
        &format!("exactly one leader, {leader}"),
        window,
        Duration::from_millis(20),
        || async { leaders(electors) == [leader] },
    )
    .await
}

/// Waits (up to [`PROMPT`]) until `count()` reaches `n`: for what event collectors, running on
/// tasks of their own, have recorded.
pub async fn wait_count(what: &str, n: usize, count: impl Fn() -> usize) {
    testkit::wait_for(what, PROMPT, || async { count() >= n })
        .await
        .unwrap();
}

/// Asserts that `elector` leads in `term` at every poll over `window`.
pub async fn assert_leads_for<E: Elector + ?Sized>(elector: &E, term: Term, window: Duration) {
    testkit::assert_holds_for(
        &format!("leading in term {term}"),
        window,
        Duration::from_millis(20),
        || async { elector.is_leader() && elector.term() == Some(term) },
    )
    .await;
}
