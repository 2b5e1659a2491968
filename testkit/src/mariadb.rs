//! Isolated MariaDB databases per test.
//!
//! MySQL's schemas are its databases, and creating one is cheap (a directory), so each test gets
//! a database of its own, dropped with everything in it when the test's handle is dropped: tests
//! run in parallel without sharing a table, a lock name or a bucket layout.

use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPoolOptions};
use sqlx::{ConnectOptions, Executor, MySqlPool};

use crate::TestkitError;

/// Default when `MARIADB_URL` is unset: the machine's local server.
pub const DEFAULT_MARIADB_URL: &str = "mysql://root@127.0.0.1:3306/test";

/// `MARIADB_URL`, or the local server.
pub fn mariadb_url() -> String {
    std::env::var("MARIADB_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_MARIADB_URL.to_owned())
}

fn options(url: &str) -> Result<MySqlConnectOptions, TestkitError> {
    let url = match url.strip_prefix("mariadb://") {
        Some(rest) => format!("mysql://{rest}"),
        None => url.to_owned(),
    };
    url.parse().map_err(TestkitError::MariaDb)
}

/// A freshly created database, dropped (with everything in it) when this value is dropped.
#[derive(Debug)]
pub struct TestMariaDb {
    /// Pool whose connections use the database.
    pub pool: MySqlPool,
    /// The database's name (lower case, safe unquoted).
    pub database: String,
    url: String,
    dropped: bool,
}

impl TestMariaDb {
    /// Creates a uniquely named database and a pool on it.
    pub async fn new(prefix: &str) -> Result<Self, TestkitError> {
        let server = mariadb_url();
        let database = crate::names::schema(prefix);
        let admin_options = options(&server)?;
        let mut admin = admin_options.connect().await.map_err(|e| {
            TestkitError::MariaDb(sqlx::Error::Configuration(
                format!("cannot connect to {server} ({e}); start MariaDB or set MARIADB_URL")
                    .into(),
            ))
        })?;
        admin
            .execute(format!("CREATE DATABASE `{database}`").as_str())
            .await
            .map_err(TestkitError::MariaDb)?;
        let options = admin_options.database(&database);
        let pool = MySqlPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .map_err(TestkitError::MariaDb)?;
        let url = options.to_url_lossy().to_string();
        Ok(TestMariaDb {
            pool,
            database,
            url,
            dropped: false,
        })
    }

    /// A `mysql://` URL of this database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `` `database`.`table` ``.
    pub fn qualified(&self, table: &str) -> String {
        format!("`{}`.`{}`", self.database, table)
    }

    /// Drops the database now (also done on drop, best effort).
    pub async fn close(mut self) -> Result<(), TestkitError> {
        self.dropped = true;
        self.pool.close().await;
        drop_database(&self.database).await
    }
}

async fn drop_database(database: &str) -> Result<(), TestkitError> {
    let mut conn = options(&mariadb_url())?
        .connect()
        .await
        .map_err(TestkitError::MariaDb)?;
    // A session still in a transaction on the database (a test that panicked with one open:
    // sqlx rolls back a dropped transaction only when its connection is used again) holds
    // metadata locks that DROP DATABASE would wait for: end those sessions first.
    let sessions: Vec<u64> = sqlx::query_scalar(
        "SELECT CAST(ID AS UNSIGNED) FROM information_schema.PROCESSLIST \
         WHERE DB = ? AND ID <> CONNECTION_ID()",
    )
    .bind(database)
    .fetch_all(&mut conn)
    .await
    .map_err(TestkitError::MariaDb)?;
    for id in sessions {
        // It may have ended meanwhile.
        let _ = conn.execute(format!("KILL {id}").as_str()).await;
    }
    conn.execute("SET SESSION lock_wait_timeout = 10")
        .await
        .map_err(TestkitError::MariaDb)?;
    conn.execute(format!("DROP DATABASE IF EXISTS `{database}`").as_str())
        .await
        .map_err(TestkitError::MariaDb)?;
    Ok(())
}

impl Drop for TestMariaDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // As for Postgres schemas (pg.rs): a short-lived thread with its own runtime, since the
        // test's runtime cannot be blocked on.
        let database = self.database.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                if let Err(e) = rt.block_on(drop_database(&database)) {
                    eprintln!("testkit: could not drop database {database}: {e}");
                }
            }
        })
        .join();
    }
}
