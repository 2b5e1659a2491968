//! Settings of the ZooKeeper elector and the timings that follow from them.
//!
//! Only the session timeout is tunable among the timings: the lease, the probe interval and the
//! succession derive from it, so they cannot be set into an unsafe combination (a lease that
//! outlives the session would let a stalled leader act after a successor took over).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::coordination::naming;
use crate::error::ConfigProblem;
use crate::secret::Secret;

/// ZooKeeper digest authentication: the session is `user` (scheme `digest`,
/// `user:password`), and the election node and candidacies it creates are that user's alone
/// (ACL creator-all), so a client without the password can neither read nor touch them. SASL
/// (Kerberos, DIGEST-MD5) is not built: zookeeper-client has it only behind its `sasl`
/// features (rsasl, and GSSAPI needs the system's Kerberos).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZkAuth {
    /// The digest user name (no ':').
    pub user: String,
    /// Its password: `{ file = "..." }`, `{ env = "..." }` or `{ value = "..." }`. Never
    /// printed.
    pub password: Secret,
}

/// The digest credentials as sent (`user:password`); Debug never shows them.
#[derive(Clone)]
pub struct Digest(pub(crate) Vec<u8>);

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Digest({})", crate::secret::REDACTED)
    }
}

/// Settings of the ZooKeeper elector (ephemeral sequential znodes; the lowest leads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZooKeeperConfig {
    /// The ensemble, one `host:port` each. Default `["127.0.0.1:2181"]`.
    pub servers: Vec<String>,
    /// The election node: contenders of one application share it and put their candidacies
    /// under it. Absolute, without a trailing `/`. Default
    /// `/harvester/election/<binary name>` (characters outside `[a-zA-Z0-9._-]` replaced by
    /// `_`). Deleting it (with its children) ends every contender.
    pub path: Option<String>,
    /// The ZooKeeper session timeout asked of the server: a contender the server has not heard
    /// from for this long loses its candidacy, and a successor may lead. The leader stops acting
    /// by itself half of it after the server last answered it (the lease). From 1s to 60s;
    /// default 6s. Servers clamp it to 2 to 20 ticks (4s to 40s with the usual 2s tick); a
    /// shorter negotiated timeout shortens the lease to match.
    #[serde(with = "humantime_serde")]
    pub session_timeout: Duration,
    /// Create the election node and its missing parents (persistent; open ACL, or creator-all
    /// with `auth`) at start. Default true; when false a missing node is a configuration error.
    pub create_path: bool,
    /// This member's name, stored in its candidacy znode and logged. Default
    /// `<host>_<pid>_<unix secs>`.
    pub name: Option<String>,
    /// How long closing waits for the application to acknowledge the revocation, keeping the
    /// candidacy (so no successor starts) meanwhile. Default 2x `session_timeout`, at most 30s.
    #[serde(with = "humantime_serde", default)]
    pub revoke_timeout: Option<Duration>,
    /// Bound on connecting (at start and for a new session after expiry) and on each request
    /// at start. Default 5s.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Digest authentication, `{ user = "...", password = { file = "..." } }` ([`ZkAuth`]):
    /// the election node and candidacies are then created with the ACL creator-all. Default
    /// none (open ACL).
    #[serde(default)]
    pub auth: Option<ZkAuth>,
}

impl Default for ZooKeeperConfig {
    fn default() -> Self {
        ZooKeeperConfig {
            servers: vec!["127.0.0.1:2181".into()],
            path: None,
            session_timeout: Duration::from_secs(6),
            create_path: true,
            name: None,
            revoke_timeout: None,
            connect_timeout: Duration::from_secs(5),
            auth: None,
        }
    }
}

const MIN_SESSION: Duration = Duration::from_secs(1);
const MAX_SESSION: Duration = Duration::from_secs(60);
const MAX_REVOKE: Duration = Duration::from_secs(30);

fn default_path() -> String {
    format!("/harvester/election/{}", naming::binary_name())
}

