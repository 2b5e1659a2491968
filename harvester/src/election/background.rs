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
