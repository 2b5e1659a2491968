//! Settings of Rink on etcd and the timings that follow from them.
//!
//! As for the etcd elector, only the lease TTL is tunable among the safety timings: the
//! keep-alive interval, how long a member acts on its lease and how long the leader waits
//! before handing a vanished member's rank on all derive from it, so they cannot be set into a
//! combination where a stalled member still acts when its successor starts.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::assign::DEFAULT_BUCKETS;
use crate::coordination::etcd::keeper::LeaseTiming;
use crate::coordination::etcd::{access_problems, timing_problems, Access, EtcdTls};
use crate::coordination::naming::{self, binary_name, sanitise};
use crate::error::ConfigProblem;
use crate::secret::Secret;

/// Settings of Rink on etcd (a sticky ranked ring: buckets by consistent hashing over ranks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RinkConfig {
    /// The cluster's client URLs, `http://host:port`, `https://host:port` (with `tls`) or a
    /// bare `host:port`, one per member. Default `["http://127.0.0.1:2379"]`.
    pub endpoints: Vec<String>,
    /// TLS, as for the etcd elector ([`EtcdTls`]): `{ ca, cert, key }`. Default none.
    #[serde(default)]
    pub tls: Option<EtcdTls>,
    /// The etcd user (its role needs readwrite on the prefix). Default none.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password ([`Secret`]). Never printed. Default none.
    #[serde(default)]
    pub password: Option<Secret>,
    /// The rink's key prefix: members of one group share it (`{prefix}/members/`,
    /// `{prefix}/applied/`, `{prefix}/state`). Default `/harvester/rink/<group>`, the group
    /// being the binary's name unless [`RinkConfig::for_group`] set it (characters outside
    /// `[a-zA-Z0-9._-]` replaced by `_`). Nothing else may write under it.
    pub prefix: Option<String>,
    /// This member's name: its key `{prefix}/members/{name}`; unique within the rink. Default
    /// `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// The lease TTL: a member the server has not heard from for this long loses its lease and
    /// its keys. It keeps the lease alive every quarter of it and stops acting on its buckets by
    /// itself half of it after sending the last keep-alive the server answered; the leader hands
    /// a vanished member's rank on half of it after seeing its key go. Whole seconds, 2s to 1h;
    /// default 5s.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// How long a joining member waits before it is given a rank of its own (moving about 1/n
    /// of the buckets to it); a member leaving meanwhile hands its rank to it at once, moving
    /// nothing else (rolling deploys). Zero ranks a member as soon as the leader sees it.
    /// Default 10s; at most 1h.
    #[serde(with = "humantime_serde")]
    pub rebalance_delay: Duration,
    /// B: how many buckets the table is split into; the same for every member (the table
    /// records the first member's, and a member with another count refuses). Default
    /// [`DEFAULT_BUCKETS`] (64).
    pub buckets: u16,
    /// How long a member waits for the application to acknowledge a revocation before it
    /// reports the buckets released anyway (the next owner waits for that report). Default 2x
    /// `ttl`, at most 30s.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Bound on reaching the cluster at start (the first lease grant and joining). Default 5s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
}

