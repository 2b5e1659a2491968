use super::*;

#[test]
fn defaults_are_valid_and_adaptive_where_goharvest_fixed_them() {
    let c = Config::default();
    c.validate().unwrap();
    assert_eq!(c.limits.max_in_flight_records, Adaptive::Auto);
    assert_eq!(c.limits.send_concurrency, Adaptive::Auto);
    assert_eq!(c.limits.mark_query_records, Adaptive::Auto);
    // "auto" starts where goharvest's fixed defaults were.
    assert_eq!(c.limits.window_floor(), 1000);
    // Either mode; a transactional term registers the ids of 8 whatever its count.
    assert_eq!(c.limits.shards(), auto_shards(cores()));
    assert_eq!(super::publish::FENCED_SHARD_IDS, 8);
    assert_eq!(
        [1, 2, 3, 4, 8, 16, 64].map(auto_shards),
        [1, 1, 1, 2, 4, 8, 8]
    );
    assert_eq!(c.limits.send_buffer, 10);
    assert_eq!(c.limits.io_error_backoff, Duration::from_millis(500));
    assert_eq!(c.limits.mark_backoff, Duration::from_millis(10));
    assert_eq!(c.limits.min_metrics_interval, Duration::from_secs(5));
}

#[test]
fn unknown_fields_are_rejected() {
    let err = serde_json::from_str::<Config>(r#"{"limits": {"max_in_flight": 5}}"#).unwrap_err();
    assert!(err.to_string().contains("max_in_flight"), "{err}");
}

#[test]
fn humane_durations() {
    let c: Config = serde_json::from_str(r#"{"limits": {"drain_timeout": "2s 500ms"}}"#).unwrap();
    assert_eq!(c.limits.drain_timeout, Some(Duration::from_millis(2500)));
    assert!(serde_json::from_str::<Config>(r#"{"limits": {"drain_timeout": "soon"}}"#).is_err());
}

#[test]
fn every_problem_is_reported_with_field() {
    let mut c = Config::default();
    c.limits.max_in_flight_records = Adaptive::Fixed(0);
    c.limits.send_concurrency = Adaptive::Fixed(0);
    c.kafka = KafkaConfig::with_bootstrap("b").set("enable.idempotence", "false");
    let fields: Vec<_> = c.problems().into_iter().map(|p| p.field).collect();
    assert!(
        fields.contains(&"limits.max_in_flight_records".to_owned()),
        "{fields:?}"
    );
    assert!(fields.contains(&"limits.send_concurrency".to_owned()));
    assert!(fields.iter().any(|f| f.contains("enable.idempotence")));
    let message = c.validate().unwrap_err().to_string();
    assert!(message.contains("limits.send_concurrency"), "{message}");
}

#[test]
fn drain_must_fit_inside_the_barrier() {
    let mut c = Config::default();
    c.limits.drain_timeout = Some(Duration::from_secs(30));
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "limits.drain_timeout"));
}

#[test]
fn a_reset_patience_below_a_second_names_its_field() {
    let mut c: Config = serde_json::from_str(r#"{"limits": {"reset_patience": "900ms"}}"#).unwrap();
    assert_eq!(c.limits.reset_patience, Duration::from_millis(900));
    let named = |c: &Config| {
        c.problems()
            .iter()
            .any(|p| p.field == "limits.reset_patience")
    };
    assert!(named(&c));
    c.limits.reset_patience = Duration::from_secs(1);
    assert!(!named(&c));
    assert_eq!(
        Config::default().limits.reset_patience,
        Duration::from_secs(30)
    );
}

#[test]
fn an_unset_drain_follows_a_shorter_heartbeat() {
    // Default NELI (5 s heartbeat, 10 s revoke): the 5 s ceiling.
    let mut c = Config::default();
    assert_eq!(c.drain_timeout(), Duration::from_secs(5));
    // A 2 s heartbeat (4 s revoke) alone is valid: the drain becomes 3 s.
    c = c
        .with_overrides([("leader.heartbeat_timeout", "2s")])
        .unwrap();
    assert!(c.problems().is_empty(), "{:?}", c.problems());
    assert_eq!(c.drain_timeout(), Duration::from_secs(3));
    // Set, it is used as set.
    c.limits.drain_timeout = Some(Duration::from_secs(1));
    assert_eq!(c.drain_timeout(), Duration::from_secs(1));
}

#[test]
fn table_names_parse_in_config() {
    let c: Config = serde_json::from_str(r#"{"outbox": {"table": "billing.outbox"}}"#).unwrap();
    assert_eq!(c.outbox.table.quoted(), "\"billing\".\"outbox\"");
    assert_eq!(
        c.outbox.quarantine().quoted(),
        "\"billing\".\"outbox_quarantine\""
    );
    assert!(serde_json::from_str::<Config>(r#"{"outbox": {"table": "a;b"}}"#).is_err());
}

#[test]
fn password_is_redacted() {
    let d = DatabaseConfig {
        url: "postgres://u:secret@h:5432/db".into(),
        ..Default::default()
    };
    assert_eq!(d.redacted_url(), "postgres://u:<redacted>@h:5432/db");
}

#[test]
fn producer_settings_default_to_none_so_kafka_bootstrap_wins() {
    let c = Config {
        kafka: KafkaConfig::with_bootstrap("b:1"),
        ..Default::default()
    };
    assert!(c.producer_kafka.0.is_empty());
    let pc = c.producer_client_config().unwrap();
    assert_eq!(pc.get("bootstrap.servers"), Some("b:1"));
}

#[test]
fn producer_delivery_timeout_defaults_below_the_session_and_larger_is_refused() {
    let c = Config::default();
    let pc = c.producer_client_config().unwrap();
    assert_eq!(pc.get("delivery.timeout.ms"), Some("10000"));
    let mut c = Config {
        producer_kafka: KafkaConfig::empty().set("delivery.timeout.ms", "15000"),
        ..Default::default()
    };
    let p = c.problems();
    assert!(
        p.iter()
            .any(|p| p.field == "producer_kafka.\"delivery.timeout.ms\""
                && p.message.contains("session")),
        "{p:?}"
    );
    c.producer_kafka = KafkaConfig::empty().set("delivery.timeout.ms", "12000");
    assert!(c.problems().is_empty());
    assert_eq!(
        c.producer_client_config()
            .unwrap()
            .get("delivery.timeout.ms"),
        Some("12000")
    );
}

#[test]
fn a_mark_batch_wait_longer_than_the_idle_poll_is_refused() {
    let mut c = Config::default();
    assert_eq!(c.limits.mark_batch_wait, Duration::from_millis(20));
    c.limits.mark_batch_wait = Duration::from_secs(2);
    let problems = c.problems();
    let p = problems
        .iter()
        .find(|p| p.field == "limits.mark_batch_wait")
        .expect("mark_batch_wait above idle_poll_interval must be refused");
    assert!(p.message.contains("idle_poll_interval"), "{}", p.message);
    c.limits.mark_batch_wait = Duration::ZERO;
    c.validate().unwrap();
}

#[test]
fn a_key_window_comes_with_the_gapless_guarantee_and_no_message_timeout() {
    let producer = |c: &Config, key: &str| {
        c.producer_client_config()
            .unwrap()
            .get(key)
            .map(str::to_owned)
    };
    let mut c = Config::default();
    assert_eq!(c.limits.max_in_flight_per_key, 1);
    // One record per key: librdkafka's default guarantee, and a delivery timeout below the
    // leader's succession.
    assert_eq!(producer(&c, "enable.gapless.guarantee"), None);
    let bounded = c.leader.delivery_timeout().as_millis().to_string();
    assert_eq!(producer(&c, "delivery.timeout.ms"), Some(bounded.clone()));
    c.limits.max_in_flight_per_key = 64;
    c.validate().unwrap();
    assert_eq!(
        producer(&c, "enable.gapless.guarantee").as_deref(),
        Some("true")
    );
    assert_eq!(producer(&c, "delivery.timeout.ms").as_deref(), Some("0"));
    // Transactions abort as a whole: neither is needed there.
    c.publish = transactional("orders");
    c.validate().unwrap();
    assert_eq!(producer(&c, "enable.gapless.guarantee"), None);
    assert_eq!(producer(&c, "delivery.timeout.ms"), Some(bounded));
}

#[test]
fn a_key_window_refuses_what_would_let_a_key_reorder() {
    let mut c = Config::default();
    c.limits.max_in_flight_per_key = 64;
    c.producer_kafka = KafkaConfig::empty().set("enable.gapless.guarantee", "false");
    let problems = c.problems();
    let p = problems
        .iter()
        .find(|p| p.field == "producer_kafka.\"enable.gapless.guarantee\"")
        .expect("a window of 64 without gapless must be refused");
    assert!(p.message.contains("= 64"), "{}", p.message);
    assert!(p.message.contains("reordering"), "{}", p.message);
    // librdkafka's other spellings of true are no refusal.
    c.producer_kafka = KafkaConfig::empty().set("enable.gapless.guarantee", "1");
    c.validate().unwrap();
    // Either map, either name of the timeout; "0" is what the harvester sets anyway.
    c.producer_kafka = KafkaConfig::empty();
    let kafka = c.kafka.clone();
    c.kafka = kafka.clone().set("message.timeout.ms", "30000");
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "kafka.\"message.timeout.ms\""));
    c.kafka = kafka.clone().set("message.timeout.ms", "0");
    c.validate().unwrap();
    c.kafka = kafka;
    c.producer_kafka = KafkaConfig::empty().set("delivery.timeout.ms", "5000");
    let problems = c.problems();
    let p = problems
        .iter()
        .find(|p| p.field == "producer_kafka.\"delivery.timeout.ms\"")
        .expect("a message timeout with a window must be refused");
    assert!(p.message.contains("times out"), "{}", p.message);
    assert_eq!(problems.len(), 1, "{problems:?}");
    c.limits.max_in_flight_per_key = 1;
    c.validate().unwrap();
    c.producer_kafka = KafkaConfig::empty().set("enable.gapless.guarantee", "true");
    c.limits.max_in_flight_per_key = 5000;
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "limits.max_in_flight_per_key"
            && p.message.contains("max_in_flight_records")));
    c.limits.max_in_flight_per_key = 0;
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "limits.max_in_flight_per_key" && p.message.contains("at least 1")));
}

