//! Settings of the NATS KV elector and the timings that follow from them.
//!
//! Only `ttl` and `campaign_interval` are tunable; the renewal interval, the lease and the
//! stand-down derive from `ttl` so that they cannot be set into an unsafe combination.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::access::{access_problems, Access, NatsTls};
use crate::coordination::naming;
use crate::error::ConfigProblem;
use crate::secret::Secret;

/// Settings of the NATS JetStream KV elector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NatsKvConfig {
    /// NATS server URL; several, separated by commas, for a cluster. `nats://`, `tls://`,
    /// `ws://` and `wss://` schemes. Default `nats://127.0.0.1:4222`.
    pub url: String,
    /// TLS: `{ ca = "ca.pem" }` (plus `cert` and `key` for servers that verify clients);
    /// setting it requires TLS of the server. Default none (TLS only for `tls://` URLs).
    #[serde(default)]
    pub tls: Option<NatsTls>,
    /// The user to log in as, with `password`. At most one of user/password, `token` and
    /// `credentials_file`. Default none.
    #[serde(default)]
    pub user: Option<String>,
    /// The user's password: `{ file = "..." }`, `{ env = "..." }` or `{ value = "..." }`.
    /// Never printed. Default none.
    #[serde(default)]
    pub password: Option<Secret>,
    /// A token to log in with (a [`Secret`], never printed). Default none.
    #[serde(default)]
    pub token: Option<Secret>,
    /// A `.creds` file (a user JWT and its NKey seed) to log in with. Default none.
    #[serde(default)]
    pub credentials_file: Option<std::path::PathBuf>,
    /// KV bucket holding the election key. Default `harvester_election`.
    pub bucket: String,
    /// The election key: whoever holds it leads. Contenders of one application share it.
    /// Default: the binary's file name with characters outside `[-/_=.a-zA-Z0-9]` replaced by `_`.
    pub key: Option<String>,
    /// The bucket's `max_age`: a leader that stops renewing loses the key this long after its
    /// last renewal. The leader renews at 3/4 of it and stops acting by itself after 19/20 of
    /// it (the lease). From 1s to 1h; default 5s. An existing bucket must have this `max_age`.
    #[serde(with = "humantime_serde")]
    pub ttl: Duration,
    /// How often a candidate tries to take the key (the first retries after losing leadership
    /// or a reconnect come faster). From 50ms up to `ttl`; default 1s.
    #[serde(with = "humantime_serde")]
    pub campaign_interval: Duration,
    /// Create the bucket with `max_age = ttl` when it is missing. Default true; when false a
    /// missing bucket is an error.
    pub create_bucket: bool,
    /// Replicas of the bucket when this elector creates it (1 to 5). Default 1.
    pub replicas: usize,
    /// This member's name, stored in the key and logged. Default `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// How long closing waits for the application to acknowledge the revocation, keeping the
    /// key (so no successor starts) meanwhile. Default 2x `ttl`, at most 30s.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Bound on connecting and opening the bucket at start. Default 5s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
}

impl Default for NatsKvConfig {
    fn default() -> Self {
        NatsKvConfig {
            url: "nats://127.0.0.1:4222".into(),
            tls: None,
            user: None,
            password: None,
            token: None,
            credentials_file: None,
            bucket: "harvester_election".into(),
            key: None,
            ttl: Duration::from_secs(5),
            campaign_interval: Duration::from_secs(1),
            create_bucket: true,
            replicas: 1,
            name: None,
            revoke_timeout: None,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(3600);
const MIN_CAMPAIGN: Duration = Duration::from_millis(50);

/// Characters a KV key may hold (async-nats' and the server's rule).
fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '/' | '_' | '=' | '.')
}

fn bucket_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_')
}

fn sanitise(name: &str, keep: fn(char) -> bool) -> String {
    let s: String = name
        .chars()
        .map(|c| if keep(c) { c } else { '_' })
        .collect();
    let s = s.trim_matches('.');
    if s.is_empty() {
        "harvester".into()
    } else {
        s.to_owned()
    }
}

fn default_key() -> String {
    sanitise(&naming::binary_name(), key_char)
}

