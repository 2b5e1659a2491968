//! Bounded waiting, shared by every test so that none waits with a bare sleep or hangs forever.
//!
//! A test waits on something it can observe (a database or broker query, a counter, an event)
//! and gives up at a bound derived from the configuration under test plus a stated margin
//! ([`within`]): a loaded machine makes a test slower, never wrong. A "nothing happened" check
//! first waits for an event proving the system had the chance, then observes a window whose
//! length comes from the configuration ([`assert_holds_for`]).

use std::future::Future;
use std::time::{Duration, Instant};

/// What a test adds to a bound the system under test promises (a lease, a session, a
/// succession, a drain timeout) for the machine rather than the system: thread scheduling,
/// process start-up and I/O on two shared cores, one kept busy by another process. It is
/// never the system's own allowance, so a bound is always stated as `configured + margin`.
pub const LOAD_MARGIN: Duration = Duration::from_secs(5);

/// The bound for something the system promises within `configured`: that plus [`LOAD_MARGIN`].
pub const fn within(configured: Duration) -> Duration {
    configured.saturating_add(LOAD_MARGIN)
}

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
/// passes; how long it took.
pub async fn wait_for<F, Fut>(
    what: &str,
    timeout: Duration,
    condition: F,
) -> Result<Duration, WaitTimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    wait_until(what, start + timeout, condition)
        .await
        .map(|()| start.elapsed())
}

/// Polls `condition` as [`wait_for`] does until it returns true or `deadline` passes (for a
/// bound that runs from an event before the wait began, e.g. a fault's injection).
pub async fn wait_until<F, Fut>(
    what: &str,
    deadline: Instant,
    mut condition: F,
) -> Result<(), WaitTimedOut>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        if condition().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(WaitTimedOut {
                what: what.to_owned(),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// Polls `condition` every `every` for `window` and panics naming `what` the first time it is
/// false; the number of polls. The window's length is the caller's to derive from the
/// configuration (e.g. a TTL the system had to outlive); call it once the system has had the
/// chance to break the condition, so that the window is not observed vacuously.
pub async fn assert_holds_for<F, Fut>(
    what: &str,
    window: Duration,
    every: Duration,
    mut condition: F,
) -> usize
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    let mut polls = 0;
    loop {
        polls += 1;
        assert!(
            condition().await,
            "{what}: broken after {:?} (poll {polls})",
            start.elapsed()
        );
        if start.elapsed() >= window {
            return polls;
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn wait_for_returns_once_the_condition_holds_and_times_out_otherwise() {
        let polls = AtomicUsize::new(0);
        wait_for("the third poll", Duration::from_secs(60), || async {
            polls.fetch_add(1, Ordering::SeqCst) == 2
        })
        .await
        .unwrap();
        assert_eq!(polls.load(Ordering::SeqCst), 3);
        let e = wait_for("never", Duration::from_millis(30), || async { false })
            .await
            .unwrap_err();
        assert_eq!(e.what, "never");
        assert!(e.waited >= Duration::from_millis(30), "{e}");
    }

    #[tokio::test]
    async fn wait_until_a_past_deadline_polls_once() {
        let polls = AtomicUsize::new(0);
        let e = wait_until("late", Instant::now(), || async {
            polls.fetch_add(1, Ordering::SeqCst);
            false
        })
        .await
        .unwrap_err();
        assert_eq!(polls.load(Ordering::SeqCst), 1, "{e}");
    }

    #[tokio::test]
    async fn assert_holds_for_polls_through_the_window() {
        let polls = assert_holds_for(
            "true",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || async { true },
        )
        .await;
        assert!(polls >= 2, "{polls}");
    }

    #[tokio::test]
    #[should_panic(expected = "falls: broken")]
    async fn assert_holds_for_panics_when_the_condition_breaks() {
        let polls = AtomicUsize::new(0);
        assert_holds_for(
            "falls",
            Duration::from_secs(60),
            Duration::from_millis(1),
            || async { polls.fetch_add(1, Ordering::SeqCst) < 2 },
        )
        .await;
    }
}
