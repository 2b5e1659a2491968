//! The harvester's statements keep their index plans on real Postgres, however small the outbox
//! was when a connection cached them (`store::postgres::SESSION`).
//!
//! Each statement is prepared once per connection and then runs a cached generic plan. On an
//! outbox of one page, Postgres's generic plan for the mark's UPDATE and for the purge is a
//! sequential scan, which the connection keeps while dead row versions pile up until autovacuum:
//! at 500 rec/s every mark scanned the whole table. This test prepares the mark and the purge
//! on a table of one page, forces the generic plan, and reads it: on a plain connection it is a
//! sequential scan (what the harvester's connections would do without their session setting;
//! this half fails if Postgres stops choosing it, which would make the setting unneeded), on a
//! connection of the harvester's pool an index scan. Checked the other way: with the line that
//! runs `SESSION` in `pool_options` removed, this test fails ("the harvester's connection plans
//! a sequential scan").

use harvester::outbox::{Shape, TableName};
use harvester::store::postgres::{connect_pool, PgStore, Statements};
use harvester::store::{DatabaseConfig, OutboxConfig, OutboxStore};
use sqlx::pool::PoolConnection;
use sqlx::{Executor, Postgres};
use testkit::pg::TestDb;

/// The generic plans of the mark and the purge on `conn`, as EXPLAIN prints them.
async fn generic_plans(conn: &mut PoolConnection<Postgres>, s: &Statements) -> String {
    conn.execute("SET plan_cache_mode = force_generic_plan")
        .await
        .unwrap();
    conn.execute(format!("PREPARE mark_plan(uuid, bigint, bigint) AS {}", s.mark).as_str())
        .await
        .unwrap();
    conn.execute(format!("PREPARE purge_plan(bigint[]) AS {}", s.purge).as_str())
        .await
        .unwrap();
    let mut plans = String::new();
    for explain in [
        "EXPLAIN EXECUTE mark_plan(gen_random_uuid(), 100, 0)",
        "EXPLAIN EXECUTE purge_plan(ARRAY[1, 2]::bigint[])",
    ] {
        let lines: Vec<String> = sqlx::query_scalar(explain)
            .fetch_all(&mut **conn)
            .await
            .unwrap();
        plans.push_str(&lines.join("\n"));
        plans.push('\n');
    }
    conn.execute("DEALLOCATE ALL").await.unwrap();
    plans
}

#[tokio::test]
async fn marks_and_purges_keep_index_plans_on_a_table_of_one_page() {
    let db = TestDb::new("hvplans").await.unwrap();
    let table = TableName::parse(&format!("{}.outbox", db.schema)).unwrap();
    let outbox = OutboxConfig {
        table: table.clone(),
        ..OutboxConfig::default()
    };
    let database = DatabaseConfig {
        url: db.url().to_owned(),
        ..DatabaseConfig::default()
    };
    let store = PgStore::connect(&database, &outbox).await.unwrap();
    store.migrate().await.unwrap();
    // One page of rows, and statistics that say so.
    let t = table.quoted();
    db.pool
        .execute(
            format!(
                "INSERT INTO {t} (topic, kafka_key, kafka_value) \
                 SELECT 't', 'k', convert_to(g::text, 'UTF8') FROM generate_series(1, 5) g; \
                 ANALYZE {t}"
            )
            .as_str(),
        )
        .await
        .unwrap();
    let statements = Statements::new(&table, &outbox.quarantine(), Shape::Native);

    let plain = generic_plans(&mut db.pool.acquire().await.unwrap(), &statements).await;
    assert!(
        plain.contains("Seq Scan on outbox"),
        "a plain connection's generic plans no longer scan a one-page outbox sequentially, so \
         the harvester's session setting may be unneeded:\n{plain}"
    );

    let harvester_pool = connect_pool(&database).await.unwrap();
    let own = generic_plans(&mut harvester_pool.acquire().await.unwrap(), &statements).await;
    assert!(
        !own.contains("Seq Scan"),
        "the harvester's connection plans a sequential scan:\n{own}"
    );
    assert!(own.contains("outbox_pkey"), "{own}");
}
