//! A small pool of tiberius clients: at most `database.max_connections` connections, handed out
//! one caller at a time, each statement bounded by the statement timeout, and any connection
//! that saw an error, a timeout or a dropped call discarded rather than reused.
//!
//! Why our own: tiberius is a single connection, and the pools built for it (bb8-tiberius,
//! deadpool-tiberius) require tiberius 0.12; what the store needs is small (a semaphore, a stack
//! of idle clients, a reconnect), and owning it lets the pool keep the rule that matters here:
//! tiberius leaves a connection out of step with the server when a call is cut short (a client
//! timeout, a future dropped by `select!`), and a connection that was inside a transaction must
//! not be handed to the next caller. So a connection goes back to the pool only after a call
//! that completed, outside any transaction; every other one is closed, and the server rolls back
//! whatever it had open.
//!
//! Time bounds, since SQL Server has no server-side statement timeout: every connection runs
//! `SET LOCK_TIMEOUT` with `database.statement_timeout` (`sql/session.sql`), so the server gives
//! up a lock wait itself and reports it (error 1222; the statement is rolled back), and every call
//! here is bounded on the client by the same timeout and a second more ([`CLIENT_SLACK`], so that
//! the server's own error normally comes first). A call that outlives the client's bound has its
//! connection closed: the server then ends the request, rolling it back, when it notices the
//! connection is gone, and a lock wait at the latest when the lock timeout runs out. Opening a
//! connection (TCP, login, session settings) and waiting for a free one are bounded by
//! `database.connect_timeout`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tiberius::{Query, Row};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use super::statements::render;
use super::url::Target;
use crate::error::Error;
use crate::store::{DatabaseConfig, PoolStats};
use crate::Result;

/// A tiberius client over tokio's TCP stream.
pub type Client = tiberius::Client<Compat<TcpStream>>;

/// How much longer than the statement timeout the client waits for a call.
pub const CLIENT_SLACK: Duration = Duration::from_secs(1);

/// An idle connection is checked with a trivial statement before reuse once it has been idle
/// this long (the server or a load balancer may have closed it meanwhile).
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(30);

/// The pool. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    target: Target,
    /// `sql/session.sql`, rendered.
    session: String,
    statement_timeout: Duration,
    /// The statement timeout and [`CLIENT_SLACK`]: the client's bound of every call.
    call_timeout: Duration,
    connect_timeout: Duration,
    max: u32,
    permits: Arc<Semaphore>,
    /// Idle clients and since when.
    idle: Mutex<Vec<(Client, Instant)>>,
    /// Open connections, idle or in use.
    open: AtomicU32,
}

impl Pool {
    /// A pool for `target` sized and bounded by `database`; it connects on first use.
    pub fn new(target: Target, database: &DatabaseConfig) -> Self {
        let lock_timeout_ms = database
            .statement_timeout
            .as_millis()
            .clamp(1, i32::MAX as u128);
        let max = database.max_connections.max(1);
        Pool {
            inner: Arc::new(Inner {
                session: render(
                    include_str!("sql/session.sql"),
                    &[("{{lock_timeout_ms}}", lock_timeout_ms.to_string())],
                ),
                target,
                statement_timeout: database.statement_timeout,
                call_timeout: database.statement_timeout + CLIENT_SLACK,
                connect_timeout: database.connect_timeout,
                max,
                permits: Arc::new(Semaphore::new(max as usize)),
                idle: Mutex::new(Vec::new()),
                open: AtomicU32::new(0),
            }),
        }
    }

    /// A pool that has opened one connection (and kept it), so that a wrong address or login
    /// fails here, at start.
    pub async fn connect(target: Target, database: &DatabaseConfig) -> Result<Self> {
        let pool = Self::new(target, database);
        drop(pool.acquire().await?);
        Ok(pool)
    }

    /// Where the pool connects, for logs.
    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// The statement timeout (the server's lock timeout; the client allows `CLIENT_SLACK`
    /// more).
    pub fn statement_timeout(&self) -> Duration {
        self.inner.statement_timeout
    }

