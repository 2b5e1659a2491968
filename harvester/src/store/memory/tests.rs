//! The memory store's own behaviour (faults, gates, wake-ups, poison, buckets); the port's
//! clauses run on it with every other store in `harvester/tests/it/store/contract/`.

use std::time::Duration;

use super::*;
use crate::outbox::StashRecord;

fn records(n: usize) -> Vec<StashRecord> {
    (0..n)
        .map(|i| StashRecord::new("t", format!("k{}", i % 3), format!("v{i}")))
        .collect()
}

fn ids(decoded: &[Decoded]) -> Vec<i64> {
    decoded
        .iter()
        .map(|d| match d {
            Ok(r) => r.id,
            Err(p) => p.id,
        })
        .collect()
}

#[tokio::test]
async fn planned_faults_fail_lose_the_outcome_delay_or_hold() {
    let store = MemoryStore::new();
    store.insert(&records(3));
    let leader = Uuid::new_v4();
    store.plan(Op::Mark, Fault::Fail);
    store.plan(Op::Mark, Fault::UnknownOutcome);
    assert!(matches!(
        store.mark(leader, 1).await,
        Err(Error::Injected(_))
    ));
    assert!(
        store.rows().iter().all(|r| r.leader_id.is_none()),
        "a failed mark marks nothing"
    );
    assert!(matches!(
        store.mark(leader, 1).await,
        Err(Error::Injected(_))
    ));
    assert_eq!(
        store.rows()[0].leader_id,
        Some(leader),
        "an unknown outcome was applied"
    );
    store.plan(Op::Mark, Fault::Delay(Duration::from_millis(50)));
    let started = std::time::Instant::now();
    assert_eq!(store.mark(leader, 1).await.unwrap().len(), 1);
    assert!(started.elapsed() >= Duration::from_millis(50));

    let gate = store.hold_next(Op::Purge);
    let ids: Vec<i64> = store.rows().iter().map(|r| r.id).collect();
    let store_rows_before = ids.len() as u64;
    let held = {
        let store = store.clone();
        tokio::spawn(async move { store.purge(&ids).await })
    };
    gate.reached().await;
    // While the purge waits, a newer leader re-marks everything and deletes the first row:
    // the held purge runs after both, on what is left.
    store.mark(Uuid::new_v4(), 10).await.unwrap();
    assert_eq!(store.purge(&[1]).await.unwrap(), 1);
    gate.open();
    assert_eq!(held.await.unwrap().unwrap(), store_rows_before - 1);
    assert_eq!(store.len(), 0);
    assert_eq!(store.calls(Op::Mark), 4);
    assert_eq!(store.calls(Op::Purge), 2);
}

#[tokio::test]
async fn a_held_answer_was_applied_before_it_waits() {
    let store = MemoryStore::new();
    store.insert(&records(2));
    let leader = Uuid::new_v4();
    let gate = store.hold_next_answer(Op::Mark);
    let held = {
        let store = store.clone();
        tokio::spawn(async move { store.mark(leader, 10).await })
    };
    gate.reached().await;
    assert!(
        store.rows().iter().all(|r| r.leader_id == Some(leader)),
        "the mark ran before its answer was held"
    );
    // While the answer waits, a row it read is deleted: the answer still has it.
    assert_eq!(store.purge(&[1]).await.unwrap(), 1);
    assert!(!held.is_finished());
    gate.open();
    assert_eq!(ids(&held.await.unwrap().unwrap()), vec![1, 2]);
}

#[tokio::test]
async fn a_store_without_notifications_polls() {
    let polling = MemoryStore::with_options(false, true);
    let mut wakeups = polling.wakeups().await;
    assert!(!wakeups.announces());
    polling.insert(&records(1));
    let started = std::time::Instant::now();
    wakeups.wait(Duration::from_millis(30)).await;
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "polling waits out idle"
    );
}
