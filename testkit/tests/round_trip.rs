//! The test kit against real services: Postgres schema isolation, the embedded broker, and the
//! verifying consumer catching faults injected through Kafka (not just in memory).

use std::time::Duration;

use rdkafka::message::OwnedHeaders;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::ClientConfig;
use sqlx::Row;
use testkit::verify::{consume, ConsumeOptions};
use testkit::{envelope, names, wait_for, Broker, TestDb, Verifier};

fn producer(broker: &Broker) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .create()
        .expect("producer")
}

async fn send(p: &FutureProducer, topic: &str, run: &str, key: &str, seq: u64) {
    let mut headers = OwnedHeaders::new();
    for (k, v) in envelope::headers(run, seq) {
        headers = headers.insert(rdkafka::message::Header {
            key: k,
            value: Some(&v),
        });
    }
    let record = FutureRecord::to(topic)
        .key(key)
        .payload("v")
        .headers(headers);
    p.send(record, Duration::from_secs(10))
        .await
        .expect("delivered");
}

/// Rows written in an isolated schema, relayed by a separate task, read back and verified.
#[tokio::test]
async fn postgres_to_broker_round_trip() {
    let db = TestDb::new("roundtrip").await.unwrap();
    let broker = Broker::discover().unwrap();
    let topic = names::topic("roundtrip");
    broker.create_topic(&topic, 4).await.unwrap();
    let run = names::unique("run");

    sqlx::query(
        "CREATE TABLE outbox (id BIGSERIAL PRIMARY KEY, k TEXT NOT NULL, seq BIGINT NOT NULL)",
    )
    .execute(&db.pool)
    .await
    .unwrap();
    let mut verifier = Verifier::new();
    for key in 0..20 {
        for seq in 0..10u64 {
            sqlx::query("INSERT INTO outbox (k, seq) VALUES ($1, $2)")
                .bind(format!("k{key}"))
                .bind(seq as i64)
                .execute(&db.pool)
                .await
                .unwrap();
            verifier.expect(&topic, format!("k{key}").as_bytes(), seq);
        }
    }

    // The relay: a separate task reading rows in id order and producing them.
    let relay = {
        let (pool, topic, run, p) = (
            db.pool.clone(),
            topic.clone(),
            run.clone(),
            producer(&broker),
        );
        tokio::spawn(async move {
            let rows = sqlx::query("SELECT k, seq FROM outbox ORDER BY id")
                .fetch_all(&pool)
                .await
                .unwrap();
            for row in rows {
                let (k, seq): (String, i64) = (row.get(0), row.get(1));
                send(&p, &topic, &run, &k, seq as u64).await;
            }
            p.flush(Duration::from_secs(10)).unwrap();
        })
    };

    let options = ConsumeOptions::new(broker.bootstrap(), &[&topic], &run);
    let verifier = consume(options, verifier, |_, _, _| {}).await.unwrap();
    relay.await.unwrap();
    let report = verifier.report();
    println!("round trip: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 200);
    assert_eq!(report.duplicates, 0);

    // The schema is isolated: the table is not visible from public.
    let visible: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'outbox'",
    )
    .bind(&db.schema)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    assert_eq!(visible, 1);
    let schema = db.schema.clone();
    let url = db.url().to_owned();
    db.close().await.unwrap();
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_namespace WHERE nspname = $1")
        .bind(&schema)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0, "schema dropped on close");
}

/// Loss, duplication and reordering injected on the wire are all reported.
#[tokio::test]
async fn verifier_catches_faults_through_kafka() {
    let broker = Broker::discover().unwrap();
    let topic = names::topic("faults");
    broker.create_topic(&topic, 1).await.unwrap();
    let run = names::unique("run");
    let p = producer(&broker);
    let mut verifier = Verifier::new();
    for seq in 0..4 {
        verifier.expect(&topic, b"lossy", seq);
        verifier.expect(&topic, b"dup", seq);
        verifier.expect(&topic, b"swap", seq);
    }
    for seq in [0, 1, 3] {
        send(&p, &topic, &run, "lossy", seq).await; // seq 2 lost
    }
    for seq in [0, 1, 1, 2, 3] {
        send(&p, &topic, &run, "dup", seq).await; // 1 duplicated
    }
    for seq in [0, 2, 1, 3] {
        send(&p, &topic, &run, "swap", seq).await; // 1 and 2 swapped
    }
    send(&p, &topic, "another-run", "dup", 0).await;

    let mut options = ConsumeOptions::new(broker.bootstrap(), &[&topic], &run);
    options.timeout = Duration::from_secs(5);
    let report = consume(options, verifier, |_, _, _| {})
        .await
        .unwrap()
        .report();
    println!("injected: {report}");
    assert!(!report.is_correct());
    assert_eq!(report.lost, 1);
    assert_eq!(report.lost_examples[0].key, b"lossy");
    assert_eq!(report.lost_examples[0].seq, 2);
    assert_eq!(report.duplicates, 1);
    assert_eq!(report.duplicate_examples[0].key, b"dup");
    assert_eq!(report.reordered, 1);
    assert_eq!(report.reordered_examples[0].key, b"swap");
    assert_eq!(report.foreign, 1);
}