/// The server URLs of a comma-separated `url`.
pub(crate) fn servers(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// `url` with any `user:password@` replaced by `***@`, for logs and messages.
pub(crate) fn redacted(url: &str) -> String {
    url.split(',')
        .map(|server| match (server.find("://"), server.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &server[..scheme + 3], &server[at..])
            }
            (None, Some(at)) => format!("***{}", &server[at..]),
            _ => server.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Settings with every default resolved and the derived timings.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub url: String,
    /// TLS and the login.
    pub access: Access,
    pub bucket: String,
    pub key: String,
    pub name: String,
    pub ttl: Duration,
    pub campaign_interval: Duration,
    pub create_bucket: bool,
    pub replicas: usize,
    pub revoke_timeout: Duration,
    pub connect_timeout: Duration,
    /// The leader renews the key this long after its last renewal was sent.
    pub renew_interval: Duration,
    /// How long a leader acts after sending its last successful write.
    pub lease: Duration,
    /// How long a winner waits before acting when the key was not handed over to it.
    pub stand_down: Duration,
}

impl NatsKvConfig {
    /// TLS and the login, as the client takes them.
    pub fn access(&self) -> Access {
        Access {
            tls: self.tls.clone(),
            user: self.user.clone(),
            password: self.password.clone(),
            token: self.token.clone(),
            credentials_file: self.credentials_file.clone(),
        }
    }

    /// Checks the settings; every problem names the field and the fix.
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        let mut problem = |name: &str, message: String| {
            problems.push(ConfigProblem::new(format!("{field}.{name}"), message))
        };
        let servers = servers(&self.url);
        if servers.is_empty() {
            problem(
                "url",
                "is empty; give a NATS server URL such as nats://127.0.0.1:4222".into(),
            );
        }
        for server in servers {
            if let Err(e) = server.parse::<async_nats::ServerAddr>() {
                problem(
                    "url",
                    format!(
                        "{:?} is not a NATS server URL ({e}); use nats://host:port (or tls://, ws://, wss://), several separated by commas",
                        redacted(server)
                    ),
                );
            }
        }
        access_problems(&self.access(), &mut problem);
        let b = &self.bucket;
        if b.is_empty() || !b.chars().all(bucket_char) {
            problem(
                "bucket",
                format!(
                    "{b:?} is not a valid bucket name; use letters, digits, '-' and '_', e.g. {:?}",
                    sanitise(b, bucket_char)
                ),
            );
        }
        if let Some(k) = &self.key {
            if k.is_empty() || !k.chars().all(key_char) || k.starts_with('.') || k.ends_with('.') {
                problem(
                    "key",
                    format!(
                        "{k:?} is not a valid key; use letters, digits and -/_=. (not first or last), e.g. {:?}",
                        sanitise(k, key_char)
                    ),
                );
            }
        }
        let ttl = self.ttl;
        if !(MIN_TTL..=MAX_TTL).contains(&ttl) {
            problem(
                "ttl",
                format!("is {ttl:?}; use 1s to 1h (5s is the default)"),
            );
        }
        let ci = self.campaign_interval;
        if ci < MIN_CAMPAIGN || ci > ttl {
            problem(
                "campaign_interval",
                format!(
                    "is {ci:?}; use at least 50ms and at most ttl ({ttl:?}): a slower campaign only delays the successor (1s is the default)"
                ),
            );
        }
        if !(1..=5).contains(&self.replicas) {
            problem("replicas", format!("is {}; use 1 to 5", self.replicas));
        }
        if let Some(rt) = self.revoke_timeout {
            if rt.is_zero() || rt > Duration::from_secs(600) {
                problem(
                    "revoke_timeout",
                    format!(
                        "is {rt:?}; use above zero and at most 10m, or leave it unset for 2x ttl"
                    ),
                );
            }
        }
        let ct = self.connect_timeout;
        if ct < Duration::from_millis(100) || ct > Duration::from_secs(300) {
            problem(
                "connect_timeout",
                format!("is {ct:?}; use 100ms to 5m (5s is the default)"),
            );
        }
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

    /// The leader renews the key at 3/4 of `ttl` (the seed's rhythm).
    pub fn renew_interval(&self) -> Duration {
        self.ttl * 3 / 4
    }

    /// How long a leader acts without a successful update before it stops by itself: 19/20 of
    /// `ttl`, measured from when the last successful update was *sent*, so the key (stamped
    /// by the server after that) always outlives the leader's own belief.
    pub fn lease(&self) -> Duration {
        self.ttl * 19 / 20
    }

    /// How long a winner waits before acting unless the key was handed over (resigned) to it:
    /// the seed's stand-down, the renew interval + 50ms. The predecessor stopped acting by
    /// itself before its key expired (its lease is shorter than `ttl`); the stand-down is the
    /// time whatever it queued in its lease has to fail (the producers' default delivery
    /// timeout is [`succession`](Self::succession) - [`lease`](Self::lease), 4/5 of `ttl` +
    /// 50ms) before the successor publishes.
    pub fn stand_down(&self) -> Duration {
        self.renew_interval() + Duration::from_millis(50)
    }

    /// The earliest a successor acts after the leader's last successful update: the key
    /// expires `ttl` after it and the winner then stands down. An orderly close hands over at
    /// once instead (after the revocation barrier).
    pub fn succession(&self) -> Duration {
        self.ttl + self.stand_down()
    }

    /// The latest a successor leads after the leader falls silent (candidates poll every
    /// `campaign_interval`), not counting round trips.
    pub fn takeover(&self) -> Duration {
        self.succession() + self.campaign_interval
    }

    /// How long close() waits for the application's acknowledgement of the revocation.
    pub fn revoke_timeout(&self) -> Duration {
        self.revoke_timeout
            .unwrap_or_else(|| (self.ttl * 2).min(Duration::from_secs(30)))
    }

    /// Resolves the defaults.
    pub fn resolve(&self) -> Resolved {
        Resolved {
            url: self.url.clone(),
            access: self.access(),
            bucket: self.bucket.clone(),
            key: self.key.clone().unwrap_or_else(default_key),
            name: self.name.clone().unwrap_or_else(naming::member_name),
            ttl: self.ttl,
            campaign_interval: self.campaign_interval,
            create_bucket: self.create_bucket,
            replicas: self.replicas,
            revoke_timeout: self.revoke_timeout(),
            connect_timeout: self.connect_timeout,
            renew_interval: self.renew_interval(),
            lease: self.lease(),
            stand_down: self.stand_down(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_coherent() {
        let c = NatsKvConfig::default();
        assert!(
            c.problems("leader").is_empty(),
            "{:?}",
            c.problems("leader")
        );
        assert_eq!(c.renew_interval(), Duration::from_millis(3750));
        assert_eq!(c.lease(), Duration::from_millis(4750));
        assert!(c.renew_interval() < c.lease() && c.lease() < c.ttl);
        assert_eq!(c.succession(), Duration::from_millis(8800));
        assert_eq!(
            c.stand_down(),
            c.renew_interval() + Duration::from_millis(50)
        );
        assert_eq!(c.revoke_timeout(), Duration::from_secs(10));
        let long = NatsKvConfig {
            ttl: Duration::from_secs(60),
            ..c
        };
        assert_eq!(long.revoke_timeout(), Duration::from_secs(30));
    }

    #[test]
    fn a_stalled_leaders_queue_has_most_of_a_ttl_to_fail_for_every_ttl() {
        for ms in [1_000, 2_000, 3_000, 5_000, 30_000, 3_600_000] {
            let c = NatsKvConfig {
                ttl: Duration::from_millis(ms),
                ..Default::default()
            };
            assert!(c.lease() < c.ttl, "ttl {ms}ms");
            assert!(c.succession() - c.lease() >= c.ttl * 4 / 5, "ttl {ms}ms");
            assert!(c.takeover() > c.succession());
        }
    }

    #[test]
    fn problems_name_field_and_fix() {
        let c = NatsKvConfig {
            url: "http://x".into(),
            bucket: "a.b".into(),
            key: Some(".k".into()),
            ttl: Duration::from_millis(500),
            campaign_interval: Duration::from_secs(2),
            replicas: 0,
            revoke_timeout: Some(Duration::ZERO),
            connect_timeout: Duration::ZERO,
            name: Some(" ".into()),
            ..Default::default()
        };
        let p = c.problems("leader");
        for field in [
            "url",
            "bucket",
            "key",
            "ttl",
            "campaign_interval",
            "replicas",
            "revoke_timeout",
            "connect_timeout",
            "name",
        ] {
            assert!(
                p.iter().any(|p| p.field == format!("leader.{field}")),
                "{field}: {p:?}"
            );
        }
        assert!(p.iter().any(|p| p.message.contains("\"a_b\"")), "{p:?}");
    }

    #[test]
    fn several_servers_and_bare_hosts_are_accepted() {
        let c = NatsKvConfig {
            url: "nats://a:4222, tls://b:4222,c".into(),
            ..Default::default()
        };
        assert!(c.problems("leader").is_empty());
        assert_eq!(servers(&c.url), vec!["nats://a:4222", "tls://b:4222", "c"]);
    }

    #[test]
    fn credentials_are_redacted() {
        assert_eq!(
            redacted("nats://u:secret@a:4222,nats://b:4222,tok@c"),
            "nats://***@a:4222,nats://b:4222,***@c"
        );
    }

    #[test]
    fn default_key_is_a_valid_key() {
        let r = NatsKvConfig::default().resolve();
        let c = NatsKvConfig {
            key: Some(r.key.clone()),
            ..Default::default()
        };
        assert!(c.problems("leader").is_empty(), "{}", r.key);
    }
}
