//! What the `bench` binary does, as library functions: resolve scenarios, measure the ceilings,
//! run every scenario, and write JSON lines, plots and the Markdown summary.
//!
//! The database URL's scheme picks the backend: `postgres://` (the default, `DATABASE_URL` or
//! the local server), or `mysql://` / `mariadb://` for MariaDB/MySQL. Each backend's ceilings
//! are its own (its store's mark and purge, its writers), its server's settings go in the
//! provenance, and scenarios that only make sense on Postgres are skipped on MariaDB with a
//! line saying why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::secured::{SecuredKafka, ADMIN};
use testkit::verify::ClientSettings;
use testkit::Broker;
use workloads::Backend;

use crate::ground::Ground;
use crate::plot::{line_chart, Extras, Series, Span, XAxis};
use crate::report::{append_json, markdown};
use crate::result::{Ceilings, Provenance, RunResult};
use crate::run::Bench;
use crate::scenario::ScenarioFile;
use crate::BenchError;

/// Options of `bench run`.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub profile: String,
    pub scenarios: Vec<String>,
    pub file: Option<PathBuf>,
    pub set: Vec<String>,
    pub scale: f64,
    /// A real cluster's bootstrap servers (`--brokers`, `KAFKA_BROKERS`).
    pub brokers: Option<String>,
    /// The embedded broker (librdkafka's mock), whatever `brokers` says. Without either, the
    /// mock too (the provenance says it was a fallback).
    pub embedded: bool,
    /// `postgres://...` (default: `DATABASE_URL` or the local server) or `mysql://...` /
    /// `mariadb://...`.
    pub database_url: Option<String>,
    pub reaper: Option<PathBuf>,
    pub out: PathBuf,
    pub ceilings: bool,
    pub private_pg_port: u16,
    /// Whether to switch the server's autovacuum on (the default), off, or leave it.
    pub autovacuum: crate::pg::AutovacuumMode,
    /// The rate (records/s) the report's capacity plan sizes for, if any.
    pub target_rate: Option<f64>,
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct Summary {
    pub markdown: String,
    pub files: Vec<String>,
    /// Where the run happened (its tree: committed or not).
    pub provenance: Provenance,
    pub runs: Vec<RunResult>,
    pub ceilings: Ceilings,
}

fn load(file: Option<&Path>) -> Result<ScenarioFile, BenchError> {
    let builtin = ScenarioFile::builtin();
    match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(BenchError::io(format!("read {}", path.display())))?;
            Ok(builtin.merge(ScenarioFile::parse(&text, &path.display().to_string())?))
        }
        None => Ok(builtin),
    }
}

/// `bench list`.
pub fn list(file: Option<&Path>) -> Result<String, BenchError> {
    let f = load(file)?;
    let mut s = String::from("profiles:\n");
    for (p, names) in &f.profiles {
        s.push_str(&format!("  {p}: {}\n", names.join(", ")));
    }
    s.push_str("scenarios:\n");
    for (name, sc) in &f.scenario {
        let listener = match sc.listener {
            crate::scenario::Listener::Plaintext => String::new(),
            other => format!(", listener {}", other.name()),
        };
        s.push_str(&format!(
            "  {name} ({:?}{listener}): {}\n",
            sc.kind, sc.description
        ));
    }
    Ok(s)
}

fn bad(message: impl Into<String>) -> BenchError {
    BenchError::Scenario {
        scenario: "command line".into(),
        message: message.into(),
    }
}

/// Everything a command needs before running scenarios.
struct Prepared {
    file: ScenarioFile,
    bench: Bench,
    provenance: Provenance,
    run_id: String,
    jsonl: PathBuf,
    /// The server's autovacuum as the run changed it, to put back when the command ends.
    autovacuum: Option<crate::ground::Restore>,
}

