//! What a failed delivery means for its row.
//!
//! librdkafka already retries retriable errors inside the idempotent producer (without
//! reordering), so an error that reaches the application is either permanent for this record
//! (quarantine it), possibly permanent (retry a few times, then quarantine), or transient in a
//! way librdkafka gave up on (message timeout, transport): reset and publish again.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// The fate of a row whose delivery failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Can never succeed (e.g. too large): quarantine now.
    Permanent,
    /// May be a misconfiguration (unknown topic, rejected record): retry up to
    /// `max_delivery_attempts`, then quarantine.
    Suspect,
    /// The principal may not write it (no ACL): end the harvest, naming the ACL. Never
    /// quarantined: the row is fine, and an ACL publishes it.
    Refused,
    /// Retry (reset and re-mark) as often as it takes.
    Transient,
    /// The producer itself is unusable and must be replaced.
    Fatal,
}

/// Classifies an error code from a delivery report or a failed enqueue.
pub fn classify(error: &KafkaError) -> Failure {
    let Some(code) = error.rdkafka_error_code() else {
        return Failure::Transient;
    };
    match code {
        RDKafkaErrorCode::MessageSizeTooLarge
        | RDKafkaErrorCode::InvalidMessageSize
        | RDKafkaErrorCode::MessageBatchTooLarge => Failure::Permanent,
        RDKafkaErrorCode::UnknownTopicOrPartition
        | RDKafkaErrorCode::UnknownTopic
        | RDKafkaErrorCode::UnknownPartition
        | RDKafkaErrorCode::InvalidRecord
        | RDKafkaErrorCode::InvalidTopic
        | RDKafkaErrorCode::PolicyViolation
        | RDKafkaErrorCode::InvalidMessage => Failure::Suspect,
        RDKafkaErrorCode::TopicAuthorizationFailed
        | RDKafkaErrorCode::ClusterAuthorizationFailed
        | RDKafkaErrorCode::TransactionalIdAuthorizationFailed => Failure::Refused,
        RDKafkaErrorCode::Fatal => Failure::Fatal,
        _ => Failure::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let e = |c| KafkaError::MessageProduction(c);
        assert_eq!(
            classify(&e(RDKafkaErrorCode::MessageSizeTooLarge)),
            Failure::Permanent
        );
        assert_eq!(
            classify(&e(RDKafkaErrorCode::UnknownTopicOrPartition)),
            Failure::Suspect
        );
        assert_eq!(
            classify(&e(RDKafkaErrorCode::MessageTimedOut)),
            Failure::Transient
        );
        assert_eq!(classify(&e(RDKafkaErrorCode::Fatal)), Failure::Fatal);
        assert_eq!(
            classify(&e(RDKafkaErrorCode::TopicAuthorizationFailed)),
            Failure::Refused
        );
    }
}
