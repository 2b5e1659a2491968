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
use rdkafka::ClientConfig;
use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;

mod reach;
mod secrets;
pub mod statistics;

pub use crate::error::code_name;
pub use reach::{refusal, Wanted};
use secrets::{indirect, pem_problem, read_secret};

/// librdkafka properties shared by every client the harvester creates. Default:
/// `bootstrap.servers = localhost:9092`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KafkaConfig(pub BTreeMap<String, String>);

/// Passwords, keys and tokens redacted (what a log line or a panic message may print).
impl std::fmt::Debug for KafkaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("KafkaConfig")
            .field(&self.redacted())
            .finish()
    }
}

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
    /// is reported against `field` with the forced value. Secrets given indirectly are read
    /// here (see [`KafkaConfig::resolved`]), and the result is checked by librdkafka itself
    /// (an unknown property or a bad value is a problem naming the key), so a mistake fails at
    /// check time rather than when a client is created, after the database was touched.
    pub fn client_config(
        &self,
        field: &str,
        role: &str,
        forced: &[(&str, String)],
    ) -> Result<ClientConfig, Vec<ConfigProblem>> {
        let (resolved, mut problems) = self.resolved(field);
        let mut config = ClientConfig::new();
        for (key, value) in &resolved {
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
            problems.extend(native_problems(&config, field));
        }
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }

    /// The properties with secrets given indirectly read in: `<property>_file` names a file
    /// whose content (without its trailing newline) is the value, `<property>_env` an
    /// environment variable (`"sasl.password_file" = "/run/secrets/kafka"`), so a password need
    /// not be in the configuration. Files named by `ssl.*.location` must hold PEM. Problems
    /// name the key as written, never the secret.
    pub fn resolved(&self, field: &str) -> (Vec<(String, String)>, Vec<ConfigProblem>) {
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for (key, value) in &self.0 {
            let at = || format!("{field}.\"{key}\"");
            let Some((property, how)) = indirect(key) else {
                if let Some(problem) = pem_problem(key, value) {
                    problems.push(ConfigProblem::new(at(), problem));
                }
                out.push((key.clone(), value.clone()));
                continue;
            };
            if self.0.contains_key(property) {
                problems.push(ConfigProblem::new(
                    at(),
                    format!("\"{property}\" is set too; keep one of them"),
                ));
                continue;
            }
            match read_secret(how, value) {
                Ok(secret) => out.push((property.to_owned(), secret)),
                Err(why) => problems.push(ConfigProblem::new(at(), why)),
            }
        }
        (out, problems)
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
                        k.contains(s)
                            && !k.ends_with(".location")
                            && k != "group.instance.id"
                            && indirect(k).is_none()
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

/// What librdkafka says of the properties, as problems naming the key (it stops at the first).
fn native_problems(config: &ClientConfig, field: &str) -> Option<ConfigProblem> {
    match config.create_native_config() {
        Ok(_) => None,
        Err(rdkafka::error::KafkaError::ClientConfig(_, description, key, _)) => Some(
            ConfigProblem::new(format!("{field}.\"{key}\""), description),
        ),
        Err(e) => Some(ConfigProblem::new(field.to_owned(), e.to_string())),
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
    fn librdkafka_checks_the_properties_at_check_time() {
        let cfg = KafkaConfig::with_bootstrap("b:9092").set("bootstrap_servers", "b:9092");
        let problems = cfg.client_config("kafka", "producers", &[]).unwrap_err();
        assert_eq!(
            problems[0].field, "kafka.\"bootstrap_servers\"",
            "{problems:?}"
        );
        let cfg = KafkaConfig::with_bootstrap("b:9092").set("security.protocol", "sasl_tls");
        let problems = cfg.client_config("kafka", "producers", &[]).unwrap_err();
        assert_eq!(
            problems[0].field, "kafka.\"security.protocol\"",
            "{problems:?}"
        );
    }

    /// This build has libcurl: OAUTHBEARER's OIDC method (a client-credentials token from the
    /// endpoint) is a configuration librdkafka accepts, its secret read from a file.
    #[test]
    fn oauthbearer_with_oidc_is_accepted() {
        let secret = std::env::temp_dir().join(format!("oidc-secret-{}", std::process::id()));
        std::fs::write(&secret, "s3cret\n").unwrap();
        let cfg = KafkaConfig::with_bootstrap("b:9093")
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "OAUTHBEARER")
            .set("sasl.oauthbearer.method", "oidc")
            .set("sasl.oauthbearer.client.id", "harvester")
            .set(
                "sasl.oauthbearer.client.secret_file",
                secret.display().to_string(),
            )
            .set(
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/token",
            )
            .set("sasl.oauthbearer.scope", "kafka");
        let config = cfg.client_config("kafka", "producers", &[]);
        std::fs::remove_file(&secret).unwrap();
        let config = config.unwrap_or_else(|p| panic!("refused: {p:?}"));
        assert_eq!(config.get("sasl.oauthbearer.client.secret"), Some("s3cret"));
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }
}
