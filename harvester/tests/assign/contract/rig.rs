//! One assignor kind set up for a contract clause: a group or prefix of its own on the shared
//! server (or a server of its own, to stop and start: [`Rig::with_own_server`]), short
//! timings, and members built the way the harvester builds them
//! (`LeaderConfig::build_coordinator`; a single-leader elector becomes `Exclusive`).

use std::sync::Arc;
use std::time::Duration;

use harvester::assign::exclusive::Exclusive;
use harvester::assign::neli::NeliAssignorConfig;
use harvester::assign::rink::RinkConfig;
use harvester::assign::Assignor;
use harvester::config::{Coordinator, KafkaConfig, LeaderConfig};
use harvester::election::neli::NeliConfig;
use testkit::coord::{self, Server};
use testkit::Broker;

use crate::cells::OwnServer;

/// Buckets of every rig's table.
pub const B: u16 = 8;

/// The assignors of the port. Adding one: a variant here, its config in [`Rig::config`], and
/// a line in the `contract_cells!` list (`contract/mod.rs`). The mock assignor (`assign::mock`) moves
/// buckets only when its test says so: it has no group to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Non-exclusive NELI: buckets follow the leader topic's partitions.
    NeliBuckets,
    /// Rink's sticky ranked ring on etcd.
    Rink,
    /// A NELI elector's leader owns every bucket.
    Exclusive,
}

pub struct Rig {
    pub kind: Kind,
    namespace: String,
    kafka: KafkaConfig,
    own: Option<OwnServer>,
}

impl Rig {
    pub fn new(kind: Kind, test: &str) -> Rig {
        let namespace = crate::cells::namespace("ac", test);
        let kafka = KafkaConfig::with_bootstrap(Broker::discover().unwrap().bootstrap());
        Rig {
            kind,
            namespace,
            kafka,
            own: None,
        }
    }

    /// The same rig on a server of its own, started now: a private etcd for Rink, a cluster of
    /// its own of the embedded broker for the NELI kinds (with non-exclusive NELI's leader
    /// topic: the embedded broker creates a topic it is asked about with 4 partitions).
    pub async fn with_own_server(mut self) -> Rig {
        let own = match self.kind {
            Kind::Rink => OwnServer::private(Server::Etcd),
            Kind::NeliBuckets | Kind::Exclusive => OwnServer::cluster(),
        };
        if let Some(cluster) = own.cluster_of_its_own() {
            self.kafka = KafkaConfig::with_bootstrap(cluster.bootstrap());
            if self.kind == Kind::NeliBuckets {
                let topic = format!("{}.neli-buckets", self.namespace);
                cluster.create_topic(&topic, i32::from(B)).await.unwrap();
            }
        }
        self.own = Some(own);
        self
    }

    /// The rig's own server, to stop and start ([`Rig::with_own_server`] first).
    pub fn own_server(&mut self) -> &mut OwnServer {
        self.own.as_mut().expect("a server of its own")
    }

    /// The settings of member `name`: every member of the rig in one group.
    pub fn config(&self, name: &str) -> LeaderConfig {
        let name = Some(name.to_owned());
        let ns = &self.namespace;
        match self.kind {
            Kind::NeliBuckets => LeaderConfig::NeliBuckets(NeliAssignorConfig {
                group_id: Some(ns.clone()),
                name,
                heartbeat_timeout: Duration::from_secs(1),
                min_poll_interval: Duration::from_millis(50),
                buckets: B,
                ..Default::default()
            }),
            Kind::Rink => LeaderConfig::Rink(RinkConfig {
                endpoints: vec![OwnServer::address_or(
                    self.own.as_ref(),
                    coord::etcd_endpoint,
                )],
                prefix: Some(format!("/harvester-tests/{ns}")),
                name,
                ttl: Duration::from_secs(2),
                rebalance_delay: Duration::ZERO,
                buckets: B,
                connect_timeout: Duration::from_secs(3),
                ..Default::default()
            }),
            Kind::Exclusive => NeliConfig {
                group_id: Some(ns.clone()),
                name,
                heartbeat_timeout: Duration::from_secs(1),
                min_poll_interval: Duration::from_millis(50),
                ..Default::default()
            }
            .into(),
        }
    }

    /// A member, taking part from now on.
    pub async fn member(&self, name: &str) -> Arc<dyn Assignor> {
        match self
            .config(name)
            .build_coordinator(&self.kafka)
            .await
            .unwrap()
        {
            Coordinator::Assignor(a) => a,
            Coordinator::Elector(e) => Arc::new(Exclusive::new(e, B)),
        }
    }

    /// How long the group may take to settle after a member joins or leaves: the succession
    /// (a silent member's buckets wait that long; a first owner, at most that) plus the margin.
    pub fn settle_bound(&self) -> Duration {
        testkit::within(self.config("any").succession())
    }

    /// How long a revocation waits for its acknowledgement.
    pub fn revoke_timeout(&self) -> Duration {
        self.config("any").revoke_timeout()
    }

    /// How long a member takes to own its buckets again after the rig's own server came back:
    /// what outlived the outage (a lease, a membership) lapses, then the group settles, each
    /// within the succession, and the client's reconnect back-off; plus the margin.
    pub fn return_bound(&self) -> Duration {
        testkit::within(self.config("any").succession() * 3)
    }

    /// How long a closing member may take to report closed, plus the margin.
    pub fn close_bound(&self) -> Duration {
        testkit::within(self.config("any").close_timeout())
    }

    /// Waits (twice the settling bound) until `member` owns every bucket.
    pub async fn owns_every_bucket(&self, member: &Arc<dyn Assignor>, what: &str) {
        let all = harvester::assign::all_buckets(B);
        testkit::wait_for(what, self.settle_bound() * 2, || async {
            member.owned() == all
        })
        .await
        .unwrap();
    }

    /// Closes `member` (closing it again changes nothing) and waits for it to report closed.
    pub async fn close(&self, member: &Arc<dyn Assignor>) {
        member.close();
        tokio::time::timeout(self.close_bound(), member.closed())
            .await
            .expect("closed in time")
            .expect("an orderly close is Ok");
    }
}
