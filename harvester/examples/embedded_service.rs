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
//! cargo run -p harvester --example embedded_service
//! ```
//!
//! With `EXAMPLE_ORDERS=N` it writes N orders, waits until the harvester has published and
//! purged every one of them, stops, and exits non-zero if they were not all gone in time; the
//! test command runs it that way once (`scripts/test.sh`).

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
    ensure_topic(&brokers, "orders").await?;
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

    // The business: one order a second (or EXAMPLE_ORDERS of them, 20 ms apart), its event in
    // the same transaction.
    let orders: Option<u64> = std::env::var("EXAMPLE_ORDERS")
        .ok()
        .map(|n| n.parse())
        .transpose()?;
    let every = if orders.is_some() { 20 } else { 1000 };
    let mut tick = tokio::time::interval(Duration::from_millis(every));
    for n in 0..orders.unwrap_or(u64::MAX) {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        place_order(&pool, &stasher, n).await?;
    }
    let drained = match orders {
        Some(n) => Some(all_published(&harvester, n, &config).await?),
        None => None,
    };
    tracing::info!("shutting down: draining the harvester");
    shutdown.cancel();
    running.await??;
    match drained {
        Some(Err(left)) => {
            Err(format!("{left} outbox rows were still there when the wait ended").into())
        }
        _ => Ok(()),
    }
}

/// One order: the business row and its event, in one transaction.
async fn place_order(
    pool: &sqlx::PgPool,
    stasher: &harvester::store::postgres::Stasher,
    n: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let customer = format!("customer-{}", n % 5);
    let mut tx = pool.begin().await?;
    let (order_id,): (i64,) =
        sqlx::query_as("INSERT INTO orders (customer, total_cents) VALUES ($1, $2) RETURNING id")
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
    Ok(())
}

/// Waits until this harvester has published and purged `orders` rows and the outbox is empty,
/// and fails if it quarantined any (a row Kafka refused is not a published one). The bound is
/// the leadership's succession (a fresh member may wait that long to lead) plus 30 s for the
/// rows themselves, a wide margin on a shared CI machine. `Err(rows left)` when it ran out.
async fn all_published(
    harvester: &Harvester,
    orders: u64,
    config: &Config,
) -> Result<Result<(), i64>, Box<dyn std::error::Error>> {
    let deadline =
        tokio::time::Instant::now() + config.leader.succession() + Duration::from_secs(30);
    let mut events = harvester.subscribe();
    loop {
        let stats = harvester.stats();
        if stats.quarantined > 0 {
            return Err(
                format!("{} rows were quarantined, not published", stats.quarantined).into(),
            );
        }
        let left = harvester.store().backlog().await?.rows;
        if stats.purged >= orders && left == 0 {
            tracing::info!(orders, "every order was published and purged");
            return Ok(Ok(()));
        }
        // Woken by the harvester's own events (its meter every min_metrics_interval among
        // them), or the deadline.
        tokio::select! {
            got = events.recv() => {
                if matches!(got, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                    return Ok(Err(left));
                }
            }
            () = tokio::time::sleep_until(deadline) => return Ok(Err(left)),
        }
    }
}

/// Creates `topic` unless it exists. A real service's topics come with its cluster; the example
/// makes its own so that it runs against a broker that does not create topics on first use.
async fn ensure_topic(brokers: &str, topic: &str) -> Result<(), Box<dyn std::error::Error>> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    use rdkafka::types::RDKafkaErrorCode;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()?;
    let new = NewTopic::new(topic, 3, TopicReplication::Fixed(1));
    for result in admin.create_topics([&new], &AdminOptions::new()).await? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => return Err(format!("cannot create topic {name}: {code}").into()),
        }
    }
    Ok(())
}
