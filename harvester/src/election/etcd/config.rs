//! Settings of the etcd elector and the timings that follow from them.
//!
//! Only the lease TTL is tunable among the timings: the keep-alive interval, the lease a leader
//! acts on and the succession derive from it, so they cannot be set into an unsafe combination
//! (a lease that outlived the server's would let a stalled leader act after a successor took
//! over).

use std::time::Duration;

use serde::{Deserialize, Serialize};

#[cfg(test)]
use crate::coordination::etcd::endpoint_problem;
use crate::coordination::etcd::{access_problems, timing_problems, Access, EtcdTls};
use crate::coordination::naming;
use crate::error::ConfigProblem;
use crate::secret::Secret;

/// Settings of the etcd elector (a lease per member, a key per candidacy; the oldest leads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EtcdConfig {
    /// The cluster's client URLs, `http://host:port`, `https://host:port` (with `tls`) or a
    /// bare `host:port` (TLS when `tls` is set), one per member. Default
    /// `["http://127.0.0.1:2379"]`.
    pub endpoints: Vec<String>,
    /// TLS: `{ ca = "ca.pem" }`, plus `cert` and `key` for a cluster that checks client
    /// certificates. Required for `https://` endpoints. Default none (plain http).
    #[serde(default)]
    pub tls: Option<EtcdTls>,
    /// The etcd user, for a cluster with authentication enabled; its role needs readwrite on
    /// the prefix. Default none.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password: `{ file = "..." }`, `{ env = "..." }` or `{ value = "..." }`.
    /// Never printed. Default none.
    #[serde(default)]
    pub password: Option<Secret>,
    /// The election prefix: contenders of one application share it, each candidacy is a key
    /// under `{prefix}/`. Default `/harvester/election/<binary name>` (characters outside
    /// `[a-zA-Z0-9._-]` replaced by `_`). Nothing else may write under it.
    pub prefix: Option<String>,
    /// The lease TTL: a member the server has not heard from for this long loses its lease and
    /// its candidacy, and a successor may lead. The member keeps it alive every quarter of it;
    /// a leader stops acting by itself half of it after sending the last keep-alive the server
    /// answered. Whole seconds, from 2s to 1h; default 5s. The server must grant it as asked
    /// (etcd raises TTLs below its minimum, 1.5x its election timeout rounded up: 2s with the
    /// default settings); a server that raises it refuses the setting at start.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// This member's name, stored in its candidacy key and logged. Default
    /// `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// How long closing waits for the application to acknowledge the revocation, keeping the
    /// lease alive (so no successor starts) meanwhile. Default 2x `ttl`, at most 30s.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Bound on reaching the cluster at start (the first lease grant and candidacy). Default 5s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            endpoints: vec!["http://127.0.0.1:2379".into()],
            tls: None,
            user: None,
            password: None,
            prefix: None,
            ttl: Duration::from_secs(5),
            name: None,
            revoke_timeout: None,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

const MIN_TTL: Duration = Duration::from_secs(2);
const MAX_TTL: Duration = Duration::from_secs(3600);
const MAX_DEFAULT_REVOKE: Duration = Duration::from_secs(30);

fn default_prefix() -> String {
    format!("/harvester/election/{}", naming::binary_name())
}

