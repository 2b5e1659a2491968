//! Marks: atomic and exclusive, the head of the table in id order, a newer generation taking
//! back what an older one holds, and each row as it was written.

use uuid::Uuid;

use super::rig::Rig;
use super::{ids, records};

/// A mark returns the lowest ids among the rows not marked by `leader`, at most `limit`,
/// sorted by id; exactly the rows it returned carry `leader`, and a leader's own rows are not
/// marked again.
pub async fn marks_take_the_head_in_id_order(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(10, 3)).await;
    assert_eq!(all.len(), 10);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");

    let a = Uuid::new_v4();
    assert_eq!(ids(&store.mark(a, 4).await.unwrap()), all[..4]);
    let mut expected = vec![Some(a); 4];
    expected.resize(10, None);
    assert_eq!(rig.leaders().await, expected, "exactly the rows returned");
    assert_eq!(ids(&store.mark(a, 4).await.unwrap()), all[4..8]);
    assert_eq!(ids(&store.mark(a, 100).await.unwrap()), all[8..]);
    assert!(
        store.mark(a, 100).await.unwrap().is_empty(),
        "a leader's own rows are not marked again"
    );
    assert!(rig.leaders().await.iter().all(|l| *l == Some(a)));
}

/// A newer generation (another leader id) re-marks, from the head, what an older one or a
/// dead leader holds.
pub async fn a_newer_generation_re_marks_what_an_older_one_holds(rig: Rig) {
    let store = &rig.store;
    let all = rig.commit(&records(5, 2)).await;
    let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(ids(&store.mark(old, 3).await.unwrap()), all[..3]);
    assert_eq!(
        ids(&store.mark(new, 10).await.unwrap()),
        all,
        "the old generation's rows and the unmarked ones, from the head"
    );
    assert!(rig.leaders().await.iter().all(|l| *l == Some(new)));
    assert!(store.mark(new, 10).await.unwrap().is_empty());
}

/// A marked row comes back as it was written: topic, key, value (a tombstone too), headers in
/// order (binary values, partition and timestamp, before the epoch too, where the table
/// carries them: `Rig::carries_*`), and a UTC create time.
pub async fn a_marked_row_comes_back_as_it_was_written(rig: Rig) {
    let mut written = records(4, 3);
    let second: (&str, Vec<u8>) = match rig.carries_binary_headers() {
        true => ("bin", vec![0, 255]),
        false => ("text", b"x y".to_vec()),
    };
    written[0] = written[0]
        .clone()
        .header("trace", "abc")
        .header(second.0, second.1.clone());
    written[2].value = None;
    if rig.carries_partition_and_timestamp() {
        written[1].partition = Some(2);
        written[1].timestamp_ms = Some(1_700_000_000_123);
    }
    if rig.carries_timestamps_before_the_epoch() {
        written[3].timestamp_ms = Some(-1);
    }
    let all = rig.commit(&written).await;
    let marked = rig.store.mark(Uuid::new_v4(), 10).await.unwrap();
    assert_eq!(ids(&marked), all);

    let r0 = marked[0].as_ref().unwrap();
    assert_eq!(r0.topic, "t");
    assert_eq!(r0.key.as_deref(), Some(&b"key-0"[..]));
    assert_eq!(r0.value.as_deref(), Some(&b"0"[..]));
    assert_eq!(
        r0.headers,
        vec![
            ("trace".into(), b"abc".to_vec()),
            (second.0.into(), second.1)
        ]
    );
    assert_eq!((r0.partition, r0.timestamp_ms), (None, None));
    let age = chrono::Utc::now() - r0.create_time;
    assert!(age.num_seconds().abs() < 60, "create_time is UTC: {age}");
    assert_eq!(marked[2].as_ref().unwrap().value, None, "a tombstone");
    if rig.carries_partition_and_timestamp() {
        let r1 = marked[1].as_ref().unwrap();
        assert_eq!(
            (r1.partition, r1.timestamp_ms),
            (Some(2), Some(1_700_000_000_123))
        );
    }
    if rig.carries_timestamps_before_the_epoch() {
        let r3 = marked[3].as_ref().unwrap();
        assert_eq!(r3.timestamp_ms, Some(-1), "before the epoch");
    }
}

/// A mark takes committed rows only and never waits for an open transaction: a row whose
/// transaction drew a lower id but commits late is left out, then taken by the next mark once
/// committed. Bounded by the load margin: a mark that waited would wait for the test's open
/// transaction (or a lock-wait timeout, 50 s on MariaDB).
pub async fn a_late_commit_is_marked_once_committed_and_never_waited_for(rig: Rig) {
    let mut early = rig.begin().await;
    let low = early.stash(&records(1, 1)).await[0];
    let high = rig.commit(&records(1, 1)).await[0];
    assert!(low < high);
    let leader = Uuid::new_v4();
    let marked = tokio::time::timeout(testkit::LOAD_MARGIN, rig.store.mark(leader, 10))
        .await
        .expect("a mark must not wait for an uncommitted insert")
        .unwrap();
    assert_eq!(
        ids(&marked),
        vec![high],
        "the uncommitted row is not there yet"
    );
    early.commit().await;
    assert_eq!(
        ids(&rig.store.mark(leader, 10).await.unwrap()),
        vec![low],
        "the late commit is taken by the next mark"
    );
}
