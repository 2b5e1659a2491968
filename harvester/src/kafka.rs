//! What every Kafka client of the harvester shares: the librdkafka pass-through settings and the
//! forwarding of librdkafka's log lines into `tracing`.
//!
//! Users may set any librdkafka property (security, timeouts, compression), except those the
//! harvester must control for correctness: setting one of those is an error naming the key,
//! never a silent override (as in Vector's Kafka sink).
//!
//! A leaf module: the config, the electors and the pipeline all import it, and it imports none
//! of them, so no dependency circle can run through the Kafka settings.

use std::collections::BTreeMap;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;
use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;

/// librdkafka properties shared by every client the harvester creates. Default:
/// `bootstrap.servers = localhost:9092`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KafkaConfig(pub BTreeMap<String, String>);

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig(BTreeMap::from([(
            "bootstrap.servers".into(),
            "localhost:9092".into(),
        )]))
    }
}

impl KafkaConfig {
    /// No properties at all.
    pub fn empty() -> Self {
        KafkaConfig(BTreeMap::new())
    }

    /// Only `bootstrap.servers` set.
    pub fn with_bootstrap(servers: &str) -> Self {
        KafkaConfig(BTreeMap::from([(
            "bootstrap.servers".into(),
            servers.into(),
        )]))
    }

    /// Sets one property.
    pub fn set(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0.insert(key.to_owned(), value.into());
        self
    }

    /// The user's properties plus `forced`; a user property that collides with a forced one
    /// is reported against `field` with the forced value.
    pub fn client_config(
        &self,
        field: &str,
        role: &str,
        forced: &[(&str, String)],
    ) -> Result<ClientConfig, Vec<ConfigProblem>> {
        let mut problems = Vec::new();
        let mut config = ClientConfig::new();
        for (key, value) in &self.0 {
            if let Some((_, forced_value)) = forced.iter().find(|(k, _)| k == key) {
                problems.push(ConfigProblem::new(
                    format!("{field}.\"{key}\""),
                    format!(
                        "is set by the harvester for its {role} (to {forced_value}); remove it from the configuration"
                    ),
                ));
            }
            config.set(key, value);
        }
        for (key, value) in forced {
            config.set(*key, value);
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }

    /// Waits up to `bound` for a broker of `bootstrap.servers` to answer a metadata request:
    /// a harvester starts only against a cluster it can reach, and an address that is wrong,
    /// down, not Kafka, or behind another security protocol fails here naming the setting,
    /// instead of as retries in the log.
    pub async fn reach(&self, bound: std::time::Duration) -> Result<(), crate::Error> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let config = self
            .client_config("kafka", "connection check", &[])
            .map_err(crate::Error::InvalidConfig)?;
        let bootstrap = self.get("bootstrap.servers").unwrap_or_default().to_owned();
        let answer = tokio::task::spawn_blocking(move || {
            let consumer: BaseConsumer = config.create().map_err(|e| e.to_string())?;
            consumer
                .fetch_metadata(None, bound)
                .map(|m| m.brokers().len())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match answer {
            Ok(brokers) if brokers > 0 => Ok(()),
            Ok(_) => Err(unreachable(
                &bootstrap,
                bound,
                "the cluster listed no brokers",
            )),
            Err(why) => Err(unreachable(&bootstrap, bound, &why)),
        }
    }

    /// Problems with the map itself (checked by `validate()`).
    pub fn problems(&self, field: &str) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        match self.0.get("bootstrap.servers") {
            Some(v) if !v.trim().is_empty() => {}
            _ => problems.push(ConfigProblem::new(
                format!("{field}.\"bootstrap.servers\""),
                "is required: list the brokers, e.g. \"localhost:9092\"",
            )),
        }
        problems
    }

    /// The value of a property, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The properties with secrets (passwords, keys, tokens) replaced.
    pub fn redacted(&self) -> BTreeMap<String, String> {
        self.0
            .iter()
            .map(|(k, v)| {
                let secret = ["password", "secret", "key", "token", "jaas"]
                    .iter()
                    .any(|s| {
                        k.contains(s) && !k.ends_with(".location") && k != "group.instance.id"
                    });
                (
                    k.clone(),
                    if secret {
                        "<redacted>".into()
                    } else {
                        v.clone()
                    },
                )
            })
            .collect()
    }
}

/// Forwards one librdkafka log line to `tracing`, tagged with the client (`member`): errors and
/// warnings as such, librdkafka's notices and infos at debug (they are chatty), its debug at trace.
pub fn log_to_tracing(member: &str, level: RDKafkaLogLevel, fac: &str, message: &str) {
    match level {
        RDKafkaLogLevel::Emerg
        | RDKafkaLogLevel::Alert
        | RDKafkaLogLevel::Critical
        | RDKafkaLogLevel::Error => tracing::error!(member, fac, "librdkafka: {message}"),
        RDKafkaLogLevel::Warning => tracing::warn!(member, fac, "librdkafka: {message}"),
        RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
            tracing::debug!(member, fac, "librdkafka: {message}")
        }
        RDKafkaLogLevel::Debug => tracing::trace!(member, fac, "librdkafka: {message}"),
    }
}