/// What is wrong with a prefix, if anything.
fn prefix_problem(prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some(
            "is empty; use a prefix of the application's own, e.g. \"/harvester/election/billing\""
                .into(),
        );
    }
    if prefix.ends_with('/') {
        return Some(format!(
            "{prefix:?} must not end in '/' (the candidacies are keys under the prefix and a '/'); use {:?}",
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

/// Settings with every default resolved and the derived timings.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub endpoints: Vec<String>,
    /// TLS and the user.
    pub access: Access,
    pub prefix: String,
    pub name: String,
    pub ttl: Duration,
    pub revoke_timeout: Duration,
    pub connect_timeout: Duration,
    /// How often a member keeps its lease alive: a quarter of `ttl`.
    pub keep_alive_interval: Duration,
    /// How long a leader acts after sending the last keep-alive the server answered.
    pub lease: Duration,
    /// The earliest a successor acts after the leader falls silent.
    pub succession: Duration,
}

impl Resolved {
    /// The key range of the candidacies: `{prefix}/`.
    pub fn candidacies(&self) -> String {
        format!("{}/", self.prefix)
    }

    /// The endpoints joined for logs.
    pub fn endpoint_list(&self) -> String {
        self.endpoints.join(",")
    }
}

impl EtcdConfig {
    /// Checks the settings; every problem names the field (`{field}.<name>`) and the fix.
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut problem = |name: &str, message: String| {
            problems.push(ConfigProblem::new(format!("{field}.{name}"), message))
        };
        access_problems(&self.endpoints, &self.access(), &mut problem);
        if let Some(prefix) = &self.prefix {
            if let Some(p) = prefix_problem(prefix) {
                problem("prefix", p);
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
        timing_problems(self.revoke_timeout, self.connect_timeout, &mut problem);
        if let Some(n) = &self.name {
            if n.trim().is_empty() || n.len() > 256 {
                problem(
                    "name",
                    "must be 1-256 characters, not blank; leave it unset for <host>_<pid>_<secs>"
                        .into(),
                );
            }
        }
        problems
    }

    /// How long a leader acts without a keep-alive answered before it stops by itself: half
    /// of `ttl`, counted from when it sent the last keep-alive the server answered. The server
    /// renewed the lease after that send, so it cannot expire it (and delete the leader's key)
    /// sooner than `ttl` after it: the lease ends at least half of `ttl` before a successor
    /// can lead, and that half is the producers' default delivery timeout.
    pub fn lease(&self) -> Duration {
        self.ttl / 2
    }

    /// From a leader falling silent to a successor leading, at the earliest: `ttl`, after which
    /// the server expires the silent leader's lease and deletes its key (on its next expiry
    /// check, up to 500ms later), which wakes the next candidate. An orderly close hands over
    /// at once instead (after the revocation barrier).
    pub fn succession(&self) -> Duration {
        self.ttl
    }

    /// How often a member keeps its lease alive: a quarter of `ttl`, so one lost keep-alive
    /// does not end the lease.
    pub fn keep_alive_interval(&self) -> Duration {
        self.ttl / 4
    }

    /// How long close() waits for the application's acknowledgement of the revocation.
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
            prefix: self.prefix.clone().unwrap_or_else(default_prefix),
            name: self.name.clone().unwrap_or_else(naming::member_name),
            ttl: self.ttl,
            revoke_timeout: self.revoke_timeout(),
            connect_timeout: self.connect_timeout,
            keep_alive_interval: self.keep_alive_interval(),
            lease: self.lease(),
            succession: self.succession(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_derived_timings() {
        let c = EtcdConfig::default();
        assert!(
            c.problems("leader").is_empty(),
            "{:?}",
            c.problems("leader")
        );
        assert_eq!(c.lease(), Duration::from_millis(2500));
        assert_eq!(c.succession(), Duration::from_secs(5));
        assert_eq!(c.keep_alive_interval(), Duration::from_millis(1250));
        assert_eq!(c.revoke_timeout(), Duration::from_secs(10));
        let long = EtcdConfig {
            ttl: Duration::from_secs(60),
            ..c.clone()
        };
        assert_eq!(long.revoke_timeout(), Duration::from_secs(30));
        let r = c.resolve();
        assert_eq!(r.endpoints, ["http://127.0.0.1:2379"]);
        assert!(r.prefix.starts_with("/harvester/election/"), "{}", r.prefix);
        assert!(prefix_problem(&r.prefix).is_none());
        assert_eq!(r.candidacies(), format!("{}/", r.prefix));
        assert!(!r.name.is_empty());
    }

    #[test]
    fn a_stalled_leaders_queue_has_half_a_ttl_to_fail_for_every_ttl() {
        for secs in [2, 3, 5, 30, 3600] {
            let c = EtcdConfig {
                ttl: Duration::from_secs(secs),
                ..Default::default()
            };
            assert!(c.problems("leader").is_empty(), "ttl {secs}s");
            assert!(c.keep_alive_interval() < c.lease(), "ttl {secs}s");
            assert!(c.lease() < c.succession(), "ttl {secs}s");
            assert_eq!(c.succession() - c.lease(), c.ttl / 2, "ttl {secs}s");
        }
    }

    #[test]
    fn problems_name_the_field_and_the_fix() {
        let c = EtcdConfig {
            endpoints: vec!["https://etcd:2379".into(), "etcd".into()],
            tls: None,
            user: None,
            password: None,
            prefix: Some("/a/b/".into()),
            ttl: Duration::from_secs(1),
            revoke_timeout: Some(Duration::ZERO),
            connect_timeout: Duration::ZERO,
            name: Some(" ".into()),
        };
        let p = c.problems("leader");
        for field in [
            "leader.endpoints",
            "leader.prefix",
            "leader.ttl",
            "leader.revoke_timeout",
            "leader.connect_timeout",
            "leader.name",
        ] {
            assert!(p.iter().any(|p| p.field == field), "{field} in {p:?}");
        }
        assert_eq!(
            p.iter().filter(|p| p.field == "leader.endpoints").count(),
            2,
            "one problem per bad endpoint: {p:?}"
        );
        assert!(p.iter().any(|p| p.message.contains("\"/a/b\"")), "{p:?}");
        assert!(p.iter().any(|p| p.message.contains("etcd:2379")), "{p:?}");

        let empty = EtcdConfig {
            endpoints: vec![],
            prefix: Some(String::new()),
            ttl: Duration::from_millis(2500),
            ..Default::default()
        };
        let p = empty.problems("x");
        assert_eq!(
            p.iter().map(|p| p.field.as_str()).collect::<Vec<_>>(),
            ["x.endpoints", "x.prefix", "x.ttl"],
            "{p:?}"
        );
        assert!(p[2].message.contains("whole seconds"), "{p:?}");
        let long = EtcdConfig {
            ttl: Duration::from_secs(7200),
            ..Default::default()
        };
        assert_eq!(long.problems("leader")[0].field, "leader.ttl");
    }

    #[test]
    fn endpoints_and_prefixes() {
        assert!(endpoint_problem("http://127.0.0.1:2379").is_none());
        assert!(endpoint_problem("http://etcd-0.etcd:2379/").is_none());
        assert!(endpoint_problem("127.0.0.1:2379").is_none());
        assert!(endpoint_problem("http://[::1]:2379").is_none());
        assert!(endpoint_problem("https://a:2379").is_none());
        assert!(endpoint_problem("unix://a:2379").is_some());
        assert!(endpoint_problem("http://a").unwrap().contains("a:2379"));
        assert!(endpoint_problem("http://a:0").is_some());
        assert!(endpoint_problem("http://a:2379,b:2379").is_some());
        assert!(endpoint_problem("http://u:p@a:2379").is_some());
        assert!(prefix_problem("/harvester/election/x").is_none());
        assert!(prefix_problem("election").is_none());
        assert!(prefix_problem("").is_some());
        assert!(prefix_problem("/a b").is_some());
        assert!(prefix_problem("/a/").unwrap().contains("\"/a\""));
    }

    #[test]
    fn serde_reads_humantime_and_refuses_unknown_fields() {
        let c: EtcdConfig =
            serde_json::from_str(r#"{"endpoints": ["http://e:2379"], "ttl": "3s"}"#).unwrap();
        assert_eq!(c.ttl, Duration::from_secs(3));
        assert_eq!(c.connect_timeout, Duration::from_secs(5));
        assert!(serde_json::from_str::<EtcdConfig>(r#"{"url": "x"}"#).is_err());
        let back: EtcdConfig = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back, c);
    }
}
