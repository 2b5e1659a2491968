//! Prometheus metrics of a harvester.
//!
//! Operators judge an outbox relay by what it lets them see: how far behind it is (backlog and
//! the age of the oldest unpublished row), whether it leads, and where time goes (mark, publish,
//! purge). The stages already keep relaxed counters and lock-free histograms in
//! [`crate::stats::Stats`]; a scrape reads them, adds a cheap sample from the store (backlog,
//! oldest age, pool state), and renders the text format. Nothing here runs on the per-record
//! path.

pub mod names;
mod render;

use std::time::Duration;

use crate::store::Backlog;
use crate::Harvester;

pub use render::Exposition;

/// Reads the backlog and oldest-row age from the store, bounded by `timeout`.
pub async fn sample_table(harvester: &Harvester, timeout: Duration) -> crate::Result<Backlog> {
    tokio::time::timeout(timeout, harvester.store().backlog())
        .await
        .map_err(|_| crate::Error::Timeout {
            what: "the backlog query".into(),
            after: timeout,
        })?
}

/// The whole exposition for one scrape. A failed table sample leaves the backlog metrics out
/// (and is logged) rather than failing the scrape.
pub async fn scrape(harvester: &Harvester) -> String {
    let table = match sample_table(harvester, Duration::from_secs(2)).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("metrics: {}", crate::error::chain(&e));
            None
        }
    };
    render::render(harvester, table)
}