fn transactional(id: &str) -> PublishConfig {
    serde_json::from_value(serde_json::json!({"mode": "transactional", "transactional_id": id}))
        .unwrap()
}

#[test]
fn publish_defaults_to_idempotent_and_reads_transactional_settings() {
    assert_eq!(Config::default().publish, PublishConfig::Idempotent);
    let c: Config = serde_json::from_str(
        r#"{"publish": {"mode": "transactional", "transactional_id": "orders", "max_records": 50, "linger": "20ms"}}"#,
    )
    .unwrap();
    let t = c.publish.transactional().unwrap();
    assert_eq!(t.max_records, 50);
    assert_eq!(t.linger, Duration::from_millis(20));
    assert_eq!(t.shard_id(3), "orders-3");
    // A term of 2 shards registers 2 to 7 besides its own; one of 8 or more, none besides.
    assert_eq!(
        t.fence_only_ids(2),
        ["orders-2", "orders-3", "orders-4", "orders-5", "orders-6", "orders-7"]
    );
    assert!(t.fence_only_ids(8).is_empty() && t.fence_only_ids(12).is_empty());
    c.validate().unwrap();
    let d = transactional("x");
    let t = d.transactional().unwrap();
    assert_eq!(
        (t.max_records, t.linger),
        (1000, Duration::from_millis(100))
    );
}

