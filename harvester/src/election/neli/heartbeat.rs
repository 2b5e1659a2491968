//! The heartbeat a leader publishes to partition 0 and must read back.
//!
//! goNELI accepts any message as proof of connectivity; a heartbeat here names its sender and
//! term and carries its send time, so only this member's heartbeat for its current (or pending)
//! term, sent recently, keeps it leader. A heartbeat from another member, a previous term, or one
//! delivered very late proves nothing about this member's standing now.

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
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Heartbeat {
    pub fn new(member: &str, term: Uuid) -> Self {
        Heartbeat {
            member: member.to_owned(),
            term,
            sent_ms: now_ms(),
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_own_fresh_heartbeat_for_the_term_counts() {
        let term = Uuid::new_v4();
        let hb = Heartbeat::decode(&Heartbeat::new("me", term).encode()).unwrap();
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
}
