//! The warm-up on the real broker `scripts/services.sh up` started (KAFKA_BROKERS), end to end
//! with the real `reaper` binary and Postgres: the broker is warmed by drains until its CPU per
//! record stops falling, a topic per shape is created, led, written and read, the scenarios
//! share those topics and each verifies only its own records (none of the others', none of the
//! warm-up's), shapes given on the command line reach the backlog and the topic, and the warm
//! topics are gone when the run ends. A run given `--cold` says its figures are a cold start's.

use std::path::PathBuf;

use bench::cli::{run, RunOptions};
use bench::scenario::Shape;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use std::time::Duration;

fn reaper() -> PathBuf {
    // target/<profile>/deps/warm_kafka-<hash> -> target/<profile>/reaper.
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("reaper")
}

fn brokers() -> String {
    std::env::var("KAFKA_BROKERS")
        .expect("KAFKA_BROKERS names the real broker: run under scripts/with-services.sh")
}

fn options(scenarios: &[&str], file: Option<PathBuf>, shape: Shape, cold: bool) -> RunOptions {
    RunOptions {
        profile: String::new(),
        scenarios: scenarios.iter().map(|s| (*s).to_owned()).collect(),
        file,
        set: Vec::new(),
        scale: 0.1,
        brokers: Some(brokers()),
        embedded: false,
        database_url: None,
        reaper: Some(reaper()),
        out: std::env::temp_dir().join(testkit::names::unique("bench-warm")),
        ceilings: false,
        private_pg_port: 25433,
        autovacuum: bench::pg::AutovacuumMode::AsFound,
        target_rate: None,
        shape,
        cold,
    }
}

/// Topics of the broker whose name holds `part`.
fn topics_named(part: &str) -> Vec<String> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .create()
        .unwrap();
    let m = c.fetch_metadata(None, Duration::from_secs(10)).unwrap();
    m.topics()
        .iter()
        .map(|t| t.name().to_owned())
        .filter(|n| n.contains(part))
        .collect()
}

