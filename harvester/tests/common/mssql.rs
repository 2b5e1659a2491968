//! A test's own schema in the SQL Server database `MSSQL_URL` names (e.g.
//! `sqlserver://sa:password@127.0.0.1:1433/harvester_test?encrypt=false`), dropped with
//! everything in it when the value is dropped, and the few raw statements the suites read it
//! with. Shared by the store suite (`store_mssql.rs`) and the end-to-end suites
//! (`backend.rs`).
//!
//! The database must be a scratch one: the first test of a run turns its
//! READ_COMMITTED_SNAPSHOT on if it is off (the store refuses to run without it), which ends the
//! database's other sessions.

use harvester::outbox::TableName;
use harvester::store::mssql::{connect_pool, parse_url, Pool};
use harvester::store::DatabaseConfig;
use tiberius::{Query, Row};
use uuid::Uuid;

/// Why the SQL Server tests skip here.
pub const UNSET: &str = "MSSQL_URL is not set (no SQL Server on this machine); set it to \
                         sqlserver://user:pass@host:1433/db to run this suite";

/// `MSSQL_URL`, if set (and not blank).
pub fn url() -> Option<String> {
    std::env::var("MSSQL_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// Turns READ_COMMITTED_SNAPSHOT on in the test database, once per test process, if it is off.
static ROW_VERSIONING: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();

/// A test's schema in the `MSSQL_URL` database.
#[derive(Debug)]
pub struct TestMssql {
    pub url: String,
    /// The schema's name (safe unquoted, but always bracketed in SQL).
    pub schema: String,
    /// For the tests' own statements (the harvester's session settings on each connection).
    pub pool: Pool,
    dropped: bool,
}

/// `[schema].[table]`, a `]` inside doubled (as the store quotes it).
pub fn quoted(table: &TableName) -> String {
    let bracket = |ident: &str| format!("[{}]", ident.replace(']', "]]"));
    match &table.schema {
        Some(s) => format!("{}.{}", bracket(s), bracket(&table.table)),
        None => bracket(&table.table),
    }
}

fn database(url: &str) -> DatabaseConfig {
    DatabaseConfig {
        url: url.to_owned(),
        max_connections: 4,
        ..DatabaseConfig::default()
    }
}

impl TestMssql {
    /// A schema name for `prefix` (the schema itself is created by the store's migrations),
    /// with row versioning on in the database; `None` (printing nothing: the caller says why)
    /// when `MSSQL_URL` is not set.
    pub async fn new(prefix: &str) -> Option<TestMssql> {
        let url = url()?;
        testkit::init_tracing();
        ROW_VERSIONING.get_or_init(|| row_versioning(&url)).await;
        let pool = connect_pool(&database(&url)).await.unwrap();
        let schema = format!("h_{}", testkit::names::schema(prefix));
        Some(TestMssql {
            url,
            schema,
            pool,
            dropped: false,
        })
    }

    /// `database` settings for a pool of 4 on the test database.
    pub fn database(&self) -> DatabaseConfig {
        database(&self.url)
    }

    /// `schema.name`.
    pub fn table(&self, name: &str) -> TableName {
        TableName::parse(&format!("{}.{name}", self.schema)).unwrap()
    }

    /// `[schema].[table]`, for any table name (a `]` inside doubled).
    pub fn qualified(&self, table: &str) -> String {
        quoted(&TableName {
            schema: Some(self.schema.clone()),
            table: table.to_owned(),
        })
    }

    /// The rows of `query`'s first result set.
    pub async fn query(&self, query: Query<'_>) -> Vec<Row> {
        rows(&self.pool, query).await
    }

    /// The rows of `sql`'s first result set.
    pub async fn rows(&self, sql: &str) -> Vec<Row> {
        self.query(Query::new(sql)).await
    }

    /// The rows of `table`.
    pub async fn count(&self, table: &TableName) -> i64 {
        let sql = format!("SELECT COUNT_BIG(*) FROM {}", quoted(table));
        self.rows(&sql).await[0].get::<i64, _>(0).unwrap()
    }

    /// The ids in `table`, ascending.
    pub async fn ids(&self, table: &TableName) -> Vec<i64> {
        let sql = format!("SELECT id FROM {} ORDER BY id", quoted(table));
        let rows = self.rows(&sql).await;
        rows.iter().map(|r| r.get::<i64, _>(0).unwrap()).collect()
    }

    /// How many rows of `table` are marked by `leader` (a `UNIQUEIDENTIFIER`, bound from the
    /// `Uuid` as the store binds it).
    pub async fn marked_by(&self, table: &TableName, leader: Uuid) -> i64 {
        let sql = format!(
            "SELECT COUNT_BIG(*) FROM {} WHERE leader_id = @P1",
            quoted(table)
        );
        let mut query = Query::new(sql);
        query.bind(leader);
        self.query(query).await[0].get::<i64, _>(0).unwrap()
    }

    /// (outbox id, reason) of every row of the quarantine table `quarantine`, by outbox id.
    /// `leader_id` of every row of `table`, by id.
    pub async fn leaders(&self, table: &TableName) -> Vec<Option<Uuid>> {
        let sql = format!("SELECT leader_id FROM {} ORDER BY id", quoted(table));
        self.rows(&sql).await.iter().map(|r| r.get(0)).collect()
    }

    pub async fn quarantined(&self, quarantine: &TableName) -> Vec<(i64, String)> {
        let sql = format!(
            "SELECT outbox_id, reason FROM {} ORDER BY outbox_id",
            quoted(quarantine)
        );
        let rows = self.rows(&sql).await;
        rows.iter()
            .map(|r| {
                let reason = r.get::<&str, _>(1).unwrap().to_owned();
                (r.get::<i64, _>(0).unwrap(), reason)
            })
            .collect()
    }

    /// Drops the schema and its tables now (also done on drop, best effort).
    pub async fn close(mut self) {
        self.dropped = true;
        drop_schema(&self.pool, &self.schema).await.unwrap();
    }
}

/// Turns READ_COMMITTED_SNAPSHOT on in the database if it is off, on a client of its own opened
/// before any pool of the tests' (`WITH ROLLBACK IMMEDIATE` ends the database's other sessions,
/// which would leave a pool holding a dead idle connection).
async fn row_versioning(url: &str) {
    let target = parse_url(url).unwrap();
    let mut client = Pool::new(target, &database(url))
        .open_client()
        .await
        .unwrap();
    let on: Option<i32> = client
        .simple_query(
            "SELECT CAST(is_read_committed_snapshot_on AS INT) \
             FROM sys.databases WHERE database_id = DB_ID()",
        )
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .and_then(|row| row.get(0));
    if on != Some(1) {
        println!("turning READ_COMMITTED_SNAPSHOT on in the test database");
        client
            .simple_query(
                "ALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON WITH ROLLBACK IMMEDIATE",
            )
            .await
            .unwrap()
            .into_results()
            .await
            .unwrap();
    }
}

async fn rows(pool: &Pool, query: Query<'_>) -> Vec<Row> {
    let mut conn = pool.acquire().await.unwrap();
    conn.rows("run a test query", query).await.unwrap()
}

/// Drops every table of `schema`, then the schema (nothing if it does not exist).
async fn drop_schema(pool: &Pool, schema: &str) -> harvester::Result<()> {
    let sql = "DECLARE @sql NVARCHAR(MAX) = N''; \
               SELECT @sql += N'DROP TABLE ' + QUOTENAME(s.name) + N'.' + QUOTENAME(t.name) + N'; ' \
               FROM sys.tables AS t JOIN sys.schemas AS s ON s.schema_id = t.schema_id \
               WHERE s.name = @P1; \
               IF SCHEMA_ID(@P1) IS NOT NULL SET @sql += N'DROP SCHEMA ' + QUOTENAME(@P1) + N';'; \
               EXEC (@sql);";
    let mut query = Query::new(sql);
    query.bind(schema);
    let mut conn = pool.acquire().await?;
    conn.execute("drop the test schema", query).await?;
    Ok(())
}

impl Drop for TestMssql {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // As testkit's schemas: the test's runtime cannot be blocked on, so a short-lived
        // thread with a runtime and a connection of its own drops the schema, even when the
        // test panicked.
        let (url, schema) = (self.url.clone(), self.schema.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                let dropped = rt.block_on(async {
                    let pool = connect_pool(&database(&url)).await?;
                    drop_schema(&pool, &schema).await
                });
                if let Err(e) = dropped {
                    eprintln!("could not drop the SQL Server schema {schema}: {e}");
                }
            }
        })
        .join();
    }
}
