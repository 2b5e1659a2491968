//! Prometheus metrics of a harvester.
//!
//! Operators judge an outbox relay by what it lets them see: how far behind it is (backlog and
//! the age of the oldest unpublished row), whether it leads, and where time goes (mark, publish,
//! purge). The stages already keep relaxed counters and lock-free histograms in
//! [`crate::pipeline::Stats`]; a scrape reads them, adds a cheap table sample and the pool state,
//! and renders the text format. Nothing here runs on the per-record path.

pub mod histogram;
pub mod names;
mod render;

use std::time::Duration;

use crate::Harvester;

pub use render::Exposition;

/// What a scrape reads from the outbox table.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TableSample {
    /// Rows in the table: exact up to 100,000, the id span above that.
    pub backlog: i64,
    /// Seconds since the oldest row was written; 0 when the table is empty.
    pub oldest_age_seconds: f64,
}

/// Reads the backlog and oldest-row age, bounded by `timeout`.
pub async fn sample_table(harvester: &Harvester, timeout: Duration) -> crate::Result<TableSample> {
    let query =
        sqlx::query_as::<_, (i64, Option<i64>, Option<f64>)>(&harvester.statements().backlog)
            .fetch_one(harvester.pool());
    let (capped, span, age) = tokio::time::timeout(timeout, query)
        .await
        .map_err(|_| crate::Error::Timeout {
            what: "the backlog query".into(),
            after: timeout,
        })?
        .map_err(crate::Error::db("sample the outbox backlog"))?;
    let backlog = if capped > 100_000 {
        span.unwrap_or(capped)
    } else {
        capped
    };
    Ok(TableSample {
        backlog,
        oldest_age_seconds: age.unwrap_or(0.0).max(0.0),
    })
}

/// The whole exposition for one scrape. A failed table sample leaves the backlog metrics out
/// (and is logged) rather than failing the scrape.
pub async fn scrape(harvester: &Harvester) -> String {
    let table = match sample_table(harvester, Duration::from_secs(2)).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::debug!("metrics: {e}");
            None
        }
    };
    render::render(harvester, table)
}
