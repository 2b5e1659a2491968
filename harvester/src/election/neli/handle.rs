//! The [`Neli`](super::Neli) elector's calls are answered from the state its pulse thread
//! keeps, never by that thread, so none waits behind a poll; closing marks that state and
//! raises the flag the pulse thread stops on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Shared;
use crate::election::shell::Backend;
use crate::election::{ElectorState, Term};

/// What the elector holds: the shared state and what stops its campaign.
#[derive(Debug)]
pub struct Handle {
    pub(super) shared: Arc<Shared>,
    pub(super) stop: Arc<AtomicBool>,
}

impl Backend for Handle {
    fn describe(&self) -> String {
        let c = &self.shared.config;
        format!(
            "neli member={} group={} topic={}",
            c.name, c.group_id, c.topic
        )
    }

    fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    fn term(&self) -> Option<Term> {
        if self.shared.is_leader() {
            self.shared.inner.lock().leading
        } else {
            None
        }
    }

    fn state(&self) -> ElectorState {
        self.shared.inner.lock().lifecycle
    }

    fn close(&self) {
        let mut inner = self.shared.inner.lock();
        if inner.lifecycle == ElectorState::Live {
            inner.lifecycle = ElectorState::Closing;
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}
