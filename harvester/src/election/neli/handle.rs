//! What a [`Neli`](super::Neli) elector answers from: the state its pulse thread keeps, and the
//! flag that stops that thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::Shared;
use crate::election::shell::Backend;
use crate::election::{ElectorState, Term};

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
