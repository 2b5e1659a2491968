//! `reaper`: the harvester as a standalone sidecar. It only maps arguments onto the library.
//!
//! Configuration layers: the file (TOML, YAML, JSON, or goharvest's reaper YAML), then
//! `HARVESTER__*` environment variables, then `--set path=value` and the shorthand flags.
//! `reaper check-config` prints the effective configuration with secrets redacted, or every
//! problem with its field and fix.
//!
//! Signals: the first SIGTERM/SIGINT stops marking, drains, purges what was acknowledged and
//! leaves the group; a second exits at once. Exit codes: 0 clean stop, 1 runtime failure,
//! 2 invalid configuration, 3 shutdown exceeded its bound, 130 second signal.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use harvester::{events, Config, Harvester};
use tokio_util::sync::CancellationToken;

/// mimalloc rather than glibc's allocator: the per-record path allocates and frees small buffers
/// on several threads (rows, Kafka headers, delivery tags), and glibc's consolidation of freed
/// chunks showed in the drain's profile. A choice of the binary; embedders keep their own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(about = "Transactional-outbox harvester: publishes Postgres outbox rows to Kafka")]
struct Args {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    config: ConfigArgs,
    /// Print harvester events as JSON lines on stdout.
    #[arg(long, global = true)]
    events_json: bool,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Harvest (the default).
    Run,
    /// Print the effective configuration (secrets redacted), or every problem; exit 2 if invalid.
    CheckConfig,
}

#[derive(Debug, clap::Args)]
struct ConfigArgs {
    /// Config file: .toml, .yaml/.yml (ours or goharvest's reaper file), or .json.
    #[arg(long, short, global = true, env = "REAPER_CONFIG")]
    config: Option<PathBuf>,
    /// Override any field: `--set limits.max_in_flight_records=5000` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE", global = true)]
    set: Vec<String>,
    /// Shorthand for `--set kafka.bootstrap.servers=...`.
    #[arg(long, global = true)]
    bootstrap: Option<String>,
    /// Shorthand for `--set database.url=...`.
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Shorthand for `--set leader.group_id=...`.
    #[arg(long, global = true)]
    group: Option<String>,
    /// Shorthand for `--set outbox.table=...`.
    #[arg(long, global = true)]
    table: Option<String>,
    /// Shorthand for `--set http.listen=...` (default 127.0.0.1:9090; port 0 picks one).
    #[arg(long, global = true)]
    http: Option<SocketAddr>,
    /// Shorthand for `--set logging.format=...` (human or json).
    #[arg(long, global = true)]
    log_format: Option<String>,
}

fn load(args: &ConfigArgs) -> harvester::Result<Config> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for s in &args.set {
        let (k, v) = s.split_once('=').ok_or_else(|| {
            harvester::Error::InvalidConfig(vec![harvester::ConfigProblem::new(
                format!("--set {s}"),
                "must be PATH=VALUE, e.g. --set limits.send_buffer=20",
            )])
        })?;
        pairs.push((k.to_owned(), v.to_owned()));
    }
    let shorthands = [
        ("kafka.bootstrap.servers", args.bootstrap.clone()),
        ("database.url", args.database_url.clone()),
        ("leader.group_id", args.group.clone()),
        ("outbox.table", args.table.clone()),
        ("http.listen", args.http.map(|a| a.to_string())),
        ("logging.format", args.log_format.clone()),
    ];
    for (k, v) in shorthands {
        if let Some(v) = v {
            pairs.push((k.to_owned(), v));
        }
    }
    let mut config = Config::layered(
        args.config.as_deref(),
        std::env::vars(),
        pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    )?;
    if config.http.listen.is_none() {
        config.http.listen = Some(SocketAddr::from(([127, 0, 0, 1], 9090)));
    }
    config.validate()?;
    Ok(config)
}

fn print_json(v: &serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

fn exit_for(e: &harvester::Error) -> i32 {
    if e.config_problems().is_some() {
        2
    } else {
        1
    }
}

fn report_invalid(e: &harvester::Error) {
    match e {
        harvester::Error::InvalidConfig(problems) => {
            eprintln!(
                "reaper: invalid configuration ({} problem(s)):",
                problems.len()
            );
            for p in problems {
                eprintln!("  {p}");
            }
        }
        other => eprintln!("reaper: {}", harvester::chain(other)),
    }
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let config = match load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            report_invalid(&e);
            std::process::exit(exit_for(&e));
        }
    };
    if matches!(args.command, Some(Cmd::CheckConfig)) {
        match toml::to_string_pretty(&config.redacted()) {
            Ok(text) => print!("{text}"),
            Err(e) => eprintln!("reaper: cannot print the configuration: {e}"),
        }
        std::process::exit(0);
    }
    config.logging.init();
    // Spans over OTLP (`[tracing]`, off by default); flushed when the guard drops at exit.
    let spans = match harvester::telemetry::install(&config.tracing) {
        Ok(guard) => guard,
        Err(e) => {
            report_invalid(&e);
            std::process::exit(exit_for(&e));
        }
    };
    let listen = config.http.listen;
    let shutdown_bound =
        config.drain_timeout() + config.leader.revoke_timeout() + Duration::from_secs(10);
    let harvester = match Harvester::connect(config).await {
        Ok(h) => Arc::new(h),
        Err(e) => {
            report_invalid(&e);
            std::process::exit(exit_for(&e));
        }
    };
    let cancel = CancellationToken::new();
    if let Some(addr) = listen {
        match harvester::http::serve(Arc::clone(&harvester), addr, cancel.child_token()).await {
            Ok(endpoint) if args.events_json => {
                print_json(&events::line(
                    "http",
                    serde_json::json!({"addr": endpoint.addr}),
                ));
            }
            Ok(_) => {}
            Err(e) => {
                eprintln!("reaper: {}", harvester::chain(&e));
                std::process::exit(1);
            }
        }
    }
    if args.events_json {
        harvester.on_event(|e| print_json(&e.to_json()));
    }
    tokio::spawn(signals(cancel.clone(), shutdown_bound));
    let code = match harvester.run(cancel).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("reaper: {}", harvester::chain(&e));
            exit_for(&e)
        }
    };
    // The final flush blocks until the export is done, and the gRPC export runs on this
    // runtime: dropping the guard on a worker would hold that worker while the export waits
    // for one (a deadlock on a one-worker runtime). Off the workers, on the blocking pool.
    if let Some(guard) = spans {
        if let Err(e) = tokio::task::spawn_blocking(move || drop(guard)).await {
            eprintln!("reaper: flushing the spans at exit failed: {e}");
        }
    }
    std::process::exit(code);
}

/// First signal: graceful stop, bounded by `bound`; second signal: exit at once.
async fn signals(cancel: CancellationToken, bound: Duration) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("reaper: cannot install signal handlers");
        return;
    };
    let mut received = 0;
    loop {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        received += 1;
        if received == 1 {
            tracing::info!(
                "stopping: draining and leaving the group (signal again to exit at once)"
            );
            cancel.cancel();
            tokio::spawn(async move {
                tokio::time::sleep(bound).await;
                eprintln!("reaper: graceful stop exceeded {bound:?}; exiting");
                std::process::exit(3);
            });
        } else {
            std::process::exit(130);
        }
    }
}
