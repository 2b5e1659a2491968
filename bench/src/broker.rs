//! Which broker a run measures, and the facts about it that shape the figures.
//!
//! A drain's rate means little without its broker: the embedded broker (librdkafka's mock
//! cluster) has no disks, replication or network and serves everything on one thread, while a
//! real cluster's flush policy, replication, `min.insync.replicas` and thread pools decide what
//! an `acks=all` producer can get out of it. So the provenance names the broker, how it was
//! chosen (`--embedded`, `--brokers` / `KAFKA_BROKERS`, or the fallback to the mock when neither
//! is given), its version where it can be known honestly, and the settings read from the broker
//! itself (`DescribeConfigs` on its first broker, the broker count from metadata).
//!
//! The version: the Kafka protocol does not carry the broker's release, so it is only given for
//! a cluster `scripts/services/kafka.sh` started from this checkout's state directory (its bootstrap
//! file names the same servers): the running broker's own "Kafka version:" log line, else the
//! version the script pins. Any other cluster is "version not known".
//!
//! Topics the bench creates on a real cluster are deleted when their scenario ends
//! ([`delete_topics`]): a real broker keeps every record for its retention (7 days by default),
//! and a capacity run writes gigabytes.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;
use serde::{Deserialize, Serialize};
use testkit::Broker;

/// The broker settings the provenance reports, read with `DescribeConfigs`.
pub const SETTINGS: [&str; 8] = [
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "default.replication.factor",
    "min.insync.replicas",
    "num.partitions",
    "group.min.session.timeout.ms",
    "num.io.threads",
    "num.network.threads",
];

/// The acknowledgement the harvester's producers wait for: they are always idempotent
/// (`enable.idempotence=true` is forced, transactional mode included), which requires `all`.
pub const PRODUCER_ACKS: &str = "all";

/// How the run's broker was chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// `--embedded`: the mock, whatever `--brokers` / `KAFKA_BROKERS` say.
    Embedded,
    /// `--brokers` or `KAFKA_BROKERS`.
    #[default]
    Brokers,
    /// Neither was given: the mock.
    Fallback,
}

impl Selection {
    fn describe(self) -> &'static str {
        match self {
            Selection::Embedded => "chosen with --embedded",
            Selection::Brokers => "from --brokers / KAFKA_BROKERS",
            Selection::Fallback => {
                "a fallback: neither --brokers nor KAFKA_BROKERS was given (`source .state/services.env` or scripts/bench.sh for the real broker)"
            }
        }
    }
}

/// What the run's broker is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerKind {
    /// librdkafka's mock cluster (the embedded broker).
    #[default]
    Mock,
    /// A Kafka cluster (Apache Kafka or another implementation of the protocol).
    Kafka,
}

impl BrokerKind {
    /// The mock for the embedded broker, Kafka otherwise.
    pub fn of(broker: &Broker) -> BrokerKind {
        if broker.embedded().is_some() {
            BrokerKind::Mock
        } else {
            BrokerKind::Kafka
        }
    }
}

/// The run's broker, as the provenance gives it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerFacts {
    pub kind: BrokerKind,
    pub bootstrap: String,
    pub selection: Selection,
    /// `Apache Kafka 4.1.2`, `librdkafka 2.12.1`; `None` when it cannot be known.
    pub version: Option<String>,
    /// Started by `scripts/services/kafka.sh` from this checkout's state directory.
    pub ours: bool,
    /// Brokers the cluster's metadata lists (the mock: its brokers).
    pub brokers: Option<usize>,
    /// [`SETTINGS`] as the broker reports them (`None`: unset); empty for the mock.
    pub settings: Vec<(String, Option<String>)>,
    /// Why the settings are missing, when they could not be read.
    pub settings_error: Option<String>,
    /// The acks the harvester's producers use ([`PRODUCER_ACKS`]).
    pub producer_acks: String,
}

