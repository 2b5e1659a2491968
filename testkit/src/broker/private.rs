//! An Apache Kafka cluster of a test's own (`scripts/services/kafka.sh`), for the faults only a real
//! cluster has: a broker stopped, killed, or paused (SIGSTOP) until requests time out. The
//! shared broker is never taken away; a test that needs to is given one of these.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;

use rand::Rng;

use crate::{names, state_dir, TestkitError};

use super::Broker;

/// What happens to one node of a [`PrivateKafka`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeAction {
    /// SIGTERM: a controlled shutdown (leadership moves first).
    Stop,
    /// SIGKILL: a crash.
    Kill,
    /// Starts it again on its data.
    Start,
    /// SIGSTOP: it holds its connections and answers nothing.
    Pause,
    /// SIGCONT.
    Resume,
}

impl NodeAction {
    fn word(self) -> &'static str {
        match self {
            NodeAction::Stop => "stop",
            NodeAction::Kill => "kill",
            NodeAction::Start => "start",
            NodeAction::Pause => "pause",
            NodeAction::Resume => "resume",
        }
    }
}

/// `nodes` combined broker+controller nodes on loopback, data under `.state/private/`; stopped
/// and removed on drop. With 3 or more nodes, topics and the internal topics have replication 3
/// and `min.insync.replicas` 2.
#[derive(Debug)]
pub struct PrivateKafka {
    dir: PathBuf,
    nodes: u16,
    bootstrap: String,
    /// `HARVEST_KAFKA_VERSION` for every `scripts/services/kafka.sh` call on it (`None`: the pinned one).
    version: Option<String>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/services/kafka.sh")
}

