//! `bench`: the capacity-planning benchmark. Maps arguments onto the `bench` library.
//!
//! ```text
//! bench run [--profile quick|full|shapes|capacity] [--scenario NAME]... [--file my.toml]
//!           [--set k=v]... [--keys N] [--key-skew uniform|zipf:S] [--partitions N]
//!           [--value-bytes N] [--target-rate R]
//!           [--database postgres://...|mysql://...] [--brokers HOST:PORT | --embedded]
//! bench tune [--workload tune] [--sweep PATH=V1,V2,...]... [--p99-budget 50ms] [--quick]
//! bench list
//! ```
//! Exit codes: 0 every run verified correct (whether or not it kept up with its writers, which
//! the summary shows), 1 a run lost or reordered records (or failed, or was inconclusive), 2 bad
//! input.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    about = "Outbox harvester benchmark: throughput, commit-to-receipt latency, failover, against this machine's own ceilings"
)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run a profile or named scenarios.
    Run(RunArgs),
    /// Sweep settings (MaxInFlightRecords, shards, mark batch, linger) over one scenario and
    /// recommend the knee within a p99 budget.
    Tune(TuneArgs),
    /// goharvest v0.3.1's own reaper and ours, one after the other, on a private Kafka 3.9.1,
    /// the same goharvest-shaped table and rows: drain, 10 hot keys, one hot key, kill -9.
    Versus(VersusArgs),
    /// List profiles and scenarios.
    List {
        /// Extra scenario file (adds or replaces by name).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Profile to run (ignored when --scenario is given).
    #[arg(long, default_value = "quick")]
    profile: String,
    /// Scenario(s) to run.
    #[arg(long = "scenario")]
    scenarios: Vec<String>,
    /// Extra scenario file (adds or replaces by name).
    #[arg(long)]
    file: Option<PathBuf>,
    /// Harvester setting for every scenario, e.g. `--set limits.max_in_flight_records=5000`.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// Scale backlogs and durations (0.1 for a smoke run).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Kafka bootstrap servers of the cluster to measure (default: KAFKA_BROKERS, which
    /// `scripts/services.sh` sets to its Apache Kafka; with neither, the embedded broker).
    #[arg(long, env = "KAFKA_BROKERS")]
    brokers: Option<String>,
    /// Run on the embedded broker (librdkafka's mock cluster) whatever --brokers or
    /// KAFKA_BROKERS say.
    #[arg(long)]
    embedded: bool,
    /// Database URL; its scheme picks the backend: postgres:// (default: DATABASE_URL or the
    /// local server), or mysql:// or mariadb:// for MariaDB/MySQL.
    #[arg(long, visible_alias = "database", env = "DATABASE_URL")]
    database_url: Option<String>,
    /// The reaper binary (default: next to this one).
    #[arg(long)]
    reaper: Option<PathBuf>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Skip the ceiling measurements.
    #[arg(long)]
    no_ceilings: bool,
    /// Size the report's capacity plan for this many records/s (members, cores, WAL), from the
    /// costs per record the run measured. A capacity run plans one member without it.
    #[arg(long, value_parser = positive_rate)]
    target_rate: Option<f64>,
    /// The workload's keys: every selected scenario's backlog (or writers) over this many keys.
    #[arg(long)]
    keys: Option<u32>,
    /// How the records spread over the keys: `uniform` or `zipf:S` (exponent S above 0).
    #[arg(long, value_parser = parse_skew)]
    key_skew: Option<workloads::Skew>,
    /// Partitions of every selected scenario's topic.
    #[arg(long)]
    partitions: Option<i32>,
    /// Value bytes of every record.
    #[arg(long)]
    value_bytes: Option<usize>,
    /// Measure without warming the broker and the topics first (every scenario then pays for
    /// a cold broker and a new topic; the report says so). For comparisons only.
    #[arg(long)]
    cold: bool,
    /// Port for the bench's own Postgres (pg-restart). Below Linux's ephemeral range
    /// (32768-60999): a port in it can be held by one of the run's own outgoing connections
    /// when the cluster starts.
    #[arg(long, default_value_t = 25431)]
    private_pg_port: u16,
    /// The server's autovacuum for the run: `on` (default; switched on for the run and
    /// restored after when the server has it off, as a superuser can), `off` (for a
    /// comparison) or `as-found`.
    #[arg(long, default_value = "on")]
    autovacuum: bench::pg::AutovacuumMode,
}

#[derive(Debug, clap::Args)]
struct TuneArgs {
    #[command(flatten)]
    run: RunArgs,
    /// The scenario to sweep.
    #[arg(long = "workload", default_value = "tune")]
    workload: String,
    /// A sweep `PATH=V1,V2,...` (repeatable); default: in-flight, shards, mark batch, linger.
    #[arg(long = "sweep")]
    sweeps: Vec<String>,
    /// Fewer values per default sweep.
    #[arg(long)]
    quick: bool,
    /// The p99 commit-to-receipt latency budget (default: twice the defaults' own p99 in the
    /// sweep's control runs, so it fits this machine).
    #[arg(long, value_parser = humantime::parse_duration)]
    p99_budget: Option<std::time::Duration>,
    /// Runs per value, in rounds over the whole sweep; each value's figures are the medians.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    repeat: u16,
}