impl BrokerFacts {
    /// One line for the provenance.
    pub fn line(&self) -> String {
        let nodes = self.brokers.map_or_else(
            || "nodes not known".to_owned(),
            |n| format!("{n} node{}", if n == 1 { "" } else { "s" }),
        );
        let what = match (self.kind, self.ours, &self.version) {
            (BrokerKind::Mock, _, v) => format!(
                "embedded broker (librdkafka's mock cluster{}) at {}",
                v.as_ref().map(|v| format!(", {v}")).unwrap_or_default(),
                self.bootstrap
            ),
            (BrokerKind::Kafka, true, Some(v)) => format!(
                "{v} (scripts/services/kafka.sh, KRaft, {nodes}) at {}",
                self.bootstrap
            ),
            (BrokerKind::Kafka, _, _) => format!(
                "Kafka cluster at {} (version not known, {nodes})",
                self.bootstrap
            ),
        };
        let settings = match (self.kind, &self.settings_error) {
            (BrokerKind::Mock, _) => "no disks, replication or network".to_owned(),
            (BrokerKind::Kafka, Some(e)) => format!("its settings could not be read: {e}"),
            (BrokerKind::Kafka, None) => self
                .settings
                .iter()
                .map(|(k, v)| format!("{k}={}", setting_value(k, v.as_deref())))
                .collect::<Vec<_>>()
                .join(", "),
        };
        format!(
            "{what}, {}; {settings}; the harvester's producers use acks={} (idempotent)",
            self.selection.describe(),
            self.producer_acks
        )
    }

    /// Whether the broker is a real cluster (not the mock).
    pub fn is_cluster(&self) -> bool {
        self.kind == BrokerKind::Kafka
    }
}

/// A setting's value as the report shows it: `unset`, and Kafka's "never" for a flush interval
/// of `Long.MAX_VALUE` messages.
fn setting_value(key: &str, value: Option<&str>) -> String {
    match value {
        None => "unset".into(),
        Some(v) if key == "log.flush.interval.messages" && v == i64::MAX.to_string() => {
            format!("{v} (never: the OS flushes)")
        }
        Some(v) => v.to_owned(),
    }
}

/// The facts about `broker`, chosen by `selection`. A cluster whose settings cannot be read is
/// still described (with the reason); this never fails the run.
pub async fn describe(broker: &Broker, selection: Selection) -> BrokerFacts {
    let mut facts = BrokerFacts {
        bootstrap: broker.bootstrap().to_owned(),
        selection,
        producer_acks: PRODUCER_ACKS.to_owned(),
        ..BrokerFacts::default()
    };
    if let Some(info) = broker.embedded() {
        facts.version = Some(format!(
            "librdkafka {}",
            rdkafka::util::get_rdkafka_version().1
        ));
        facts.brokers = usize::try_from(info.brokers.max(1)).ok();
        return facts;
    }
    facts.kind = BrokerKind::Kafka;
    if let Some(dir) = own_cluster(&testkit::state_dir(), broker.bootstrap()) {
        facts.ours = true;
        facts.version = own_version(&dir).map(|v| format!("Apache Kafka {v}"));
    }
    match read_settings(broker.bootstrap()).await {
        Ok((brokers, settings)) => {
            facts.brokers = Some(brokers);
            facts.settings = settings;
        }
        Err(e) => facts.settings_error = Some(e),
    }
    facts
}

/// Whether two bootstrap lists name the same servers (in any order).
fn same_servers(a: &str, b: &str) -> bool {
    let servers = |s: &str| {
        let mut v: Vec<String> = s
            .split(',')
            .map(|x| x.trim().to_owned())
            .filter(|x| !x.is_empty())
            .collect();
        v.sort();
        v
    };
    let a = servers(a);
    !a.is_empty() && a == servers(b)
}

/// The directory under `state` of the `scripts/services/kafka.sh` cluster serving `bootstrap`
/// (`kafka`, `kafka-cluster`: each keeps its bootstrap list in a file `bootstrap`).
fn own_cluster(state: &Path, bootstrap: &str) -> Option<PathBuf> {
    std::fs::read_dir(state)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("kafka"))
        })
        .find(|dir| {
            std::fs::read_to_string(dir.join("bootstrap"))
                .is_ok_and(|text| same_servers(&text, bootstrap))
        })
}

