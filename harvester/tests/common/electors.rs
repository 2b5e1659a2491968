//! Observing in-process electors of any kind: their events, and how many lead at once.
//! Included by the per-elector test files with `#[path]`, so they compile nothing else.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::election::{ElectionEvent, Elector, EventStream, Term};

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
pub fn leaders<E: Elector>(electors: &[Arc<E>]) -> Vec<usize> {
    (0..electors.len())
        .filter(|&i| electors[i].is_leader())
        .collect()
}

/// Samples on a thread of its own while running; records the most leaders seen at once.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    most: Arc<AtomicUsize>,
    samples: Arc<AtomicUsize>,
    handle: std::thread::JoinHandle<()>,
}

impl Sampler {
    pub fn start<E: Elector>(electors: &[Arc<E>], every: Duration) -> Sampler {
        let electors = electors.to_vec();
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let samples = Arc::new(AtomicUsize::new(0));
        let handle = std::thread::spawn({
            let (stop, most, samples) = (stop.clone(), most.clone(), samples.clone());
            move || {
                while !stop.load(Ordering::SeqCst) {
                    most.fetch_max(leaders(&electors).len(), Ordering::SeqCst);
                    samples.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(every);
                }
            }
        });
        Sampler {
            stop,
            most,
            samples,
            handle,
        }
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
pub async fn wait_leader<E: Elector>(electors: &[Arc<E>], timeout: Duration) -> usize {
    let start = Instant::now();
    loop {
        let l = leaders(electors);
        assert!(l.len() <= 1, "two leaders at once: {l:?}");
        if let Some(&i) = l.first() {
            return i;
        }
        assert!(start.elapsed() < timeout, "no leader within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