/// `scripts/services/kafka.sh` with `HARVEST_KAFKA_VERSION` set to `version` (the pinned one if `None`).
fn kafka_sh_version(args: &[&str], version: Option<&str>) -> Result<String, TestkitError> {
    let mut command = Command::new(script());
    command.args(args);
    if let Some(v) = version {
        command.env("HARVEST_KAFKA_VERSION", v);
    }
    let out = command.output()?;
    if !out.status.success() {
        return Err(TestkitError::Server(format!(
            "scripts/services/kafka.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A base port below the ephemeral range (so no outgoing connection holds one of them) whose
/// every node's client and controller ports (and the relayed listener's, the port after them)
/// are free now.
fn free_base(nodes: u16) -> Result<u16, TestkitError> {
    let mut rng = rand::thread_rng();
    for _ in 0..100 {
        let base = rng.gen_range(200..300u16) * 100;
        let free = (0..nodes).all(|i| {
            let p = base + 100 * i;
            (p..p + 3).all(|port| TcpListener::bind(("127.0.0.1", port)).is_ok())
        });
        if free {
            return Ok(base);
        }
    }
    Err(TestkitError::Server(
        "no free ports for a Kafka cluster".into(),
    ))
}

impl PrivateKafka {
    /// Starts the cluster and waits until a metadata request lists every broker.
    pub fn start(nodes: u16) -> Result<PrivateKafka, TestkitError> {
        Self::start_version(nodes, None)
    }

    /// As [`PrivateKafka::start`], with Apache Kafka `version` (e.g. "3.9.1", for clients that
    /// speak protocol versions Kafka 4 removed) instead of the pinned one, for every later call
    /// on it too (a node started again runs the same version).
    pub fn start_version(nodes: u16, version: Option<&str>) -> Result<PrivateKafka, TestkitError> {
        let dir = state_dir().join("private").join(names::unique("kafka"));
        let base = free_base(nodes)?;
        let mut cluster = PrivateKafka {
            dir,
            nodes,
            bootstrap: String::new(),
            version: version.map(str::to_owned),
        };
        cluster.bootstrap = kafka_sh_version(
            &[
                "up",
                &cluster.dir.display().to_string(),
                &base.to_string(),
                &nodes.to_string(),
            ],
            cluster.version.as_deref(),
        )?;
        Ok(cluster)
    }

    /// One node with a second client listener, `RELAYED` (on the port after the controller's),
    /// that advertises `relay`'s address: clients bootstrapped at the relay reach the broker only
    /// through it ([`super::relay`]), the others through the plain listener. Returns the cluster
    /// and the relayed listener's own address, for [`super::relay::Relay::start`].
    pub fn start_relayed(relay: SocketAddr) -> Result<(PrivateKafka, SocketAddr), TestkitError> {
        let dir = state_dir().join("private").join(names::unique("kafka"));
        let p = free_base(1)?;
        std::fs::create_dir_all(&dir)?;
        let props = dir.join("relayed.properties");
        std::fs::write(
            &props,
            format!(
                "listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c},RELAYED://127.0.0.1:{r}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c},RELAYED://{relay}\n\
                 listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,RELAYED:PLAINTEXT\n",
                c = p + 1,
                r = p + 2,
            ),
        )?;
        let mut cluster = PrivateKafka {
            dir,
            nodes: 1,
            bootstrap: String::new(),
            version: None,
        };
        let out = Command::new(script())
            .args([
                "up",
                &cluster.dir.display().to_string(),
                &p.to_string(),
                "1",
            ])
            .env("HARVEST_KAFKA_EXTRA_PROPS", &props)
            .output()?;
        if !out.status.success() {
            return Err(TestkitError::Server(format!(
                "scripts/services/kafka.sh up (relayed): {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        cluster.bootstrap = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((cluster, SocketAddr::from(([127, 0, 0, 1], p + 2))))
    }

    /// `scripts/services/kafka.sh` for this cluster's version.
    fn sh(&self, args: &[&str]) -> Result<String, TestkitError> {
        kafka_sh_version(args, self.version.as_deref())
    }

    /// Every node's client address, comma-separated.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The cluster as a [`Broker`] (topic creation, the verifying consumer).
    pub fn broker(&self) -> Broker {
        Broker::external(&self.bootstrap)
    }

    /// How many nodes it was started with.
    pub fn nodes(&self) -> u16 {
        self.nodes
    }

    /// Node `node` (1-based)'s client address.
    pub fn address(&self, node: u16) -> &str {
        self.bootstrap
            .split(',')
            .nth(usize::from(node.saturating_sub(1)))
            .unwrap_or_default()
    }

    /// Stops, kills, starts, pauses or resumes node `node` (1-based). Returns once the signal
    /// is delivered (a stop or kill: once the process is gone).
    pub fn node(&self, node: u16, action: NodeAction) -> Result<(), TestkitError> {
        self.sh(&[
            "node",
            action.word(),
            &self.dir.display().to_string(),
            &node.to_string(),
        ])
        .map(|_| ())
    }

    /// Brokers a metadata request lists unfenced now.
    pub fn live_brokers(&self) -> Result<u16, TestkitError> {
        let n = self.sh(&["brokers", &self.dir.display().to_string()])?;
        n.parse()
            .map_err(|_| TestkitError::Server(format!("kafka.sh brokers said {n:?}")))
    }

    /// The node leading `partition` of `topic` now (from the brokers' own metadata).
    pub fn leader_of(&self, topic: &str, partition: i32) -> Result<u16, TestkitError> {
        self.partitions(topic)?
            .into_iter()
            .find(|p| p.partition == partition)
            .and_then(|p| p.leader)
            .ok_or_else(|| TestkitError::Broker(format!("no leader for {topic}/{partition}")))
    }

    /// Every partition of `topic` with its leader and in-sync replicas, as the metadata says now.
    pub fn partitions(&self, topic: &str) -> Result<Vec<PartitionState>, TestkitError> {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        let consumer: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &self.bootstrap)
            .create()?;
        let metadata = consumer.fetch_metadata(Some(topic), std::time::Duration::from_secs(10))?;
        Ok(metadata
            .topics()
            .iter()
            .flat_map(|t| t.partitions())
            .map(|p| PartitionState {
                partition: p.id(),
                leader: u16::try_from(p.leader()).ok(),
                in_sync: p.isr().len(),
            })
            .collect())
    }

    /// The node leading the most partitions of `topic` now (the lowest id among equals).
    pub fn busiest_leader(&self, topic: &str) -> Result<u16, TestkitError> {
        let mut led = std::collections::BTreeMap::<u16, usize>::new();
        for leader in self.partitions(topic)?.into_iter().filter_map(|p| p.leader) {
            *led.entry(leader).or_default() += 1;
        }
        led.iter()
            .max_by_key(|(node, n)| (**n, std::cmp::Reverse(**node)))
            .map(|(node, _)| *node)
            .ok_or_else(|| TestkitError::Broker(format!("no partition of {topic} has a leader")))
    }

    /// A node to take away with the least else disturbed: not the controller quorum's
    /// leader, and leading the fewest partitions of `topic` (the highest id among equals).
    pub fn quiet_node(&self, topic: &str) -> Result<u16, TestkitError> {
        let quorum = self.quorum_leader()?;
        let mut led: std::collections::BTreeMap<u16, usize> = (1..=self.nodes)
            .filter(|n| *n != quorum)
            .map(|n| (n, 0))
            .collect();
        for leader in self.partitions(topic)?.into_iter().filter_map(|p| p.leader) {
            if let Some(n) = led.get_mut(&leader) {
                *n += 1;
            }
        }
        led.iter()
            .min_by_key(|(node, n)| (**n, std::cmp::Reverse(**node)))
            .map(|(node, _)| *node)
            .ok_or_else(|| TestkitError::Broker("no node other than the quorum leader".into()))
    }

    /// Whether every node is up and every partition of `topic` is led and has every node in
    /// sync: the cluster is whole again after a fault.
    pub fn whole(&self, topic: &str) -> Result<bool, TestkitError> {
        if self.live_brokers()? < self.nodes {
            return Ok(false);
        }
        let partitions = self.partitions(topic)?;
        Ok(!partitions.is_empty()
            && partitions
                .iter()
                .all(|p| p.leader.is_some() && p.in_sync == usize::from(self.nodes)))
    }

    /// The node leading the KRaft controller quorum now (`kafka-metadata-quorum describe
    /// --status`, its `LeaderId`).
    pub fn quorum_leader(&self) -> Result<u16, TestkitError> {
        let status = self.sh(&[
            "tool",
            "org.apache.kafka.tools.MetadataQuorumCommand",
            "--bootstrap-server",
            &self.bootstrap,
            "describe",
            "--status",
        ])?;
        quorum_leader_in(&status).ok_or_else(|| {
            TestkitError::Broker(format!("no LeaderId in the quorum's status: {status}"))
        })
    }
}

/// One partition as the metadata reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionState {
    pub partition: i32,
    /// Its leader (`None`: no leader now).
    pub leader: Option<u16>,
    /// How many replicas are in sync.
    pub in_sync: usize,
}

/// `LeaderId:  2` in `kafka-metadata-quorum describe --status` output.
fn quorum_leader_in(status: &str) -> Option<u16> {
    status
        .lines()
        .find_map(|l| l.trim().strip_prefix("LeaderId:"))
        .and_then(|id| id.trim().parse().ok())
}

impl Drop for PrivateKafka {
    fn drop(&mut self) {
        let dir = self.dir.display().to_string();
        for node in 1..=self.nodes {
            let _ = self.sh(&["node", "resume", &dir, &node.to_string()]);
        }
        let _ = self.sh(&["down", &dir]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_quorum_status_names_its_leader() {
        let status =
            "ClusterId:              abc\nLeaderId:               2\nLeaderEpoch:            5\n";
        assert_eq!(super::quorum_leader_in(status), Some(2));
        assert_eq!(super::quorum_leader_in("ClusterId: abc"), None);
    }
}
