//! Against the real Postgres: a COPY that stalls while committing is written once, and a
//! stalled try's transaction is read as what it became.

use std::time::Duration;

use testkit::TestDb;

use super::{copy_in, settle, Settled};

/// How long the stalling trigger sleeps: longer than the test's deadline by a margin of 4 s,
/// so a try is always given up while its server side still sleeps.
const STALL: Duration = Duration::from_secs(5);
const DEADLINE: Duration = Duration::from_secs(1);

/// A table whose first row ever stalls its transaction's COMMIT for [`STALL`]: a deferred
/// constraint trigger sleeps when a sequence (not rolled back with the transaction) says it is
/// the first call, and notes its backend in another (`stalled_pid`).
async fn stalling_table(db: &TestDb) {
    let stall = STALL.as_secs();
    for statement in [
        "CREATE TABLE copied (v int NOT NULL)".to_owned(),
        "CREATE SEQUENCE stall_once".to_owned(),
        "CREATE SEQUENCE stalled_pid".to_owned(),
        format!(
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
             IF nextval('stall_once') = 1 THEN \
             PERFORM setval('stalled_pid', pg_backend_pid()); PERFORM pg_sleep({stall}); END IF; \
             RETURN NULL; END $$"
        ),
        "CREATE CONSTRAINT TRIGGER stall AFTER INSERT ON copied DEFERRABLE INITIALLY DEFERRED \
         FOR EACH ROW EXECUTE FUNCTION stall()"
            .to_owned(),
    ] {
        sqlx::query(&statement).execute(&db.pool).await.unwrap();
    }
}

/// Waits until the stalled backend has exited (bounded by the stall plus a margin of 10 s):
/// whatever a given-up try would still commit has by then.
async fn no_copy_left(db: &TestDb) {
    let until = tokio::time::Instant::now() + STALL + Duration::from_secs(10);
    loop {
        let (running,): (i64,) = sqlx::query_as(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE pid = (SELECT last_value FROM stalled_pid)",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        if running == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the stalled try still runs"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_copy_that_stalls_while_committing_is_written_once() {
    testkit::init_tracing();
    let db = TestDb::new("copy_once").await.unwrap();
    stalling_table(&db).await;

    copy_in(
        &db.pool,
        "COPY copied (v) FROM STDIN",
        b"1\n2\n3\n",
        DEADLINE,
    )
    .await
    .unwrap();
    no_copy_left(&db).await;

    let (rows, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT v) FROM copied")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!((rows, distinct), (3, 3), "each row exactly once");
    let (calls,): (i64,) = sqlx::query_as("SELECT last_value FROM stall_once")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    // The first try stalled at its first row and was ended; the second ran all three.
    assert_eq!(calls, 4, "the first try stalled and was sent again");
    db.close().await.unwrap();
}

/// Begins a transaction on a connection of its own, notes it, and commits or rolls it back.
async fn ended(db: &TestDb, commit: bool) -> (String, i32) {
    let mut conn = db.pool.acquire().await.unwrap().detach();
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let noted: (String, i32) = sqlx::query_as(include_str!("xact.sql"))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    if commit {
        tx.commit().await.unwrap();
    } else {
        tx.rollback().await.unwrap();
    }
    noted
}

#[tokio::test]
async fn a_stalled_tries_transaction_is_read_as_what_it_became() {
    testkit::init_tracing();
    let db = TestDb::new("copy_settle").await.unwrap();
    let (xid, pid) = ended(&db, true).await;
    assert_eq!(
        settle(&db.pool, &xid, pid).await.unwrap(),
        Settled::Committed
    );
    let (xid, pid) = ended(&db, false).await;
    assert_eq!(settle(&db.pool, &xid, pid).await.unwrap(), Settled::Aborted);

    // Still open on its backend: ended by settle, so aborted.
    let mut conn = db.pool.acquire().await.unwrap().detach();
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let (xid, pid): (String, i32) = sqlx::query_as(include_str!("xact.sql"))
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(settle(&db.pool, &xid, pid).await.unwrap(), Settled::Aborted);
    drop(tx);
    drop(conn);
    db.close().await.unwrap();
}
