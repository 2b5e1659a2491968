//! The elector's leadership as a holder of the lease keeper shared with Rink: the keeper
//! moves the deadline [`Shared::is_leader`] checks, so a keep-alive the server answered is the
//! only thing that extends a term.

use std::sync::Arc;
use std::time::Instant;

use etcd_client::Client;

use super::state::Shared;
use crate::coordination::etcd::keeper::{Keeper, LeaseHolder, LeaseTiming};

impl LeaseHolder for Shared {
    fn deadline(&self) -> Instant {
        Shared::deadline(self)
    }

    fn extend(&self, lease: i64, until: Instant) -> bool {
        Shared::extend(self, lease, until)
    }

    fn lose_lease(&self, lease: i64, why: &str) {
        Shared::lose_lease(self, lease, why)
    }
}

/// [`Keeper::spawn`] for the elector's leadership, with the elector's timings.
pub(crate) fn keep(shared: Arc<Shared>, client: Client, id: i64) -> Keeper {
    let s = &shared.settings;
    let timing = LeaseTiming {
        name: s.name.clone(),
        ttl: s.ttl,
        lease: s.lease,
        keep_alive_interval: s.keep_alive_interval,
    };
    Keeper::spawn(shared, timing, client, id)
}
