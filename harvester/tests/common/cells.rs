//! What the elector and assignor contracts share: one test per clause and implementation, and a
//! namespace of its own per test on the shared servers. Included with `#[path]` by the binaries
//! that hold a contract, so they compile nothing else of `common`.

/// One module per implementation (`(module, Variant)` of the enum `$kind`), holding one test
/// per clause: `module::clause` calls `super::run($kind::Variant, "clause", super::clause)`.
#[macro_export]
macro_rules! contract_cells {
    ($kind:ident; $(($module:ident, $variant:ident)),+ $(,)?; $clauses:tt) => {
        $( $crate::contract_cells!(@module $kind, $module, $variant, $clauses); )+
    };
    (@module $kind:ident, $module:ident, $variant:ident, [$($clause:ident),+ $(,)?]) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $clause() {
                    super::run(super::$kind::$variant, stringify!($clause), super::$clause).await
                }
            )+
        }
    };
}

/// A name no other test uses, for a group, path, bucket or prefix (`.` replaced: NATS bucket
/// names refuse it).
pub fn namespace(prefix: &str, test: &str) -> String {
    testkit::names::unique(&format!("{prefix}-{test}")).replace('.', "_")
}

/// A server of a test's own, to stop and start: a private coordination server, or (NELI) a
/// cluster of its own of the embedded broker, whose brokers can be taken down. Stopped on drop.
pub enum OwnServer {
    Server(testkit::coord::PrivateServer),
    Cluster(testkit::Broker),
}

impl OwnServer {
    /// Starts a private `server`.
    pub fn private(server: testkit::coord::Server) -> OwnServer {
        tokio::task::block_in_place(|| {
            OwnServer::Server(testkit::coord::PrivateServer::start(server).unwrap())
        })
    }

    /// A cluster of one broker of its own on the embedded broker.
    pub fn cluster() -> OwnServer {
        tokio::task::block_in_place(|| {
            OwnServer::Cluster(testkit::Broker::mock().unwrap().isolated(1).unwrap())
        })
    }

    /// The client address of `own` when it is a private server, else the shared one.
    pub fn address_or(own: Option<&OwnServer>, shared: impl FnOnce() -> String) -> String {
        match own {
            Some(OwnServer::Server(s)) => s.address().to_owned(),
            _ => shared(),
        }
    }

    /// The cluster of the embedded broker.
    pub fn cluster_of_its_own(&self) -> Option<&testkit::Broker> {
        match self {
            OwnServer::Server(_) => None,
            OwnServer::Cluster(c) => Some(c),
        }
    }

    /// Stops it (every broker of the cluster), keeping its data.
    pub fn stop(&self) {
        tokio::task::block_in_place(|| match self {
            OwnServer::Server(s) => s.stop().unwrap(),
            OwnServer::Cluster(c) => c.broker_down(-1).unwrap(),
        });
    }

    /// Starts it again on the same address and data.
    pub fn start(&mut self) {
        tokio::task::block_in_place(|| match self {
            OwnServer::Server(s) => s.restart().unwrap(),
            OwnServer::Cluster(c) => c.broker_up(-1).unwrap(),
        });
    }
}