async fn prepare(o: &RunOptions) -> Result<Prepared, BenchError> {
    let file = load(o.file.as_deref())?;
    if !o.scale.is_finite() || o.scale <= 0.0 {
        return Err(bad("--scale must be above 0"));
    }
    let mut extra = Vec::new();
    for s in &o.set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| bad(format!("--set {s}: use PATH=VALUE")))?;
        extra.push((k.to_owned(), v.to_owned()));
    }
    // The scenarios this run selects, with their settings.
    let selected = if o.scenarios.is_empty() {
        file.profile(&o.profile).unwrap_or_default()
    } else {
        o.scenarios.clone()
    };
    let scenarios: Vec<_> = file
        .scenario
        .iter()
        .filter(|(name, _)| selected.is_empty() || selected.contains(name))
        .map(|(name, s)| (name.clone(), s.settings(&file.base)))
        .collect();
    let transactional = scenarios
        .iter()
        .flat_map(|(_, settings)| settings.iter())
        .chain(extra.iter())
        .any(|(k, v)| k == "publish.mode" && v == "transactional");
    let (broker, selection) = select_broker(o, &scenarios, &mut extra).await?;
    let sasl_ssl = sasl_ssl_listener(&broker);
    // A selected scenario that cannot reach its listener fails the command now, before the
    // ceilings and the other scenarios ran.
    if let Err(why) = &sasl_ssl {
        let secured = scenarios.iter().map(|(name, _)| name).find(|name| {
            file.scenario[name.as_str()].listener == crate::scenario::Listener::SaslSsl
        });
        if let Some(name) = secured {
            return Err(BenchError::Scenario {
                scenario: name.clone(),
                message: format!("listener = \"sasl_ssl\": {why}"),
            });
        }
    }
    let database_url = o
        .database_url
        .clone()
        .unwrap_or_else(testkit::pg::database_url);
    let reaper = match &o.reaper {
        Some(r) => r.clone(),
        None => std::env::current_exe()
            .map_err(BenchError::io("find this executable"))?
            .with_file_name("reaper"),
    };
    if !reaper.exists() {
        return Err(bad(format!(
            "no reaper binary at {}; build it with `cargo build --release -p harvester --features cli --bin reaper` or pass --reaper",
            reaper.display()
        )));
    }
    let backend = Backend::of(&database_url).map_err(|e| bad(e.to_string()))?;
    std::fs::create_dir_all(&o.out)
        .map_err(BenchError::io(format!("create {}", o.out.display())))?;
    let run_id = chrono::Utc::now().format("%Y%m%d-%H%M%S").to_string();
    let jsonl = o.out.join(format!("{run_id}.jsonl"));
    let broker_facts = crate::broker::describe(&broker, selection).await;
    eprintln!("bench: broker: {}", broker_facts.line());
    let broker_text = broker_line(&broker, &broker_facts, transactional).await;
    let (server, autovacuum) = crate::ground::server(backend)
        .prepare(&database_url, o.autovacuum)
        .await?;
    let mut provenance = Provenance::detect(&run_id, &broker_text, server.postgres);
    provenance.mariadb = server.mariadb;
    provenance.broker_facts = broker_facts;
    append_json(&jsonl, &serde_json::json!({"provenance": provenance}))?;
    let bench = Bench {
        database_url,
        backend,
        broker,
        reaper,
        base: file.base.clone(),
        extra,
        private_pg_port: o.private_pg_port,
        sasl_ssl,
    };
    Ok(Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
        autovacuum,
    })
}

/// The run's broker: the mock with `--embedded` or when no cluster is named, else the cluster
/// of `--brokers` / `KAFKA_BROKERS`, with every selected scenario's NELI session fitted to it.
async fn select_broker(
    o: &RunOptions,
    scenarios: &[(String, Vec<(String, String)>)],
    extra: &mut Vec<(String, String)>,
) -> Result<(Broker, crate::broker::Selection), BenchError> {
    use crate::broker::Selection;
    let cluster = o
        .brokers
        .as_deref()
        .map(str::trim)
        .filter(|b| !b.is_empty());
    match cluster {
        _ if o.embedded => Ok((Broker::mock()?, Selection::Embedded)),
        None => Ok((Broker::mock()?, Selection::Fallback)),
        Some(b) => {
            // A real cluster refuses sessions below its minimum: fit them, or fail now. Only
            // the scenarios this run selects count (a 5 s drain is not shortened for a 1 s
            // failover scenario that does not run), and only NELI's session is the cluster's
            // business.
            if matches!(crate::electors::requested(extra), None | Some("neli")) {
                crate::session::fit_to_cluster(b, scenarios, extra).await?;
            }
            Ok((Broker::external(b), Selection::Brokers))
        }
    }
}

