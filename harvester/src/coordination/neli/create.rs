//! Creating the leader topic, for both NELI flavours: one partition for the elector, P for the
//! bucket assignor. An existing topic counts as created; a refusal keeps its code, so the
//! caller can tell a missing ACL (which ends NELI, see [`super::refusal`]) from a broker that
//! is slow or ignores the request (which it waits out).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::kafka::KafkaConfig;

/// Why the topic was not created: the error's text, and the broker's code when it answered.
pub(crate) type NotCreated = (String, Option<RDKafkaErrorCode>);

/// Creates `topic` with `partitions` partitions and the cluster's replication factor, each
/// request bounded by `timeout`.
pub(crate) fn create_topic(
    kafka: &KafkaConfig,
    topic: &str,
    partitions: i32,
    timeout: Duration,
) -> Result<(), NotCreated> {
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config("kafka", "admin client", &[])
        .map_err(|_| ("invalid admin config".to_owned(), None))?
        .create()
        .map_err(|e: KafkaError| (e.to_string(), None))?;
    let new_topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
    let options = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let results = futures::executor::block_on(admin.create_topics([&new_topic], &options))
        .map_err(|e| (e.to_string(), None))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err((code.to_string(), Some(code))),
        }
    }
    Ok(())
}
