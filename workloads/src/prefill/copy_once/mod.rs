//! One chunk of a backlog into Postgres exactly once, even when a `COPY` stalls.
//!
//! A try that stalls is given up, and the chunk may be sent again only if that try's
//! transaction did not commit: closing the connection does not roll it back once the server is
//! committing (a slow fsync, a deferred trigger), and a chunk written twice repeats every key's
//! sequences, which the verifier rightly calls rewound. So each try runs in a transaction whose
//! id is known before any row is sent; a stalled try's backend is terminated (waiting for it to
//! exit), and the transaction's status, now final, decides: committed is done, aborted is sent
//! again.

use std::time::Duration;

use sqlx::{PgConnection, PgPool};

use crate::WorkloadError;

/// Tries of one COPY.
const TRIES: u32 = 3;

/// How long a stalled try's backend is given to exit once told to.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// How often the status of a try's transaction is read while it is still in progress.
const STATUS_POLL: Duration = Duration::from_millis(100);

/// What became of a stalled try's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    Committed,
    Aborted,
}

/// Runs `statement` (a `COPY ... FROM STDIN`) with `text`, committed exactly once: a try that
/// takes longer than `deadline` is settled (see the module) and sent again only if it aborted,
/// up to [`TRIES`] times. Seen here once in a few hundred pre-fills: the client waiting forever
/// while the server, in COPY mode, waited for data (`ClientRead`, 0 bytes received).
pub(crate) async fn copy_in(
    pool: &PgPool,
    statement: &str,
    text: &[u8],
    deadline: Duration,
) -> Result<(), WorkloadError> {
    for attempt in 1..=TRIES {
        let mut conn = pool
            .acquire()
            .await
            .map_err(WorkloadError::db("connect for COPY"))?;
        let mut started = None;
        let tried =
            tokio::time::timeout(deadline, try_copy(&mut conn, statement, text, &mut started));
        let Err(_) = tried.await else {
            return Ok(());
        };
        // Out of the pool: the connection is closed, whatever state the server left it in.
        drop(conn.detach());
        let settled = match started {
            // No transaction id yet: nothing was sent, nothing can have committed.
            None => Settled::Aborted,
            Some((xid, pid)) => settle(pool, &xid, pid).await?,
        };
        tracing::warn!(
            attempt,
            bytes = text.len(),
            ?deadline,
            ?settled,
            "a COPY stalled"
        );
        if settled == Settled::Committed {
            return Ok(());
        }
    }
    Err(WorkloadError::Invalid(format!(
        "COPY of {} bytes stalled {TRIES} times (each given {deadline:?}; none committed)",
        text.len()
    )))
}

/// One try: `BEGIN`, note the transaction, COPY, `COMMIT`. An error is returned as it is (a
/// failed try is not retried: only a stall is).
async fn try_copy(
    conn: &mut PgConnection,
    statement: &str,
    text: &[u8],
    started: &mut Option<(String, i32)>,
) -> Result<(), WorkloadError> {
    let mut tx = sqlx::Connection::begin(conn)
        .await
        .map_err(WorkloadError::db("begin the COPY's transaction"))?;
    let row: (String, i32) = sqlx::query_as(include_str!("xact.sql"))
        .fetch_one(&mut *tx)
        .await
        .map_err(WorkloadError::db("read the COPY's transaction id"))?;
    *started = Some(row);
    let mut copy = tx
        .copy_in_raw(statement)
        .await
        .map_err(WorkloadError::db("start COPY"))?;
    copy.send(text)
        .await
        .map_err(WorkloadError::db("send COPY data"))?;
    copy.finish()
        .await
        .map_err(WorkloadError::db("finish COPY"))?;
    tx.commit()
        .await
        .map_err(WorkloadError::db("commit the COPY"))
}

/// Ends the backend `pid` (waiting up to [`EXIT_WAIT`] for it to exit) and reads the final
/// status of its transaction `xid`, polling while it is still in progress (a backend that could
/// not be told to end finishes on its own). No answer within [`EXIT_WAIT`] after that is an
/// error: sending the chunk again could write it twice.
pub(crate) async fn settle(pool: &PgPool, xid: &str, pid: i32) -> Result<Settled, WorkloadError> {
    let wait_ms = EXIT_WAIT.as_millis() as i64;
    if let Err(e) = sqlx::query(include_str!("terminate.sql"))
        .bind(pid)
        .bind(wait_ms)
        .execute(pool)
        .await
    {
        tracing::warn!(pid, error = %e, "could not end a stalled COPY's backend; waiting for it");
    }
    let until = tokio::time::Instant::now() + EXIT_WAIT;
    loop {
        let status: Option<String> = sqlx::query_scalar(include_str!("status.sql"))
            .bind(xid)
            .fetch_one(pool)
            .await
            .map_err(WorkloadError::db(
                "read a stalled COPY's transaction status",
            ))?;
        match status.as_deref() {
            Some("committed") => return Ok(Settled::Committed),
            Some("aborted") => return Ok(Settled::Aborted),
            _ if tokio::time::Instant::now() >= until => {
                return Err(WorkloadError::Invalid(format!(
                    "a stalled COPY's transaction {xid} was still {status:?} {EXIT_WAIT:?} after \
                     its backend {pid} was told to end; not sending the chunk again"
                )))
            }
            _ => tokio::time::sleep(STATUS_POLL).await,
        }
    }
}

#[cfg(test)]
mod tests;
