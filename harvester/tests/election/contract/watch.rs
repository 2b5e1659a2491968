//! A contender's events, handled as an application would on a task of its own: terms recorded,
//! revocations acknowledged at once, or held when the test says so (to hold the barrier).

use std::sync::Arc;

use harvester::election::{Ack, ElectionEvent, Elector, Term};
use parking_lot::Mutex;

#[derive(Default)]
struct Seen {
    terms: Vec<Term>,
    hold: bool,
    held: Option<Ack>,
    revocations: usize,
    fences: usize,
}

/// See the module.
#[derive(Clone)]
pub struct Watch(Arc<Mutex<Seen>>);

impl Watch {
    /// Takes `elector`'s events and handles them from now on.
    pub fn on(elector: &Arc<dyn Elector>) -> Watch {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let events = elector.take_events().expect("the events, once");
        let s = Arc::clone(&seen);
        harvester::election::on_event(events, move |e| {
            let mut s = s.lock();
            match e {
                ElectionEvent::Acquired { term } => s.terms.push(term),
                ElectionEvent::Revoked { ack, .. } => {
                    s.revocations += 1;
                    if s.hold {
                        s.held = Some(ack);
                    } else {
                        ack.ack();
                    }
                }
                ElectionEvent::Fenced { .. } => s.fences += 1,
            }
        });
        Watch(seen)
    }

    /// Every term acquired so far, in order.
    pub fn terms(&self) -> Vec<Term> {
        self.0.lock().terms.clone()
    }

    /// How many times leadership lapsed without a barrier (`Fenced`).
    pub fn fences(&self) -> usize {
        self.0.lock().fences
    }

    /// From now on revocations are held, not acknowledged.
    pub fn hold(&self) {
        self.0.lock().hold = true;
    }

    /// Whether a revocation is being held.
    pub fn holding(&self) -> bool {
        self.0.lock().held.is_some()
    }

    /// Acknowledges the revocation held, if any.
    pub fn release(&self) {
        if let Some(ack) = self.0.lock().held.take() {
            ack.ack();
        }
    }
}
