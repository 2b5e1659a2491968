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
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "no work before leadership");
        mock.acquire();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(runs.load(Ordering::SeqCst) > 0);
        mock.fence();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let after_fence = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            after_fence,
            "no work once fenced"
        );
        mock.acquire();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            mock.revoke(Duration::from_secs(2)).await,
            "revoke acknowledged"
        );
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
