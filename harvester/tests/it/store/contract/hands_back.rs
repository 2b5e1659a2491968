//! Purge, reset and quarantine: conditioned on the leader (purge excepted: acknowledged rows go
//! whoever marks them), atomic, counted; and the same on id lists longer than one statement's.

use uuid::Uuid;

use super::rig::Rig;
use super::{ids, records};

/// A stale leader (an older generation, its rows re-marked by a newer one) resets and
/// quarantines nothing: skipped silently, not counted, the rows still the newer leader's.
pub async fn a_stale_leader_resets_and_quarantines_nothing(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(4, 2)).await;
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(ids(&store.mark(old, 10).await.unwrap()), all);
    assert_eq!(ids(&store.mark(new, 10).await.unwrap()), all);
    assert_eq!(store.reset(&all, &[old]).await.unwrap(), 0);
    assert!(!store.quarantine(all[0], &[old], "stale").await.unwrap());
    assert_eq!(
        rig.leaders().await,
        vec![Some(new); 4],
        "rows still belong to the newer leader"
    );
    assert!(rig.quarantined().await.is_empty());
}

/// Reset hands rows of one of `leaders` back (leader NULL), counted; the next mark of any
/// generation, the same one included, takes them, and only them.
pub async fn reset_rows_are_marked_again_by_any_generation(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(4, 2)).await;
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    store.mark(new, 10).await.unwrap();
    assert_eq!(store.reset(&all[..2], &[old, new]).await.unwrap(), 2);
    assert_eq!(rig.leaders().await, vec![None, None, Some(new), Some(new)]);
    assert_eq!(
        store.reset(&all[..2], &[new]).await.unwrap(),
        0,
        "reset rows are no one's"
    );
    assert_eq!(ids(&store.mark(new, 10).await.unwrap()), all[..2]);
    let third = Uuid::new_v4();
    assert_eq!(ids(&store.mark(third, 10).await.unwrap()), all);
}

/// Purge deletes the rows of `ids` whoever marks them (a reset row, another leader's row, an
/// unmarked one), counts only what it deleted, and a second purge of the same ids finds them
/// gone.
pub async fn purge_deletes_whoever_marks_the_rows(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(5, 2)).await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    store.mark(a, 2).await.unwrap();
    store.mark(b, 1).await.unwrap();
    assert_eq!(store.reset(&all[..1], &[b]).await.unwrap(), 1);
    // all[0] reset, all[1] b's, all[2] unmarked; all[3..] stay.
    assert_eq!(store.purge(&all[..3]).await.unwrap(), 3);
    assert_eq!(store.purge(&all[..3]).await.unwrap(), 0, "already gone");
    assert_eq!(rig.ids().await, all[3..]);
}

/// Quarantine moves a row of one of `leaders` with its reason, in one step: gone from the
/// outbox, in the quarantine; a second call finds nothing to move.
pub async fn quarantine_moves_the_row_with_its_reason(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(2, 2)).await;
    let leader = Uuid::new_v4();
    store.mark(leader, 10).await.unwrap();
    assert!(store
        .quarantine(all[0], &[leader], "too large")
        .await
        .unwrap());
    assert!(
        !store.quarantine(all[0], &[leader], "again").await.unwrap(),
        "already moved"
    );
    assert_eq!(rig.ids().await, all[1..]);
    assert_eq!(
        rig.quarantined().await,
        vec![(all[0], "too large".to_owned())]
    );
}

/// Id lists longer than a statement takes (stores split them): every promise holds across the
/// split.
pub async fn long_id_lists_keep_every_promise(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(1300, 50)).await;
    let a = Uuid::new_v4();
    assert_eq!(
        ids(&store.mark(a, 2000).await.unwrap()),
        all,
        "every row, in id order"
    );
    let (reset, kept) = all.split_at(1100);
    assert_eq!(store.reset(reset, &[a]).await.unwrap(), 1100);
    let b = Uuid::new_v4();
    assert_eq!(store.reset(kept, &[b]).await.unwrap(), 0, "not b's");
    assert_eq!(ids(&store.mark(a, 2000).await.unwrap()), reset);
    assert_eq!(store.purge(&all).await.unwrap(), 1300);
    assert!(rig.ids().await.is_empty());
}
