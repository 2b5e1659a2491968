//! Two members owning one bucket at once, seen from outside: what every assignor suite samples
//! while its members come, go and hand buckets over.

use harvester::assign::{Assignor, Buckets};

/// One sample of `members`: each one's `owned()` read in order, then again in the same order.
/// A bucket was owned twice at once when a member owned it at both of its reads and another at a
/// read in between (for a later member its first read, for an earlier one its second): a bucket
/// is never lost and won back within microseconds. The buckets and the two members' indices, the
/// one that held them first.
pub fn overlap(members: &[&dyn Assignor]) -> Option<(Buckets, usize, usize)> {
    let first: Vec<Buckets> = members.iter().map(|m| m.owned()).collect();
    let second: Vec<Buckets> = members.iter().map(|m| m.owned()).collect();
    for x in 0..members.len() {
        let held: Buckets = first[x].intersection(&second[x]).copied().collect();
        for y in (0..members.len()).filter(|&y| y != x) {
            let between = if y > x { &first[y] } else { &second[y] };
            let both: Buckets = held.intersection(between).copied().collect();
            if !both.is_empty() {
                return Some((both, x, y));
            }
        }
    }
    None
}
