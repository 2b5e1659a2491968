//! One elector kind set up for a contract clause: a namespace of its own on the shared server
//! (or a server of its own, to stop and start: [`Rig::with_own_server`]), short timings, and
//! contenders built the way the harvester builds them (`LeaderConfig::build`).

use std::sync::Arc;
use std::time::Duration;

use harvester::config::{KafkaConfig, LeaderConfig};
use harvester::election::etcd::EtcdConfig;
use harvester::election::mock::{self, MockElector};
use harvester::election::nats_kv::NatsKvConfig;
use harvester::election::neli::NeliConfig;
use harvester::election::zookeeper::ZooKeeperConfig;
use harvester::election::Elector;
use testkit::coord::{self, Server};
use testkit::Broker;

use crate::cells::OwnServer;

/// The electors of the port. Adding one: a variant here, its config in [`Rig::config`], and a
/// line in the `contract_cells!` list (`contract/mod.rs`). The mock elector leads when its test
/// says so (`election::mock`): its contender is told to lead at once, and it has no contention
/// to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Neli,
    ZooKeeper,
    NatsKv,
    Etcd,
    Mock,
}

pub struct Rig {
    pub kind: Kind,
    namespace: String,
    kafka: KafkaConfig,
    own: Option<OwnServer>,
}

impl Rig {
    pub fn new(kind: Kind, test: &str) -> Rig {
        let namespace = crate::cells::namespace("ec", test);
        let kafka = KafkaConfig::with_bootstrap(Broker::discover().unwrap().bootstrap());
        Rig {
            kind,
            namespace,
            kafka,
            own: None,
        }
    }

    /// The same rig on a server of its own, started now.
    pub fn with_own_server(mut self) -> Rig {
        let own = match self.kind {
            Kind::Neli => OwnServer::cluster(),
            Kind::ZooKeeper => OwnServer::private(Server::ZooKeeper),
            Kind::NatsKv => OwnServer::private(Server::Nats),
            Kind::Etcd => OwnServer::private(Server::Etcd),
            Kind::Mock => unreachable!("the mock elector has no server"),
        };
        if let Some(cluster) = own.cluster_of_its_own() {
            self.kafka = KafkaConfig::with_bootstrap(cluster.bootstrap());
        }
        self.own = Some(own);
        self
    }

    /// The rig's own server, to stop and start ([`Rig::with_own_server`] first).
    pub fn own_server(&mut self) -> &mut OwnServer {
        self.own.as_mut().expect("a server of its own")
    }

    /// The settings of contender `name`: every contender of the rig in one election.
    pub fn config(&self, name: &str) -> LeaderConfig {
        let name = Some(name.to_owned());
        let ns = &self.namespace;
        match self.kind {
            Kind::Neli => NeliConfig {
                group_id: Some(ns.clone()),
                name,
                heartbeat_timeout: Duration::from_secs(1),
                min_poll_interval: Duration::from_millis(50),
                ..Default::default()
            }
            .into(),
            Kind::ZooKeeper => LeaderConfig::ZooKeeper(ZooKeeperConfig {
                servers: vec![OwnServer::address_or(
                    self.own.as_ref(),
                    coord::zookeeper_addr,
                )],
                path: Some(format!("/harvester-tests/{ns}")),
                session_timeout: Duration::from_secs(3),
                name,
                connect_timeout: Duration::from_secs(5),
                ..Default::default()
            }),
            Kind::NatsKv => LeaderConfig::NatsKv(NatsKvConfig {
                url: OwnServer::address_or(self.own.as_ref(), coord::nats_url),
                bucket: ns.clone(),
                key: Some("leader".into()),
                ttl: Duration::from_secs(2),
                campaign_interval: Duration::from_millis(200),
                name,
                connect_timeout: Duration::from_secs(3),
                ..Default::default()
            }),
            Kind::Etcd => LeaderConfig::Etcd(EtcdConfig {
                endpoints: vec![OwnServer::address_or(
                    self.own.as_ref(),
                    coord::etcd_endpoint,
                )],
                prefix: Some(format!("/harvester-tests/{ns}")),
                ttl: Duration::from_secs(2),
                name,
                connect_timeout: Duration::from_secs(3),
                ..Default::default()
            }),
            Kind::Mock => unreachable!("the mock elector has no configuration"),
        }
    }

    /// A contender, contending from now on (the mock's, leading).
    pub async fn contender(&self, name: &str) -> Arc<dyn Elector> {
        if self.kind == Kind::Mock {
            let mock = MockElector::new();
            mock.acquire();
            return Arc::new(mock);
        }
        self.config(name).build(&self.kafka).await.unwrap()
    }

    /// How long a contender may take to lead once the election is free: the succession (a
    /// lapsed leader's successor waits that long; a first one, at most that) plus the margin.
    pub fn acquire_bound(&self) -> Duration {
        testkit::within(match self.kind {
            Kind::Mock => Duration::ZERO,
            _ => self.config("any").succession(),
        })
    }

    /// How long leadership takes to return after the rig's own server came back: what outlived
    /// the outage (a key, a lease, a session) lapses, then an election, each within the
    /// succession, and the client's reconnect back-off (shorter at these timings); plus the
    /// margin.
    pub fn return_bound(&self) -> Duration {
        testkit::within(self.config("any").succession() * 3)
    }

    /// How long a revocation waits for its acknowledgement.
    pub fn revoke_timeout(&self) -> Duration {
        match self.kind {
            Kind::Mock => mock::REVOKE_TIMEOUT,
            _ => self.config("any").revoke_timeout(),
        }
    }

    /// How long a closing contender may take to report closed, plus the margin.
    pub fn close_bound(&self) -> Duration {
        testkit::within(match self.kind {
            Kind::Mock => mock::REVOKE_TIMEOUT,
            _ => self.config("any").close_timeout(),
        })
    }
}