/// The version of the `scripts/services/kafka.sh` cluster in `dir`: its first node's last "Kafka
/// version:" log line (what runs), else the version the script pins.
fn own_version(dir: &Path) -> Option<String> {
    let logged = std::fs::File::open(dir.join("n1").join("kafka.log"))
        .ok()
        .and_then(|f| version_in_log(std::io::BufReader::new(f)));
    logged.or_else(pinned_version)
}

/// The last "Kafka version: X" of a broker's log.
fn version_in_log(log: impl BufRead) -> Option<String> {
    const MARK: &str = "Kafka version: ";
    log.split(b'\n')
        .map_while(Result::ok)
        .filter_map(|line| {
            let line = String::from_utf8_lossy(&line).into_owned();
            let at = line.find(MARK)? + MARK.len();
            let version = line[at..].split_whitespace().next()?.to_owned();
            Some(version)
        })
        .last()
}

/// `scripts/services/kafka.sh version`.
fn pinned_version() -> Option<String> {
    let out = std::process::Command::new(crate::workspace_root().join("scripts/services/kafka.sh"))
        .arg("version")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !v.is_empty()).then_some(v)
}

fn admin(bootstrap: &str) -> Result<AdminClient<DefaultClientContext>, String> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .map_err(|e| format!("cannot create an admin client for {bootstrap}: {e}"))
}

/// The cluster's broker count (metadata) and [`SETTINGS`] of its first broker
/// (`DescribeConfigs`).
async fn read_settings(bootstrap: &str) -> Result<(usize, Vec<(String, Option<String>)>), String> {
    let timeout = Duration::from_secs(10);
    let admin = admin(bootstrap)?;
    let (admin, ids) = tokio::task::spawn_blocking(move || {
        let ids: Result<Vec<i32>, String> = admin
            .inner()
            .fetch_metadata(None, timeout)
            .map(|m| m.brokers().iter().map(|b| b.id()).collect())
            .map_err(|e| format!("metadata: {e}"));
        (admin, ids)
    })
    .await
    .map_err(|e| format!("metadata thread: {e}"))?;
    let ids = ids?;
    let first = *ids.iter().min().ok_or("the metadata lists no broker")?;
    let options = AdminOptions::new().request_timeout(Some(timeout));
    let results = admin
        .describe_configs(&[ResourceSpecifier::Broker(first)], &options)
        .await
        .map_err(|e| format!("DescribeConfigs: {e}"))?;
    let resource = results
        .into_iter()
        .next()
        .ok_or("DescribeConfigs answered nothing")?
        .map_err(|e| format!("DescribeConfigs on broker {first}: {e}"))?;
    let settings = SETTINGS
        .iter()
        .map(|k| {
            (
                (*k).to_owned(),
                resource.get(k).and_then(|e| e.value.clone()),
            )
        })
        .collect();
    Ok((ids.len(), settings))
}