    /// The pool's gauges.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            size: self.inner.open.load(Ordering::Relaxed),
            idle: self.inner.idle.lock().len(),
            max: self.inner.max,
        }
    }

    /// A connection: an idle one (checked first if it has been idle long), or a new one.
    pub async fn acquire(&self) -> Result<Conn> {
        let inner = &self.inner;
        let permit = tokio::time::timeout(
            inner.connect_timeout,
            Arc::clone(&inner.permits).acquire_owned(),
        )
        .await
        .map_err(|_| Error::Timeout {
            what: format!("a free sql server connection ({} in use)", inner.max),
            after: inner.connect_timeout,
        })?
        .map_err(|_| Error::Closed("the sql server pool"))?;
        loop {
            let idle = inner.idle.lock().pop();
            let Some((client, since)) = idle else { break };
            let mut conn = Conn::new(client, Arc::clone(inner), None);
            if since.elapsed() < CHECK_AFTER_IDLE
                || conn
                    .rows("check an idle connection", Query::new("SELECT 1"))
                    .await
                    .is_ok()
            {
                conn.permit = Some(permit);
                return Ok(conn);
            }
            // A dead idle connection: dropped (not clean), the next one is tried.
        }
        let client = self.open().await?;
        inner.open.fetch_add(1, Ordering::Relaxed);
        Ok(Conn::new(client, Arc::clone(inner), Some(permit)))
    }

    /// A connection of its own, outside the pool (neither counted nor limited by it, and its
    /// calls not bounded in time), with the pool's target and session settings: for a service
    /// that writes records with the [`Stasher`](super::Stasher) in its own transactions, or for
    /// tests that hold a transaction open.
    pub async fn open_client(&self) -> Result<Client> {
        self.open().await
    }

    /// Opens a connection: TCP, login (following one redirect, as Azure SQL's gateway sends),
    /// session settings; all within the connect timeout.
    async fn open(&self) -> Result<Client> {
        let inner = &self.inner;
        let target = &inner.target;
        let work = async {
            let mut config = target.config(inner.connect_timeout);
            let (mut host, mut port) = (target.host.clone(), target.port);
            for _ in 0..2 {
                let tcp = TcpStream::connect((host.as_str(), port))
                    .await
                    .map_err(|source| Error::Io {
                        action: format!("connect to sql server at {host}:{port}"),
                        source,
                    })?;
                tcp.set_nodelay(true).map_err(|source| Error::Io {
                    action: "set TCP_NODELAY on a sql server connection".into(),
                    source,
                })?;
                match tiberius::Client::connect(config.clone(), tcp.compat_write()).await {
                    Ok(mut client) => {
                        client
                            .simple_query(inner.session.as_str())
                            .await
                            .map_err(Error::mssql("apply the session settings"))?
                            .into_results()
                            .await
                            .map_err(Error::mssql("apply the session settings"))?;
                        return Ok(client);
                    }
                    Err(tiberius::error::Error::Routing {
                        host: routed,
                        port: routed_port,
                    }) => {
                        config.host(&routed);
                        config.port(routed_port);
                        (host, port) = (routed, routed_port);
                    }
                    Err(e) => {
                        return Err(Error::mssql(format!(
                            "log in to sql server at {}",
                            target.describe()
                        ))(e))
                    }
                }
            }
            Err(Error::StoreAnswer {
                what: format!(
                    "sql server at {} redirected the connection more than once",
                    target.describe()
                ),
            })
        };
        tokio::time::timeout(inner.connect_timeout, work)
            .await
            .map_err(|_| Error::Timeout {
                what: format!("a connection to sql server at {}", target.describe()),
                after: inner.connect_timeout,
            })?
    }
}

