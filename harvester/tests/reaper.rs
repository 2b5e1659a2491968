//! The real `reaper` binary against real Postgres and the embedded broker: it publishes what a
//! separate writer commits (on every database backend, from a config file naming the database by
//! URL), stops gracefully on SIGTERM, exposes `/leader` on exactly one of two instances, and
//! refuses bad configuration naming the field.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::reaper::{run_to_end, stop_bound, Reaper, TempFile};
use common::{Backend, World};
use testkit::http::metric;
use testkit::process::Signal;
use testkit::wait_for;

async fn leader_of<'a>(reapers: &'a [&'a Reaper]) -> Vec<usize> {
    let mut leading = Vec::new();
    for (i, r) in reapers.iter().enumerate() {
        if r.is_leader().await {
            leading.push(i);
        }
    }
    leading
}

on_every_backend!(publishes_a_separate_writers_rows_and_reports_them);

async fn publishes_a_separate_writers_rows_and_reports_them(backend: Backend) {
    let world = Arc::new(World::on(backend, "rpub", 4).await);
    world.migrate().await;
    let config = world.reaper_config(|_| {});
    let mut reaper = Reaper::spawn("r", &config).await;
    assert_eq!(reaper.get("/healthz").await.0, 200);
    wait_for("the reaper leads", world.first_lead(), || async {
        reaper.is_leader().await
    })
    .await
    .unwrap();
    // The writer is this test process; the reaper is another.
    world.write(30, 20, 7).await;
    let report = world.verify(Duration::from_secs(60)).await;
    report.assert_correct();
    assert_eq!(report.delivered, 600);
    world.drained().await;
    let (status, ready) = reaper.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    let (_, text) = reaper.get("/metrics").await;
    let published = metric(&text, "harvester_records_published_total").unwrap();
    let purged = metric(&text, "harvester_records_purged_total").unwrap();
    println!("{backend:?}, metrics after 600 records: published {published}, purged {purged}");
    assert!(published >= 600.0 && purged >= 600.0, "{text}");
    assert_eq!(metric(&text, "harvester_leader"), Some(1.0));
    assert_eq!(metric(&text, "harvester_backlog_records"), Some(0.0));
    assert!(metric(&text, "harvester_publish_duration_seconds_count").unwrap() >= 600.0);
    // Every record went through each stage once (at least: a re-mark may take a row again).
    for stage in [
        "harvester_commit_to_marked_seconds",
        "harvester_marked_to_sent_seconds",
        "harvester_acked_to_purged_seconds",
    ] {
        let count = metric(&text, &format!("{stage}_count")).unwrap();
        let sum = metric(&text, &format!("{stage}_sum")).unwrap();
        assert!(
            count >= 600.0 && sum > 0.0,
            "{stage}: {count} observations, sum {sum}"
        );
    }
    reaper.proc.signal(Signal::Term).unwrap();
    let exit = reaper
        .proc
        .wait_exit(testkit::within(stop_bound(&world.config())))
        .expect("it exits");
    assert!(
        exit.success(),
        "{backend:?}: a graceful stop exits 0: {exit}"
    );
}

