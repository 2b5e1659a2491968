//! Operations on real parts: `dashboards/` (the Grafana dashboard, the Prometheus config, the
//! alerting rules) against a real Prometheus scraping a real `reaper` under load.
//!
//! `it/meta/dashboards.rs` checks only names: that every metric the files use is defined in
//! `metrics::names` and exported. That cannot show a query selecting nothing (a wrong label, a
//! histogram without `_bucket`, a gauge only a leader exports), a rule that does not parse or
//! never fires, or a `for` that cannot elapse. So here:
//! - promtool checks the shipped config and rules and runs the rules' unit tests
//!   (`alerts.test.yml`);
//! - a Prometheus of the test's own (its own port and data dir, scrape and evaluation every
//!   second) scrapes a reaper while rows are written, loads `dashboards/alerts.yml` unchanged,
//!   and answers every query of the dashboard's panels and every rule's expression (turned into
//!   its `bool` form, so a healthy rule answers too) with at least one series: an empty answer
//!   is a dashboard bug; every rule's own expression is false while the reaper is healthy;
//! - the reaper's broker is stopped, and the rules that must fire (no leader, nothing published
//!   while rows wait, the oldest row too old) are seen firing through `/api/v1/alerts`, with
//!   their production `for`, within bounds derived from the rule, the reaper's lease and the
//!   intervals plus the load margin, and no sooner than their `for`.
//!
//! The broker is a private Kafka cluster ([`testkit::broker::PrivateKafka`]), never the shared
//! one; its JVM takes a core, so this is a binary of its own, in `scripts/test/test-run.py`'s
//! `private-kafka` group. Without `prometheus` and `promtool` (`scripts/services.sh tools`
//! installs Debian's package) the tests skip, or fail where services are required
//! (`testkit::skip`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::real::{node, world_on_private_cluster};
use common::reaper::Reaper;
use common::World;
use parking_lot::Mutex;
use serde_json::Value;
use testkit::broker::NodeAction;
use testkit::process::{Observed, Signal};
use testkit::{wait_for, wait_until, within};

/// Prometheus's scrape and evaluation interval here.
const INTERVAL: Duration = Duration::from_secs(1);
/// How long Prometheus may take to start serving: it opens an empty TSDB and reads two small
/// files (about a second here), plus the load margin.
const PROMETHEUS_START: Duration = within(Duration::from_secs(10));
/// Keys written per round, and the pause between rounds, of the load.
const LOAD_KEYS: usize = 10;
const LOAD_EVERY: Duration = Duration::from_millis(100);
/// The rules that must fire once the broker is gone. The delivery-failure ones need not: a
/// reaper that lost its leadership (within its lease, 1 s here) sends nothing more.
const MUST_FIRE: [&str; 3] = [
    "HarvesterNoLeader",
    "HarvesterProducerStuck",
    "HarvesterOldestRecordTooOld",
];

fn dashboards() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards")
}

/// `prometheus` and `promtool` on PATH.
struct Tools {
    prometheus: PathBuf,
    promtool: PathBuf,
}

impl Tools {
    /// Both tools, or the test skips (failing where services are required).
    fn find() -> Option<Tools> {
        let on_path = |name: &str| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        };
        match (on_path("prometheus"), on_path("promtool")) {
            (Some(prometheus), Some(promtool)) => Some(Tools {
                prometheus,
                promtool,
            }),
            _ => {
                testkit::skip::skip(
                    "prometheus or promtool is not installed; scripts/services.sh tools installs Debian's prometheus",
                );
                None
            }
        }
    }

    /// Runs `promtool args` and asserts it succeeded; its output.
    fn promtool(&self, args: &[&Path]) -> String {
        let out = Command::new(&self.promtool).args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
        text
    }
}

/// An alerting rule of `dashboards/alerts.yml`.
#[derive(Debug, Clone)]
struct Rule {
    name: String,
    expr: String,
    /// Its `for`: how long the expression must hold before the alert fires.
    hold: Duration,
}

/// A Prometheus duration (`30s`, `2m`).
fn duration(text: &str) -> Duration {
    humantime::parse_duration(text).unwrap_or_else(|e| panic!("not a duration: {text:?}: {e}"))
}

