//! A small service that embeds the harvester: each "order" is a business row and an outbox
//! record written in one transaction; the harvester runs in-process, serves `/metrics` and the
//! probes, and stops gracefully on Ctrl-C (stop marking, drain, purge, leave the group).
//!
//! It wires the two ports by hand to show the seams: the outbox store (Postgres, reached the way
//! the service's own pool reaches it, with connections of its own) and the elector (whatever
//! `[leader]` names; NELI by default). `Harvester::connect(config)` does the same in one call.
//!
//! ```sh
//! scripts/services.sh up && source .state/services.env
//! KAFKA_BROKERS=$HARVEST_EMBEDDED_BOOTSTRAP cargo run -p harvester --example embedded_service
//! ```

use std::sync::Arc;
use std::time::Duration;

use harvester::config::{KafkaConfig, Limits};
use harvester::outbox::StashRecord;
use harvester::store::postgres::PgStore;
use harvester::{Config, Harvester};
use sqlx::postgres::PgPoolOptions;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let database_url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let brokers = std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "localhost:9092".into());
    let config = Config {
        kafka: KafkaConfig::with_bootstrap(&brokers),
        database: harvester::config::DatabaseConfig {
            url: database_url.clone(),
            ..Default::default()
        },
        limits: Limits {
            min_metrics_interval: Duration::from_secs(2),
            ..Default::default()
        },
        http: harvester::config::HttpConfig {
            listen: Some("127.0.0.1:9091".parse()?),
        },
        ..Default::default()
    };
    config.logging.init();

    // The service's own pool, for its business transactions.
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&database_url)
        .await?;
    // Port 1, the outbox store: its own connections (statement timeout included), the
    // service's connection options.
    let store = PgStore::like_pool(&pool, &config.database, &config.outbox).await?;
    let stasher = store.stasher();
    // Port 2, the elector `[leader]` names.
    let elector = config.leader.build(&config.kafka).await?;
    let harvester = Arc::new(Harvester::new(config.clone(), Arc::new(store), elector).await?);
    sqlx::query("CREATE TABLE IF NOT EXISTS orders (id BIGSERIAL PRIMARY KEY, customer TEXT NOT NULL, total_cents BIGINT NOT NULL)")
        .execute(&pool)
        .await?;

    let shutdown = CancellationToken::new();
    if let Some(addr) = config.http.listen {
        harvester::http::serve(Arc::clone(&harvester), addr, shutdown.child_token()).await?;
    }
    harvester.on_event(|e| tracing::info!(?e, "harvester event"));
    let running = {
        let (h, token) = (Arc::clone(&harvester), shutdown.clone());
        tokio::spawn(async move { h.run(token).await })
    };

    // The business: one order a second, its event in the same transaction.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    for n in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        let customer = format!("customer-{}", n % 5);
        let mut tx = pool.begin().await?;
        let (order_id,): (i64,) = sqlx::query_as(
            "INSERT INTO orders (customer, total_cents) VALUES ($1, $2) RETURNING id",
        )
        .bind(&customer)
        .bind(1000 + n as i64)
        .fetch_one(&mut *tx)
        .await?;
        let event = format!(r#"{{"order_id":{order_id},"customer":"{customer}"}}"#);
        // Keyed by customer: each customer's events stay in order.
        stasher
            .stash(&mut tx, &StashRecord::new("orders", customer, event))
            .await?;
        tx.commit().await?;
    }
    tracing::info!("shutting down: draining the harvester");
    shutdown.cancel();
    running.await??;
    Ok(())
}
