//! Hosts librdkafka's mock clusters in a long-lived process.
//!
//! A mock cluster lives inside whichever process created it, so a test that kills a harvester
//! process must not own the broker. This host owns the clusters on its main thread (the handles
//! are not `Send`), serves the control protocol from listener threads, and forwards each request
//! to the main thread over a channel. Cluster 0 is shared; tests that inject faults start their
//! own cluster so they cannot disturb concurrent tests.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, DefaultProducerContext, Producer};
use rdkafka::ClientConfig;
use rdkafka_sys::types::{RDKafkaApiKey, RDKafkaRespErr};

use super::protocol::{BrokerInfo, Command, Reply, Request};
use crate::TestkitError;

/// How the host is started.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// Number of mock brokers in cluster 0.
    pub brokers: i32,
    /// Where `broker.json` is written.
    pub state_dir: PathBuf,
    /// Delay before the first rebalance of a new group (Kafka's
    /// `group.initial.rebalance.delay.ms`; the mock's default is 3 s).
    pub initial_rebalance_delay: Duration,
}

type Envelope = (Request, mpsc::Sender<Reply>);

/// The client that owns a mock cluster; the cluster lives as long as it does.
struct Owner(BaseProducer);

impl Owner {
    fn new(brokers: i32, initial_rebalance_delay: Duration) -> Result<Self, String> {
        // Created through a client (`test.mock.num.brokers`) rather than `MockCluster::new` so
        // that the raw handle is reachable for the one setting the safe wrapper lacks.
        let producer: BaseProducer = ClientConfig::new()
            .set("test.mock.num.brokers", brokers.to_string())
            .set("log_level", "3")
            .create()
            .map_err(|e| format!("cannot create mock cluster: {e}"))?;
        let owner = Owner(producer);
        if owner.cluster().is_none() {
            return Err("client did not create a mock cluster".into());
        }
        owner.set_initial_rebalance_delay(initial_rebalance_delay);
        Ok(owner)
    }

    fn cluster(&self) -> Option<MockCluster<'_, DefaultProducerContext>> {
        self.0.client().mock_cluster()
    }

    /// Not exposed by the safe wrapper, and the mock's 3 s default would add 3 s to every test
    /// that forms a new group.
    #[allow(unsafe_code)]
    fn set_initial_rebalance_delay(&self, delay: Duration) {
        let millis = i32::try_from(delay.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: `self.0` is a live client that created a mock cluster (checked in `new`), so
        // the handle is non-null and valid for the duration of the call.
        unsafe {
            let handle = rdkafka_sys::rd_kafka_handle_mock_cluster(self.0.client().native_ptr());
            if !handle.is_null() {
                rdkafka_sys::rd_kafka_mock_group_initial_rebalance_delay_ms(handle, millis);
            }
        }
    }
}

/// Runs the broker until a `shutdown` command arrives. Writes `broker.json` once ready and
/// removes it on the way out.
pub fn run(options: &HostOptions) -> Result<(), TestkitError> {
    let mut clusters = BTreeMap::new();
    let first = Owner::new(options.brokers, options.initial_rebalance_delay)
        .map_err(TestkitError::Broker)?;
    let bootstrap = first
        .cluster()
        .map(|c| c.bootstrap_servers())
        .unwrap_or_default();
    clusters.insert(0u32, first);
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let info = BrokerInfo {
        bootstrap,
        control: listener.local_addr()?.to_string(),
        pid: std::process::id(),
        brokers: options.brokers,
    };
    std::fs::create_dir_all(&options.state_dir)?;
    let state_file = options.state_dir.join(super::STATE_FILE);
    write_atomically(&state_file, &serde_json::to_vec_pretty(&info)?)?;
    tracing::info!(bootstrap = %info.bootstrap, control = %info.control, "embedded broker ready");

    let (tx, rx) = mpsc::channel::<Envelope>();
    std::thread::Builder::new()
        .name("broker-control".into())
        .spawn(move || accept_loop(listener, tx))?;

    let mut next_id = 1u32;
    for (request, reply_to) in rx {
        let stop = request.command == Command::Shutdown;
        let reply = match request.command {
            Command::NewCluster { brokers } => {
                match Owner::new(brokers, options.initial_rebalance_delay) {
                    Ok(owner) => {
                        let id = next_id;
                        next_id += 1;
                        let mut reply = Reply::ok();
                        reply.bootstrap = owner.cluster().map(|c| c.bootstrap_servers());
                        reply.cluster = Some(id);
                        clusters.insert(id, owner);
                        tracing::info!(id, "cluster started");
                        reply
                    }
                    Err(e) => Reply::err(e),
                }
            }
            Command::DropCluster if request.cluster == 0 => {
                Reply::err("cluster 0 is shared and cannot be dropped")
            }
            Command::DropCluster => match clusters.remove(&request.cluster) {
                Some(_) => Reply::ok(),
                None => Reply::err(format!("no cluster {}", request.cluster)),
            },
            command => match clusters.get(&request.cluster).and_then(Owner::cluster) {
                Some(cluster) => apply(&cluster, command),
                None => Reply::err(format!("no cluster {}", request.cluster)),
            },
        };
        let _ = reply_to.send(reply);
        if stop {
            break;
        }
    }
    let _ = std::fs::remove_file(&state_file);
    tracing::info!("embedded broker stopped");
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

fn accept_loop(listener: TcpListener, tx: mpsc::Sender<Envelope>) {
    for stream in listener.incoming().flatten() {
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name("broker-conn".into())
            .spawn(move || serve(stream, tx));
    }
}

fn serve(stream: TcpStream, tx: mpsc::Sender<Envelope>) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    for line in BufReader::new(stream).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::err(format!("malformed request: {e}")),
            Ok(request) => {
                let (reply_tx, reply_rx) = mpsc::channel();
                if tx.send((request, reply_tx)).is_err() {
                    return Ok(());
                }
                reply_rx
                    .recv()
                    .unwrap_or_else(|_| Reply::err("broker is stopping"))
            }
        };
        let mut out = serde_json::to_vec(&reply)?;
        out.push(b'\n');
        writer.write_all(&out)?;
    }
    Ok(())
}