/// Fault injection reaches the broker: a downed broker makes produce time out, and it recovers.
#[tokio::test]
async fn broker_down_and_up() {
    // Faults are injected into a cluster of this test's own in the mock, never a shared one.
    let broker = Broker::mock().unwrap().isolated(1).unwrap();
    let topic = names::topic("down");
    broker.create_topic(&topic, 1).await.unwrap();
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("message.timeout.ms", "1500")
        .create()
        .unwrap();
    p.send(
        FutureRecord::to(&topic).key("k").payload("before"),
        Duration::from_secs(5),
    )
    .await
    .expect("delivered while up");

    // Round-trip delay is observable.
    broker.set_rtt(-1, Duration::from_millis(300)).unwrap();
    let started = std::time::Instant::now();
    p.send(
        FutureRecord::to(&topic).key("k").payload("slow"),
        Duration::from_secs(5),
    )
    .await
    .expect("delivered with rtt");
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "rtt not applied: {:?}",
        started.elapsed()
    );
    broker.set_rtt(-1, Duration::ZERO).unwrap();

    broker.broker_down(-1).unwrap();
    let failed = p
        .send(
            FutureRecord::to(&topic).key("k").payload("while down"),
            Duration::from_secs(5),
        )
        .await;
    broker.broker_up(-1).unwrap();
    assert!(
        failed.is_err(),
        "produce must fail while the broker is down"
    );

    wait_for("produce after broker_up", Duration::from_secs(30), || {
        let p = p.clone();
        let topic = topic.clone();
        async move {
            p.send(
                FutureRecord::to(&topic).key("k").payload("after"),
                Duration::from_secs(2),
            )
            .await
            .is_ok()
        }
    })
    .await
    .unwrap();

    // Stacked request errors fail requests: a non-retriable error reaches the application.
    broker
        .request_errors("Produce", &["INVALID_RECORD"])
        .unwrap();
    let rejected = p
        .send(
            FutureRecord::to(&topic).key("k").payload("rejected"),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        rejected.is_err(),
        "stacked INVALID_RECORD must fail the produce"
    );
    assert!(broker
        .request_errors("Produce", &["NO_SUCH_ERROR"])
        .is_err());
}

#[tokio::test]
async fn wait_for_times_out_with_context() {
    let err = wait_for("never", Duration::from_millis(50), || async { false })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("never"));
}

/// The same on Apache Kafka, a cluster of this test's own: a paused node (SIGSTOP) makes
/// produce time out, a stopped one refuses it, and once started on its data it serves again,
/// with what it had before still there.
#[tokio::test]
async fn a_private_kafka_node_paused_stopped_and_started() {
    use testkit::broker::{NodeAction, PrivateKafka};
    let cluster = tokio::task::spawn_blocking(|| PrivateKafka::start(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cluster.live_brokers().unwrap(), 1);
    let broker = cluster.broker();
    let topic = names::topic("pdown");
    broker.create_topic(&topic, 1).await.unwrap();
    let p: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("message.timeout.ms", "1500")
        .create()
        .unwrap();
    let send = |payload: &'static str| {
        let (p, topic) = (p.clone(), topic.clone());
        async move {
            p.send(
                FutureRecord::to(&topic).key("k").payload(payload),
                Duration::from_secs(5),
            )
            .await
            .map(|_| ())
            .map_err(|(e, _)| e)
        }
    };
    send("before").await.expect("delivered while up");
    for (fault, heal) in [
        (NodeAction::Pause, NodeAction::Resume),
        (NodeAction::Stop, NodeAction::Start),
    ] {
        cluster.node(1, fault).unwrap();
        let failed = send("while down").await;
        cluster.node(1, heal).unwrap();
        assert!(failed.is_err(), "produce must fail after {fault:?}");
        wait_for(
            &format!("produce after {heal:?}"),
            Duration::from_secs(60),
            || async { send("after").await.is_ok() },
        )
        .await
        .unwrap();
    }
    // Kept through the stop: the first record is still the first, with the later ones after it
    // (a record that timed out while the node was paused may have been written on resume).
    let bootstrap = broker.bootstrap().to_owned();
    let read = tokio::task::spawn_blocking(move || {
        testkit::broker::console::read_all(&bootstrap, &topic, 3, Duration::from_secs(30))
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(read.len(), 3, "{read:?}");
    assert_eq!(read[0].value, "before", "{read:?}");
}
