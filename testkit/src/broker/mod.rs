//! Finding and driving the Kafka-protocol broker that tests and benchmarks talk to.
//!
//! `KAFKA_BROKERS` names the cluster every test and benchmark runs on: Apache Kafka started by
//! `scripts/services.sh`, or the user's own (topics are created with the admin API). Faults are
//! injected into the embedded broker (librdkafka's mock cluster, also started by
//! `scripts/services.sh`), found through its state file, which also gives the control port used
//! for topic creation and fault injection: [`Broker::mock`]. Without `KAFKA_BROKERS`,
//! [`Broker::discover`] falls back to the mock too.

pub mod console;
pub mod host;
pub mod limits;
pub mod private;
pub mod protocol;
pub mod relay;
mod topic_config;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

pub use private::{NodeAction, PrivateKafka};
pub use protocol::{BrokerInfo, Command, Reply, Request};

use crate::TestkitError;

/// Name of the embedded broker's state file inside the state directory.
pub const STATE_FILE: &str = "broker.json";

/// A reachable Kafka-protocol broker (one cluster of it).
#[derive(Debug, Clone)]
pub struct Broker {
    bootstrap: String,
    /// Present for the embedded broker only.
    embedded: Option<BrokerInfo>,
    /// Which cluster of the embedded broker (0 = shared).
    cluster: u32,
    /// Drops an isolated cluster when the last clone goes.
    _guard: Option<Arc<ClusterGuard>>,
}

#[derive(Debug)]
struct ClusterGuard {
    control: String,
    cluster: u32,
}

impl Drop for ClusterGuard {
    fn drop(&mut self) {
        let request = Request {
            cluster: self.cluster,
            command: Command::DropCluster,
        };
        let _ = roundtrip(&self.control, &request);
    }
}

fn roundtrip(control: &str, request: &Request) -> Result<Reply, TestkitError> {
    let mut stream = TcpStream::connect(control)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    Ok(serde_json::from_str(&answer)?)
}

impl Broker {
    /// An external cluster by its bootstrap servers (no fault injection).
    pub fn external(bootstrap: &str) -> Self {
        Broker {
            bootstrap: bootstrap.to_owned(),
            embedded: None,
            cluster: 0,
            _guard: None,
        }
    }

    /// `KAFKA_BROKERS` (from the environment, else `.state/services.env`), else the embedded
    /// broker.
    pub fn discover() -> Result<Self, TestkitError> {
        let bootstrap = crate::coord::address("KAFKA_BROKERS", "");
        if !bootstrap.trim().is_empty() {
            return Ok(Broker::external(bootstrap.trim()));
        }
        Self::mock()
    }

    /// The embedded broker (librdkafka's mock cluster), whatever `KAFKA_BROKERS` says: for the
    /// tests that inject faults (through [`Broker::isolated`] clusters).
    pub fn mock() -> Result<Self, TestkitError> {
        let path = state_file();
        let bytes = std::fs::read(&path).map_err(|e| {
            TestkitError::Broker(format!(
                "no broker: KAFKA_BROKERS is unset and {} is unreadable ({e}); \
                 start one with `scripts/services.sh up`",
                path.display()
            ))
        })?;
        let info: BrokerInfo = serde_json::from_slice(&bytes)?;
        let broker = Broker {
            bootstrap: info.bootstrap.clone(),
            embedded: Some(info),
            cluster: 0,
            _guard: None,
        };
        broker.send(Command::Ping).map_err(|e| {
            TestkitError::Broker(format!(
                "embedded broker in {} does not answer ({e}); restart it with \
                 `scripts/services.sh up`",
                path.display()
            ))
        })?;
        Ok(broker)
    }

    /// A cluster of its own inside the embedded broker process, for tests that inject faults
    /// (destroyed when the last clone is dropped). Errors for an external cluster.
    pub fn isolated(&self, brokers: i32) -> Result<Broker, TestkitError> {
        let info = self.embedded_info()?;
        let reply = roundtrip(
            &info.control,
            &Request {
                cluster: 0,
                command: Command::NewCluster { brokers },
            },
        )?;
        match (reply.cluster, reply.bootstrap) {
            (Some(cluster), Some(bootstrap)) => Ok(Broker {
                bootstrap,
                embedded: Some(info.clone()),
                cluster,
                _guard: Some(Arc::new(ClusterGuard {
                    control: info.control.clone(),
                    cluster,
                })),
            }),
            _ => Err(TestkitError::Broker(format!(
                "cannot start an isolated cluster: {}",
                reply.error.unwrap_or_default()
            ))),
        }
    }

