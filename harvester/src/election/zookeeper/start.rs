//! The elector's thread: the session and the campaign run there with their own runtime (the
//! client's tasks live there too), so a busy application runtime cannot delay the probes that
//! keep the lease, nor the reaction to a lost connection.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::campaign;
use super::session;
use super::state::Shared;
use crate::election::shell::{Closed, Ready};

/// Opens the session and makes sure the election node exists (each bounded by
/// `connect_timeout` in `session`), reports that on `connected`, then campaigns: `entered`
/// hears once the first candidacy is in, `closed` how the campaign ended.
pub(crate) async fn run(
    shared: Arc<Shared>,
    stop: CancellationToken,
    connected: Ready,
    entered: oneshot::Sender<()>,
    closed: Closed,
) {
    let settings = &shared.settings;
    let client = match session::connect_at_start(settings, "leader").await {
        Ok(client) => client,
        Err(e) => {
            shared.finish();
            let _ = connected.send(Err(e));
            return;
        }
    };
    if let Err(e) = session::ensure_path(&client, settings, "leader").await {
        shared.finish();
        let _ = connected.send(Err(e));
        return;
    }
    if connected.send(Ok(())).is_err() {
        // start() was abandoned: nobody holds the elector to close it.
        shared.finish();
        return;
    }
    campaign::run_to_end(shared, client, stop, entered, closed).await;
}
