//! What a store does around the marks: its migrations, and how it wakes a marker that found
//! nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::LOAD_MARGIN;

use super::rig::Rig;
use super::{ids, records};

/// Migrations are safe when several members start at once on a fresh database, idempotent,
/// and keep the rows already in the table.
pub async fn migrations_are_safe_at_once_idempotent_and_keep_rows(rig: Rig) {
    let prefix = format!("sc_mig_{:?}", rig.imp).to_lowercase();
    let fresh = Rig::new_with(rig.imp, &prefix, false)
        .await
        .expect("its server answered a moment ago");
    drop(rig);
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let store = Arc::clone(&fresh.store);
            tokio::spawn(async move { store.migrate().await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    let written = fresh.commit(&records(5, 2)).await;
    fresh.store.migrate().await.unwrap();
    assert_eq!(fresh.ids().await, written, "the rows are kept");
    let marked = fresh.store.mark(uuid::Uuid::new_v4(), 10).await.unwrap();
    assert_eq!(ids(&marked), written);
}

/// A store that announces commits (`Rig::announces`) wakes a waiting marker when a row commits,
/// long before its idle bound; one that polls says so and waits its idle bound out; none sleeps
/// past the bound (bounds: the idle time plus the load margin).
pub async fn wakeups_follow_commits_or_the_idle_bound(rig: Rig) {
    let mut wakeups = rig.store.wakeups().await;
    assert_eq!(wakeups.announces(), rig.announces(), "{:?}", rig.imp);
    let idle = Duration::from_millis(300);
    let started = Instant::now();
    wakeups.wait(idle).await;
    assert!(started.elapsed() <= idle + LOAD_MARGIN, "slept past idle");

    if rig.announces() {
        wakeups.forget_received();
        let long = Duration::from_secs(60);
        let waiting = tokio::spawn(async move {
            let started = Instant::now();
            wakeups.wait(long).await;
            started.elapsed()
        });
        rig.commit(&records(1, 1)).await;
        let took = waiting.await.unwrap();
        assert!(
            took < LOAD_MARGIN,
            "woken by the commit, not the {long:?} bound: {took:?}"
        );
    } else {
        rig.commit(&records(1, 1)).await;
        let started = Instant::now();
        wakeups.wait(idle).await;
        assert!(started.elapsed() >= idle, "polling waits its idle time out");
    }
}
