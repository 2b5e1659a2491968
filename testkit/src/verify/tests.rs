use super::*;

fn expect_all(v: &mut Verifier, keys: &[&str], per_key: u64) {
    for k in keys {
        for s in 0..per_key {
            v.expect("t", k.as_bytes(), s);
        }
    }
}

#[test]
fn clean_run_is_correct() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a", "b"], 3);
    for s in 0..3 {
        v.observe("t", b"a", s);
        v.observe("t", b"b", s);
    }
    let r = v.report();
    assert!(r.is_correct(), "{r}");
    assert_eq!((r.expected, r.delivered, r.duplicates), (6, 6, 0));
}

#[test]
fn catches_loss() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a"], 3);
    v.observe("t", b"a", 0);
    v.observe("t", b"a", 2);
    let r = v.report();
    assert!(!r.is_correct());
    assert_eq!(r.lost, 1);
    assert_eq!(r.lost_examples[0].seq, 1);
    assert!(!v.complete());
}

#[test]
fn catches_duplicate_without_failing() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a"], 2);
    for s in [0, 1, 1] {
        v.observe("t", b"a", s);
    }
    let r = v.report();
    assert_eq!(r.duplicates, 1);
    assert_eq!(r.rewinds, 0);
    assert!(
        r.is_correct(),
        "a trailing duplicate is at-least-once, not an error"
    );
}

#[test]
fn catches_reorder() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a"], 3);
    for s in [0, 2, 1] {
        v.observe("t", b"a", s);
    }
    let r = v.report();
    assert_eq!(r.reordered, 1);
    assert_eq!(r.reordered_examples[0].seq, 1);
    // A first delivery that steps back is a rewind as well: no duplicate is needed for one.
    assert_eq!((r.rewinds, r.duplicates), (1, 0));
    assert!(!r.is_correct());
}

#[test]
fn catches_rewind() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a"], 2);
    for s in [0, 1, 0, 1] {
        v.observe("t", b"a", s);
    }
    let r = v.report();
    assert_eq!((r.duplicates, r.rewinds, r.reordered), (2, 1, 0));
    assert!(!r.is_correct());
}

#[test]
fn counts_each_step_back_as_a_rewind() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a", "b"], 3);
    // a: 0,1,2 then the window 1,2 twice: two steps back, four duplicates.
    for s in [0, 1, 2, 1, 2, 1, 2] {
        v.observe("t", b"a", s);
    }
    // b: in order, then its last record again: a duplicate, no step back.
    for s in [0, 1, 2, 2] {
        v.observe("t", b"b", s);
    }
    let r = v.report();
    assert_eq!((r.duplicates, r.rewinds, r.reordered), (5, 2, 0));
    assert_eq!(r.rewind_examples.len(), 2);
}

#[test]
fn a_rewinds_depth_is_how_far_back_its_key_went() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a", "b"], 6);
    // a replays its last three (depth 2), b its last two (depth 1).
    for s in [0, 1, 2, 3, 4, 5, 3, 4, 5] {
        v.observe("t", b"a", s);
    }
    for s in [0, 1, 2, 3, 4, 5, 4, 5] {
        v.observe("t", b"b", s);
    }
    let r = v.report();
    assert_eq!((r.rewinds, r.deepest_rewind), (2, 2));
    assert!(!r.is_correct());
    // A replay of three records is within a window of 3 or more, not of 2.
    assert!(r.is_correct_within_window(3));
    assert!(!r.is_correct_within_window(2));
    // Loss is never within a window.
    let mut lossy = Verifier::new();
    expect_all(&mut lossy, &["a"], 2);
    lossy.observe("t", b"a", 0);
    assert!(!lossy.report().is_correct_within_window(64));
}

#[test]
fn catches_unexpected_and_counts_foreign() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a"], 1);
    v.observe("t", b"a", 0);
    v.observe("t", b"a", 5);
    v.observe_foreign();
    let r = v.report();
    assert_eq!((r.unexpected, r.foreign), (1, 1));
    assert!(!r.is_correct());
}

#[test]
fn keys_are_independent() {
    let mut v = Verifier::new();
    expect_all(&mut v, &["a", "b"], 2);
    for (k, s) in [("b", 0), ("a", 0), ("b", 1), ("a", 1)] {
        v.observe("t", k.as_bytes(), s);
    }
    assert!(v.report().is_correct());
}

#[test]
fn gaps_from_rollbacks_are_not_loss() {
    let mut v = Verifier::new();
    v.expect("t", b"a", 0);
    v.expect("t", b"a", 2);
    v.observe("t", b"a", 0);
    v.observe("t", b"a", 2);
    assert!(v.report().is_correct());
}

#[test]
fn completeness_follows_expectations_declared_before_or_after_delivery() {
    let mut v = Verifier::new();
    v.expect("t", b"a", 0);
    assert!(!v.complete());
    v.observe("t", b"a", 0);
    assert!(v.complete());
    // Delivered before it was declared (a writer's ledger catching up), then declared.
    v.observe("t", b"b", 0);
    v.expect("t", b"b", 0);
    assert!(v.complete());
    assert_eq!(v.delivered_expected(), 2);
    // A duplicate does not count twice; a new expectation is missing until delivered.
    v.observe("t", b"a", 0);
    v.expect("t", b"a", 1);
    assert!(!v.complete());
    assert_eq!(v.delivered_expected(), 2);
    assert_eq!(v.report().lost, 1);
}
