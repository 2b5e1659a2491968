//! Running the scenarios with any elector: `bench run --set leader.kind=zookeeper`.
//!
//! The scenario file's settings are written for NELI (a 1 s heartbeat, so a 3 s session). For
//! another kind, the NELI fields give way to that kind's own at the same 3 s (the NATS bucket's
//! TTL, the ZooKeeper session, the etcd lease), its server from `scripts/services.sh`, and an
//! election namespace of the scenario's own, so failover gaps compare elector against elector.
//! What the user sets with `--set` always wins.

use crate::BenchError;
use harvester::config::LeaderConfig;

/// Every kind's TTL or session in the scenarios (NELI's 3 x 1 s heartbeat).
pub const TTL: &str = "3s";

/// The elector kind the command line asks for, if any.
pub fn requested(extra: &[(String, String)]) -> Option<&str> {
    extra
        .iter()
        .rev()
        .find(|(k, _)| k == "leader.kind")
        .map(|(_, v)| v.as_str())
}

/// The settings a harvester of this scenario gets: `scenario` (base and scenario settings),
/// fitted to the kind `extra` asks for, then `extra`. `namespace` is unique to the scenario
/// (its consumer group), and names the bucket, znode or key prefix of its election.
pub fn settings(
    namespace: &str,
    scenario: Vec<(String, String)>,
    extra: &[(String, String)],
) -> Result<Vec<(String, String)>, BenchError> {
    // The command line's kind, else the scenario's own (scale-out scenarios name theirs).
    let kind = match requested(extra).or_else(|| requested(&scenario)) {
        None | Some("neli") => {
            return Ok(scenario.into_iter().chain(extra.iter().cloned()).collect())
        }
        Some(kind) => kind.to_owned(),
    };
    let kind = kind.as_str();
    let defaults = LeaderConfig::defaults(kind)
        .map_err(|e| BenchError::Run(format!("--set leader.kind={kind}: {e}")))?;
    let fields = serde_json::to_value(&defaults)
        .map_err(|e| BenchError::Run(format!("leader.kind={kind}: {e}")))?;
    let has = |path: &str| {
        path.strip_prefix("leader.")
            .is_none_or(|field| fields.get(field).is_some())
    };
    let ns: String = namespace
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let own: Vec<(&str, String)> = match kind {
        "nats_kv" => vec![
            ("leader.url", testkit::coord::nats_url()),
            ("leader.bucket", ns),
            ("leader.key", "leader".into()),
            ("leader.ttl", TTL.into()),
            ("leader.campaign_interval", "200ms".into()),
        ],
        "zookeeper" => vec![
            (
                "leader.servers",
                format!("[\"{}\"]", testkit::coord::zookeeper_addr()),
            ),
            ("leader.path", format!("/bench/{ns}")),
            ("leader.session_timeout", TTL.into()),
        ],
        "etcd" => vec![
            (
                "leader.endpoints",
                format!("[\"{}\"]", testkit::coord::etcd_endpoint()),
            ),
            ("leader.prefix", format!("/bench/{ns}")),
            ("leader.ttl", TTL.into()),
        ],
        "neli_buckets" => vec![("leader.group_id", namespace.to_owned())],
        "rink" => vec![
            (
                "leader.endpoints",
                format!("[\"{}\"]", testkit::coord::etcd_endpoint()),
            ),
            ("leader.prefix", format!("/bench/{ns}")),
            ("leader.ttl", TTL.into()),
        ],
        _ => Vec::new(),
    };
    Ok(scenario
        .into_iter()
        .filter(|(k, _)| has(k))
        .chain(own.into_iter().map(|(k, v)| (k.to_owned(), v)))
        .chain(extra.iter().cloned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_scenario_that_shares_by_bucket_gets_its_group() {
        let scenario = pairs(&[
            ("leader.heartbeat_timeout", "1s"),
            ("leader.kind", "neli_buckets"),
        ]);
        let fitted = settings("bench-7", scenario, &[]).unwrap();
        let config = harvester::Config::default()
            .with_overrides(fitted.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert_eq!(config.leader.kind(), "neli_buckets");
        assert!(config.leader.shares_by_bucket());
        assert_eq!(config.leader.lease(), std::time::Duration::from_secs(1));
        assert!(fitted
            .iter()
            .any(|(k, v)| k == "leader.group_id" && v == "bench-7"));
    }

    #[test]
    fn neli_settings_pass_through_and_other_kinds_get_their_own() {
        let scenario = pairs(&[
            ("leader.heartbeat_timeout", "1s"),
            ("limits.drain_timeout", "1s"),
        ]);
        let same = settings("g", scenario.clone(), &[]).unwrap();
        assert_eq!(same, scenario);
        let extra = pairs(&[
            ("leader.kind", "zookeeper"),
            ("leader.session_timeout", "4s"),
        ]);
        let fitted = settings("bench-1.x", scenario, &extra).unwrap();
        let config = harvester::Config::default()
            .with_overrides(fitted.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert_eq!(config.leader.kind(), "zookeeper");
        assert_eq!(
            config.limits.drain_timeout,
            Some(std::time::Duration::from_secs(1))
        );
        // The user's 4s wins over the scenarios' 3s: succession = session.
        assert_eq!(
            config.leader.succession(),
            std::time::Duration::from_secs(4)
        );
        assert!(fitted
            .iter()
            .any(|(k, v)| k == "leader.path" && v == "/bench/bench-1_x"));
        assert!(!fitted.iter().any(|(k, _)| k == "leader.heartbeat_timeout"));
    }

    #[test]
    fn an_unknown_kind_is_an_error_naming_it() {
        let e = settings("g", Vec::new(), &pairs(&[("leader.kind", "raft")])).unwrap_err();
        assert!(e.to_string().contains("raft"), "{e}");
    }
}