/// The error for a producer's fatal `code`, when a new producer would meet it again (see
/// [`crate::Error::KafkaRefused`]); `None` for fatal errors a fresh producer clears (fenced, a
/// gap in a partition's sequence).
pub fn refusal(bootstrap: &str, code: RDKafkaErrorCode, reason: &str) -> Option<crate::Error> {
    let fix = match code {
        RDKafkaErrorCode::UnsupportedFeature => "the brokers lack the API versions that idempotent and transactional producers need (InitProducerId: Apache Kafka 0.11 or later); point it at such brokers",
        RDKafkaErrorCode::ClusterAuthorizationFailed => "grant the harvester's principal IdempotentWrite on the cluster (brokers before Kafka 3.0; later ones need Write on the topics)",
        RDKafkaErrorCode::TransactionalIdAuthorizationFailed => "grant the harvester's principal Write and Describe on the transactional ids publish.transactional_id-*",
        RDKafkaErrorCode::InvalidTransactionTimeout => "set producer_kafka.\"transaction.timeout.ms\" (by default the larger of the leader's succession and 60 s) at most the brokers' transaction.max.timeout.ms",
        _ => return None,
    };
    Some(crate::Error::KafkaRefused {
        bootstrap: bootstrap.to_owned(),
        code,
        reason: reason.to_owned(),
        fix,
    })
}

fn unreachable(bootstrap: &str, after: std::time::Duration, reason: &str) -> crate::Error {
    crate::Error::KafkaUnreachable {
        bootstrap: bootstrap.to_owned(),
        after,
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_key_override_is_an_error_naming_the_key() {
        let cfg = KafkaConfig::with_bootstrap("b:9092").set("enable.idempotence", "false");
        let err = cfg
            .client_config(
                "kafka",
                "producers",
                &[("enable.idempotence", "true".into())],
            )
            .unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(err[0].field.contains("enable.idempotence"), "{}", err[0]);
        assert!(err[0].message.contains("remove it"), "{}", err[0]);
    }

    #[test]
    fn forced_keys_are_applied() {
        let cfg = KafkaConfig::with_bootstrap("b:9092");
        let cc = cfg
            .client_config("kafka", "producers", &[("linger.ms", "0".into())])
            .unwrap();
        assert_eq!(cc.get("linger.ms"), Some("0"));
        assert_eq!(cc.get("bootstrap.servers"), Some("b:9092"));
    }

    #[test]
    fn secrets_are_redacted() {
        let cfg = KafkaConfig::with_bootstrap("b").set("sasl.password", "hunter2");
        assert_eq!(cfg.redacted()["sasl.password"], "<redacted>");
        assert_eq!(cfg.redacted()["bootstrap.servers"], "b");
    }

    #[test]
    fn a_refusal_a_new_producer_would_meet_again_ends_the_harvest() {
        for code in [
            RDKafkaErrorCode::UnsupportedFeature,
            RDKafkaErrorCode::ClusterAuthorizationFailed,
            RDKafkaErrorCode::TransactionalIdAuthorizationFailed,
            RDKafkaErrorCode::InvalidTransactionTimeout,
        ] {
            let e = refusal("b:9092", code, "why").expect("a refusal");
            assert!(e.ends_harvest());
            let text = e.to_string();
            assert!(
                text.contains("kafka.\"bootstrap.servers\" = \"b:9092\""),
                "{text}"
            );
        }
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::OutOfOrderSequenceNumber,
            RDKafkaErrorCode::InvalidRecord,
        ] {
            assert!(refusal("b:9092", code, "why").is_none(), "{code:?}");
        }
    }
}
