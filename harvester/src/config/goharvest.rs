//! goharvest's reaper YAML (`harvest:` and `logging:` sections, camelCase keys), so a user can
//! point our reaper at the file they already run goharvest with.
//!
//! Settings we have no equivalent for are rejected by name, never silently dropped, except
//! goharvest's pure polling knobs (`pollDuration`, `maxPollInterval`, `queueTimeout`,
//! `drainInterval`), whose job our LISTEN/NOTIFY wake-ups and bounded waits already do; those
//! are accepted and logged as ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::{Adaptive, Config, KafkaConfig};
use crate::election::neli::NeliConfig;
use crate::error::ConfigProblem;
use crate::outbox::{Shape, TableName};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GoharvestFile {
    harvest: Harvest,
    #[serde(default)]
    logging: Option<Logging>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Harvest {
    #[serde(default)]
    base_kafka_config: BTreeMap<String, serde_yaml::Value>,
    #[serde(default)]
    producer_kafka_config: BTreeMap<String, serde_yaml::Value>,
    #[serde(default)]
    leader_topic: Option<String>,
    #[serde(default, rename = "leaderGroupID")]
    leader_group_id: Option<String>,
    #[serde(default)]
    data_source: Option<String>,
    #[serde(default)]
    outbox_table: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Limits {
    #[serde(default, with = "humantime_serde")]
    io_error_backoff: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    poll_duration: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    min_poll_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    max_poll_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    heartbeat_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    drain_interval: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    queue_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    mark_backoff: Option<Duration>,
    #[serde(default)]
    max_in_flight_records: Option<usize>,
    #[serde(default, with = "humantime_serde")]
    min_metrics_interval: Option<Duration>,
    #[serde(default)]
    send_concurrency: Option<usize>,
    #[serde(default)]
    send_buffer: Option<usize>,
    #[serde(default)]
    mark_query_records: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Logging {
    level: String,
}

/// Whether a parsed YAML document is goharvest-shaped (a top-level `harvest:` key).
pub(crate) fn is_goharvest(doc: &serde_yaml::Value) -> bool {
    doc.get("harvest").is_some()
}

fn scalar(v: &serde_yaml::Value) -> String {
    match v {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Bool(b) => b.to_string(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => serde_yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_owned(),
    }
}

/// A libpq key/value DSN (`host=h port=5432 user=u password= dbname=d sslmode=disable`) or a URL,
/// as a postgres:// URL.
pub(crate) fn dsn_to_url(dsn: &str) -> Result<String, String> {
    let dsn = dsn.trim();
    if dsn.starts_with("postgres://") || dsn.starts_with("postgresql://") {
        return Ok(dsn.to_owned());
    }
    let mut kv = BTreeMap::new();
    for part in dsn.split_whitespace() {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not key=value"))?;
        kv.insert(k.to_owned(), v.trim_matches('\'').to_owned());
    }
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    let host = kv.remove("host").unwrap_or_else(|| "localhost".into());
    let port = kv.remove("port").unwrap_or_else(|| "5432".into());
    let user = kv.remove("user").unwrap_or_else(|| "postgres".into());
    let password = kv.remove("password").filter(|p| !p.is_empty());
    let db = kv.remove("dbname").unwrap_or_else(|| user.clone());
    let creds = match password {
        Some(p) => format!("{}:{}", enc(&user), enc(&p)),
        None => enc(&user),
    };
    let mut url = format!("postgres://{creds}@{host}:{port}/{}", enc(&db));
    let params: Vec<String> = kv.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect();
    if !params.is_empty() {
        url.push('?');
        url.push_str(&params.join("&"));
    }
    Ok(url)
}

impl GoharvestFile {
    /// The equivalent [`Config`], or every problem.
    pub(crate) fn into_config(self) -> Result<Config, Vec<ConfigProblem>> {
        let mut problems = Vec::new();
        let h = self.harvest;
        let mut config = Config::default();
        let map = |m: &BTreeMap<String, serde_yaml::Value>| {
            KafkaConfig(m.iter().map(|(k, v)| (k.clone(), scalar(v))).collect())
        };
        if !h.base_kafka_config.is_empty() {
            config.kafka = map(&h.base_kafka_config);
        }
        config.producer_kafka = map(&h.producer_kafka_config);
        // goharvest elects through NELI only.
        let mut neli = NeliConfig {
            topic: h.leader_topic,
            group_id: h.leader_group_id,
            name: h.name,
            ..NeliConfig::default()
        };
        if let Some(ds) = h.data_source {
            match dsn_to_url(&ds) {
                Ok(url) => config.database.url = url,
                Err(e) => problems.push(ConfigProblem::new(
                    "harvest.dataSource",
                    format!(
                        "cannot be read: {e}; use a libpq key=value string or a postgres:// URL"
                    ),
                )),
            }
        }
        if let Some(t) = h.outbox_table {
            match TableName::parse(&t) {
                Ok(t) => config.outbox.table = t,
                Err(e) => problems.push(ConfigProblem::new("harvest.outboxTable", e)),
            }
        }
        // goharvest's table layout, harvested unchanged.
        config.outbox.shape = Shape::Goharvest;
        let l = h.limits;
        let c = &mut config.limits;
        if let Some(v) = l.io_error_backoff {
            c.io_error_backoff = v;
        }
        if let Some(v) = l.mark_backoff {
            c.mark_backoff = v;
        }
        if let Some(v) = l.max_in_flight_records {
            c.max_in_flight_records = Adaptive::Fixed(v);
        }
        if let Some(v) = l.min_metrics_interval {
            c.min_metrics_interval = v;
        }
        if let Some(v) = l.send_concurrency {
            c.send_concurrency = Adaptive::Fixed(v);
        }
        if let Some(v) = l.send_buffer {
            c.send_buffer = v;
        }
        if let Some(v) = l.mark_query_records {
            c.mark_query_records = Adaptive::Fixed(v);
        }
        if let Some(v) = l.heartbeat_timeout {
            neli.heartbeat_timeout = v;
        }
        if let Some(v) = l.min_poll_interval {
            neli.min_poll_interval = v;
        }
        config.leader = neli.into();
        let ignored = [
            ("pollDuration", l.poll_duration),
            ("maxPollInterval", l.max_poll_interval),
            ("drainInterval", l.drain_interval),
            ("queueTimeout", l.queue_timeout),
        ];
        for (name, v) in ignored {
            if v.is_some() {
                tracing::info!("goharvest limit {name} has no equivalent here (waits are event-driven and bounded); ignored");
            }
        }
        if let Some(log) = self.logging {
            // goharvest levels: Trace, Debug, Info, Warn, Error (any case).
            config.logging.level = log.level.to_lowercase();
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_dsn_becomes_a_url() {
        assert_eq!(
            dsn_to_url("host=db port=6543 user=app password= dbname=orders sslmode=disable")
                .unwrap(),
            "postgres://app@db:6543/orders?sslmode=disable"
        );
        assert_eq!(
            dsn_to_url("host=db user=app password=p@ss dbname=o").unwrap(),
            "postgres://app:p%40ss@db:5432/o"
        );
        assert!(dsn_to_url("host").is_err());
    }
}
