//! Whether the cluster can be used at all: reached within the connect bound at start, and
//! refusals a new producer would meet again told apart from the faults a restart clears.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientConfig;

use super::KafkaConfig;
use crate::error::ConfigProblem;

impl KafkaConfig {
    /// Waits up to `bound` for a broker of `bootstrap.servers` to answer a metadata request:
    /// a harvester starts only against a cluster it can reach, and an address that is wrong,
    /// down, not Kafka, or behind another security protocol fails here naming the setting,
    /// instead of as retries in the log. A broker that refuses the TLS handshake or the SASL
    /// login is a configuration problem naming the setting to fix (as soon as librdkafka
    /// reports it, not at the end of the bound).
    pub async fn reach(&self, bound: Duration) -> Result<(), crate::Error> {
        let config = self
            .client_config("kafka", "connection check", &[])
            .map_err(crate::Error::InvalidConfig)?;
        let bootstrap = self.get("bootstrap.servers").unwrap_or_default().to_owned();
        let outcome = tokio::task::spawn_blocking(move || probe(&config, bound))
            .await
            .unwrap_or_else(|e| Err(Failed::Other(e.to_string())));
        match outcome {
            Ok(()) => Ok(()),
            Err(Failed::Refused(code, reason)) => Err(crate::Error::InvalidConfig(vec![
                self.refused_problem(code, &reason)
            ])),
            Err(Failed::Uncreatable(reason)) => {
                Err(crate::Error::InvalidConfig(vec![ConfigProblem::new(
                    "kafka",
                    format!("librdkafka cannot create a client with these properties: {reason}"),
                )]))
            }
            Err(Failed::Other(reason)) => Err(unreachable(&bootstrap, bound, &reason)),
        }
    }

    /// The setting to fix when the broker refused the TLS handshake or the SASL login: the
    /// first of [`REFUSALS`] whose words the reason holds, named as the user wrote it.
    fn refused_problem(&self, code: RDKafkaErrorCode, reason: &str) -> ConfigProblem {
        let sasl = code == RDKafkaErrorCode::Authentication;
        let refusal = REFUSALS
            .iter()
            .find(|r| r.sasl == sasl && r.words.iter().any(|w| reason.contains(w)))
            .unwrap_or(if sasl { &SASL_LOGIN } else { &TLS_OTHER });
        let key = refusal
            .keys
            .iter()
            .find(|k| self.0.contains_key(**k))
            .unwrap_or(&refusal.keys[0]);
        ConfigProblem::new(
            format!("kafka.\"{key}\""),
            format!(
                "the broker refused the connection ({reason}): {}",
                refusal.fix
            ),
        )
    }
}

/// A kind of refusal: words of librdkafka's reason, the settings that fix it (the first set is
/// named; otherwise the first), and how.
struct Refusal {
    sasl: bool,
    words: &'static [&'static str],
    keys: &'static [&'static str],
    fix: &'static str,
}

const SASL_LOGIN: Refusal = Refusal {
    sasl: true,
    words: &["credentials", "Invalid username or password"],
    keys: &["sasl.password_file", "sasl.password_env", "sasl.password", "sasl.username"],
    fix: "check kafka.\"sasl.username\" and its password (and that the user exists for this mechanism)",
};

const TLS_OTHER: Refusal = Refusal {
    sasl: false,
    words: &["bad certificate", "certificate required"],
    keys: &["ssl.certificate.location", "ssl.certificate.pem"],
    fix: "the broker requires a client certificate signed by a CA it trusts (ssl.certificate.location and ssl.key.location)",
};

const REFUSALS: [Refusal; 5] = [
    SASL_LOGIN,
    Refusal {
        sasl: true,
        words: &["mechanism"],
        keys: &["sasl.mechanism", "sasl.mechanisms"],
        fix: "use a mechanism the listener enables",
    },
    Refusal {
        sasl: false,
        words: &["PLAINTEXT broker listener", "wrong version number", "packet length"],
        keys: &["security.protocol"],
        fix: "the listener speaks another security.protocol",
    },
    Refusal {
        sasl: false,
        words: &["verify failed", "could not be verified"],
        keys: &["ssl.ca.location", "ssl.ca.pem"],
        fix: "the broker's certificate must be signed by this CA, be valid now, and name the host in bootstrap.servers",
    },
    TLS_OTHER,
];

/// Why a probe failed: no client could be created from the properties (e.g. a SASL mechanism
/// this build lacks, a key file OpenSSL cannot read), the broker refused the handshake or
/// login, or something else.
enum Failed {
    Uncreatable(String),
    Refused(RDKafkaErrorCode, String),
    Other(String),
}

/// Metadata requests in short slices until one is answered, the broker refuses us, or the
/// bound is spent.
fn probe(config: &ClientConfig, bound: Duration) -> Result<(), Failed> {
    const SLICE: Duration = Duration::from_millis(250);
    // A producer, not a consumer: its poll hands librdkafka's error events, with their text,
    // to the context (a consumer's poll returns the bare code).
    let client: BaseProducer<Witness> = config
        .create_with_context(Witness::default())
        .map_err(|e| Failed::Uncreatable(e.to_string()))?;
    let started = Instant::now();
    loop {
        let slice = bound.saturating_sub(started.elapsed()).min(SLICE);
        let last = match client.client().fetch_metadata(None, slice) {
            Ok(m) if m.brokers().is_empty() => "the cluster listed no brokers".to_owned(),
            Ok(_) => return Ok(()),
            Err(e) => e.to_string(),
        };
        client.poll(Duration::ZERO);
        if let Some((code, reason)) = client.context().refusal() {
            return Err(Failed::Refused(code, reason));
        }
        if started.elapsed() >= bound {
            return Err(Failed::Other(match client.context().last() {
                Some(seen) => format!("{last}; {seen}"),
                None => last,
            }));
        }
    }
}

/// Keeps the last error librdkafka reported, and the last that says the broker refused us.
#[derive(Default)]
struct Witness {
    refused: Mutex<Option<(RDKafkaErrorCode, String)>>,
    last: Mutex<Option<String>>,
}

impl Witness {
    fn refusal(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.refused.lock().clone()
    }

    fn last(&self) -> Option<String> {
        self.last.lock().clone()
    }
}

impl Witness {
    /// Notes one failure, from an error event (`code`) or a connection's failure log line.
    fn observe(&self, code: RDKafkaErrorCode, reason: &str) {
        *self.last.lock() = Some(reason.to_owned());
        let refused = matches!(
            code,
            RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SSL
        ) || reason.contains("SSL handshake failed")
            || reason.contains("SSL routines");
        if refused {
            *self.refused.lock() = Some((code, reason.to_owned()));
        }
    }
}

impl ClientContext for Witness {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        super::log_to_tracing("connection check", level, fac, message);
        // librdkafka reports a connection's failure as an error event once, and logs it each
        // time: a repeat may come only as this line.
        if fac == "FAIL" {
            let reason = message
                .strip_prefix("[thrd:")
                .and_then(|m| m.split_once("]: "))
                .map_or(message, |(_, rest)| rest);
            self.observe(RDKafkaErrorCode::BrokerTransportFailure, reason);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!("connection check: {error}: {reason}");
        match error.rdkafka_error_code() {
            // Says less than the failure before it.
            None | Some(RDKafkaErrorCode::AllBrokersDown) => {}
            Some(code) => self.observe(code, reason),
        }
    }
}

impl ProducerContext for Witness {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &rdkafka::message::DeliveryResult<'_>, _: ()) {}
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
