//! What every command does before its scenarios: load and check the scenarios, pick the broker
//! and fit NELI's session to it, and record the provenance and the server's settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::secured::{SecuredKafka, ADMIN};
use testkit::verify::ClientSettings;
use testkit::Broker;
use workloads::Backend;

use super::options::{bad, load, selected, RunOptions};
use crate::report::append_json;
use crate::result::Provenance;
use crate::run::Bench;
use crate::scenario::ScenarioFile;
use crate::warm::TopicPool;
use crate::BenchError;

/// Everything a command needs before running scenarios.
pub(super) struct Prepared {
    pub(super) file: ScenarioFile,
    pub(super) bench: Bench,
    pub(super) provenance: Provenance,
    pub(super) run_id: String,
    pub(super) jsonl: PathBuf,
}

/// What the command needs, and the server's autovacuum as it was changed, to put back when the
/// command ends.
async fn prepare(o: &RunOptions) -> Result<(Prepared, Option<crate::ground::Restore>), BenchError> {
    let file = load(o.file.as_deref())?;
    if !o.scale.is_finite() || o.scale <= 0.0 {
        return Err(bad("--scale must be above 0"));
    }
    o.shape.validate().map_err(bad)?;
    let mut extra = Vec::new();
    for s in &o.set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| bad(format!("--set {s}: use PATH=VALUE")))?;
        extra.push((k.to_owned(), v.to_owned()));
    }
    let selected = selected(o, &file);
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
        topics: TopicPool::default(),
    };
    provenance.cold = o.cold;
    provenance.loop_ms.0 = Some(crate::calibrate::loop_ms());
    let prepared = Prepared {
        file,
        bench,
        provenance,
        run_id,
        jsonl,
    };
    Ok((prepared, autovacuum))
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

/// Warms the broker for the command (see [`super::warm`]) and records what that did.
async fn warm(o: &RunOptions, p: &mut Prepared) -> Result<(), BenchError> {
    if let Some(w) = super::warm::warm(o, &p.file, &mut p.bench).await? {
        append_json(&p.jsonl, &serde_json::json!({ "warm_up": w }))?;
        p.provenance.warm_up = Some(w);
    }
    Ok(())
}

/// Prepares a command, runs `body` on what it prepared, then puts the server's autovacuum back
/// as it was, whatever `body` returned.
pub(super) async fn prepared<T, F, Fut>(o: &RunOptions, body: F) -> Result<T, BenchError>
where
    F: FnOnce(Prepared) -> Fut,
    Fut: std::future::Future<Output = Result<T, BenchError>>,
{
    let (mut prepared, restore) = prepare(o).await?;
    let warmed = warm(o, &mut prepared).await;
    let pool = prepared.bench.topics.clone();
    let outcome = match warmed {
        Ok(()) => body(prepared).await,
        Err(e) => Err(e),
    };
    pool.delete().await;
    if let Some(r) = restore {
        r.restore().await;
    }
    outcome
}