fn apply(cluster: &MockCluster<'_, DefaultProducerContext>, command: Command) -> Reply {
    let result = match command {
        Command::Ping | Command::Shutdown => Ok(()),
        Command::NewCluster { .. } | Command::DropCluster => Err("handled by the host".into()),
        Command::CreateTopic { name, partitions } => cluster
            .create_topic(&name, partitions, 1)
            .map_err(|e| format!("create topic {name}: {e}")),
        Command::RequestErrors { api, errors } => api_key(&api).and_then(|key| {
            let codes = errors
                .iter()
                .map(|e| error_code(e))
                .collect::<Result<Vec<_>, _>>()?;
            cluster.request_errors(key, &codes);
            Ok(())
        }),
        Command::ClearRequestErrors { api } => api_key(&api).map(|key| {
            cluster.clear_request_errors(key);
        }),
        Command::ApiVersions { api, versions } => api_key(&api).and_then(|key| {
            let (min, max) = versions.unzip();
            cluster
                .apiversion(key, min, max)
                .map_err(|e| format!("api versions of {api}: {e}"))
        }),
        Command::BrokerDown { broker } => cluster
            .broker_down(broker)
            .map_err(|e| format!("broker {broker} down: {e}")),
        Command::BrokerUp { broker } => cluster
            .broker_up(broker)
            .map_err(|e| format!("broker {broker} up: {e}")),
        Command::Rtt { broker, millis } => cluster
            .broker_round_trip_time(broker, Duration::from_millis(millis))
            .map_err(|e| format!("broker {broker} rtt: {e}")),
    };
    match result {
        Ok(()) => Reply::ok(),
        Err(e) => Reply::err(e),
    }
}

/// Kafka API names accepted by [`Command::RequestErrors`].
const API_KEYS: &[(&str, RDKafkaApiKey)] = &[
    ("Produce", RDKafkaApiKey::Produce),
    ("Fetch", RDKafkaApiKey::Fetch),
    ("ListOffsets", RDKafkaApiKey::ListOffsets),
    ("Metadata", RDKafkaApiKey::Metadata),
    ("OffsetCommit", RDKafkaApiKey::OffsetCommit),
    ("OffsetFetch", RDKafkaApiKey::OffsetFetch),
    ("FindCoordinator", RDKafkaApiKey::FindCoordinator),
    ("JoinGroup", RDKafkaApiKey::JoinGroup),
    ("Heartbeat", RDKafkaApiKey::Heartbeat),
    ("LeaveGroup", RDKafkaApiKey::LeaveGroup),
    ("SyncGroup", RDKafkaApiKey::SyncGroup),
    ("InitProducerId", RDKafkaApiKey::InitProducerId),
    ("AddPartitionsToTxn", RDKafkaApiKey::AddPartitionsToTxn),
    ("EndTxn", RDKafkaApiKey::EndTxn),
];

fn api_key(name: &str) -> Result<RDKafkaApiKey, String> {
    API_KEYS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, k)| *k)
        .ok_or_else(|| {
            let known: Vec<_> = API_KEYS.iter().map(|(n, _)| *n).collect();
            format!("unknown api {name:?}; known: {}", known.join(", "))
        })
}

/// Kafka error names accepted by [`Command::RequestErrors`].
const ERRORS: &[(&str, RDKafkaRespErr)] = &[
    ("_TRANSPORT", RDKafkaRespErr::RD_KAFKA_RESP_ERR__TRANSPORT),
    (
        "NOT_LEADER_FOR_PARTITION",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
    ),
    (
        "REQUEST_TIMED_OUT",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
    ),
    (
        "MSG_SIZE_TOO_LARGE",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
    ),
    (
        "COORDINATOR_NOT_AVAILABLE",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE,
    ),
    (
        "NOT_COORDINATOR",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_COORDINATOR,
    ),
    (
        "NOT_ENOUGH_REPLICAS",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS,
    ),
    (
        "TOPIC_AUTHORIZATION_FAILED",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
    ),
    (
        "UNKNOWN_TOPIC_OR_PART",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
    ),
    (
        "INVALID_RECORD",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD,
    ),
    (
        "PRODUCER_FENCED",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_PRODUCER_FENCED,
    ),
    (
        "INVALID_PRODUCER_EPOCH",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
    ),
    (
        "UNKNOWN_MEMBER_ID",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID,
    ),
    (
        "REBALANCE_IN_PROGRESS",
        RDKafkaRespErr::RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS,
    ),
];

fn error_code(name: &str) -> Result<RDKafkaRespErr, String> {
    ERRORS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, e)| *e)
        .ok_or_else(|| {
            let known: Vec<_> = ERRORS.iter().map(|(n, _)| *n).collect();
            format!("unknown error {name:?}; known: {}", known.join(", "))
        })
}
