//! Wake-ups by `LISTEN`: the native table's insert trigger NOTIFYs at commit, so an idle
//! harvester marks as soon as rows are committed instead of polling goharvest's hundred times a
//! second. When the channel is unavailable (a goharvest table has no trigger, or `LISTEN`
//! failed) the marker polls with its back-off instead.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use sqlx::postgres::PgListener;
use sqlx::PgPool;

use crate::store::{Polling, Wakeups};

/// A `LISTEN` connection of one term.
#[derive(Debug)]
struct Listening(PgListener);

impl Wakeups for Listening {
    fn wait(&mut self, idle: Duration) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let notified = async {
                if self.0.recv().await.is_err() {
                    // sqlx reconnects on the next recv; fall back to the timer meanwhile.
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep(idle) => {}
            }
        })
    }

    fn announces(&self) -> bool {
        true
    }

    fn forget_received(&mut self) {
        // Only what is readable now: `recv` is cancel-safe, so a notification half read when
        // the poll finds nothing more is kept for the next wait. Bounded, so a flood of inserts
        // cannot hold the marker here.
        for _ in 0..FORGET_AT_MOST {
            match self.0.try_recv().now_or_never() {
                Some(Ok(Some(_))) => {}
                _ => return,
            }
        }
    }
}

/// The most notifications one `forget_received` reads.
const FORGET_AT_MOST: usize = 10_000;

/// Listens on `channel`, or polls when there is none or `LISTEN` fails (logged).
pub(super) async fn wakeups(pool: &PgPool, channel: Option<&str>) -> Box<dyn Wakeups> {
    let Some(channel) = channel else {
        return Box::new(Polling);
    };
    let listening = async {
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(channel).await?;
        Ok::<_, sqlx::Error>(listener)
    }
    .await;
    match listening {
        Ok(l) => Box::new(Listening(l)),
        Err(e) => {
            tracing::warn!("LISTEN {channel} failed, polling instead: {e}");
            Box::new(Polling)
        }
    }
}