/// The SASL_SSL listener of the run's broker (see [`crate::scenario::Listener::SaslSsl`]), or
/// why it has none: the embedded broker has no secured listener, and the one
/// `scripts/services.sh up` exported belongs to the broker at its `KAFKA_BROKERS` only.
fn sasl_ssl_listener(broker: &Broker) -> Result<ClientSettings, String> {
    if broker.embedded().is_some() {
        return Err(
            "the run is on the embedded broker (`--embedded`, or neither `--brokers` nor KAFKA_BROKERS), which has no secured listener; run against the broker `scripts/services.sh up` started".into(),
        );
    }
    let secured = SecuredKafka::discover().map_err(|e| e.to_string())?;
    let servers = |list: &str| {
        let mut v: Vec<String> = list.split(',').map(|s| s.trim().to_owned()).collect();
        v.sort();
        v
    };
    if servers(&secured.plaintext) != servers(broker.bootstrap()) {
        return Err(format!(
            "the exported SASL_SSL listener ({}) is the broker's at KAFKA_BROKERS={}, not this run's ({})",
            secured.sasl_ssl,
            secured.plaintext,
            broker.bootstrap()
        ));
    }
    let password = secured.password_file(ADMIN);
    if !Path::new(&password).is_file() {
        return Err(format!("no password file {password} (KAFKA_USERS_DIR)"));
    }
    Ok(ClientSettings::sasl_ssl(&secured, ADMIN))
}

/// The provenance's broker sentence: the facts, and for a transactional run what a
/// read_committed consumer can be trusted to show on this broker.
async fn broker_line(
    broker: &Broker,
    facts: &crate::broker::BrokerFacts,
    transactional: bool,
) -> String {
    let text = facts.line();
    if !transactional {
        return text;
    }
    match testkit::verify::probe_aborted(broker, Duration::from_secs(15)).await {
        Ok(p) => format!("{text}; it {}", p.describe()),
        Err(e) => format!("{text}; the aborted-transaction probe failed: {e}"),
    }
}

/// `bench run`.
///
/// Boxed, like every entry point the binary awaits: the future is compiled in this crate once,
/// not again in the binary (release builds share no generic code between crates).
pub fn run(o: RunOptions) -> futures::future::LocalBoxFuture<'static, Result<Summary, BenchError>> {
    Box::pin(run_inner(o))
}

async fn run_inner(o: RunOptions) -> Result<Summary, BenchError> {
    let mut prepared = prepare(&o).await?;
    let restore = prepared.autovacuum.take();
    let outcome = run_prepared(&o, prepared).await;
    if let Some(r) = restore {
        r.restore().await;
    }
    outcome
}

