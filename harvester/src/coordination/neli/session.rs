//! A group session the cluster refuses is a configuration error, not a transient one.
//!
//! NELI's session is 3 x `heartbeat_timeout`; a broker refuses a JoinGroup whose session lies
//! outside its `group.min.session.timeout.ms`..`group.max.session.timeout.ms` (6 s..30 min by
//! default) with INVALID_SESSION_TIMEOUT, and librdkafka would retry that for ever. NELI (both
//! flavours) ends instead with an [`Error::InvalidConfig`] naming the setting, the session it
//! gives, and the cluster's bounds where the cluster will tell them (DescribeConfigs may be
//! denied to a least-privilege principal: then the defaults are named).

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::error::{ConfigProblem, Error};
use crate::kafka::KafkaConfig;

/// Whether a consumer error is the broker refusing the session.
pub(crate) fn is_refused_session(error: &KafkaError) -> bool {
    error.rdkafka_error_code() == Some(RDKafkaErrorCode::InvalidSessionTimeout)
}

/// The error to end with when the cluster refused `session` (3 x `field`).
pub(crate) fn refused(kafka: &KafkaConfig, field: &str, session: Duration) -> Error {
    let bounds = match cluster_bounds(kafka) {
        Some((min, max)) => format!(
            "the cluster's group.min.session.timeout.ms is {min} and group.max.session.timeout.ms {max}"
        ),
        None => "the cluster's group.min.session.timeout.ms (6000 by default) and group.max.session.timeout.ms (1800000 by default) could not be read".to_owned(),
    };
    Error::InvalidConfig(vec![ConfigProblem::new(
        format!("{field}.heartbeat_timeout"),
        format!(
            "gives a group session of {} ms (3 x heartbeat_timeout), which the cluster refused (INVALID_SESSION_TIMEOUT): {bounds}; raise heartbeat_timeout until 3 x it is within them, or lower the broker's minimum",
            session.as_millis()
        ),
    )])
}

/// (min, max) session the cluster's first broker allows, in ms, if it answers in time.
fn cluster_bounds(kafka: &KafkaConfig) -> Option<(String, String)> {
    let timeout = Duration::from_secs(5);
    let admin: AdminClient<DefaultClientContext> = kafka
        .client_config("kafka", "admin client", &[])
        .ok()?
        .create()
        .ok()?;
    let broker = admin
        .inner()
        .fetch_metadata(None, timeout)
        .ok()?
        .brokers()
        .first()?
        .id();
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let results = futures::executor::block_on(
        admin.describe_configs(&[ResourceSpecifier::Broker(broker)], &options),
    )
    .ok()?;
    let resource = results.into_iter().next()?.ok()?;
    let value = |name: &str| {
        resource
            .entries
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    Some((
        value("group.min.session.timeout.ms")?,
        value("group.max.session.timeout.ms")?,
    ))
}
