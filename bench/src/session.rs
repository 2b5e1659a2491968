//! Fitting the scenarios' leader session to a real cluster.
//!
//! The scenarios use a 1 s heartbeat (a 3 s group session) so failovers fit a quick run; the
//! embedded broker accepts that, but a real Kafka cluster refuses sessions below its
//! `group.min.session.timeout.ms` (6 s by default): the member never joins and the run would
//! hang. With `--brokers`, the bench reads that minimum and raises the heartbeat for every
//! scenario until the session fits, and says so; a heartbeat the user set explicitly is never
//! changed behind their back: if it does not fit, the run fails at once naming both values.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use crate::BenchError;

/// Kafka's default `group.min.session.timeout.ms`, assumed when the cluster will not say.
pub const KAFKA_DEFAULT_MIN_SESSION: Duration = Duration::from_millis(6000);

const KEY: &str = "leader.heartbeat_timeout";
const BROKER_SETTING: &str = "group.min.session.timeout.ms";

/// The cluster's minimum group session, or `None` when it cannot be read (no DescribeConfigs
/// support or permission); an unreachable cluster is an error.
pub async fn broker_min_session(bootstrap: &str) -> Result<Option<Duration>, BenchError> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| {
            BenchError::Run(format!(
                "cannot create an admin client for {bootstrap}: {e}"
            ))
        })?;
    let timeout = Duration::from_secs(10);
    let broker = {
        let metadata = admin.inner().fetch_metadata(None, timeout).map_err(|e| {
            BenchError::Run(format!("the cluster at {bootstrap} does not answer: {e}"))
        })?;
        metadata.brokers().first().map(|b| b.id())
    };
    let Some(broker) = broker else {
        return Ok(None);
    };
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let described = admin
        .describe_configs(&[ResourceSpecifier::Broker(broker)], &options)
        .await;
    let value = described.ok().and_then(|results| {
        results.into_iter().find_map(|r| {
            r.ok()?
                .entries
                .into_iter()
                .find(|e| e.name == BROKER_SETTING)?
                .value
        })
    });
    Ok(value
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis))
}

/// The harvester's configuration a list of settings gives (the library's defaults, overridden).
pub fn resolved(settings: &[(String, String)]) -> Result<harvester::Config, BenchError> {
    let pairs = settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    harvester::Config::default()
        .with_overrides(pairs)
        .map_err(|e| BenchError::Run(format!("settings do not resolve: {e}")))
}

/// The session a list of settings gives the harvester (the library decides, per elector kind).
pub fn session_of(settings: &[(String, String)]) -> Result<Duration, BenchError> {
    resolved(settings).map(|c| c.leader.succession())
}

/// The key window (`limits.max_in_flight_per_key`) a list of settings gives the harvester.
pub fn key_window_of(settings: &[(String, String)]) -> Result<u64, BenchError> {
    resolved(settings).map(|c| c.limits.max_in_flight_per_key as u64)
}

/// What to do about `sessions` (each scenario's name and session) on a cluster whose minimum is
/// `min`: `None` when all fit; else the heartbeat to set for every scenario (the smallest
/// multiple of 100 ms whose 3 x session fits). `explicit`: the session of a heartbeat the user
/// set with `--set`, which is an error rather than something to change.
pub fn fit(
    sessions: &[(String, Duration)],
    explicit: Option<Duration>,
    min: Duration,
) -> Result<Option<Duration>, String> {
    if let Some(session) = explicit.filter(|s| *s < min) {
        return Err(format!(
            "--set {KEY} gives a leader session of {} ms, below the cluster's {BROKER_SETTING} of {} ms: the harvester could never join the group; use {KEY} of at least {}",
            session.as_millis(),
            min.as_millis(),
            humantime::format_duration(heartbeat_for(min))
        ));
    }
    Ok(sessions
        .iter()
        .any(|(_, s)| *s < min)
        .then(|| heartbeat_for(min)))
}

/// The smallest heartbeat (a multiple of 100 ms) whose session (3 x) is at least `min`.
fn heartbeat_for(min: Duration) -> Duration {
    let ms = min.as_millis().div_ceil(3).div_ceil(100) * 100;
    Duration::from_millis(ms as u64)
}

/// Fits every scenario's session to the cluster at `bootstrap`, appending the heartbeat to
/// `extra` when needed and saying so on stderr.
pub async fn fit_to_cluster(
    bootstrap: &str,
    scenarios: &[(String, Vec<(String, String)>)],
    extra: &mut Vec<(String, String)>,
) -> Result<(), BenchError> {
    let min = match broker_min_session(bootstrap).await? {
        Some(min) => min,
        None => {
            eprintln!(
                "bench: the cluster does not report {BROKER_SETTING}; assuming Kafka's default {} ms",
                KAFKA_DEFAULT_MIN_SESSION.as_millis()
            );
            KAFKA_DEFAULT_MIN_SESSION
        }
    };
    let explicit = if extra.iter().any(|(k, _)| k == KEY) {
        Some(session_of(extra)?)
    } else {
        None
    };
    // Only NELI's sessions are the cluster's business: a scenario of another kind (Rink, in
    // the scale profile) has no group session, and no heartbeat_timeout either.
    let sessions = scenarios
        .iter()
        .filter(|(_, settings)| {
            let kind = crate::electors::requested(extra)
                .or_else(|| crate::electors::requested(settings))
                .unwrap_or("neli");
            matches!(kind, "neli" | "neli_buckets")
        })
        .map(|(name, settings)| {
            let all: Vec<_> = settings.iter().chain(extra.iter()).cloned().collect();
            Ok((name.clone(), session_of(&all)?))
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    if let Some(heartbeat) = fit(&sessions, explicit, min).map_err(BenchError::Run)? {
        let shortest = sessions.iter().map(|(_, s)| *s).min().unwrap_or_default();
        eprintln!(
            "bench: the cluster's {BROKER_SETTING} is {} ms, above the scenarios' leader session of {} ms; using {KEY} = {} (session {} ms) for every scenario, so failover gaps are longer than with the embedded broker",
            min.as_millis(),
            shortest.as_millis(),
            humantime::format_duration(heartbeat),
            (heartbeat * 3).as_millis()
        );
        extra.push((
            KEY.to_owned(),
            humantime::format_duration(heartbeat).to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn sessions_below_the_minimum_raise_the_heartbeat_for_all() {
        let sessions = vec![("drain".to_owned(), s(3000)), ("slow".to_owned(), s(9000))];
        assert_eq!(fit(&sessions, None, s(6000)).unwrap(), Some(s(2000)));
        assert_eq!(fit(&sessions, None, s(6500)).unwrap(), Some(s(2200)));
        assert_eq!(fit(&sessions, None, s(3000)).unwrap(), None, "all fit");
    }

    #[test]
    fn an_explicit_heartbeat_that_does_not_fit_fails_naming_both_values() {
        let e = fit(&[("drain".to_owned(), s(3000))], Some(s(3000)), s(6000)).unwrap_err();
        assert!(
            e.contains("3000 ms") && e.contains("6000 ms") && e.contains(BROKER_SETTING),
            "{e}"
        );
        assert!(e.contains("2s"), "says what would fit: {e}");
        assert_eq!(
            fit(&[("drain".to_owned(), s(6000))], Some(s(6000)), s(6000)).unwrap(),
            None
        );
    }

    #[test]
    fn sessions_come_from_the_library() {
        let settings = vec![(KEY.to_owned(), "1s".to_owned())];
        assert_eq!(session_of(&settings).unwrap(), s(3000));
    }
}