/// Two scenarios and a 2 x 2 sweep of keys and partitions on warm topics, each verified on
/// its own records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_share_warm_topics_and_each_reads_only_its_own_records() {
    testkit::init_tracing();
    let file = std::env::temp_dir()
        .join(testkit::names::unique("shapes"))
        .with_extension("toml");
    std::fs::write(
        &file,
        "[scenario.small-shapes]\nkind = \"drain\"\nbacklog = { rows = 20000, keys = 100, value_bytes = 100 }\n\
         keys_sweep = [100, 1000]\npartitions_sweep = [4, 16]\n",
    )
    .unwrap();
    let shape = Shape {
        key_skew: Some("zipf:1.1".parse().unwrap()),
        ..Shape::default()
    };
    let summary = run(options(
        &["drain", "steady", "small-shapes"],
        Some(file),
        shape,
        false,
    ))
    .await
    .unwrap_or_else(|e| panic!("the warm run failed: {e}"));
    println!("{}", summary.markdown);
    let warm = summary
        .provenance
        .warm_up
        .as_ref()
        .expect("a run on a real broker is warmed");
    let (listener, broker) = &warm.broker[0];
    assert_eq!(listener, "plaintext");
    assert!(
        broker.rounds.len() >= bench::warm::BROKER_RULE.min_rounds,
        "{} drains",
        broker.rounds.len()
    );
    assert!(broker.rounds.iter().all(|r| r.produce_broker_us.is_some()));
    // The ceilings are off: topics of 8 (drain, steady, the warm-up), 4 and 16 partitions.
    let mut warmed: Vec<i32> = warm.topics.iter().map(|t| t.need.partitions).collect();
    warmed.sort_unstable();
    assert_eq!(warmed, [4, 8, 16]);
    assert!(warm
        .topics
        .iter()
        .all(|t| t.warming.records() > 0 && t.warming.rounds.len() >= 4));
    assert!(summary
        .markdown
        .contains("## Warm-up (before anything was measured"));
    let names: Vec<&str> = summary.runs.iter().map(|r| r.scenario.as_str()).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    for r in &summary.runs {
        assert!(r.passed, "{}: {}", r.scenario, r.problems);
        assert_eq!(
            (r.correctness.lost, r.correctness.reordered),
            (0, 0),
            "{}",
            r.scenario
        );
        assert_eq!(r.correctness.delivered, r.committed, "{}", r.scenario);
        // On a shared warm topic every partition starts after what was written before, and
        // the verifier saw nothing of it.
        assert!(
            r.log.iter().all(|p| p.start > 0),
            "{}: {:?}",
            r.scenario,
            r.log
        );
        assert_eq!(r.log.iter().map(|p| p.evicted).sum::<u64>(), 0);
        assert!(r.batching.is_some_and(|b| b.requests > 0), "{}", r.scenario);
        assert!(
            r.per_record().is_some_and(|p| p.complete()),
            "{}",
            r.scenario
        );
    }
    let shaped: Vec<_> = summary
        .runs
        .iter()
        .filter(|r| r.scenario.starts_with("small-shapes/"))
        .collect();
    assert_eq!(shaped.len(), 4);
    for r in &shaped {
        let b = r.backlog.expect("a drain's backlog");
        // The command line's skew reached the backlog; the sweep set keys and partitions.
        assert_eq!(b.key_skew, "zipf:1.1".parse().unwrap());
        let label = format!(
            "small-shapes/{}-keys/{}-partitions",
            b.keys, r.topic.partitions
        );
        assert_eq!(r.scenario, label);
    }
    assert!(summary.markdown.contains("## Drains by shape"));
    assert!(summary.markdown.contains("### CPU per delivered record"));
    // This run's warm topics: others on the shared broker may be another run's (one killed
    // before it could clean up leaves its own).
    let ours: Vec<String> = warm.topics.iter().map(|t| t.name.clone()).collect();
    assert!(!ours.is_empty());
    let left: Vec<String> = topics_named("bench-warm")
        .into_iter()
        .filter(|t| ours.contains(t))
        .collect();
    assert!(
        left.is_empty(),
        "the warm topics are deleted when the run ends: {left:?} of {ours:?} remain"
    );
}

/// `--cold`: no warm-up, a topic of the scenario's own, and a report that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_run_says_its_figures_are_a_cold_start() {
    testkit::init_tracing();
    let summary = run(options(&["drain"], None, Shape::default(), true))
        .await
        .unwrap_or_else(|e| panic!("the cold run failed: {e}"));
    assert!(summary.provenance.warm_up.is_none());
    assert!(summary.provenance.cold);
    assert!(summary.markdown.contains("Not warmed (`--cold`)"));
    let r = &summary.runs[0];
    assert!(r.passed, "{}", r.problems);
    assert!(r.log.iter().all(|p| p.start == 0), "{:?}", r.log);
}

/// A topic transactional scenarios use is warmed by a transactional writer, whose every
/// partition ends with a commit marker: an offset no record carries. The read-back ends at
/// the high watermark all the same; a reader that counts records waits out its minute on the
/// marker and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactional_warm_up_reads_past_the_commit_markers() {
    testkit::init_tracing();
    let broker = testkit::Broker::discover().unwrap();
    assert!(
        broker.embedded().is_none(),
        "KAFKA_BROKERS names the real broker"
    );
    let topic = testkit::names::topic("warm-txn");
    broker.create_topic(&topic, 4).await.unwrap();
    let rule = bench::warm::Rule {
        round_records: 400,
        min_rounds: 2,
        max_rounds: 2,
        max_time: Duration::from_secs(30),
        tolerance: 0.1,
        window: 1,
    };
    let client = testkit::verify::ClientSettings::plaintext(broker.bootstrap());
    let warming = tokio::task::spawn_blocking(move || {
        bench::warm::load::warm(
            &client,
            &topic,
            4,
            100,
            bench::warm::Writer::Transactional,
            &rule,
            &|| None,
        )
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("the transactional warm-up failed: {e}"));
    assert_eq!(warming.rounds.len(), 2);
    assert_eq!(warming.records(), 800);
}
