//! Scoped marks (harvesters sharing one outbox by bucket, `hash(key) mod B`): the layout guard
//! (nothing marked unless B is the recorded count, and the first count recorded stands, also
//! when members record at once), every row in exactly one bucket, a key in one bucket only,
//! `buckets_of` naming the bucket the scoped mark uses, and two interleaved scopes splitting the
//! table.

use std::collections::{BTreeMap, BTreeSet};

use harvester::outbox::Decoded;
use harvester::store::{BucketScope, OutboxStore};
use uuid::Uuid;

use super::rig::Rig;
use super::{ids, records};

const COUNT: u16 = 8;

/// Nothing is marked before a count is recorded, nor under another count afterwards; the first
/// count recorded stands (members recording at once all get the same one); a scope of every
/// bucket is the whole table.
pub async fn the_layout_guards_scoped_marks_and_the_first_count_stands(rig: Rig) {
    let store = &rig.store;
    let written = rig.commit(&records(20, 5)).await;
    let leader = Uuid::new_v4();
    let all = BucketScope::new(COUNT, 0..COUNT);
    for scope in [&all, &BucketScope::new(COUNT, 0..COUNT / 2)] {
        let marked = store.mark_scoped(leader, 10, scope).await.unwrap();
        assert!(marked.is_empty(), "no layout recorded: nothing marked");
    }
    let racing: Vec<_> = [COUNT, COUNT * 2, COUNT * 4, COUNT]
        .into_iter()
        .map(|count| {
            let store = std::sync::Arc::clone(store);
            tokio::spawn(async move { store.record_buckets(count, "racer").await })
        })
        .collect();
    let mut stood = BTreeSet::new();
    for r in racing {
        stood.insert(r.await.unwrap().unwrap());
    }
    assert_eq!(
        stood.len(),
        1,
        "every member gets the same count: {stood:?}"
    );
    let count = *stood.first().unwrap();
    assert_eq!(
        store.record_buckets(count * 2, "later").await.unwrap(),
        count
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
    let whole = BucketScope::new(count, 0..count);
    assert!(whole.is_all());
    assert_eq!(
        ids(&store.mark_scoped(leader, 100, &whole).await.unwrap()),
        written,
        "a scope of every bucket is the whole table, in id order"
    );
}

/// One scope per bucket takes every row exactly once, each key in one bucket only, and
/// `buckets_of` names, in order and across long lists, the bucket each key was taken in; two
/// scopes splitting the buckets, marked in turns as two members would, take every row once with
/// no key in both.
pub async fn scoped_marks_split_the_rows_by_key_and_buckets_of_agrees(rig: Rig) {
    let store = &*rig.store;
    let written = rig.commit(&records(400, 40)).await;
    store.record_buckets(COUNT, "test").await.unwrap();
    let mut taken = BTreeSet::new();
    let mut bucket_of_key: BTreeMap<Vec<u8>, u16> = BTreeMap::new();
    for b in 0..COUNT {
        let leader = Uuid::new_v4();
        let marked = store
            .mark_scoped(leader, 1000, &BucketScope::new(COUNT, [b]))
            .await
            .unwrap();
        let keys: Vec<Option<Vec<u8>>> = marked.iter().map(|d| Some(key_of(d))).collect();
        let computed = store.buckets_of(&keys, COUNT).await.unwrap();
        assert!(computed.iter().all(|c| *c == b), "bucket {b}: {computed:?}");
        for d in &marked {
            assert!(taken.insert(id_of(d)), "row taken twice");
            let first = *bucket_of_key.entry(key_of(d)).or_insert(b);
            assert_eq!(first, b, "a key in two buckets");
        }
        store.reset(&ids(&marked), &[leader]).await.unwrap();
    }
    assert_eq!(taken.len(), written.len(), "every row in one bucket");
    let used: BTreeSet<&u16> = bucket_of_key.values().collect();
    assert!(used.len() >= 6, "40 keys over {} of 8 buckets", used.len());
    assert!(store.buckets_of(&[], COUNT).await.unwrap().is_empty());
    let many: Vec<Option<Vec<u8>>> = (0..600)
        .map(|i| Some(format!("key-{}", i % 40).into_bytes()))
        .collect();
    let spread = store.buckets_of(&many, COUNT).await.unwrap();
    assert_eq!(spread.len(), 600);
    for (key, b) in many.iter().zip(spread) {
        assert_eq!(
            bucket_of_key[key.as_ref().unwrap()],
            b,
            "in order, across lists"
        );
    }
    split_in_turns(store, written.len()).await;
}

/// Two scopes splitting the buckets, marked (and purged) in turns: every row once, no key in
/// both, both with keys.
async fn split_in_turns(store: &dyn OutboxStore, rows: usize) {
    let (left, right) = (
        BucketScope::new(COUNT, 0..COUNT / 2),
        BucketScope::new(COUNT, COUNT / 2..COUNT),
    );
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let (mut l_keys, mut r_keys, mut seen) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    loop {
        let l = mark_and_purge(store, a, &left).await;
        let r = mark_and_purge(store, b, &right).await;
        if l.is_empty() && r.is_empty() {
            break;
        }
        for (marked, keys) in [(&l, &mut l_keys), (&r, &mut r_keys)] {
            for d in marked {
                assert!(seen.insert(id_of(d)), "row {} taken twice", id_of(d));
                keys.insert(key_of(d));
            }
        }
    }
    assert_eq!(seen.len(), rows, "every row taken");
    assert!(l_keys.is_disjoint(&r_keys), "a key in both scopes");
    assert!(
        !l_keys.is_empty() && !r_keys.is_empty(),
        "both scopes had keys"
    );
}

/// One scoped mark of 7 rows, checked to be in id order, and its rows purged.
async fn mark_and_purge(
    store: &dyn OutboxStore,
    leader: Uuid,
    scope: &BucketScope,
) -> Vec<Decoded> {
    let marked = store.mark_scoped(leader, 7, scope).await.unwrap();
    let got = ids(&marked);
    assert!(got.windows(2).all(|w| w[0] < w[1]), "id order: {got:?}");
    assert_eq!(store.purge(&got).await.unwrap(), got.len() as u64);
    marked
}

fn id_of(d: &Decoded) -> i64 {
    ids(std::slice::from_ref(d))[0]
}

fn key_of(d: &Decoded) -> Vec<u8> {
    let r = d.as_ref().expect("a well-formed row");
    r.key.clone().expect("a keyed row")
}
