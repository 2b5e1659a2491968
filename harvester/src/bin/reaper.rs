//! `reaper`: the harvester as a standalone sidecar.
//!
//! Maps arguments onto the library: a config file (TOML or JSON), a few overrides, and graceful
//! signals (SIGTERM/SIGINT: stop marking, drain, purge, leave the group; a second signal exits at
//! once). `--events-json` prints every harvester event as a JSON line on stdout.
//! Exit codes: 0 clean stop, 1 runtime failure, 2 invalid configuration.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use harvester::{Config, HarvestEvent, Harvester};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(about = "Transactional-outbox harvester: publishes Postgres outbox rows to Kafka")]
struct Args {
    /// Config file (TOML, or JSON by extension).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Overrides kafka."bootstrap.servers".
    #[arg(long, env = "KAFKA_BROKERS")]
    bootstrap: Option<String>,
    /// Overrides database.url.
    #[arg(long, env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Overrides leader.group_id.
    #[arg(long)]
    group: Option<String>,
    /// Overrides outbox.table.
    #[arg(long)]
    table: Option<String>,
    /// Print harvester events as JSON lines on stdout.
    #[arg(long)]
    events_json: bool,
}

fn load(args: &Args) -> harvester::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::from_file(path)?,
        None => Config::default(),
    };
    if let Some(b) = &args.bootstrap {
        config.kafka = config.kafka.set("bootstrap.servers", b.clone());
    }
    if let Some(u) = &args.database_url {
        config.database.url = u.clone();
    }
    if let Some(g) = &args.group {
        config.leader.group_id = Some(g.clone());
    }
    if let Some(t) = &args.table {
        config.outbox.table = harvester::outbox::TableName::parse(t).map_err(|e| {
            harvester::Error::InvalidConfig(vec![harvester::ConfigProblem::new("outbox.table", e)])
        })?;
    }
    config.validate()?;
    Ok(config)
}

fn event_json(event: &HarvestEvent) -> serde_json::Value {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    match event {
        HarvestEvent::Acquired { leader_id } => {
            serde_json::json!({"kind": "acquired", "leader_id": leader_id, "t": t})
        }
        HarvestEvent::Refreshed { leader_id } => {
            serde_json::json!({"kind": "refreshed", "leader_id": leader_id, "t": t})
        }
        HarvestEvent::Revoked => serde_json::json!({"kind": "revoked", "t": t}),
        HarvestEvent::Fenced => serde_json::json!({"kind": "fenced", "t": t}),
        HarvestEvent::Meter(s) => serde_json::json!({
            "kind": "meter", "t": t, "published": s.published, "purged": s.purged,
            "in_flight_records": s.in_flight_records, "in_flight_keys": s.in_flight_keys,
            "reset": s.reset, "quarantined": s.quarantined, "remarks": s.remarks,
        }),
    }
}

#[tokio::main]
async fn main() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args = Args::parse();
    let config = match load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("reaper: {e}");
            std::process::exit(2);
        }
    };
    let harvester = match Harvester::connect(config).await {
        Ok(h) => Arc::new(h),
        Err(e @ harvester::Error::InvalidConfig(_)) => {
            eprintln!("reaper: {e}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("reaper: {e}");
            std::process::exit(1);
        }
    };
    if args.events_json {
        harvester.on_event(|e| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", event_json(&e));
            let _ = out.flush();
        });
    }
    let cancel = CancellationToken::new();
    tokio::spawn({
        let cancel = cancel.clone();
        async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let mut signals = 0;
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
                }
                signals += 1;
                if signals == 1 {
                    tracing::info!(
                        "stopping: draining and leaving the group (signal again to exit at once)"
                    );
                    cancel.cancel();
                } else {
                    std::process::exit(130);
                }
            }
        }
    });
    match harvester.run(cancel).await {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("reaper: {e}");
            std::process::exit(1);
        }
    }
}