async fn run_prepared(o: &RunOptions, prepared: Prepared) -> Result<Summary, BenchError> {
    let Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
        ..
    } = prepared;
    let names = if o.scenarios.is_empty() {
        file.profile(&o.profile)?
    } else {
        o.scenarios.clone()
    };
    for n in &names {
        if !file.scenario.contains_key(n) {
            return Err(bad(format!(
                "unknown scenario {n}; `bench list` shows them"
            )));
        }
    }
    let batch = effective_mark_batch(&bench);
    let ceilings = if o.ceilings {
        // The ceilings' topics get the drain's partitions, so the drain reads against them.
        let partitions = file.scenario.get("drain").map_or(8, |d| d.partitions);
        measure_ceilings(&bench, o.scale, partitions).await?
    } else {
        Ceilings {
            batch,
            ..Default::default()
        }
    };
    append_json(&jsonl, &serde_json::json!({"ceilings": ceilings}))?;
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let mut unsupported = Vec::new();
    for name in &names {
        let scenario = file.scenario[name].clone().scaled(o.scale);
        if let Some(why) = unsupported_on(&bench, &scenario, &file.base) {
            eprintln!("== {name}: skipped on {}: {why}", bench.backend.name());
            unsupported.push((name.clone(), why));
            continue;
        }
        let keys: Vec<Option<u32>> = if scenario.keys_sweep.is_empty() {
            vec![None]
        } else {
            scenario.keys_sweep.iter().copied().map(Some).collect()
        };
        let fleets: Vec<Option<usize>> = if scenario.harvesters_sweep.is_empty() {
            vec![None]
        } else {
            scenario
                .harvesters_sweep
                .iter()
                .copied()
                .map(Some)
                .collect()
        };
        let variants: Vec<crate::run::Variant> = keys
            .iter()
            .flat_map(|k| {
                fleets.iter().map(|h| crate::run::Variant {
                    keys: *k,
                    harvesters: *h,
                })
            })
            .collect();
        if let Some(b) = scenario.backlog {
            if let Some(short) =
                disk_shortfall(&bench.database_url, bench.backend, b.rows, b.value_bytes).await
            {
                eprintln!("== {name}: skipped: {short}");
                skipped.push(format!("{name}: {short}"));
                continue;
            }
        }
        for variant in variants {
            eprintln!("== {}", variant.label(name));
            let result = crate::run::run(&bench, name, &scenario, variant).await?;
            eprintln!(
                "   {}, {}; committed {}, delivered {}, lost {}, reordered {}, duplicates {}",
                result.verdict,
                result
                    .pace
                    .map_or_else(|| "keeping up not judged".into(), |p| p.describe()),
                result.committed,
                result.correctness.delivered,
                result.correctness.lost,
                result.correctness.reordered,
                result.correctness.duplicates
            );
            append_json(&jsonl, &result)?;
            runs.push(result);
        }
    }
    let plots = write_plots(&o.out, &run_id, &runs)?;
    let mut md = markdown(&provenance, &ceilings, &runs, &plots);
    md.push_str(&crate::report::unsupported_section(
        bench.backend,
        &unsupported,
    ));
    let capacity = crate::capacity::section(&runs, &skipped);
    md.push_str(&capacity);
    // The plan closes a capacity run, or any run asked for one.
    let mut plots = plots;
    if o.target_rate.is_some() || !capacity.is_empty() {
        md.push_str(&crate::plan::section(&runs, o.target_rate));
        if let Some(svg) = crate::plan::plot(&runs, o.target_rate) {
            let name = format!("{run_id}-plan.svg");
            let path = o.out.join(&name);
            std::fs::write(&path, svg)
                .map_err(BenchError::io(format!("write {}", path.display())))?;
            md.push_str(&format!("\n![{name}]({name})\n"));
            plots.push(path);
        }
    }
    let md_path = o.out.join(format!("{run_id}.md"));
    std::fs::write(&md_path, &md)
        .map_err(BenchError::io(format!("write {}", md_path.display())))?;
    let mut files = vec![jsonl.display().to_string(), md_path.display().to_string()];
    files.extend(plots.iter().map(|p| p.display().to_string()));
    Ok(Summary {
        markdown: md,
        files,
        provenance,
        runs,
        ceilings,
    })
}

/// Options of `bench tune` (on top of the run options: the scenario, scale, out, ...).
#[derive(Debug, Clone)]
pub struct TuneOptions {
    pub run: RunOptions,
    /// The scenario to sweep (default `tune`).
    pub scenario: String,
    /// `path=v1,v2,...`; empty for the default sweeps.
    pub sweeps: Vec<String>,
    pub quick: bool,
    pub p99_budget_ms: f64,
    /// Runs per value (in rounds); the figures are medians.
    pub repeat: usize,
}

/// What a sweep produced.
#[derive(Debug, Clone)]
pub struct TuneSummary {
    pub markdown: String,
    pub files: Vec<String>,
    pub points: Vec<crate::tune::Point>,
    pub recommendations: Vec<crate::tune::Recommendation>,
}