    fn embedded_info(&self) -> Result<&BrokerInfo, TestkitError> {
        self.embedded.as_ref().ok_or_else(|| {
            TestkitError::Broker(
                "fault injection needs the embedded broker (KAFKA_BROKERS is set)".into(),
            )
        })
    }

    /// The `bootstrap.servers` value.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Details of the embedded broker, `None` for an external cluster.
    pub fn embedded(&self) -> Option<&BrokerInfo> {
        self.embedded.as_ref()
    }

    /// The process hosting the embedded broker (every one of its clusters), for measuring its
    /// CPU; `None` for an external cluster.
    pub fn pid(&self) -> Option<u32> {
        self.embedded.as_ref().map(|info| info.pid)
    }

    /// Whether faults can be injected (embedded broker only).
    pub fn supports_faults(&self) -> bool {
        self.embedded.is_some()
    }

    /// Creates a topic; succeeds if it already exists.
    pub async fn create_topic(&self, name: &str, partitions: i32) -> Result<(), TestkitError> {
        if self.embedded.is_some() {
            return self.send(Command::CreateTopic {
                name: name.to_owned(),
                partitions,
            });
        }
        self.create_topic_with(name, partitions, &[]).await
    }

    /// Creates a topic with topic-level `configs` (`max.message.bytes`, ...) on a real cluster;
    /// succeeds if it already exists. The mock takes no topic configs: an error there.
    pub async fn create_topic_with(
        &self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
    ) -> Result<(), TestkitError> {
        if self.embedded.is_some() && !configs.is_empty() {
            return Err(TestkitError::Broker(
                "the embedded broker takes no topic configs".into(),
            ));
        }
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        // -1: the cluster's default.replication.factor (3 on the 3-broker cluster).
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(-1));
        for (key, value) in configs {
            topic = topic.set(key, value);
        }
        let results = admin.create_topics([&topic], &AdminOptions::new()).await?;
        for result in results {
            match result {
                Ok(_) => {}
                Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(TestkitError::Broker(format!(
                        "create topic {topic}: {code}"
                    )))
                }
            }
        }
        Ok(())
    }

    /// Sends one control command to the embedded broker.
    pub fn send(&self, command: Command) -> Result<(), TestkitError> {
        let info = self.embedded_info()?;
        let reply = roundtrip(
            &info.control,
            &Request {
                cluster: self.cluster,
                command: command.clone(),
            },
        )?;
        match reply.error {
            None if reply.ok => Ok(()),
            error => Err(TestkitError::Broker(format!(
                "broker refused {command:?}: {}",
                error.unwrap_or_default()
            ))),
        }
    }

    /// The next `errors.len()` requests of `api` fail with the given Kafka error names.
    pub fn request_errors(&self, api: &str, errors: &[&str]) -> Result<(), TestkitError> {
        self.send(Command::RequestErrors {
            api: api.to_owned(),
            errors: errors.iter().map(|e| (*e).to_owned()).collect(),
        })
    }

    /// Drops errors still stacked for `api`.
    pub fn clear_request_errors(&self, api: &str) -> Result<(), TestkitError> {
        self.send(Command::ClearRequestErrors {
            api: api.to_owned(),
        })
    }

    /// Sets the versions of `api` the brokers advertise; `None` offers it not at all (a broker
    /// too old for it). Clients connected before keep what they were told.
    pub fn api_versions(
        &self,
        api: &str,
        versions: Option<(i16, i16)>,
    ) -> Result<(), TestkitError> {
        self.send(Command::ApiVersions {
            api: api.to_owned(),
            versions,
        })
    }

    /// Stops broker `id` (-1: all) accepting connections.
    pub fn broker_down(&self, id: i32) -> Result<(), TestkitError> {
        self.send(Command::BrokerDown { broker: id })
    }

    /// Lets broker `id` (-1: all) accept connections again.
    pub fn broker_up(&self, id: i32) -> Result<(), TestkitError> {
        self.send(Command::BrokerUp { broker: id })
    }

    /// Delays broker `id`'s (-1: all) responses by `rtt`.
    pub fn set_rtt(&self, id: i32, rtt: Duration) -> Result<(), TestkitError> {
        self.send(Command::Rtt {
            broker: id,
            millis: rtt.as_millis() as u64,
        })
    }
}

/// Where the embedded broker's state file lives.
pub fn state_file() -> PathBuf {
    crate::state_dir().join("broker").join(STATE_FILE)
}