#[tokio::test]
async fn sigterm_mid_stream_exits_zero_within_its_bound_and_a_restart_loses_nothing() {
    let world = Arc::new(World::new("rterm", 4).await);
    world.migrate().await;
    let config = world.reaper_config(|l| {
        l.max_in_flight_records = 200.into();
        l.mark_query_records = 50.into();
    });
    let mut a = Reaper::spawn("a", &config).await;
    wait_for("a leads", world.first_lead(), || async {
        a.is_leader().await
    })
    .await
    .unwrap();
    let writer = {
        let world = Arc::clone(&world);
        tokio::spawn(async move {
            for seq in 0..120 {
                world.write_round("k", 30, seq).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    // Mid-stream: once the reaper has published some of what the writer is still writing.
    let published = parking_lot::Mutex::new(0.0);
    wait_for("a publishes", world.first_lead(), || async {
        let (_, text) = a.get("/metrics").await;
        *published.lock() = metric(&text, "harvester_records_published_total").unwrap_or(0.0);
        *published.lock() > 0.0
    })
    .await
    .unwrap();
    let published = published.into_inner();
    let signalled = Instant::now();
    a.proc.signal(Signal::Term).unwrap();
    // The reaper keeps its own bound (exiting 3, not 0, beyond it); the test waits that long
    // plus the load margin.
    let bound = stop_bound(&world.config());
    let status = a.proc.wait_exit(testkit::within(bound)).expect("a exits");
    let took = signalled.elapsed();
    println!("SIGTERM after {published} published: exit {status} after {took:?} (bound {bound:?})");
    assert_eq!(
        status.code(),
        Some(0),
        "a graceful stop exits 0, within its bound"
    );
    writer.await.unwrap();
    assert!(
        world.outbox_rows().await > 0,
        "rows were left for the restart"
    );
    let b = Reaper::spawn("b", &config).await;
    let report = world.verify(Duration::from_secs(120)).await;
    println!("after restart: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 30 * 120);
    b.proc.signal(Signal::Term).unwrap();
}

#[tokio::test]
async fn leader_probe_is_200_on_exactly_one_and_moves_on_sigterm() {
    let world = World::new("rlead", 1).await;
    world.migrate().await;
    let config = world.reaper_config(|_| {});
    let mut a = Reaper::spawn("a", &config).await;
    let mut b = Reaper::spawn("b", &config).await;
    wait_for("one leads", world.first_lead(), || async {
        leader_of(&[&a, &b]).await.len() == 1
    })
    .await
    .unwrap();
    // Both up (their endpoints answer), one leading: through a succession, the other had its
    // chance to take a lapsed lead.
    testkit::assert_holds_for(
        "exactly one /leader is 200",
        world.config().leader.succession(),
        Duration::from_millis(200),
        || async { leader_of(&[&a, &b]).await.len() == 1 },
    )
    .await;
    let first = leader_of(&[&a, &b]).await[0];
    let (old, new) = if first == 0 {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    let signalled = Instant::now();
    old.proc.signal(Signal::Term).unwrap();
    wait_for("the other leads", world.failover(), || async {
        new.is_leader().await
    })
    .await
    .unwrap();
    println!("/leader moved {:?} after SIGTERM", signalled.elapsed());
    assert_eq!(
        old.proc
            .wait_exit(testkit::within(stop_bound(&world.config())))
            .unwrap()
            .code(),
        Some(0)
    );
    let (_, text) = new.get("/metrics").await;
    assert_eq!(metric(&text, "harvester_leader"), Some(1.0));
    assert!(
        text.contains("harvester_leader_term_info{term=\""),
        "{text}"
    );
}

#[tokio::test]
async fn a_second_signal_exits_at_once_with_130() {
    let world = World::new("rsig2", 1).await;
    world.migrate().await;
    let config = world.reaper_config(|_| {});
    let mut r = Reaper::spawn("r", &config).await;
    wait_for("it leads", world.first_lead(), || async {
        r.is_leader().await
    })
    .await
    .unwrap();
    // Further signals land while the first one's drain and group leave are under way: tokio
    // folds signals that arrive before the handler runs, so one is sent at every poll until it
    // exits (a graceful stop takes a group leave, far longer than a poll).
    let first = Instant::now();
    r.proc.signal(Signal::Term).unwrap();
    let deadline = first + testkit::within(stop_bound(&world.config()));
    let status = loop {
        if let Some(status) = r.proc.try_exit() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "running {:?} after",
            first.elapsed()
        );
        let _ = r.proc.signal(Signal::Term);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!("second signal: {status} after {:?}", first.elapsed());
    assert_eq!(status.code(), Some(130), "{status}");
}

/// `--set` pairs that make the reaper elect with `kind` on the shared server, at a 3 s TTL, in
/// a namespace of its own.
fn elector_args(kind: &str, ns: &str) -> Vec<String> {
    let ns: String = ns
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let sets = match kind {
        "nats_kv" => vec![
            format!("leader.url={}", testkit::coord::nats_url()),
            format!("leader.bucket={ns}"),
            "leader.ttl=3s".into(),
            "leader.campaign_interval=200ms".into(),
        ],
        "zookeeper" => vec![
            format!("leader.servers=[\"{}\"]", testkit::coord::zookeeper_addr()),
            format!("leader.path=/reaper/{ns}"),
            "leader.session_timeout=3s".into(),
        ],
        "etcd" => vec![
            format!("leader.endpoints=[\"{}\"]", testkit::coord::etcd_endpoint()),
            format!("leader.prefix=/reaper/{ns}"),
            "leader.ttl=3s".into(),
        ],
        other => panic!("no settings for {other}"),
    };
    std::iter::once(format!("leader.kind={kind}"))
        .chain(sets)
        .flat_map(|s| ["--set".to_owned(), s])
        .collect()
}

/// The reaper with each elector beyond NELI: it leads, publishes a separate writer's rows,
/// reports leadership on `/leader` and in the metrics, and `check-config` accepts the kind.
#[tokio::test]
async fn every_elector_kind_leads_publishes_and_reports() {
    for kind in ["nats_kv", "zookeeper", "etcd"] {
        let world = World::new(&format!("rk{}", &kind[..2]), 2).await;
        world.migrate().await;
        let config = world.reaper_config(|_| {});
        let extra = elector_args(kind, &world.group);
        let mut check = vec!["check-config", "--config", config.path()];
        check.extend(extra.iter().map(String::as_str));
        let (code, out, stderr) = run_to_end(&check);
        assert_eq!(code, 0, "{kind}: {stderr}");
        assert!(out.contains(&format!("kind = \"{kind}\"")), "{kind}: {out}");
        let effective: harvester::Config = toml::from_str(&out).expect("the effective config");
        let started = Instant::now();
        let mut reaper = Reaper::spawn_with(kind, &config, &extra).await;
        // A free election: at most a succession (NATS KV's stand-down included).
        let succession = effective.leader.succession();
        wait_for("the reaper leads", testkit::within(succession), || async {
            reaper.is_leader().await
        })
        .await
        .unwrap();
        let led_after = started.elapsed();
        world.write(10, 10, 3).await;
        let report = world.verify(Duration::from_secs(60)).await;
        report.assert_correct();
        assert_eq!(report.delivered, 100, "{kind}");
        let (_, text) = reaper.get("/metrics").await;
        println!(
            "{kind}: led {led_after:?} after spawn; delivered {}; harvester_leader {:?}",
            report.delivered,
            metric(&text, "harvester_leader")
        );
        assert_eq!(metric(&text, "harvester_leader"), Some(1.0), "{kind}");
        assert!(
            text.contains("harvester_leader_term_info{term=\""),
            "{kind}: {text}"
        );
        reaper.proc.signal(Signal::Term).unwrap();
        assert_eq!(
            reaper
                .proc
                .wait_exit(testkit::within(stop_bound(&effective)))
                .unwrap()
                .code(),
            Some(0),
            "{kind}"
        );
    }
}

fn config_file(name: &str, text: &str) -> TempFile {
    TempFile::write(&format!("{}-{name}", testkit::names::unique("bad")), text)
}

#[test]
fn bad_config_exits_non_zero_naming_the_field() {
    let cases = [
        (
            "unknown.toml",
            "[limits]\nmax_inflight = 5\n",
            "max_inflight",
        ),
        (
            "duration.toml",
            "[limits]\ndrain_timeout = \"soon\"\n",
            "drain_timeout",
        ),
        (
            "forced.toml",
            "[kafka]\n\"bootstrap.servers\" = \"b:9092\"\n\"enable.idempotence\" = \"false\"\n",
            "kafka.\"enable.idempotence\"",
        ),
        (
            "zookeeper-session.toml",
            "[leader]\nkind = \"zookeeper\"\nsession_timeout = \"100ms\"\n",
            "leader.session_timeout",
        ),
        (
            "zookeeper-neli-field.toml",
            "[leader]\nkind = \"zookeeper\"\nheartbeat_timeout = \"1s\"\n",
            "heartbeat_timeout",
        ),
        (
            "nats-ttl.toml",
            "[leader]\nkind = \"nats_kv\"\nttl = \"0s\"\n",
            "leader.ttl",
        ),
        (
            "etcd-endpoints.toml",
            "[leader]\nkind = \"etcd\"\nendpoints = []\n",
            "leader.endpoints",
        ),
        ("unknown-kind.toml", "[leader]\nkind = \"raft\"\n", "raft"),
        (
            "forced-neli.yaml",
            "kafka:\n  bootstrap.servers: b:9092\n  session.timeout.ms: \"45000\"\n",
            "session.timeout.ms",
        ),
    ];
    for (name, text, field) in cases {
        let file = config_file(name, text);
        for args in [
            vec!["check-config", "--config", file.path()],
            vec!["--config", file.path()],
        ] {
            let (code, _, stderr) = run_to_end(&args);
            assert_eq!(code, 2, "{name} {args:?}: {stderr}");
            assert!(
                stderr.contains(field),
                "{name}: stderr does not name {field}: {stderr}"
            );
        }
    }
    let (code, _, stderr) = run_to_end(&["check-config", "--set", "limits.send_buffer=lots"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("limits.send_buffer"), "{stderr}");
}

#[test]
fn check_config_prints_the_effective_config_redacted_and_reads_goharvest_yaml() {
    let file = config_file(
        "goharvest.yaml",
        r#"
harvest:
  baseKafkaConfig:
    bootstrap.servers: kafka-1:9092
    sasl.password: hunter2
  producerKafkaConfig:
    compression.type: lz4
    delivery.timeout.ms: 10000
  leaderTopic: billing-neli
  leaderGroupID: billing
  dataSource: host=db port=5432 user=app password=s3cret dbname=orders sslmode=disable
  outboxTable: billing.outbox
  limits:
    minPollInterval: 100ms
    heartbeatTimeout: 5s
    maxInFlightRecords: 2000
    minMetricsInterval: 5s
    sendConcurrency: 4
    sendBuffer: 10
logging:
  level: Debug
"#,
    );
    let (code, out, stderr) = run_to_end(&[
        "check-config",
        "--config",
        file.path(),
        "--set",
        "limits.mark_query_records=200",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let printed: harvester::Config = toml::from_str(&out).unwrap();
    assert_eq!(printed.kafka.get("bootstrap.servers"), Some("kafka-1:9092"));
    assert_eq!(printed.producer_kafka.get("compression.type"), Some("lz4"));
    assert_eq!(
        printed.producer_kafka.get("delivery.timeout.ms"),
        Some("10000")
    );
    assert_eq!(printed.kafka.get("sasl.password"), Some("<redacted>"));
    assert_eq!(
        printed.leader.neli().unwrap().group_id.as_deref(),
        Some("billing")
    );
    assert_eq!(
        printed.leader.neli().unwrap().topic.as_deref(),
        Some("billing-neli")
    );
    assert_eq!(
        printed.database.url,
        "postgres://app:<redacted>@db:5432/orders?sslmode=disable"
    );
    assert_eq!(printed.outbox.shape, harvester::outbox::Shape::Goharvest);
    assert_eq!(
        printed.outbox.table,
        harvester::outbox::TableName::parse("billing.outbox").unwrap()
    );
    assert_eq!(printed.limits.max_in_flight_records, 2000.into());
    assert_eq!(printed.limits.send_concurrency, 4.into());
    assert_eq!(printed.limits.mark_query_records, 200.into());
    assert_eq!(printed.logging.level, "debug");
    assert!(!out.contains("hunter2") && !out.contains("s3cret"), "{out}");
}

/// An independent reader: what the reaper published is read back by Kafka's own Java console
/// consumer (the broker's jars), not by our verifier: every record once, its key, value and
/// headers as written, each key on one partition, and each key's records in order there.
#[tokio::test]
async fn the_java_console_consumer_reads_what_the_reaper_published() {
    use harvester::outbox::StashRecord;
    use std::collections::HashMap;
    use testkit::envelope;

    let world = Arc::new(World::new("rjava", 4).await);
    assert!(
        !world.broker.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    world.migrate().await;
    let mut reaper = Reaper::spawn("r", &world.reaper_config(|_| {})).await;
    let (keys, per_key) = (12usize, 25u64);
    for seq in 0..per_key {
        let records: Vec<_> = (0..keys)
            .map(|k| {
                let key = format!("key-{k}");
                let mut r = StashRecord::new(&world.topic, key.clone(), format!("{key}#{seq}"));
                for (name, value) in envelope::headers(&world.run, seq) {
                    r = r.header(name, value);
                }
                r
            })
            .collect();
        world.stash(&records).await;
    }
    world.drained().await;
    let (bootstrap, topic) = (world.broker.bootstrap().to_owned(), world.topic.clone());
    let total = keys * per_key as usize;
    let read = tokio::task::spawn_blocking(move || {
        // Published before the outbox drained: what remains is the JVM's start and a read.
        testkit::broker::console::read_all(&bootstrap, &topic, total, Duration::from_secs(30))
    })
    .await
    .unwrap()
    .unwrap();
    reaper.proc.signal(Signal::Term).unwrap();
    reaper
        .proc
        .wait_exit(testkit::within(stop_bound(&world.config())))
        .expect("it exits");
    assert_eq!(read.len(), total, "every record once: {read:?}");
    let mut by_partition: Vec<_> = read.iter().collect();
    by_partition.sort_by_key(|r| (r.partition, r.offset));
    let mut next: HashMap<&str, (i32, u64)> = HashMap::new();
    for r in by_partition {
        assert_eq!(
            r.header(envelope::RUN_HEADER),
            Some(world.run.as_str()),
            "{r:?}"
        );
        let seq: u64 = r.header(envelope::SEQ_HEADER).unwrap().parse().unwrap();
        assert_eq!(r.value, format!("{}#{seq}", r.key), "{r:?}");
        let (partition, expected) = next.entry(r.key.as_str()).or_insert((r.partition, 0));
        assert_eq!(
            *partition, r.partition,
            "a key stays on one partition: {r:?}"
        );
        assert_eq!(seq, *expected, "each key in order, once: {r:?}");
        *expected += 1;
    }
    assert_eq!(next.len(), keys);
    assert!(next.values().all(|(_, n)| *n == per_key));
    println!(
        "the Java console consumer read {total} records of {keys} keys over {} partitions, in order",
        next.values().map(|(p, _)| p).collect::<std::collections::BTreeSet<_>>().len()
    );
}

/// A NELI session (3 x heartbeat_timeout) below the cluster's `group.min.session.timeout.ms` is
/// refused by the broker; the reaper exits 2 (bad configuration) naming the setting and both
/// values instead of retrying the join for ever. The test broker's minimum is 1000 ms
/// (scripts/services/kafka.sh); 300 ms gives a 900 ms session.
#[tokio::test]
async fn a_session_below_the_clusters_minimum_exits_2_naming_both_values() {
    let world = World::new("rsess", 1).await;
    assert!(
        !world.broker.supports_faults(),
        "KAFKA_BROKERS must name a real broker (scripts/services.sh up starts one)"
    );
    world.migrate().await;
    let mut config = world.config();
    if let harvester::config::LeaderConfig::Neli(neli) = &mut config.leader {
        neli.heartbeat_timeout = Duration::from_millis(300);
        neli.min_poll_interval = Duration::from_millis(50);
    }
    config.limits.drain_timeout = None;
    config.validate().unwrap();
    let (code, stderr, took) = run_config_to_end(&config).await;
    println!("exit {code} after {took:?}: {stderr}");
    assert_eq!(code, 2, "{stderr}");
    for text in [
        "leader.heartbeat_timeout",
        "900 ms",
        "group.min.session.timeout.ms is 1000",
    ] {
        assert!(stderr.contains(text), "{text:?} in {stderr}");
    }
}

/// A bootstrap list that reaches no Kafka broker (a closed port; a server that is not Kafka)
/// fails the reaper's start within `limits.connect_timeout` plus a margin for the process's
/// own start, naming the setting and the address; the outbox is left as it was.
#[tokio::test]
async fn a_bootstrap_that_reaches_no_kafka_fails_within_the_connect_bound() {
    let world = World::new("rreach", 1).await;
    world.migrate().await;
    world.write(3, 2, 3).await;
    // A port nothing listens on, and a server that answers Kafka's first request with HTTP.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let foreign = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let foreign_addr = foreign.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut s, _)) = foreign.accept().await {
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    let bound = Duration::from_secs(3);
    for address in [closed.to_string(), foreign_addr.to_string()] {
        let mut config = world.config();
        config.kafka = harvester::config::KafkaConfig::with_bootstrap(&address);
        config.limits.connect_timeout = bound;
        let (code, stderr, took) = run_config_to_end(&config).await;
        println!("{address}: exit {code} after {took:?}: {stderr}");
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains("kafka.\"bootstrap.servers\"") && stderr.contains(&address),
            "names the setting and the address: {stderr}"
        );
        assert!(took < testkit::within(bound), "{took:?}");
    }
    assert_eq!(world.outbox_rows().await, 6, "nothing deleted");
}

/// Brokers that do not offer the API idempotent and transactional producers need
/// (InitProducerId, as brokers before Kafka 0.11): the reaper, in either publish mode, stops with an error naming `kafka."bootstrap.servers"` and the
/// missing support, instead of replacing its producers for ever; nothing is deleted. NELI needs
/// no InitProducerId, so the reaper leads first: the bound is the election's succession, the
/// connect bound, and a margin for the process's start. Only the embedded broker offers a
/// chosen set of API versions.
#[tokio::test]
async fn brokers_without_idempotent_producers_stop_the_reaper_naming_the_setting() {
    let world = World::with_faults(Backend::Postgres, "rapiv").await;
    world
        .broker
        .api_versions("InitProducerId", None)
        .expect("the embedded broker takes API versions");
    world.write(3, 2, 3).await;
    let transactional = serde_json::json!({
        "mode": "transactional",
        "transactional_id": testkit::names::unique("rapiv"),
    });
    for publish in [None, Some(transactional)] {
        let mut config = world.config();
        if let Some(p) = &publish {
            config.publish = serde_json::from_value(p.clone()).unwrap();
        }
        config.http.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        config.limits.connect_timeout = Duration::from_secs(3);
        let bound = testkit::within(config.leader.succession() + config.limits.connect_timeout);
        let (code, stderr, took) = run_config_to_end(&config).await;
        println!("{publish:?}: exit {code} after {took:?}: {stderr}");
        assert_eq!(code, 1, "{stderr}");
        assert!(
            stderr.contains("kafka.\"bootstrap.servers\"")
                && stderr.contains(world.broker.bootstrap())
                && stderr.contains("UnsupportedFeature"),
            "names the setting, the address and the refusal: {stderr}"
        );
        assert!(took < bound, "{took:?} (bound {bound:?})");
    }
    assert_eq!(world.outbox_rows().await, 6, "nothing deleted");
}

/// A SASL login the broker refuses (a wrong password, from a file) is a configuration problem:
/// the reaper exits 2 naming the setting, within the connect bound plus a margin for the
/// process's start, prints no password, and touches no row.
#[tokio::test]
async fn a_refused_sasl_login_exits_2_naming_the_setting() {
    use testkit::secured::{SecuredKafka, ADMIN};
    let secured = SecuredKafka::discover().unwrap();
    let world = World::new("rsasl", 1).await;
    world.migrate().await;
    world.write(3, 2, 3).await;
    let wrong = TempFile::write(
        &testkit::names::unique("wrong-password"),
        "not-the-password\n",
    );
    let mut config = world.config();
    config.http.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    config.kafka = harvester::config::KafkaConfig::with_bootstrap(&secured.sasl_plaintext)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-256")
        .set("sasl.username", ADMIN)
        .set("sasl.password_file", wrong.path());
    config.limits.connect_timeout = Duration::from_secs(5);
    let bound = testkit::within(config.limits.connect_timeout);
    let (code, stderr, took) = run_config_to_end(&config).await;
    println!("exit {code} after {took:?}: {stderr}");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("kafka.\"sasl.password_file\""), "{stderr}");
    assert!(
        !stderr.contains(&secured.password(ADMIN).unwrap()),
        "{stderr}"
    );
    assert!(took < bound, "{took:?}");
    assert_eq!(world.outbox_rows().await, 6, "nothing deleted");
}

/// Runs the reaper on `config` (written to a file) until it exits, off the test's runtime:
/// (exit code, stderr, how long it ran).
async fn run_config_to_end(config: &harvester::Config) -> (i32, String, Duration) {
    let file = TempFile::write(
        &format!("{}.toml", testkit::names::unique("cfg")),
        &toml::to_string(config).unwrap(),
    );
    let started = Instant::now();
    let (code, _, stderr) =
        tokio::task::spawn_blocking(move || run_to_end(&["--config", file.path()]))
            .await
            .unwrap();
    (code, stderr, started.elapsed())
}