#[derive(Debug, clap::Args)]
struct VersusArgs {
    /// Workload(s) to run (default: all): drain, hot-keys-10, hot-key, failover-kill.
    #[arg(long = "workload")]
    workloads: Vec<String>,
    /// Scale the backlogs (0.1 for a smoke run).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Postgres URL (default: DATABASE_URL or the local server).
    #[arg(long, visible_alias = "database", env = "DATABASE_URL")]
    database_url: Option<String>,
    /// Our reaper binary (default: next to this one).
    #[arg(long)]
    reaper: Option<PathBuf>,
    /// goharvest's reaper (default: built once by `scripts/services/goharvest.sh build`).
    #[arg(long)]
    goharvest: Option<PathBuf>,
    /// A setting for ours on top of the shared YAML, e.g. `--ours-set
    /// limits.max_in_flight_per_key=64` (repeatable; the report names each).
    #[arg(long = "ours-set", value_name = "PATH=VALUE")]
    ours_set: Vec<String>,
    /// Where results go.
    #[arg(long, default_value = "results")]
    out: PathBuf,
}

async fn versus(v: VersusArgs) -> Result<i32, bench::BenchError> {
    let binaries = bench::versus::Binaries {
        goharvest: match v.goharvest {
            Some(p) => p,
            None => bench::versus::build_goharvest()?,
        },
        ours: bench::versus::our_reaper(v.reaper.as_deref())?,
        ours_settings: v
            .ours_set
            .iter()
            .map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| {
                        bench::BenchError::Run(format!("--ours-set {kv:?}: expected PATH=VALUE"))
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let options = bench::versus::VersusOptions {
        database_url: v.database_url.unwrap_or_else(testkit::pg::database_url),
        binaries,
        only: v.workloads,
        scale: v.scale,
        out: v.out,
        command: bench::result::redacted_command(std::env::args()),
    };
    // Ctrl-C drops the run: its relay processes are killed and its private Kafka stopped (their
    // guards' Drop); the case's schema, named for the run, stays.
    let (report, correct) = tokio::select! {
        done = bench::versus::run(&options) => done?,
        _ = tokio::signal::ctrl_c() => {
            return Err(bench::BenchError::Run("interrupted: the relays were killed and the private Kafka stopped".into()));
        }
    };
    if let Ok(text) = std::fs::read_to_string(&report) {
        println!("{text}");
    }
    eprintln!("results: {}", report.display());
    if correct {
        Ok(0)
    } else {
        eprintln!("bench: some cases did not finish or were not correct (see the verdicts)");
        Ok(1)
    }
}

fn run_options(r: RunArgs) -> bench::cli::RunOptions {
    bench::cli::RunOptions {
        profile: r.profile,
        scenarios: r.scenarios,
        file: r.file,
        set: r.set,
        scale: r.scale,
        brokers: r.brokers,
        embedded: r.embedded,
        database_url: r.database_url,
        reaper: r.reaper,
        out: r.out,
        ceilings: !r.no_ceilings,
        private_pg_port: r.private_pg_port,
        autovacuum: r.autovacuum,
        target_rate: r.target_rate,
        shape: bench::scenario::Shape {
            keys: r.keys,
            key_skew: r.key_skew,
            partitions: r.partitions,
            value_bytes: r.value_bytes,
        },
        cold: r.cold,
    }
}

fn parse_skew(s: &str) -> Result<workloads::Skew, String> {
    s.parse()
}

/// A rate above 0 records/s.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a rate above 0 (records/s, e.g. 50000)"
        )),
    }
}

fn report_error(e: &bench::BenchError) -> i32 {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    eprintln!("bench: {msg}");
    if matches!(e, bench::BenchError::Scenario { .. }) {
        2
    } else {
        1
    }
}

#[tokio::main]
async fn main() {
    // Quiet unless RUST_LOG says otherwise: these tools print their own results.
    harvester::config::LoggingConfig {
        level: "warn".into(),
        format: harvester::config::LogFormat::Human,
    }
    .init();
    let args = Args::parse();
    let code = match args.command {
        Cmd::List { file } => match bench::cli::list(file.as_deref()) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("bench: {e}");
                2
            }
        },
        Cmd::Run(r) => match bench::cli::run(run_options(r)).await {
            Ok(summary) => {
                println!("{}", summary.markdown);
                eprintln!("results: {}", summary.files.join(", "));
                for line in bench::exit::closing_lines(&summary.provenance, &summary.runs) {
                    eprintln!("{line}");
                }
                bench::exit::code(&summary.runs)
            }
            Err(e) => report_error(&e),
        },
        Cmd::Versus(v) => versus(v).await.unwrap_or_else(|e| report_error(&e)),
        Cmd::Tune(t) => {
            let options = bench::cli::TuneOptions {
                run: run_options(t.run),
                scenario: t.workload,
                sweeps: t.sweeps,
                quick: t.quick,
                p99_budget_ms: t.p99_budget.map(|d| d.as_secs_f64() * 1000.0),
                repeat: usize::from(t.repeat),
            };
            match bench::cli::tune(options).await {
                Ok(summary) => {
                    println!("{}", summary.markdown);
                    eprintln!("results: {}", summary.files.join(", "));
                    if summary.points.iter().all(|p| p.passed) {
                        0
                    } else {
                        eprintln!("bench: some sweep points lost or reordered records");
                        1
                    }
                }
                Err(e) => report_error(&e),
            }
        }
    };
    std::process::exit(code);
}
