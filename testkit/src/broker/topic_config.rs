//! Changing a topic's configuration on a live real cluster (a fault test raises
//! `min.insync.replicas` above the replicas it will leave in sync).
//!
//! Kafka's AlterConfigs (the call rdkafka offers) replaces a topic's whole set of overrides:
//! whatever it does not name goes back to the broker's default. So the topic's current
//! overrides are read first and sent back with the change, and nothing set at creation is lost.

use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, ConfigSource, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

use super::Broker;
use crate::TestkitError;

impl Broker {
    /// Sets `configs` on `topic` (a real cluster), keeping its other topic-level overrides.
    pub async fn set_topic_configs(
        &self,
        topic: &str,
        configs: &[(&str, &str)],
    ) -> Result<(), TestkitError> {
        if self.embedded().is_some() {
            return Err(TestkitError::Broker(
                "the embedded broker takes no topic configs".into(),
            ));
        }
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.bootstrap())
            .create()?;
        let options = AdminOptions::new();
        let resource = ResourceSpecifier::Topic(topic);
        let described = admin.describe_configs([&resource], &options).await?;
        let mut overrides: Vec<(String, String)> = Vec::new();
        for result in described {
            let resource =
                result.map_err(|e| TestkitError::Broker(format!("describe topic {topic}: {e}")))?;
            for entry in resource.entries {
                if entry.source == ConfigSource::DynamicTopic
                    && !configs.iter().any(|(k, _)| *k == entry.name)
                {
                    if let Some(value) = entry.value {
                        overrides.push((entry.name, value));
                    }
                }
            }
        }
        let mut alter = AlterConfig::new(resource);
        for (key, value) in &overrides {
            alter = alter.set(key, value);
        }
        for (key, value) in configs {
            alter = alter.set(key, value);
        }
        for result in admin.alter_configs([&alter], &options).await? {
            match result {
                Ok(_) => {}
                Err((_, code)) => {
                    return Err(TestkitError::Broker(format!(
                        "set {configs:?} on topic {topic}: {code}"
                    )))
                }
            }
        }
        Ok(())
    }
}