/// Why `scenario` does not run on the bench's backend, if it does not (its settings with the
/// command line's on top).
fn unsupported_on(
    bench: &Bench,
    scenario: &crate::scenario::Scenario,
    base: &crate::scenario::Base,
) -> Option<String> {
    let mut settings = scenario.settings(base);
    settings.extend(bench.extra.iter().cloned());
    scenario.unsupported_on(bench.backend, &settings)
}

/// Free bytes on the file system holding `dir` (`df`), if it can be read.
fn free_bytes(dir: &str) -> Option<f64> {
    let out = std::process::Command::new("df")
        .args(["-Pk", dir])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let free_kb: f64 = text
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(free_kb * 1024.0)
}

/// Why a backlog of `rows` cannot be written to the server behind `url` now, if it cannot: the
/// free space where the server keeps its data against about three times the rows' size (the
/// table, the mark's new row versions, WAL or redo) plus 2 GB.
async fn disk_shortfall(
    url: &str,
    backend: Backend,
    rows: u64,
    value_bytes: usize,
) -> Option<String> {
    let need = rows as f64 * (value_bytes as f64 + 150.0) * 3.0 + 2e9;
    let dir = crate::ground::server(backend).data_directory(url).await?;
    let free = free_bytes(&dir)?;
    (free < need).then(|| {
        format!(
            "{rows} rows need about {:.1} GB free for {} ({dir}); {:.1} GB are",
            need / 1e9,
            backend.name(),
            free / 1e9
        )
    })
}

/// `bench tune`.
///
/// Boxed, like every entry point the binary awaits: the future is compiled in this crate once,
/// not again in the binary (release builds share no generic code between crates).
pub fn tune(
    o: TuneOptions,
) -> futures::future::LocalBoxFuture<'static, Result<TuneSummary, BenchError>> {
    Box::pin(tune_inner(o))
}

async fn tune_inner(o: TuneOptions) -> Result<TuneSummary, BenchError> {
    let mut prepared = prepare(&o.run).await?;
    let restore = prepared.autovacuum.take();
    let outcome = tune_prepared(&o, prepared).await;
    if let Some(r) = restore {
        r.restore().await;
    }
    outcome
}

async fn tune_prepared(o: &TuneOptions, prepared: Prepared) -> Result<TuneSummary, BenchError> {
    let Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
        ..
    } = prepared;
    let scenario = file
        .scenario
        .get(&o.scenario)
        .ok_or_else(|| {
            bad(format!(
                "unknown scenario {}; `bench list` shows them",
                o.scenario
            ))
        })?
        .clone()
        .scaled(o.run.scale);
    if let Some(why) = unsupported_on(&bench, &scenario, &file.base) {
        return Err(bad(format!(
            "{} does not run on {}: {why}",
            o.scenario,
            bench.backend.name()
        )));
    }
    let dimensions = if o.sweeps.is_empty() {
        crate::tune::default_dimensions(o.quick)
    } else {
        o.sweeps
            .iter()
            .map(|s| crate::tune::Dimension::parse(s))
            .collect::<Result<_, _>>()?
    };
    let points = crate::tune::sweep(&bench, &o.scenario, &scenario, &dimensions, o.repeat).await?;
    for p in &points {
        append_json(&jsonl, p)?;
    }
    let recommendations = crate::tune::recommend(&points, o.p99_budget_ms);
    let mut files = vec![jsonl.display().to_string()];
    for dim in &dimensions {
        let mine: Vec<&crate::tune::Point> = points.iter().filter(|p| p.path == dim.path).collect();
        let x = |i: usize, p: &crate::tune::Point| p.value.parse::<f64>().unwrap_or(i as f64);
        let slug: String = dim
            .path
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        for (metric, unit, log, pick) in [
            (
                "delivered",
                "records/s",
                false,
                &(|p: &crate::tune::Point| Some(p.delivered_per_s))
                    as &dyn Fn(&crate::tune::Point) -> Option<f64>,
            ),
            ("p99 latency", "ms", true, &|p: &crate::tune::Point| {
                p.p99_ms
            }),
        ] {
            let series = [Series {
                name: metric.to_owned(),
                points: mine
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| Some((x(i, p), pick(p)?)))
                    .collect(),
            }];
            let path = o.run.out.join(format!(
                "{run_id}-tune-{slug}-{}.svg",
                if log { "p99" } else { "throughput" }
            ));
            let svg = line_chart(
                &format!("{}: {metric} by {}", o.scenario, dim.path),
                &dim.path,
                unit,
                &series,
                &Extras {
                    log_y: log,
                    ..Default::default()
                },
            );
            std::fs::write(&path, svg)
                .map_err(BenchError::io(format!("write {}", path.display())))?;
            files.push(path.display().to_string());
        }
    }
    let mut md = format!(
        "{}- scenario: {} ({})\n\n",
        crate::report::head(&provenance, &format!("Tuning sweep {run_id}")),
        o.scenario,
        scenario.description
    );
    md.push_str(&crate::tune::markdown(
        &points,
        &recommendations,
        o.p99_budget_ms,
    ));
    let md_path = o.run.out.join(format!("{run_id}-tune.md"));
    std::fs::write(&md_path, &md)
        .map_err(BenchError::io(format!("write {}", md_path.display())))?;
    files.insert(1, md_path.display().to_string());
    Ok(TuneSummary {
        markdown: md,
        files,
        points,
        recommendations,
    })
}

