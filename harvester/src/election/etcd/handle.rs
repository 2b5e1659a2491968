//! The [`Etcd`](super::Etcd) elector's calls are answered from the campaign's shared state,
//! never by the campaign, so none waits behind a campaign step; closing marks that state and
//! stops the campaign through its token, which then hands off before it ends.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::state::Shared;
use crate::election::shell::Backend;
use crate::election::{ElectorState, Term};

/// What the elector holds: the shared state and what stops its campaign.
#[derive(Debug)]
pub struct Handle {
    pub(super) shared: Arc<Shared>,
    pub(super) stop: CancellationToken,
}

impl Backend for Handle {
    fn describe(&self) -> String {
        let s = &self.shared.settings;
        format!(
            "etcd member={} prefix={} endpoints={}",
            s.name,
            s.prefix,
            s.endpoint_list()
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
        self.shared.close();
        self.stop.cancel();
    }
}
