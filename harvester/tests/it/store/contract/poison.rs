//! Malformed rows: marked like any other row and returned as poison (never an error), so the
//! pipeline quarantines them and the rows around them go on.

use uuid::Uuid;

use super::rig::Rig;
use super::{ids, records};

/// Every malformed row the table can hold (`Rig::bads`) comes back from a mark as `Poison` with
/// a reason naming the fault, in id order among the good rows, and quarantines with it.
pub async fn malformed_rows_come_back_as_poison(rig: Rig) {
    let store = &rig.store;
    let good = rig.commit(&records(1, 1)).await[0];
    let bads = rig.bads();
    let mut bad_ids = Vec::new();
    for &bad in &bads {
        bad_ids.push(rig.insert_bad(bad).await);
    }
    let after = rig.commit(&records(1, 1)).await[0];
    let leader = Uuid::new_v4();
    let marked = store.mark(leader, 20).await.unwrap();
    let mut expected = vec![good];
    expected.extend(&bad_ids);
    expected.push(after);
    assert_eq!(ids(&marked), expected);
    assert!(marked[0].is_ok() && marked[marked.len() - 1].is_ok());
    for (d, bad) in marked[1..=bads.len()].iter().zip(&bads) {
        let p = d.as_ref().expect_err("poison");
        assert!(
            p.reason.contains(bad.reason()),
            "row {} ({bad:?}): {} (expected {})",
            p.id,
            p.reason,
            bad.reason()
        );
        assert!(store.quarantine(p.id, &[leader], &p.reason).await.unwrap());
    }
    let quarantined: Vec<i64> = rig.quarantined().await.iter().map(|q| q.0).collect();
    assert_eq!(quarantined, bad_ids);
    assert_eq!(rig.ids().await, vec![good, after]);
}
