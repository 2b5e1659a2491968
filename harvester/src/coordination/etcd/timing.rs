//! The timings every etcd member has beside its lease TTL, checked alike for the elector and
//! Rink: a member whose revocation or first connection could wait without bound would hold up
//! its successor or its start for ever.

use std::time::Duration;

/// The longest revocation a member may be set to wait for.
const MAX_REVOKE: Duration = Duration::from_secs(600);

/// Problems with the two timings every etcd member has beside its TTL (the elector's and Rink's
/// checks share it): a revoke timeout above zero and at most [`MAX_REVOKE`], a connect timeout
/// of 100 ms to 5 min.
pub(crate) fn timing_problems(
    revoke_timeout: Option<Duration>,
    connect_timeout: Duration,
    problem: &mut impl FnMut(&str, String),
) {
    if let Some(rt) = revoke_timeout {
        if rt.is_zero() || rt > MAX_REVOKE {
            problem(
                "revoke_timeout",
                format!("is {rt:?}; use above zero and at most 10m, or leave it unset for 2x ttl"),
            );
        }
    }
    let ct = connect_timeout;
    if ct < Duration::from_millis(100) || ct > Duration::from_secs(300) {
        problem(
            "connect_timeout",
            format!("is {ct:?}; use 100ms to 5m (5s is the default)"),
        );
    }
}