impl Default for RinkConfig {
    fn default() -> Self {
        RinkConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            tls: None,
            user: None,
            password: None,
            prefix: None,
            name: None,
            ttl: Duration::from_secs(5),
            rebalance_delay: Duration::from_secs(10),
            buckets: DEFAULT_BUCKETS,
            revoke_timeout: None,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

const MIN_TTL: Duration = Duration::from_secs(2);
const MAX_TTL: Duration = Duration::from_secs(3600);
const MAX_DELAY: Duration = Duration::from_secs(3600);
const MAX_DEFAULT_REVOKE: Duration = Duration::from_secs(30);

/// The default prefix of the rink of `group`.
pub fn prefix_for_group(group: &str) -> String {
    format!("/harvester/rink/{}", sanitise(group))
}

impl RinkConfig {
    /// The defaults, with the prefix of the rink of `group`.
    pub fn for_group(group: &str) -> RinkConfig {
        RinkConfig {
            prefix: Some(prefix_for_group(group)),
            ..Default::default()
        }
    }

    /// Checks the settings as the `leader` section; see [`RinkConfig::problems`].
    pub fn validate(&self) -> Vec<ConfigProblem> {
        self.problems("leader")
    }

    /// Checks the settings; every problem names the field (`{field}.<name>`) and the fix.
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut problem = |name: &str, message: String| {
            problems.push(ConfigProblem::new(format!("{field}.{name}"), message))
        };
        access_problems(&self.endpoints, &self.access(), &mut problem);
        if let Some(p) = self.prefix.as_deref().and_then(prefix_problem) {
            problem("prefix", p);
        }
        if let Some(n) = &self.name {
            if n.trim().is_empty() || n.len() > 256 || n.contains(['/', ' ']) {
                problem(
                    "name",
                    format!("is {n:?}; use 1-256 characters without '/' or spaces, or leave it unset for <host>_<pid>_<secs>"),
                );
            }
        }
        let ttl = self.ttl;
        if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
            problem(
                "ttl",
                format!("is {ttl:?}; use 2s to 1h (5s is the default)"),
            );
        } else if ttl.subsec_nanos() != 0 {
            problem(
                "ttl",
                format!(
                    "is {ttl:?}; etcd leases count whole seconds: use {}s or {}s",
                    ttl.as_secs(),
                    ttl.as_secs() + 1
                ),
            );
        }
        if self.rebalance_delay > MAX_DELAY {
            problem(
                "rebalance_delay",
                format!(
                    "is {:?}; use at most 1h (10s is the default)",
                    self.rebalance_delay
                ),
            );
        }
        if self.buckets == 0 {
            problem(
                "buckets",
                format!("is 0; use at least 1 ({DEFAULT_BUCKETS} is the default), the same for every member"),
            );
        }
        timing_problems(self.revoke_timeout, self.connect_timeout, &mut problem);
        problems
    }

    /// How long the application waits for acknowledgements of a revocation.
    pub fn revoke_timeout(&self) -> Duration {
        self.revoke_timeout
            .unwrap_or_else(|| (self.ttl * 2).min(MAX_DEFAULT_REVOKE))
    }

    /// TLS and the user, as the client takes them.
    pub fn access(&self) -> Access {
        Access {
            tls: self.tls.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
        }
    }

    /// Resolves the defaults.
    pub fn resolve(&self) -> Resolved {
        Resolved {
            endpoints: self.endpoints.iter().map(|e| e.trim().to_owned()).collect(),
            access: self.access(),
            prefix: self
                .prefix
                .clone()
                .unwrap_or_else(|| prefix_for_group(&binary_name())),
            name: self.name.clone().unwrap_or_else(member_name),
            ttl: self.ttl,
            rebalance_delay: self.rebalance_delay,
            buckets: self.buckets,
            revoke_timeout: self.revoke_timeout(),
            connect_timeout: self.connect_timeout,
        }
    }
}

/// Settings with every default resolved, and the timings derived from them.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub endpoints: Vec<String>,
    /// TLS and the user.
    pub access: Access,
    pub prefix: String,
    pub name: String,
    pub ttl: Duration,
    pub rebalance_delay: Duration,
    pub buckets: u16,
    pub revoke_timeout: Duration,
    pub connect_timeout: Duration,
}

impl Resolved {
    /// How long a member acts after sending the last keep-alive the server answered: half the
    /// TTL (the server renewed the lease after that send, so it keeps the lease at least a
    /// whole TTL after it).
    pub fn lease(&self) -> Duration {
        self.ttl / 2
    }

    /// How often the lease is kept alive: a quarter of the TTL, so one lost keep-alive does not
    /// end it.
    pub fn keep_alive_interval(&self) -> Duration {
        self.ttl / 4
    }

    /// What the lease keeper follows.
    pub(crate) fn lease_timing(&self) -> LeaseTiming {
        LeaseTiming {
            name: self.name.clone(),
            ttl: self.ttl,
            lease: self.lease(),
            keep_alive_interval: self.keep_alive_interval(),
        }
    }

