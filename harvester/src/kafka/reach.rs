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

/// Metadata requests until one is answered, the broker refuses us, or the bound is spent.
/// The first waits a short slice, so that a refusal is reported soon after librdkafka sees it;
/// each next waits twice as long: the request names every topic (rust-rdkafka asks for all
/// or one), and a broker with thousands of them on a busy machine may take longer than any
/// fixed slice to answer, which would fail every attempt however long the bound.
fn probe(config: &ClientConfig, bound: Duration) -> Result<(), Failed> {
    const FIRST_SLICE: Duration = Duration::from_millis(250);
    // A producer, not a consumer: its poll hands librdkafka's error events, with their text,
    // to the context (a consumer's poll returns the bare code).
    let client: BaseProducer<Witness> = config
        .create_with_context(Witness::default())
        .map_err(|e| Failed::Uncreatable(e.to_string()))?;
    let started = Instant::now();
    let mut next_slice = FIRST_SLICE;
    loop {
        let slice = bound.saturating_sub(started.elapsed()).min(next_slice);
        next_slice = next_slice.saturating_mul(2);
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

/// What a refused request asked for, so that an authorization refusal names Kafka's operation
/// and the resource, and the ACL that allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    /// Nothing more is known than the error code (a producer's fatal error).
    Unknown,
    /// `operation` (`Read`, `Write`, `Create`) on the topic `name`.
    Topic {
        operation: &'static str,
        name: &'a str,
    },
    /// Membership of the consumer group (`Read`).
    Group(&'a str),
    /// A transactional producer's id (`Write`).
    TransactionalId(&'a str),
}

/// The error for `code`, when a new client would meet it again (see
/// [`crate::Error::KafkaRefused`]): brokers without the producers' API, a transaction timeout
/// above the brokers' maximum, or an authorization refusal, named by what was `wanted`; `None`
/// for errors a fresh producer clears (fenced, a gap in a partition's sequence) and the rest.
pub fn refusal(
    bootstrap: &str,
    code: RDKafkaErrorCode,
    reason: &str,
    wanted: Wanted<'_>,
) -> Option<crate::Error> {
    use RDKafkaErrorCode as C;
    let (what, fix) = match (code, wanted) {
        (C::TopicAuthorizationFailed, Wanted::Topic { operation, name }) => {
            may_not(operation, "topic", name, format!("--topic {name}"))
        }
        (C::GroupAuthorizationFailed, Wanted::Group(group)) => {
            may_not("Read", "group", group, format!("--group {group}"))
        }
        (C::TransactionalIdAuthorizationFailed, Wanted::TransactionalId(id)) => {
            let (what, fix) = may_not("Write", "transactional id", id, format!("--transactional-id {id}"));
            let every = id.rsplit_once('-').map_or(id, |(prefix, _)| prefix);
            (what, format!("{fix} (every shard's: --transactional-id {every}- --resource-pattern-type prefixed)"))
        }
        (C::TransactionalIdAuthorizationFailed, _) => (
            "the principal may not Write the outbox's transactional ids".to_owned(),
            "grant it with an ACL: --operation Write --transactional-id <publish.transactional_id>- --resource-pattern-type prefixed".to_owned(),
        ),
        (C::TopicAuthorizationFailed | C::GroupAuthorizationFailed, _) => return None,
        (C::ClusterAuthorizationFailed, Wanted::Topic { name, .. }) => {
            let (what, fix) = may_not("Write", "topic", name, format!("--topic {name}"));
            (what, format!("{fix} (an idempotent producer needs Write on a topic from Kafka 3.0 on; before, --operation IdempotentWrite --cluster)"))
        }
        (C::ClusterAuthorizationFailed, _) => (
            "the principal may not use an idempotent producer (InitProducerId)".to_owned(),
            "grant it Write on the topics it publishes to (Kafka 3.0 and later: --operation Write --topic <topic>; brokers before 3.0: --operation IdempotentWrite --cluster)".to_owned(),
        ),
        (C::UnsupportedFeature, _) => (
            "the brokers lack the API versions that idempotent and transactional producers need (InitProducerId: Apache Kafka 0.11 or later)".to_owned(),
            "point it at such brokers".to_owned(),
        ),
        (C::InvalidTransactionTimeout, _) => (
            "the transaction timeout is above the brokers' transaction.max.timeout.ms".to_owned(),
            "set producer_kafka.\"transaction.timeout.ms\" (by default the larger of the leader's succession and 60 s) at most the brokers' transaction.max.timeout.ms".to_owned(),
        ),
        _ => return None,
    };
    Some(crate::Error::KafkaRefused {
        bootstrap: bootstrap.to_owned(),
        code,
        what,
        fix,
        reason: reason.to_owned(),
    })
}

/// (what was refused, the ACL that allows it) for `operation` on a resource.
fn may_not(operation: &str, kind: &str, name: &str, resource: String) -> (String, String) {
    let to = if operation == "Write" { " to" } else { "" };
    (
        format!("the principal may not {operation}{to} {kind} {name:?}"),
        format!("grant it with an ACL: --operation {operation} {resource}"),
    )
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
            let e = refusal("b:9092", code, "why", Wanted::Unknown).expect("a refusal");
            assert!(e.ends_harvest());
            let text = e.to_string();
            assert!(
                text.contains("kafka.\"bootstrap.servers\" = \"b:9092\""),
                "{text}"
            );
        }
        let e = refusal(
            "b:9092",
            RDKafkaErrorCode::TopicAuthorizationFailed,
            "Broker: Topic authorization failed",
            Wanted::Topic {
                operation: "Write",
                name: "orders",
            },
        )
        .expect("a refusal");
        assert!(e.ends_harvest());
        assert!(
            e.to_string().starts_with("kafka refused: the principal may not Write to topic \"orders\" (TOPIC_AUTHORIZATION_FAILED); grant it with an ACL: --operation Write --topic orders"),
            "{e}"
        );
        let e = refusal(
            "b:9092",
            RDKafkaErrorCode::GroupAuthorizationFailed,
            "why",
            Wanted::Group("billing"),
        )
        .expect("a refusal");
        assert!(
            e.to_string().contains("may not Read group \"billing\" (GROUP_AUTHORIZATION_FAILED); grant it with an ACL: --operation Read --group billing"),
            "{e}"
        );
        // Without the resource it cannot be named: not told as a refusal.
        assert!(refusal(
            "b:9092",
            RDKafkaErrorCode::TopicAuthorizationFailed,
            "why",
            Wanted::Unknown
        )
        .is_none());
        for code in [
            RDKafkaErrorCode::Fenced,
            RDKafkaErrorCode::OutOfOrderSequenceNumber,
            RDKafkaErrorCode::InvalidRecord,
        ] {
            assert!(
                refusal("b:9092", code, "why", Wanted::Unknown).is_none(),
                "{code:?}"
            );
        }
    }
}
