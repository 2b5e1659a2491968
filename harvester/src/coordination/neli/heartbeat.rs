//! The heartbeat a leader publishes to partition 0 and must read back.
//!
//! goNELI accepts any message as proof of connectivity; a heartbeat here names its sender and
//! term and carries its send time, so only this member's heartbeat for its current (or pending)
//! term, sent recently, keeps it leader. A heartbeat from another member, a previous term, or one
//! delivered very late proves nothing about this member's standing now.
//!
//! A heartbeat also carries the group generation in which its sender was assigned partition 0.
//! A correct coordinator never lets two members hold partition 0 at once, but some
//! Kafka-compatible brokers do (seen with tansu: a new member assigned partition 0 before the old
//! owner was revoked), so another member's fresh heartbeat on partition 0 is evidence of a second
//! holder. [`Heartbeat::outranks`] decides which of the two stands down.
//!
//! It also says whether its sender was acting as leader when it sent it. A member newly
//! assigned partition 0 does not act while another member's heartbeats still say so (see
//! `pulser`): the outranked holder fences when it reads the newcomer's heartbeat, and its next
//! heartbeat says it stopped, so the two never act at once, even on a broker that assigned
//! both.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Wire form of a heartbeat (JSON value; key = member name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub member: String,
    pub term: Uuid,
    /// Send time, milliseconds since the Unix epoch.
    pub sent_ms: u64,
    /// The group generation in which the sender was assigned partition 0; -1 when unknown
    /// (heartbeats of versions before it was sent).
    #[serde(default = "unknown_generation")]
    pub generation: i32,
    /// The sender was acting as leader when it sent this (true for heartbeats of versions
    /// before it was sent: they were only sent while assigned, so assume the worst).
    #[serde(default = "assume_leading")]
    pub leading: bool,
}

fn unknown_generation() -> i32 {
    -1
}

fn assume_leading() -> bool {
    true
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Heartbeat {
    pub fn new(member: &str, term: Uuid, generation: i32, leading: bool) -> Self {
        Heartbeat {
            member: member.to_owned(),
            term,
            sent_ms: now_ms(),
            generation,
            leading,
        }
    }

    /// Whether this is another member's recent heartbeat saying it was acting as leader.
    pub fn peer_leading(&self, member: &str, now_ms: u64, max_age: Duration) -> bool {
        self.member != member
            && self.leading
            && now_ms.saturating_sub(self.sent_ms) < max_age.as_millis() as u64
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// Whether this heartbeat proves `member`'s standing for `term` at `now_ms`.
    pub fn vouches_for(&self, member: &str, term: Uuid, now_ms: u64, max_age: Duration) -> bool {
        self.member == member
            && self.term == term
            && now_ms.saturating_sub(self.sent_ms) < max_age.as_millis() as u64
    }

    /// Whether this is another member's recent heartbeat that outranks `member`, assigned in
    /// `generation`: a newer generation wins, and a tie goes to the greater member name. The
    /// order is total over the members holding partition 0, so its greatest member is outranked
    /// by nobody and never stands down: two holders cannot fence each other forever, and the
    /// survivor is the newest assignment, the one the coordinator meant.
    pub fn outranks(&self, member: &str, generation: i32, now_ms: u64, max_age: Duration) -> bool {
        self.member != member
            && now_ms.saturating_sub(self.sent_ms) < max_age.as_millis() as u64
            && (self.generation, self.member.as_str()) > (generation, member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_own_fresh_heartbeat_for_the_term_counts() {
        let term = Uuid::new_v4();
        let hb = Heartbeat::decode(&Heartbeat::new("me", term, 3, true).encode()).unwrap();
        let now = now_ms();
        let age = Duration::from_secs(5);
        assert!(hb.vouches_for("me", term, now, age));
        assert!(
            !hb.vouches_for("other", term, now, age),
            "another member's heartbeat"
        );
        assert!(
            !hb.vouches_for("me", Uuid::new_v4(), now, age),
            "an older term's heartbeat"
        );
        assert!(
            !hb.vouches_for("me", term, now + 6000, age),
            "a stale heartbeat"
        );
        assert!(Heartbeat::decode(b"not json").is_none());
    }

    #[test]
    fn a_newer_generation_outranks_and_ties_go_to_the_greater_name() {
        let now = now_ms();
        let age = Duration::from_secs(5);
        let peer = |member: &str, generation| Heartbeat {
            generation,
            ..Heartbeat::new(member, Uuid::new_v4(), generation, true)
        };
        assert!(peer("a", 8).outranks("m", 7, now, age), "newer generation");
        assert!(!peer("z", 6).outranks("m", 7, now, age), "older generation");
        assert!(peer("z", 7).outranks("m", 7, now, age), "tie: greater name");
        assert!(!peer("a", 7).outranks("m", 7, now, age), "tie: lesser name");
        assert!(
            !peer("m", 9).outranks("m", 7, now, age),
            "own heartbeats never outrank"
        );
        assert!(
            !peer("a", 8).outranks("m", 7, now + 6000, age),
            "a stale heartbeat proves nothing"
        );
        // Exactly one of two simultaneous holders stands down, whatever their ranks.
        for (g1, g2) in [(3, 3), (3, 4), (5, 4)] {
            let (x, y) = (peer("x", g1), peer("y", g2));
            let x_yields = y.outranks("x", g1, now, age);
            let y_yields = x.outranks("y", g2, now, age);
            assert!(x_yields != y_yields, "generations {g1} and {g2}");
        }
        let legacy: Heartbeat = serde_json::from_str(
            r#"{"member":"old","term":"00000000-0000-0000-0000-000000000000","sent_ms":1}"#,
        )
        .unwrap();
        assert_eq!(legacy.generation, -1);
        assert!(
            legacy.leading,
            "a heartbeat without the flag is assumed to lead"
        );
        let now = now_ms();
        let quiet = Heartbeat::new("p", Uuid::new_v4(), 3, false);
        assert!(!quiet.peer_leading("me", now, age));
        let loud = Heartbeat::new("p", Uuid::new_v4(), 3, true);
        assert!(loud.peer_leading("me", now, age));
        assert!(
            !loud.peer_leading("p", now, age),
            "own heartbeats are no peer's"
        );
        assert!(!loud.peer_leading("me", now + 6000, age), "stale");
    }
}
