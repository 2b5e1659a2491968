//! The embedded broker's control protocol: one JSON object per line over loopback TCP.
//!
//! JSON lines keep the protocol debuggable with `nc` and need no extra crates; the broker is a
//! test fixture, so a handful of explicit operations beats a general RPC layer.

use serde::{Deserialize, Serialize};

/// A request to the embedded broker's control port, addressed to one mock cluster.
///
/// The host runs cluster 0 from start-up and more on request, so that a test injecting faults can
/// have a cluster of its own without disturbing tests that share cluster 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Which cluster (0 = the shared one).
    #[serde(default)]
    pub cluster: u32,
    #[serde(flatten)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Command {
    /// Liveness check.
    Ping,
    /// Create a topic (the mock cluster has no CreateTopics API; it auto-creates with 4
    /// partitions on metadata requests, so tests create topics explicitly here).
    CreateTopic { name: String, partitions: i32 },
    /// Push errors onto the stack of an API: the next `errors.len()` requests of that API fail
    /// with these codes, in order. `api` is a Kafka API name such as `Produce` or `Heartbeat`;
    /// errors are Kafka error names such as `NOT_LEADER_FOR_PARTITION` or `_TRANSPORT`.
    RequestErrors { api: String, errors: Vec<String> },
    /// Drop any errors still stacked for an API.
    ClearRequestErrors { api: String },
    /// Set the versions of an API the brokers advertise (`None`: the API is not offered at all,
    /// as by a broker too old for it). `api` as for `RequestErrors`.
    ApiVersions {
        api: String,
        versions: Option<(i16, i16)>,
    },
    /// Stop a broker accepting connections (-1 = all brokers).
    BrokerDown { broker: i32 },
    /// Let a broker accept connections again (-1 = all brokers).
    BrokerUp { broker: i32 },
    /// Add a round-trip delay to a broker's responses (-1 = all brokers).
    Rtt { broker: i32, millis: u64 },
    /// Start another, independent cluster; the reply carries its id and bootstrap.
    NewCluster { brokers: i32 },
    /// Destroy a cluster started with `NewCluster`.
    DropCluster,
    /// Stop the broker process cleanly.
    Shutdown,
}

/// The broker's answer to one [`Command`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reply {
    /// Whether the command took effect.
    pub ok: bool,
    /// Why it did not, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `NewCluster`: the new cluster's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<u32>,
    /// For `NewCluster`: the new cluster's bootstrap servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap: Option<String>,
}

impl Reply {
    pub fn ok() -> Self {
        Reply {
            ok: true,
            error: None,
            cluster: None,
            bootstrap: None,
        }
    }

    pub fn err(message: impl Into<String>) -> Self {
        Reply {
            ok: false,
            error: Some(message.into()),
            cluster: None,
            bootstrap: None,
        }
    }
}

/// What a running broker publishes in its state file so other processes can find it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    /// `bootstrap.servers` of the mock cluster.
    pub bootstrap: String,
    /// Address of the control port (this protocol).
    pub control: String,
    /// Process id of the broker host.
    pub pid: u32,
    /// Number of brokers in the mock cluster.
    pub brokers: i32,
}