#[test]
fn publish_rejects_unknown_fields_and_modes() {
    let unknown = serde_json::from_str::<Config>(
        r#"{"publish": {"mode": "transactional", "transactional_id": "o", "batch": 5}}"#,
    )
    .unwrap_err();
    assert!(unknown.to_string().contains("batch"), "{unknown}");
    let mode =
        serde_json::from_str::<Config>(r#"{"publish": {"mode": "exactly_once"}}"#).unwrap_err();
    assert!(mode.to_string().contains("exactly_once"), "{mode}");
}

#[test]
fn transactional_mode_needs_an_id_and_owns_it() {
    let mut c = Config {
        publish: transactional(" "),
        ..Config::default()
    };
    let fields: Vec<_> = c.problems().into_iter().map(|p| p.field).collect();
    assert!(
        fields.contains(&"publish.transactional_id".to_owned()),
        "{fields:?}"
    );
    c.publish = transactional("orders");
    c.producer_kafka = KafkaConfig::empty().set("transactional.id", "mine");
    let problems = c.problems();
    assert!(
        problems
            .iter()
            .any(|p| p.field == "producer_kafka.\"transactional.id\""
                && p.message.contains("orders-<i>")),
        "{problems:?}"
    );
}

#[test]
fn a_key_window_needs_no_gapless_guarantee_in_transactional_mode() {
    let mut c = Config {
        producer_kafka: KafkaConfig::empty().set("enable.gapless.guarantee", "false"),
        ..Config::default()
    };
    c.limits.max_in_flight_per_key = 64;
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "producer_kafka.\"enable.gapless.guarantee\""
            && p.message.contains("transactional")));
    c.publish = transactional("orders");
    c.validate().unwrap();
}

