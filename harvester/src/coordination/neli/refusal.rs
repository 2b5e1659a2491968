//! An ACL the cluster lacks is a configuration error, not a transient one.
//!
//! NELI (both flavours) needs Read on its group, Read and Write on its leader topic, and Create
//! on it where it creates it. librdkafka reports a missing one as an error event and retries for
//! ever, and the member would contend without ever leading; so each NELI client turns such a
//! refusal into [`crate::Error::KafkaRefused`], naming the operation, the resource and the ACL
//! that grants it, and the elector or assignor ends with it.

use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError;
use rdkafka::message::DeliveryResult;
use rdkafka::producer::ProducerContext;
use rdkafka::types::RDKafkaErrorCode;

use crate::error::Error;
use crate::kafka::{KafkaConfig, Wanted};

/// The error that ends NELI when the cluster refused what `wanted` names for want of an ACL:
/// a new client would be refused the same way. `None` for any other error.
pub(crate) fn refused(
    kafka: &KafkaConfig,
    error: &KafkaError,
    wanted: Wanted<'_>,
) -> Option<Error> {
    refused_code(
        kafka,
        error.rdkafka_error_code()?,
        &error.to_string(),
        wanted,
    )
}

/// As [`refused`], from an error code and its text (the admin API's results).
pub(crate) fn refused_code(
    kafka: &KafkaConfig,
    code: RDKafkaErrorCode,
    reason: &str,
    wanted: Wanted<'_>,
) -> Option<Error> {
    let bootstrap = kafka.get("bootstrap.servers").unwrap_or_default();
    crate::kafka::refusal(bootstrap, code, reason, wanted)
}

/// What a consumer of `topic` in `group` was refused: membership of the group, or reading the
/// topic.
pub(crate) fn consumer_wants<'a>(group: &'a str, topic: &'a str, error: &KafkaError) -> Wanted<'a> {
    match error.rdkafka_error_code() {
        Some(RDKafkaErrorCode::GroupAuthorizationFailed) => Wanted::Group(group),
        Some(RDKafkaErrorCode::TopicAuthorizationFailed) => Wanted::Topic {
            operation: "Read",
            name: topic,
        },
        _ => Wanted::Unknown,
    }
}

/// What creating the leader topic `topic` was refused, if it was for want of an ACL.
pub(crate) fn create_refused(
    kafka: &KafkaConfig,
    code: RDKafkaErrorCode,
    reason: &str,
    topic: &str,
) -> Option<Error> {
    let wanted = Wanted::Topic {
        operation: "Create",
        name: topic,
    };
    refused_code(kafka, code, reason, wanted)
}

/// A heartbeat producer's context: logs through `tracing` and keeps a refused delivery (only a
/// refusal matters: any other lost heartbeat shows as a lapse).
pub(crate) struct HeartbeatContext {
    member: String,
    refused: parking_lot::Mutex<Option<KafkaError>>,
}

impl HeartbeatContext {
    pub(crate) fn new(member: &str) -> Self {
        HeartbeatContext {
            member: member.to_owned(),
            refused: parking_lot::Mutex::new(None),
        }
    }

    /// The error that ends NELI if a heartbeat to `topic` was refused since the last call.
    pub(crate) fn take_refusal(&self, kafka: &KafkaConfig, topic: &str) -> Option<Error> {
        let error = self.refused.lock().take()?;
        let wanted = Wanted::Topic {
            operation: "Write",
            name: topic,
        };
        refused(kafka, &error, wanted)
    }
}

impl ClientContext for HeartbeatContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        crate::kafka::log_to_tracing(&self.member, level, fac, message);
    }
}

impl ProducerContext for HeartbeatContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            if e.rdkafka_error_code() == Some(RDKafkaErrorCode::TopicAuthorizationFailed) {
                *self.refused.lock() = Some(e.clone());
            }
        }
    }
}
