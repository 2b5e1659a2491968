//! Checks of the `OutboxStore` contract that every backend's suite runs alike.

use harvester::store::{BucketScope, OutboxStore};
use uuid::Uuid;

/// Scoped marks take nothing until the table's bucket count is recorded, and nothing under
/// another count afterwards: the first recorded count (`count`) stands.
pub async fn layout_guards_scoped_marks(store: &dyn OutboxStore, count: u16) {
    let all = BucketScope::new(count, 0..count);
    let leader = Uuid::new_v4();
    assert!(
        store
            .mark_scoped(leader, 10, &all)
            .await
            .unwrap()
            .is_empty(),
        "no layout recorded: a scoped mark takes nothing"
    );
    assert_eq!(store.record_buckets(count, "first").await.unwrap(), count);
    assert_eq!(
        store.record_buckets(count * 2, "second").await.unwrap(),
        count,
        "the first count stands"
    );
    let other = BucketScope::new(count * 2, 0..count * 2);
    assert!(
        store
            .mark_scoped(leader, 10, &other)
            .await
            .unwrap()
            .is_empty(),
        "a scope of another count takes nothing"
    );
}
