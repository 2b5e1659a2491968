use std::future::Future;
use std::time::{Duration, Instant};

/// A condition did not become true in time.
#[derive(Debug, thiserror::Error)]
#[error("timed out after {waited:?} waiting for {what}")]
pub struct WaitTimedOut {
    /// What was awaited, as given by the caller.
    pub what: String,
    /// How long was waited.
    pub waited: Duration,
}

/// Polls `condition` (10 ms at first, backing off to 200 ms) until it returns true or `timeout`
/// passes. Every wait in a test goes through here so that none can hang forever.
pub async fn wait_for<F, Fut>(
    what: &str,
    timeout: Duration,
    mut condition: F,
) -> Result<Duration, WaitTimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        if condition().await {
            return Ok(start.elapsed());
        }
        if start.elapsed() >= timeout {
            return Err(WaitTimedOut {
                what: what.to_owned(),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}