/// Deletes `topics` from the real cluster at `bootstrap` (the bench's own, by their unique
/// names); a failure is only reported: the topics then expire with the cluster's retention.
pub async fn delete_topics(bootstrap: &str, topics: &[String]) {
    let outcome = async {
        let admin = admin(bootstrap)?;
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
        let results = admin
            .delete_topics(&names, &options)
            .await
            .map_err(|e| e.to_string())?;
        let failed: Vec<String> = results
            .into_iter()
            .filter_map(|r| r.err())
            .filter(|(_, code)| *code != rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition)
            .map(|(t, code)| format!("{t}: {code}"))
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(failed.join(", "))
        }
    }
    .await;
    if let Err(e) = outcome {
        eprintln!("bench: could not delete the topics {topics:?} from {bootstrap}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> BrokerFacts {
        BrokerFacts {
            kind: BrokerKind::Kafka,
            bootstrap: "127.0.0.1:19092".into(),
            selection: Selection::Brokers,
            version: Some("Apache Kafka 4.1.2".into()),
            ours: true,
            brokers: Some(1),
            settings: vec![
                (
                    "log.flush.interval.messages".into(),
                    Some(i64::MAX.to_string()),
                ),
                ("log.flush.interval.ms".into(), None),
                ("min.insync.replicas".into(), Some("1".into())),
            ],
            settings_error: None,
            producer_acks: PRODUCER_ACKS.into(),
        }
    }

    #[test]
    fn our_cluster_is_named_with_its_version_and_settings() {
        let line = ours().line();
        assert!(
            line.starts_with(
                "Apache Kafka 4.1.2 (scripts/services/kafka.sh, KRaft, 1 node) at 127.0.0.1:19092, from --brokers / KAFKA_BROKERS;"
            ),
            "{line}"
        );
        assert!(
            line.contains("log.flush.interval.messages=9223372036854775807 (never: the OS flushes), log.flush.interval.ms=unset, min.insync.replicas=1;"),
            "{line}"
        );
        assert!(
            line.ends_with("producers use acks=all (idempotent)"),
            "{line}"
        );
    }

    #[test]
    fn another_cluster_has_no_version_and_the_mock_says_how_it_was_chosen() {
        let other = BrokerFacts {
            ours: false,
            version: None,
            brokers: Some(3),
            bootstrap: "k1:9092,k2:9092".into(),
            ..ours()
        };
        assert!(
            other
                .line()
                .starts_with("Kafka cluster at k1:9092,k2:9092 (version not known, 3 nodes)"),
            "{}",
            other.line()
        );
        let unreadable = BrokerFacts {
            settings_error: Some("DescribeConfigs: denied".into()),
            ..other
        };
        assert!(unreadable
            .line()
            .contains("its settings could not be read: DescribeConfigs: denied"));
        let mock = BrokerFacts {
            kind: BrokerKind::Mock,
            version: Some("librdkafka 2.12.1".into()),
            selection: Selection::Fallback,
            bootstrap: "127.0.0.1:42555".into(),
            settings: Vec::new(),
            ..ours()
        };
        let line = mock.line();
        assert!(
            line.starts_with("embedded broker (librdkafka's mock cluster, librdkafka 2.12.1) at 127.0.0.1:42555, a fallback: neither --brokers nor KAFKA_BROKERS was given"),
            "{line}"
        );
        assert!(
            line.contains("; no disks, replication or network;"),
            "{line}"
        );
        assert!(!mock.is_cluster() && ours().is_cluster());
    }

    #[test]
    fn the_version_is_the_logs_last_and_servers_match_in_any_order() {
        let log = "[x] INFO Kafka version: 4.1.1 (org.apache.kafka.common.utils.AppInfoParser)\n\
                   noise\n\
                   [y] INFO Kafka version: 4.1.2 (org.apache.kafka.common.utils.AppInfoParser)\n\
                   [y] INFO Kafka commitId: abc\n";
        assert_eq!(version_in_log(log.as_bytes()).as_deref(), Some("4.1.2"));
        assert_eq!(version_in_log("nothing\n".as_bytes()), None);
        assert!(same_servers("a:1,b:2\n", " b:2, a:1"));
        assert!(!same_servers("a:1", "a:1,b:2"));
        assert!(!same_servers("", ""));
    }

    #[test]
    fn our_cluster_is_found_by_its_bootstrap_file() {
        let state = std::env::temp_dir().join(testkit::names::unique("bench-broker-state"));
        std::fs::create_dir_all(state.join("kafka-cluster")).unwrap();
        std::fs::create_dir_all(state.join("broker")).unwrap();
        std::fs::write(
            state.join("kafka-cluster/bootstrap"),
            "127.0.0.1:19192,127.0.0.1:19292\n",
        )
        .unwrap();
        assert_eq!(
            own_cluster(&state, "127.0.0.1:19292,127.0.0.1:19192"),
            Some(state.join("kafka-cluster"))
        );
        assert_eq!(own_cluster(&state, "127.0.0.1:19092"), None);
        std::fs::remove_dir_all(&state).unwrap();
    }
}
