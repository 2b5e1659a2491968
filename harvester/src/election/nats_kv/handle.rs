//! The [`NatsKv`](super::NatsKv) elector's calls are answered from the campaign's shared state,
//! never by the campaign, so none waits behind a campaign step; closing goes through that state
//! too, which wakes the campaign to hand off.

use std::sync::Arc;

use super::config::redacted;
use super::state::Shared;
use crate::election::shell::Backend;
use crate::election::{ElectorState, Term};

/// What the elector holds: the shared state and what stops its campaign.
#[derive(Debug)]
pub struct Handle {
    pub(super) shared: Arc<Shared>,
}

impl Backend for Handle {
    fn describe(&self) -> String {
        let s = &self.shared.settings;
        format!(
            "nats_kv member={} bucket={} key={} url={}",
            s.name,
            s.bucket,
            s.key,
            redacted(&s.url)
        )
    }

    fn is_leader(&self) -> bool {
        self.shared.is_leader()
    }

    fn term(&self) -> Option<Term> {
        self.shared.term()
    }

    fn state(&self) -> ElectorState {
        self.shared.lifecycle()
    }

    fn close(&self) {
        self.shared.request_close();
    }
}