/// The mark batch the harvester drains a backlog with: `limits.mark_query_records` from the
/// settings, else the largest `"auto"` grows to.
fn effective_mark_batch(bench: &Bench) -> usize {
    bench
        .base
        .settings
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .chain(bench.extra.iter().cloned())
        .filter(|(k, _)| k == "limits.mark_query_records")
        .map(|(_, v)| v.trim_matches('"').parse::<usize>().ok())
        .next_back()
        .flatten()
        .unwrap_or(harvester::config::AUTO_BATCH_MAX)
}

/// Value bytes of the ceilings' records: the drain scenario's.
const CEILING_VALUE_BYTES: usize = 200;

async fn measure_ceilings(
    bench: &Bench,
    scale: f64,
    partitions: i32,
) -> Result<Ceilings, BenchError> {
    let ground = Ground::new(
        &bench.database_url,
        &bench.broker,
        partitions,
        8,
        harvester::store::OutboxMode::MarkPurge,
    )
    .await?;
    let rows = ((100_000.0 * scale) as u64).max(5_000);
    let on = match bench.backend {
        Backend::Postgres => String::new(),
        other => format!(", {}", other.name()),
    };
    eprintln!("== ceilings: DB-only mark+purge of {rows} rows, concurrently (best of mark batch {:?}{on})", crate::ceiling::MARK_BATCHES);
    let outcome = async {
        let (db, batch) = crate::ceiling::db_mark_purge(&ground, rows, CEILING_VALUE_BYTES).await?;
        eprintln!("   {:.0} rows/s (batch {batch})", db.per_second);
        eprintln!("== ceilings: DB-only batched DELETE alone of {rows} rows (best of batch x connections)");
        let delete_only = crate::ceiling::delete_only::delete_only(&ground, rows, CEILING_VALUE_BYTES).await?;
        eprintln!(
            "   {:.0} rows/s (batch {}, {} connections)",
            delete_only.best.per_second, delete_only.batch, delete_only.connections
        );
        eprintln!("== ceilings: producer-only, {rows} records");
        let producer = crate::ceiling::producer(
            bench.broker.bootstrap(),
            &ground.topic,
            rows,
            CEILING_VALUE_BYTES,
            Vec::new(),
        )
        .await?;
        eprintln!("   {:.0} records/s", producer.per_second);
        let kafka_producer = kafka_producer_ceiling(bench, rows, partitions).await;
        eprintln!("== ceilings: writers (4 writers, 10 rows/tx, closed loop, 3s)");
        let writers = crate::ceiling::writers(
            &ground,
            &workloads::WriterConfig::default(),
            Duration::from_secs(3),
        )
        .await?;
        eprintln!("   {:.0} records/s", writers.per_second);
        Ok::<_, BenchError>(Ceilings {
            db_mark_purge: Some(db),
            delete_only: Some(delete_only),
            producer: Some(producer),
            kafka_producer,
            writers: Some(writers),
            batch,
        })
    }
    .await;
    ground.drop_topics(&bench.broker).await;
    ground.drop_schema().await;
    outcome
}