impl Rule {
    /// Every alerting rule of the rules file.
    fn all() -> Vec<Rule> {
        let text = std::fs::read_to_string(dashboards().join("alerts.yml")).unwrap();
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let mut rules = Vec::new();
        for group in doc["groups"].as_sequence().expect("a groups list") {
            for rule in group["rules"].as_sequence().expect("a rules list") {
                rules.push(Rule {
                    name: rule["alert"].as_str().expect("an alert name").to_owned(),
                    expr: rule["expr"].as_str().expect("an expr").to_owned(),
                    hold: rule["for"].as_str().map_or(Duration::ZERO, duration),
                });
            }
        }
        assert!(rules.len() >= MUST_FIRE.len(), "{rules:?}");
        rules
    }

    /// The expression with every comparison made a `bool` one: it answers 0 or 1 for each
    /// series the rule looks at, so a healthy rule's series can be seen (an `and` keeps its
    /// left side where the right side has a series, as the rule does).
    fn bool_form(&self) -> String {
        let comparisons = [">", "<", ">=", "<=", "==", "!="];
        let mut out = Vec::new();
        for token in self.expr.split_whitespace() {
            out.push(token);
            if comparisons.contains(&token) {
                out.push("bool");
            }
        }
        out.join(" ")
    }

    /// The longest range (`[2m]`) the expression reads.
    fn longest_range(&self) -> Duration {
        self.expr
            .split('[')
            .skip(1)
            .filter_map(|s| s.split_once(']'))
            .map(|(range, _)| duration(range))
            .max()
            .unwrap_or(Duration::ZERO)
    }

    /// The number the expression compares against last (`> 60`).
    fn threshold(&self) -> f64 {
        let last = self.expr.split_whitespace().last().unwrap();
        last.parse()
            .unwrap_or_else(|_| panic!("{}: no threshold at the end", self.name))
    }
}