/// A connection taken from the pool: back to the pool when dropped if its last call completed
/// outside a transaction, closed otherwise.
#[derive(Debug)]
pub struct Conn {
    client: Option<Client>,
    /// The last call completed (nothing of it is left on the wire).
    clean: bool,
    /// A transaction is open.
    in_transaction: bool,
    pool: Arc<Inner>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Conn {
    fn new(client: Client, pool: Arc<Inner>, permit: Option<OwnedSemaphorePermit>) -> Self {
        Conn {
            client: Some(client),
            clean: true,
            in_transaction: false,
            pool,
            permit,
        }
    }

    /// The client, marked busy until [`finish`](Self::finish) says the call completed.
    fn start(&mut self) -> Result<&mut Client> {
        self.clean = false;
        self.client
            .as_mut()
            .ok_or(Error::Closed("a sql server connection"))
    }

    fn finish<T>(
        &mut self,
        action: &str,
        out: std::result::Result<tiberius::Result<T>, tokio::time::error::Elapsed>,
    ) -> Result<T> {
        match out {
            Ok(Ok(v)) => {
                self.clean = true;
                Ok(v)
            }
            Ok(Err(e)) => Err(Error::mssql(action)(e)),
            Err(_) => Err(Error::Timeout {
                what: format!("sql server to {action}"),
                after: self.pool.call_timeout,
            }),
        }
    }

    /// Runs `query`; returns the rows of its first result set (every result is read, so the
    /// connection is left in step).
    pub async fn rows(&mut self, action: &str, query: Query<'_>) -> Result<Vec<Row>> {
        let limit = self.pool.call_timeout;
        let client = self.start()?;
        let out = tokio::time::timeout(limit, async move {
            query.query(client).await?.into_first_result().await
        })
        .await;
        self.finish(action, out)
    }

    /// Runs `query`; returns how many rows its statements affected.
    pub async fn execute(&mut self, action: &str, query: Query<'_>) -> Result<u64> {
        let limit = self.pool.call_timeout;
        let client = self.start()?;
        let out = tokio::time::timeout(
            limit,
            async move { Ok(query.execute(client).await?.total()) },
        )
        .await;
        self.finish(action, out)
    }

    /// Begins a transaction; until [`commit`](Self::commit), dropping the connection closes it
    /// (and the server rolls the transaction back).
    pub async fn begin(&mut self, action: &str) -> Result<()> {
        let limit = self.pool.call_timeout;
        self.in_transaction = true;
        let client = self.start()?;
        let out = tokio::time::timeout(limit, client.begin_transaction()).await;
        self.finish(action, out)
    }

    /// Commits the open transaction.
    pub async fn commit(&mut self, action: &str) -> Result<()> {
        let limit = self.pool.call_timeout;
        let client = self.start()?;
        let out = tokio::time::timeout(limit, client.commit_transaction()).await;
        let done = self.finish(action, out);
        if done.is_ok() {
            self.in_transaction = false;
        }
        done
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            if self.clean && !self.in_transaction {
                self.pool.idle.lock().push((client, Instant::now()));
            } else {
                self.pool.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
        // The permit (if any) is released after the client is back.
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mssql::url;

    fn database(url: &str) -> DatabaseConfig {
        DatabaseConfig {
            url: url.to_owned(),
            max_connections: 2,
            connect_timeout: Duration::from_secs(2),
            ..DatabaseConfig::default()
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_is_an_error_and_leaves_nothing_open() {
        // A port nothing listens on: the connection is refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let db = database(&format!("sqlserver://sa:pw@127.0.0.1:{port}/db"));
        let pool = Pool::new(url::parse(&db.url).unwrap(), &db);
        for _ in 0..3 {
            match pool.acquire().await {
                Err(Error::Io { action, .. }) => {
                    assert!(action.contains(&format!("127.0.0.1:{port}")), "{action}")
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            pool.stats(),
            PoolStats {
                size: 0,
                idle: 0,
                max: 2
            }
        );
        assert!(
            pool.inner.session.contains("SET LOCK_TIMEOUT 10000;"),
            "{}",
            pool.inner.session
        );
    }

    #[tokio::test]
    async fn a_server_that_never_answers_times_out_on_connect() {
        // Accepts TCP, says nothing: the login waits, the connect timeout ends it.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                open.push(s);
            }
        });
        let mut db = database(&format!("sqlserver://sa:pw@127.0.0.1:{port}/db"));
        db.connect_timeout = Duration::from_millis(300);
        let pool = Pool::new(url::parse(&db.url).unwrap(), &db);
        let started = Instant::now();
        let err = pool.acquire().await.unwrap_err();
        assert!(started.elapsed() < testkit::within(db.connect_timeout));
        assert!(
            matches!(&err, Error::Timeout { .. } | Error::SqlServer { .. }),
            "{err:?}"
        );
        assert_eq!(pool.stats().size, 0);
        held.abort();
    }
}
