//! What the harvester reads about a store besides its rows: the backlog, readiness, a
//! description and the pool's gauges.

use uuid::Uuid;

use super::records;
use super::rig::{Impl, Rig};

/// The backlog counts the rows (marked or not) and ages the oldest; 0 and 0 s once empty.
/// `ping` answers; `describe` names the table; a store with a pool reports it.
pub async fn backlog_ping_describe_and_pool(rig: Rig) {
    let store = &rig.store;
    let empty = store.backlog().await.unwrap();
    assert_eq!((empty.rows, empty.oldest_age_seconds), (0, 0.0));
    let all = rig.commit(&records(10, 3)).await;
    store.mark(Uuid::new_v4(), 4).await.unwrap();
    let backlog = store.backlog().await.unwrap();
    assert_eq!(backlog.rows, 10);
    assert!(
        backlog.oldest_age_seconds >= 0.0 && backlog.oldest_age_seconds < 60.0,
        "{backlog:?}"
    );
    assert_eq!(store.purge(&all).await.unwrap(), 10);
    let drained = store.backlog().await.unwrap();
    assert_eq!((drained.rows, drained.oldest_age_seconds), (0, 0.0));

    store.ping().await.unwrap();
    let described = store.describe();
    match rig.imp {
        Impl::Memory => assert!(store.pool_stats().is_none(), "no pool"),
        _ => {
            assert!(described.contains(&rig.outbox.table.table), "{described}");
            let pool = store.pool_stats().expect("a pool");
            assert!(pool.max >= 2 && pool.size <= pool.max, "{pool:?}");
        }
    }
}