/// Kafka's own ProducerPerformance on a real cluster (`None` on the mock, or when the tool
/// cannot run: said on stderr, and the report says it was not measured).
async fn kafka_producer_ceiling(
    bench: &Bench,
    rows: u64,
    partitions: i32,
) -> Option<crate::ceiling::kafka_perf::KafkaProducerPerf> {
    if bench.broker.embedded().is_some() {
        return None;
    }
    eprintln!(
        "== ceilings: Kafka's ProducerPerformance, {rows} records ({}, {partitions} partitions)",
        crate::ceiling::kafka_perf::PRODUCER_PROPS.join(" ")
    );
    match crate::ceiling::kafka_perf::measure(&bench.broker, rows, CEILING_VALUE_BYTES, partitions)
        .await
    {
        Ok(k) => {
            eprintln!(
                "   {:.0} records/s ({:.2} MB/s, avg latency {:.0} ms)",
                k.ceiling.per_second, k.mb_per_second, k.avg_latency_ms
            );
            Some(k)
        }
        Err(e) => {
            eprintln!("   not measured: {e}");
            None
        }
    }
}

fn write_plots(out: &Path, run_id: &str, runs: &[RunResult]) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = Vec::new();
    let mut write = |name: String, svg: String| -> Result<(), BenchError> {
        let path = out.join(name);
        std::fs::write(&path, svg).map_err(BenchError::io(format!("write {}", path.display())))?;
        files.push(path);
        Ok(())
    };
    let pct = |r: &RunResult| {
        r.latency_ms.map(|l| Series {
            name: r.scenario.clone(),
            points: vec![
                (0.5, l.p50),
                (0.9, l.p90),
                (0.99, l.p99),
                (0.999, l.p999),
                (1.0, l.max),
            ],
        })
    };
    let latency: Vec<Series> = runs.iter().filter_map(pct).collect();
    if !latency.is_empty() {
        write(
            format!("{run_id}-latency.svg"),
            line_chart(
                "Commit-to-receipt latency by percentile",
                "percentile (each further nine one step to the right)",
                "ms",
                &latency,
                &Extras {
                    x_axis: XAxis::Percentile,
                    log_y: true,
                    ..Default::default()
                },
            ),
        )?;
    }
    if let Some(series) = crate::capacity::rate_by_progress(runs) {
        write(
            format!("{run_id}-drain-rate.svg"),
            line_chart(
                "Drain rate over the drain, by backlog size (flat = the cost does not grow with the backlog)",
                "% of the backlog delivered",
                "records/s",
                &series,
                &Extras::default(),
            ),
        )?;
    }
    for r in runs {
        let slug: String = r
            .scenario
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let series = [Series {
            name: "received/s".into(),
            points: r.per_second.clone(),
        }];
        write(
            format!("{run_id}-{slug}-throughput.svg"),
            line_chart(
                &format!("{}: first deliveries per second", r.scenario),
                "seconds since harvesters started",
                "records/s",
                &series,
                &Extras {
                    markers: r.events.clone(),
                    spans: publish_gap(r).into_iter().collect(),
                    ..Default::default()
                },
            ),
        )?;
    }
    Ok(files)
}

/// A failover's publish gap on the run's timeline (seconds since the harvesters started): from
/// the last delivery before the new leader acquired to the first after it.
fn publish_gap(r: &RunResult) -> Option<Span> {
    let f = r.failover?;
    let new_leader = r.events.iter().find(|(l, _)| l == "new leader")?.1;
    let fault = new_leader - f.fault_to_acquired_ms / 1000.0;
    let to = fault + f.fault_to_first_publish_ms / 1000.0;
    Some(Span {
        label: format!("publish gap {:.2} s", f.gap_ms / 1000.0),
        from: to - f.gap_ms / 1000.0,
        to,
    })
}