#[test]
fn members_sharing_by_bucket_publish_each_bucket_under_an_id_of_its_own() {
    let mut c = Config {
        publish: transactional("orders"),
        leader: serde_json::from_value(serde_json::json!({"kind": "neli_buckets"})).unwrap(),
        ..Config::default()
    };
    c.validate().unwrap();
    assert_eq!(c.publish.transactional().unwrap().unit_id(7), "orders-b7");
    c.producer_kafka = KafkaConfig::empty().set("transactional.id", "mine");
    assert!(c
        .problems()
        .iter()
        .any(|p| p.message.contains("orders-b<bucket>")));
    c.producer_kafka = KafkaConfig::empty();
    c.limits.send_concurrency = Adaptive::Fixed(4);
    let problems = c.problems();
    assert!(
        problems
            .iter()
            .any(|p| p.field == "limits.send_concurrency" && p.message.contains("bucket")),
        "{problems:?}"
    );
}

#[test]
fn overrides_switch_the_publishing_mode_in_either_order() {
    let c = Config::default()
        .with_overrides([
            ("publish.transactional_id", "orders"),
            ("publish.mode", "transactional"),
            ("publish.linger", "30ms"),
        ])
        .unwrap();
    let t = c.publish.transactional().unwrap();
    assert_eq!(t.transactional_id, "orders");
    assert_eq!(t.linger, Duration::from_millis(30));
    let bare = Config::default()
        .with_overrides([("publish.mode", "transactional")])
        .unwrap();
    let problems = bare.problems();
    assert!(
        problems
            .iter()
            .any(|p| p.field == "publish.transactional_id"),
        "{problems:?}"
    );
    let err = Config::default()
        .with_overrides([("publish.mode", "exactly_once")])
        .unwrap_err();
    assert!(err.to_string().contains("exactly_once"), "{err}");
}