/// Every query of the dashboard's panels: (panel and legend, expression as written).
fn dashboard_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(dashboards().join("harvester.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut queries = Vec::new();
    collect_queries(&doc["panels"], &mut queries);
    assert!(queries.len() >= 20, "{queries:?}");
    queries
}

fn collect_queries(panels: &Value, into: &mut Vec<(String, String)>) {
    for panel in panels.as_array().into_iter().flatten() {
        collect_queries(&panel["panels"], into);
        for target in panel["targets"].as_array().into_iter().flatten() {
            if let Some(expr) = target["expr"].as_str() {
                let title = panel["title"].as_str().unwrap_or("untitled");
                let legend = target["legendFormat"].as_str().unwrap_or("");
                into.push((format!("{title}: {legend}"), expr.to_owned()));
            }
        }
    }
}

/// What Grafana makes of `$__rate_interval` at [`INTERVAL`] scrapes: the larger of four scrapes
/// and the panel's interval plus a scrape, the former here.
fn rate_interval() -> Duration {
    INTERVAL * 4
}

/// A whole number of seconds as Prometheus writes it (`4s`).
fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// A dashboard query as Grafana sends it: `$__rate_interval` at this scrape interval, `$job`
/// the job scraping the reaper (what "All" selects here). Any other variable fails the test:
/// it would need a substitution of its own.
fn substitute(expr: &str, job: &str) -> String {
    let out = expr
        .replace("$__rate_interval", &seconds(rate_interval()))
        .replace("$__interval", &seconds(INTERVAL))
        .replace("${job}", job)
        .replace("$job", job);
    assert!(!out.contains('$'), "an unknown template variable in {expr}");
    out
}

/// A free port on loopback now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Prometheus of the test's own; killed, and its directory removed, on drop.
struct Prometheus {
    addr: SocketAddr,
    dir: PathBuf,
    job: String,
    proc: Observed,
}

impl Prometheus {
    /// `dashboards/prometheus.yml` pointed at `target`, scraping and evaluating every
    /// [`INTERVAL`], with `dashboards/alerts.yml` as it is; checked by promtool, then run.
    fn start(tools: &Tools, target: SocketAddr) -> Prometheus {
        let dir = std::env::temp_dir().join(testkit::names::unique("prometheus"));
        std::fs::create_dir_all(&dir).unwrap();
        let text = std::fs::read_to_string(dashboards().join("prometheus.yml")).unwrap();
        let mut config: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        config["global"]["scrape_interval"] = seconds(INTERVAL).into();
        config["global"]["evaluation_interval"] = seconds(INTERVAL).into();
        let rules = dashboards().join("alerts.yml").canonicalize().unwrap();
        config["rule_files"] = vec![rules.to_str().unwrap().to_owned()].into();
        let scrape = &mut config["scrape_configs"][0];
        let job = scrape["job_name"].as_str().expect("a job name").to_owned();
        scrape["static_configs"] =
            serde_yaml::from_str(&format!("[{{targets: [\"{target}\"]}}]")).unwrap();
        let file = dir.join("prometheus.yml");
        std::fs::write(&file, serde_yaml::to_string(&config).unwrap()).unwrap();
        tools.promtool(&[Path::new("check"), Path::new("config"), &file]);
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut cmd = Command::new(&tools.prometheus);
        cmd.arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn");
        let proc = Observed::spawn("prometheus", cmd).unwrap();
        Prometheus {
            addr,
            dir,
            job,
            proc,
        }
    }

    /// Waits until it serves, within [`PROMETHEUS_START`]; one that exits (its port taken
    /// meanwhile, a config it refuses) fails the test with its status.
    async fn ready(&mut self) {
        let started = Instant::now();
        while self.get("/-/ready").await.0 != 200 {
            if let Some(status) = self.proc.try_exit() {
                panic!("prometheus exited ({status}) before serving (its stderr is above)");
            }
            assert!(
                started.elapsed() < PROMETHEUS_START,
                "prometheus is not ready after {PROMETHEUS_START:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `GET path` (status, body), or status 0 while it does not answer.
    async fn get(&self, path: &str) -> (u16, String) {
        let (addr, path) = (self.addr, path.to_owned());
        tokio::task::spawn_blocking(move || testkit::http::get(addr, &path))
            .await
            .unwrap()
            .unwrap_or((0, String::new()))
    }

    /// The `data` of an API answer (`/api/v1/...`), which must be a success.
    async fn api(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        let answer: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {status}, not JSON ({e}): {body}"));
        assert_eq!(answer["status"], "success", "GET {path}: {status} {body}");
        answer["data"].clone()
    }

    /// The series an instant query answers.
    async fn query(&self, query: &str) -> Vec<Value> {
        let encoded: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("query", query)
            .finish();
        let data = self.api(&format!("/api/v1/query?{encoded}")).await;
        assert_eq!(data["resultType"], "vector", "{query}: {data}");
        data["result"].as_array().cloned().unwrap_or_default()
    }

    /// Alert names by state (`pending`, `firing`).
    async fn alerts(&self) -> BTreeMap<String, String> {
        let data = self.api("/api/v1/alerts").await;
        let mut states = BTreeMap::new();
        for alert in data["alerts"].as_array().into_iter().flatten() {
            let name = alert["labels"]["alertname"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            let state = alert["state"].as_str().unwrap_or("").to_owned();
            let kept = states.entry(name).or_insert_with(String::new);
            if *kept != "firing" {
                *kept = state;
            }
        }
        states
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // Gone before its directory is, so that it writes nothing more there.
        let _ = self.proc.signal(Signal::Kill);
        self.proc.wait_exit(Duration::from_secs(10));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Rows written to the outbox until stopped: `LOAD_KEYS` keys a round, a round every
/// `LOAD_EVERY` (the world's writer, as an application would commit them).
struct Load {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Load {
    fn start(world: Arc<World>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move {
            let mut pace = tokio::time::interval(LOAD_EVERY);
            let mut seq = 0;
            while !stopped.load(Ordering::Relaxed) {
                pace.tick().await;
                world.write_round("k", LOAD_KEYS, seq).await;
                seq += 1;
            }
            seq * LOAD_KEYS as u64
        });
        Load { stop, task }
    }

    /// Stops it; the rows it wrote.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// promtool accepts the shipped config (which loads the rules) and the rules, and the rules'
/// unit tests pass: each rule fires on a synthetic failing series and stays silent on healthy
/// ones (`dashboards/alerts.test.yml`).
#[test]
fn promtool_accepts_the_config_and_rules_and_their_unit_tests_pass() {
    let Some(tools) = Tools::find() else { return };
    let dir = dashboards();
    let config = tools.promtool(&[
        Path::new("check"),
        Path::new("config"),
        &dir.join("prometheus.yml"),
    ]);
    assert!(config.contains("1 rule files found"), "{config}");
    let rules = tools.promtool(&[
        Path::new("check"),
        Path::new("rules"),
        &dir.join("alerts.yml"),
    ]);
    let count = Rule::all().len();
    assert!(rules.contains(&format!("{count} rules found")), "{rules}");
    let tests = tools.promtool(&[
        Path::new("test"),
        Path::new("rules"),
        &dir.join("alerts.test.yml"),
    ]);
    assert!(tests.contains("SUCCESS"), "{tests}");
}

/// Waits until every query answers at least one series; the ones still empty at the bound
/// fail the test, named.
async fn every_query_answers(prom: &Prometheus, queries: &[(String, String)], bound: Duration) {
    let waiting = Mutex::new(queries.to_vec());
    let answered = wait_for("every query to answer a series", bound, || async {
        let pending = waiting.lock().clone();
        let mut still = Vec::new();
        for (what, query) in pending {
            if prom.query(&query).await.is_empty() {
                still.push((what, query));
            }
        }
        let done = still.is_empty();
        *waiting.lock() = still;
        done
    })
    .await;
    let empty = waiting.lock().clone();
    assert!(
        answered.is_ok() && empty.is_empty(),
        "{} of {} queries answer no series after {bound:?} (a dashboard or rule bug):\n{}",
        empty.len(),
        queries.len(),
        empty
            .iter()
            .map(|(what, q)| format!("  {what}: {q}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Whether every rule of `names` is loaded (and nothing else), and has been evaluated without
/// an error.
async fn rules_evaluated(prom: &Prometheus, names: &BTreeSet<&str>) -> bool {
    let data = prom.api("/api/v1/rules").await;
    let loaded: Vec<&Value> = data["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().into_iter().flatten())
        .collect();
    let ok: BTreeSet<&str> = loaded
        .iter()
        .filter(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
        .filter_map(|r| r["name"].as_str())
        .collect();
    ok == *names && loaded.len() == names.len()
}

/// Every rule is loaded and evaluates without an error within `bound`.
async fn rules_evaluate(prom: &Prometheus, rules: &[Rule], bound: Duration) {
    let names: BTreeSet<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    let evaluated = wait_for("every rule evaluated without error", bound, || {
        rules_evaluated(prom, &names)
    })
    .await;
    if evaluated.is_err() {
        panic!(
            "the rules are not all loaded and evaluated: {}",
            prom.api("/api/v1/rules").await
        );
    }
}

/// The reaper has published, seen on its own endpoint.
async fn publishes(reaper: &Reaper, bound: Duration) {
    wait_for("the reaper publishes the load", bound, || async {
        let (_, text) = reaper.get("/metrics").await;
        testkit::http::metric(&text, harvester::metrics::names::PUBLISHED).unwrap_or(0.0) > 0.0
    })
    .await
    .unwrap();
}

/// The healthy part: the target is up, every dashboard query and every rule's series answer,
/// the dashboard's `$job` variable finds the job, and no rule's condition holds.
async fn healthy_reaper_answers_everything(prom: &mut Prometheus, rules: &[Rule]) {
    prom.ready().await;
    // The first scrape comes within an interval, and takes at most another (its timeout).
    wait_for(
        "the reaper's target is up",
        within(INTERVAL * 2),
        || async {
            let data = prom.api("/api/v1/targets").await;
            data["activeTargets"]
                .as_array()
                .is_some_and(|t| t.len() == 1 && t[0]["health"] == "up")
        },
    )
    .await
    .unwrap();
    // The variable `job` is `label_values(harvester_up, job)`.
    let jobs = prom.query("count by (job) (harvester_up)").await;
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert_eq!(jobs[0]["metric"]["job"], prom.job.as_str());
    let mut queries: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .map(|(what, q)| (what, substitute(&q, &prom.job)))
        .collect();
    queries.extend(
        rules
            .iter()
            .map(|r| (format!("rule {}", r.name), r.bool_form())),
    );
    // A rate needs two scrapes inside its range (`$__rate_interval` at most), then a scrape
    // and an evaluation more; plus the load margin.
    let answers = within(rate_interval() + INTERVAL * 2);
    every_query_answers(prom, &queries, answers).await;
    // The control: a query that selects nothing answers no series here, so the answers above
    // are data, not an API that always answers something.
    let control = format!(
        "{}{{job=\"not-{}\"}}",
        harvester::metrics::names::UP,
        prom.job
    );
    assert_eq!(prom.query(&control).await, Vec::<Value>::new(), "{control}");
    rules_evaluate(prom, rules, within(INTERVAL * 2)).await;
    for rule in rules {
        let now = prom.query(&rule.expr).await;
        assert!(
            now.is_empty(),
            "{} holds on a healthy reaper: {now:?}\n{}",
            rule.name,
            rule.expr
        );
    }
    println!(
        "{} dashboard and rule queries answered; every rule silent on the healthy reaper",
        queries.len()
    );
}

/// When each rule that must fire may at the latest, counted from the broker's stop: the time
/// its condition takes to become true, then its `for`, then a scrape and an evaluation, plus
/// the load margin.
fn fire_bound(rule: &Rule, config: &harvester::Config) -> Duration {
    let condition = match rule.name.as_str() {
        // Leadership lapses within the lease (no own heartbeat is read back).
        "HarvesterNoLeader" => config.leader.lease(),
        // The last acknowledgement, before the stop, leaves the range.
        "HarvesterProducerStuck" => rule.longest_range(),
        // The oldest row waiting at the stop was younger than a second (the healthy check).
        "HarvesterOldestRecordTooOld" => Duration::from_secs_f64(rule.threshold()),
        other => panic!("no bound for {other}"),
    };
    within(condition + rule.hold + INTERVAL * 2)
}

/// Polls the alerts until every rule of `must` fires; when each was first seen firing,
/// counted from `stopped`. A rule that does not by its bound fails the test, with every
/// alert's state.
async fn fired(
    prom: &Prometheus,
    must: &[(Rule, Duration)],
    stopped: Instant,
) -> BTreeMap<String, Duration> {
    let deadline = stopped + must.iter().map(|(_, b)| *b).max().unwrap();
    let seen = Mutex::new(BTreeMap::new());
    let last = Mutex::new(BTreeMap::new());
    let all = wait_until("the rules fire", deadline, || async {
        let states = prom.alerts().await;
        let mut seen = seen.lock();
        for (rule, _) in must {
            if states.get(&rule.name).is_some_and(|s| s == "firing") {
                seen.entry(rule.name.clone()).or_insert(stopped.elapsed());
            }
        }
        *last.lock() = states;
        seen.len() == must.len()
    })
    .await;
    let seen = seen.into_inner();
    assert!(
        all.is_ok(),
        "not every rule fired by its bound after the broker stopped: fired {seen:?}, alerts now {:?}",
        last.lock()
    );
    seen
}

/// The live part. Stopping the broker (a private one) while rows are written must fire the
/// rules for no leader, nothing published while rows wait, and the oldest row too old: each
/// by its bound and no sooner than its `for` (which is the production one: the rules file is
/// loaded as it is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_answers_every_dashboard_query_and_fires_the_rules_when_kafka_stops() {
    let Some(tools) = Tools::find() else { return };
    let started = Instant::now();
    let rules = Rule::all();
    let (cluster, world) = world_on_private_cluster(1, "hvops", 4).await;
    let world = Arc::new(world);
    let file = world.reaper_config(|_| {});
    let reaper = Reaper::spawn("ops", &file).await;
    wait_for("the reaper leads", world.first_lead(), || async {
        reaper.is_leader().await
    })
    .await
    .unwrap();
    let load = Load::start(Arc::clone(&world));
    publishes(&reaper, world.publishing()).await;
    let mut prom = Prometheus::start(&tools, reaper.http);
    healthy_reaper_answers_everything(&mut prom, &rules).await;

    let config = world.config();
    let must: Vec<(Rule, Duration)> = MUST_FIRE
        .iter()
        .map(|name| {
            let rule = rules.iter().find(|r| r.name == *name).unwrap().clone();
            let bound = fire_bound(&rule, &config);
            (rule, bound)
        })
        .collect();
    // From the moment the stop begins: the leader can lapse while the node is still shutting
    // down, so an instant taken after the stop returns would make a rule seem to fire early.
    let stopped = Instant::now();
    node(&cluster, 1, NodeAction::Stop).await;
    let seen = fired(&prom, &must, stopped).await;
    let states = prom.alerts().await;
    let written = load.stop().await;
    for (rule, bound) in &must {
        let at = seen[&rule.name];
        println!(
            "{} fired {at:.1?} after the broker stopped (for {:?}, bound {bound:?})",
            rule.name, rule.hold
        );
        assert!(
            at >= rule.hold,
            "{} fired {at:?} after the stop, sooner than its for ({:?})",
            rule.name,
            rule.hold
        );
    }
    println!(
        "alerts at the end: {states:?}; {written} rows written; {:.0?} in all",
        started.elapsed()
    );
}