    /// How long the leader waits, after it first sees a member's key gone without a release,
    /// before handing the member's rank on: the member's own lease (it acted at most that long
    /// after its last answered keep-alive, which was sent before its key went) plus a margin for
    /// clocks running at slightly different rates.
    pub fn vanish_wait(&self) -> Duration {
        self.lease() + Duration::from_millis(100)
    }

    /// A bound for each request.
    pub fn op_timeout(&self) -> Duration {
        self.lease()
            .clamp(Duration::from_millis(250), Duration::from_secs(5))
    }

    /// The endpoints joined for logs.
    pub fn endpoint_list(&self) -> String {
        self.endpoints.join(",")
    }

    /// Everything of the rink: `{prefix}/`.
    pub fn range(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// A member's key.
    pub fn member_key(&self, name: &str) -> String {
        format!("{}/members/{name}", self.prefix)
    }

    /// A member's applied mark.
    pub fn applied_key(&self, name: &str) -> String {
        format!("{}/applied/{name}", self.prefix)
    }

    /// The published rink state.
    pub fn state_key(&self) -> String {
        format!("{}/state", self.prefix)
    }
}

/// `<host>_<pid>_<unix secs>`, the electors' default member name, made safe for an etcd key.
fn member_name() -> String {
    sanitise(&naming::member_name())
}

/// What is wrong with a prefix, if anything.
fn prefix_problem(prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some(
            "is empty; use a prefix of the group's own, e.g. \"/harvester/rink/billing\"".into(),
        );
    }
    if prefix.ends_with('/') {
        return Some(format!(
            "{prefix:?} must not end in '/'; use {:?}",
            prefix.trim_end_matches('/')
        ));
    }
    if prefix.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Some(format!(
            "{prefix:?} must not hold whitespace or control characters"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_derive_safe_timings() {
        let c = RinkConfig::default();
        assert!(c.validate().is_empty(), "{:?}", c.validate());
        assert_eq!(c.revoke_timeout(), Duration::from_secs(10));
        let r = c.resolve();
        assert!(r.prefix.starts_with("/harvester/rink/"), "{}", r.prefix);
        assert_eq!(r.buckets, DEFAULT_BUCKETS);
        assert!(r.keep_alive_interval() < r.lease());
        assert!(r.lease() < r.vanish_wait() && r.vanish_wait() < r.ttl);
        assert_eq!(r.member_key("a"), format!("{}/members/a", r.prefix));
        assert_eq!(
            RinkConfig::for_group("bill ing").prefix.as_deref(),
            Some("/harvester/rink/bill_ing")
        );
    }

    #[test]
    fn problems_name_the_field_and_the_fix() {
        let c = RinkConfig {
            endpoints: vec!["https://e:2379".into()],
            tls: None,
            user: None,
            password: None,
            prefix: Some("/a/".into()),
            name: Some("a/b".into()),
            ttl: Duration::from_millis(2500),
            rebalance_delay: Duration::from_secs(7200),
            buckets: 0,
            revoke_timeout: Some(Duration::ZERO),
            connect_timeout: Duration::ZERO,
        };
        let fields: Vec<_> = c.problems("leader").into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "leader.endpoints",
                "leader.prefix",
                "leader.name",
                "leader.ttl",
                "leader.rebalance_delay",
                "leader.buckets",
                "leader.revoke_timeout",
                "leader.connect_timeout"
            ]
        );
    }

    #[test]
    fn serde_reads_humantime_and_refuses_unknown_fields() {
        let c: RinkConfig = serde_json::from_str(
            r#"{"endpoints": ["http://e:2379"], "ttl": "2s", "rebalance_delay": "1s 500ms", "buckets": 16}"#,
        )
        .unwrap();
        assert_eq!(c.rebalance_delay, Duration::from_millis(1500));
        assert_eq!(c.buckets, 16);
        assert!(serde_json::from_str::<RinkConfig>(r#"{"delay": "1s"}"#).is_err());
        let back: RinkConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }
}