/// What is wrong with a znode path, if anything (ZooKeeper's own rules, plus no trailing `/`).
fn path_problem(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return Some("must be absolute (start with '/')".into());
    }
    if path == "/" {
        return Some(
            "must not be the root; use a node of its own, e.g. \"/harvester/election/billing\""
                .into(),
        );
    }
    if path.ends_with('/') {
        return Some(format!(
            "must not end in '/'; use {:?}",
            path.trim_end_matches('/')
        ));
    }
    if path[1..]
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Some("must not hold empty, '.' or '..' segments".into());
    }
    if path.chars().any(char::is_control) {
        return Some("must not hold control characters".into());
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Some("must not be under /zookeeper, which the server reserves".into());
    }
    None
}

/// What is wrong with one `host:port` entry, if anything.
fn server_problem(server: &str) -> Option<String> {
    let Some((host, port)) = server.rsplit_once(':') else {
        return Some(format!(
            "{server:?} has no port; write it as host:port, e.g. \"{server}:2181\""
        ));
    };
    if host.is_empty() || host.contains(['/', ',', ' ']) {
        return Some(format!(
            "{server:?} is not host:port (no scheme, chroot or list here: one entry per server, the election node goes in path)"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => None,
        _ => Some(format!("{server:?} has no valid port (1-65535)")),
    }
}

/// Settings with every default resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The ensemble as a ZooKeeper connect string (`host:port,host:port`).
    pub servers: String,
    pub path: String,
    pub name: String,
    pub session_timeout: Duration,
    pub create_path: bool,
    pub revoke_timeout: Duration,
    pub connect_timeout: Duration,
    /// Digest credentials, read at resolve time (after `problems()` found them readable).
    pub digest: Option<Digest>,
}

impl Resolved {
    /// The lease for a negotiated session timeout: never longer than the configured one's.
    pub fn lease_for(&self, negotiated: Duration) -> Duration {
        let session = if negotiated.is_zero() {
            self.session_timeout
        } else {
            negotiated.min(self.session_timeout)
        };
        session / 2
    }
}

impl ZooKeeperConfig {
    /// Checks the settings; every problem names the field (`{field}.<name>`) and the fix.
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        if self.servers.is_empty() {
            problems.push(ConfigProblem::new(
                format!("{field}.servers"),
                "is empty; list at least one host:port, e.g. [\"127.0.0.1:2181\"]",
            ));
        }
        for server in &self.servers {
            if let Some(p) = server_problem(server) {
                problems.push(ConfigProblem::new(format!("{field}.servers"), p));
            }
        }
        if let Some(path) = &self.path {
            if let Some(p) = path_problem(path) {
                problems.push(ConfigProblem::new(
                    format!("{field}.path"),
                    format!("{path:?} {p}"),
                ));
            }
        }
        let st = self.session_timeout;
        if !(MIN_SESSION..=MAX_SESSION).contains(&st) {
            problems.push(ConfigProblem::new(
                format!("{field}.session_timeout"),
                format!("is {st:?}; use 1s to 60s (6s is the default; servers also clamp it to 2 to 20 ticks)"),
            ));
        }
        if let Some(rt) = self.revoke_timeout {
            if rt.is_zero() || rt > MAX_REVOKE {
                problems.push(ConfigProblem::new(
                    format!("{field}.revoke_timeout"),
                    format!(
                        "is {rt:?}; use above zero and at most 30s (default 2x session_timeout)"
                    ),
                ));
            }
        }
        if self.connect_timeout.is_zero() {
            problems.push(ConfigProblem::new(
                format!("{field}.connect_timeout"),
                "is zero; use at least a few hundred ms (5s is the default)",
            ));
        }
        if let Some(name) = &self.name {
            if name.trim().is_empty() {
                problems.push(ConfigProblem::new(
                    format!("{field}.name"),
                    "is empty; leave it out for <host>_<pid>_<unix secs> or give a name",
                ));
            }
        }
        if let Some(auth) = &self.auth {
            if auth.user.trim().is_empty() || auth.user.contains(':') {
                problems.push(ConfigProblem::new(
                    format!("{field}.auth.user"),
                    "is blank or holds ':'; give the digest user name",
                ));
            }
            if let Some(p) = auth.password.problem() {
                problems.push(ConfigProblem::new(format!("{field}.auth.password"), p));
            }
        }
        problems
    }

    /// How long a leader acts without hearing from the server before it stops by itself: half
    /// of `session_timeout`, counted from when it sent the last request the server answered.
    /// The server cannot expire the session sooner than a session timeout after it received
    /// that request, so the lease ends at least half of it before a successor can lead, and
    /// that half is the producer's default delivery timeout (whatever a stalled leader queued
    /// fails before a successor publishes).
    pub fn lease(&self) -> Duration {
        self.session_timeout / 2
    }

    /// From a leader going silent to a successor leading: the session timeout, after which the
    /// server expires the silent leader's session and deletes its candidacy (rounded up to the
    /// server's tick, plus the notification). Anything the silent leader could still send must
    /// expire before this.
    pub fn succession(&self) -> Duration {
        self.session_timeout
    }

    /// How long an orderly hand-off waits for this member to stop leader work.
    pub fn revoke_timeout(&self) -> Duration {
        self.revoke_timeout
            .unwrap_or((self.session_timeout * 2).min(MAX_REVOKE))
    }

    /// Resolves the defaults.
    pub fn resolve(&self) -> Resolved {
        Resolved {
            servers: self.servers.join(","),
            path: self.path.clone().unwrap_or_else(default_path),
            name: self.name.clone().unwrap_or_else(naming::member_name),
            session_timeout: self.session_timeout,
            create_path: self.create_path,
            revoke_timeout: self.revoke_timeout(),
            connect_timeout: self.connect_timeout,
            digest: self.auth.as_ref().and_then(|a| {
                let password = a.password.read().ok()?;
                Some(Digest(format!("{}:{password}", a.user).into_bytes()))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_derived_timings() {
        let c = ZooKeeperConfig::default();
        assert!(
            c.problems("leader").is_empty(),
            "{:?}",
            c.problems("leader")
        );
        assert_eq!(c.lease(), Duration::from_secs(3));
        assert_eq!(c.succession(), Duration::from_secs(6));
        assert_eq!(c.revoke_timeout(), Duration::from_secs(12));
        let r = c.resolve();
        assert_eq!(r.servers, "127.0.0.1:2181");
        assert!(r.path.starts_with("/harvester/election/"), "{}", r.path);
        assert!(path_problem(&r.path).is_none());
        assert!(c.lease() < c.succession());
    }

    #[test]
    fn lease_follows_a_shorter_negotiated_session() {
        let r = ZooKeeperConfig::default().resolve();
        assert_eq!(r.lease_for(Duration::from_secs(4)), Duration::from_secs(2));
        assert_eq!(r.lease_for(Duration::from_secs(30)), Duration::from_secs(3));
        assert_eq!(r.lease_for(Duration::ZERO), Duration::from_secs(3));
    }

    #[test]
    fn problems_name_the_field_and_the_fix() {
        let c = ZooKeeperConfig {
            servers: vec![],
            path: Some("harvester/x/".into()),
            session_timeout: Duration::from_millis(200),
            revoke_timeout: Some(Duration::ZERO),
            connect_timeout: Duration::ZERO,
            name: Some(" ".into()),
            ..Default::default()
        };
        let p = c.problems("leader");
        for field in [
            "leader.servers",
            "leader.path",
            "leader.session_timeout",
            "leader.revoke_timeout",
            "leader.connect_timeout",
            "leader.name",
        ] {
            assert!(p.iter().any(|p| p.field == field), "{field} in {p:?}");
        }
    }

    #[test]
    fn paths_and_servers() {
        assert!(path_problem("/a/b").is_none());
        assert!(path_problem("/a/b/").unwrap().contains("\"/a/b\""));
        assert!(path_problem("a/b").is_some());
        assert!(path_problem("/").is_some());
        assert!(path_problem("/a//b").is_some());
        assert!(path_problem("/zookeeper/quota").is_some());
        assert!(server_problem("zk1:2181").is_none());
        assert!(server_problem("[::1]:2181").is_none());
        assert!(server_problem("zk1").unwrap().contains("zk1:2181"));
        assert!(server_problem("zk1:0").is_some());
        assert!(server_problem("zk1:2181/chroot").is_some());
        assert!(server_problem("zk1:2181,zk2:2181").is_some());
    }
}
