//! The one configuration of the harvester.
mod kafka;

pub use kafka::KafkaConfig;
