use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::{ElectionEvent, Elector, EventStream, Term};
use crate::Result;

/// Runs `task` repeatedly while this member leads (goNELI's `Background`), until `cancel`.
///
/// Each call gets the current term and a token that is cancelled when the term ends (fenced,
/// revoked, or shutdown); the task should do a bounded amount of work and return. Revocations
/// are acknowledged once the current call has returned, which is the hand-off barrier.
pub async fn run_while_leader<E, F, Fut>(
    elector: &E,
    mut events: EventStream,
    cancel: CancellationToken,
    mut task: F,
) -> Result<()>
where
    E: Elector + ?Sized,
    F: FnMut(Term, CancellationToken) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut term: Option<(Term, CancellationToken)> = None;
    loop {
        // Drain events without blocking, then work if leading.
        loop {
            let event = if term.is_some() {
                match futures::FutureExt::now_or_never(events.recv()) {
                    Some(e) => e,
                    None => break,
                }
            } else {
                tokio::select! {
                    e = events.recv() => e,
                    () = cancel.cancelled() => return Ok(()),
                }
            };
            match event {
                None => return elector.closed().await,
                Some(ElectionEvent::Acquired { term: t }) => {
                    term = Some((t, cancel.child_token()));
                }
                Some(ElectionEvent::Fenced { .. }) => {
                    if let Some((_, token)) = term.take() {
                        token.cancel();
                    }
                }
                Some(ElectionEvent::Revoked { ack, .. }) => {
                    if let Some((_, token)) = term.take() {
                        token.cancel();
                    }
                    ack.ack();
                }
            }
        }
        if cancel.is_cancelled() {
            return Ok(());
        }
        match &term {
            Some((t, token)) if elector.is_leader() => task(*t, token.clone()).await,
            _ => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::election::mock::MockElector;

    #[tokio::test]
    async fn task_runs_only_while_leader_and_revoke_waits_for_it() {
        let mock = MockElector::new();
        let events = mock.take_events().unwrap();
        let runs = Arc::new(AtomicU32::new(0));
        let cancel = CancellationToken::new();
        let worker = {
            let (mock, runs, cancel) = (mock.clone(), Arc::clone(&runs), cancel.clone());
            tokio::spawn(async move {
                run_while_leader(&mock, events, cancel, |_, _| {
                    let runs = Arc::clone(&runs);
                    async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await
            })
        };
        // The loop looks every 10 ms: five looks without leadership, no run.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "no work before leadership");
        mock.acquire();
        testkit::wait_for("a run", testkit::LOAD_MARGIN, || async {
            runs.load(Ordering::SeqCst) > 0
        })
        .await
        .unwrap();
        mock.fence();
        // Over ten of the loop's looks after the fence, at most the one run that had passed its
        // look before the fence begins (however the machine delays this task or that loop).
        let at_fence = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            runs.load(Ordering::SeqCst) <= at_fence + 1,
            "no work once fenced"
        );
        mock.acquire();
        let led_again = runs.load(Ordering::SeqCst);
        testkit::wait_for("a run again", testkit::LOAD_MARGIN, || async {
            runs.load(Ordering::SeqCst) > led_again
        })
        .await
        .unwrap();
        assert!(
            mock.revoke(testkit::LOAD_MARGIN).await,
            "revoke acknowledged"
        );
        // The barrier waited for the run in flight: none begins after it.
        let after_revoke = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            after_revoke,
            "no work once revoked"
        );
        cancel.cancel();
        worker.await.unwrap().unwrap();
    }
}