#[test]
fn snapshot_mode_needs_postgres_and_the_native_table() {
    let snapshot = |url: &str, shape: crate::outbox::Shape, leader: &str| Config {
        database: crate::store::DatabaseConfig {
            url: url.into(),
            ..Default::default()
        },
        outbox: crate::store::OutboxConfig {
            mode: crate::store::OutboxMode::Snapshot,
            shape,
            ..Default::default()
        },
        leader: serde_json::from_value(serde_json::json!({ "kind": leader })).unwrap(),
        ..Config::default()
    };
    let pg = "postgres://u@h/db";
    snapshot(pg, crate::outbox::Shape::Native, "neli")
        .validate()
        .unwrap();
    // Members sharing the table by bucket read their buckets only.
    snapshot(pg, crate::outbox::Shape::Native, "neli_buckets")
        .validate()
        .unwrap();
    for (c, says) in [
        (
            snapshot("mysql://u@h/db", crate::outbox::Shape::Native, "neli"),
            "postgres://",
        ),
        (
            snapshot(pg, crate::outbox::Shape::Goharvest, "neli"),
            "native table",
        ),
    ] {
        let problems = c.problems();
        assert!(
            problems
                .iter()
                .any(|p| p.field == "outbox.mode" && p.message.contains(says)),
            "{says}: {problems:?}"
        );
    }
    let parsed: crate::store::OutboxConfig =
        toml::from_str("table = \"outbox\"\nmode = \"snapshot\"").unwrap();
    assert_eq!(parsed.mode, crate::store::OutboxMode::Snapshot);
    assert!(toml::from_str::<crate::store::OutboxConfig>("mode = \"snap\"").is_err());
}

#[test]
fn a_fixed_mark_batch_or_key_window_must_fit_the_least_window() {
    let mut c = Config::default();
    c.limits.mark_query_records = Adaptive::Fixed(1001);
    let p = c.problems();
    assert!(
        p.iter().any(|p| p.field == "limits.mark_query_records"
            && p.message.contains("1000, the least the window can be")),
        "{p:?}"
    );
    c.limits.max_in_flight_records = Adaptive::Fixed(2000);
    assert!(c.problems().is_empty(), "{:?}", c.problems());
    c.limits.max_in_flight_records = Adaptive::Fixed(500);
    assert!(c
        .problems()
        .iter()
        .any(|p| p.field == "limits.mark_query_records" && p.message.contains("(500")));
}

#[test]
fn auto_and_numbers_are_read_from_files_and_overrides() {
    let c: Config = serde_json::from_str(
        r#"{"limits": {"max_in_flight_records": 5000, "send_concurrency": "auto"}}"#,
    )
    .unwrap();
    assert_eq!(c.limits.max_in_flight_records, Adaptive::Fixed(5000));
    assert_eq!(c.limits.send_concurrency, Adaptive::Auto);
    let c = c
        .with_overrides([
            ("limits.max_in_flight_records", "auto"),
            ("limits.send_concurrency", "3"),
        ])
        .unwrap();
    assert_eq!(c.limits.max_in_flight_records, Adaptive::Auto);
    assert_eq!(c.limits.shards(), 3);
    let e = Config::default()
        .with_overrides([("limits.mark_query_records", "lots")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("limits.mark_query_records") && e.contains("auto"),
        "{e}"
    );
}

#[cfg(all(feature = "etcd", feature = "nats", feature = "zookeeper"))]
#[test]
fn printed_configs_redact_every_inline_secret() {
    use crate::secret::Secret;
    let mut c = Config::default();
    c.database.password = Some(Secret::inline("pw-database"));
    let leaders = [
        r#"{ "kind": "etcd", "password": { "value": "pw-etcd" } }"#,
        r#"{ "kind": "rink", "password": { "value": "pw-rink" } }"#,
        r#"{ "kind": "nats_kv", "user": "u", "password": { "value": "pw-nats" } }"#,
        r#"{ "kind": "nats_kv", "token": { "value": "pw-token" } }"#,
        r#"{ "kind": "zookeeper", "auth": { "user": "u", "password": { "value": "pw-zk" } } }"#,
    ];
    for leader in leaders {
        c.leader = serde_json::from_str(leader).unwrap();
        let printed = toml::to_string(&c.redacted()).unwrap();
        assert!(!printed.contains("pw-"), "{leader}: {printed}");
        assert!(!format!("{c:?}").contains("pw-"), "{leader}: Debug");
        let kept = toml::to_string(&c).unwrap();
        assert!(
            kept.contains("pw-"),
            "written out, a config keeps its secrets: {kept}"
        );
    }
}
