//! Isolated Postgres schemas per test.
//!
//! A schema (not a database) per test keeps creation cheap (no template copy, no fsync of a new
//! database) while still isolating tables, sequences and the harvester's quarantine table.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Executor, PgPool};

use crate::TestkitError;

/// Default when `DATABASE_URL` is unset: the machine's local server.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// `DATABASE_URL`, or the local server.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

static CONTAINER_URL: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();

/// The URL tests use: a container's when `HARVEST_TESTCONTAINERS=1` and a Docker daemon answers
/// (started once per process and kept for its lifetime), else [`database_url`].
pub async fn resolved_url() -> String {
    if crate::containers::opted_in() {
        let url = CONTAINER_URL
            .get_or_init(|| async {
                match crate::containers::postgres().await {
                    Ok(Some(container)) => {
                        let url = container.url.clone();
                        // Kept for the whole test process; the daemon removes it on exit.
                        std::mem::forget(container);
                        Some(url)
                    }
                    Ok(None) => None,
                    Err(e) => {
                        eprintln!(
                            "testcontainers: {e}; falling back to DATABASE_URL or the local server"
                        );
                        None
                    }
                }
            })
            .await;
        if let Some(url) = url {
            return url.clone();
        }
    }
    database_url()
}

/// A freshly created schema, dropped (with everything in it) when this value is dropped.
#[derive(Debug)]
pub struct TestDb {
    /// Pool whose connections have `search_path = <schema>, public`.
    pub pool: PgPool,
    /// The schema's name (lower case, safe unquoted).
    pub schema: String,
    url: String,
    dropped: bool,
}

impl TestDb {
    /// Creates a uniquely named schema and a pool scoped to it.
    pub async fn new(prefix: &str) -> Result<Self, TestkitError> {
        let url = resolved_url().await;
        let schema = crate::names::schema(prefix);
        let options: PgConnectOptions = url.parse()?;
        let mut admin = options.clone().connect().await.map_err(|e| {
            TestkitError::Postgres(sqlx::Error::Configuration(
                format!("cannot connect to {url} ({e}); start it with `scripts/services.sh up` or set DATABASE_URL").into(),
            ))
        })?;
        admin
            .execute(format!("CREATE SCHEMA {schema}").as_str())
            .await?;
        let search_path = format!("SET search_path = {schema}, public");
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .after_connect(move |conn, _| {
                let search_path = search_path.clone();
                Box::pin(async move {
                    conn.execute(search_path.as_str()).await?;
                    Ok(())
                })
            })
            .connect_with(options)
            .await?;
        Ok(TestDb {
            pool,
            schema,
            url,
            dropped: false,
        })
    }

    /// The database URL this schema lives in.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `"schema"."table"`.
    pub fn qualified(&self, table: &str) -> String {
        format!("\"{}\".\"{}\"", self.schema, table)
    }

    /// Drops the schema now (also done on drop, best effort).
    pub async fn close(mut self) -> Result<(), TestkitError> {
        self.dropped = true;
        self.pool.close().await;
        drop_schema(&self.url, &self.schema).await
    }
}

async fn drop_schema(url: &str, schema: &str) -> Result<(), TestkitError> {
    let mut conn = url.parse::<PgConnectOptions>()?.connect().await?;
    conn.execute(format!("DROP SCHEMA IF EXISTS {schema} CASCADE").as_str())
        .await?;
    Ok(())
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // Drop runs inside the test's runtime, which cannot be blocked on; a short-lived thread
        // with its own runtime drops the schema even when the test panicked.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                if let Err(e) = rt.block_on(drop_schema(&url, &schema)) {
                    eprintln!("testkit: could not drop schema {schema}: {e}");
                }
            }
        })
        .join();
    }
}
