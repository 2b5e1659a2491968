//! What the embedded (librdkafka mock) broker does with an idempotent producer under injected
//! Produce errors, without any harvester: the benchmark's broker-faults figures depend on it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use testkit::verify::{consume, ConsumeOptions};
use testkit::{envelope, names, Broker, Verifier};

struct Ctx {
    acked: Arc<Mutex<Vec<(u32, u64)>>>,
    failed: Arc<AtomicU64>,
}
impl ClientContext for Ctx {}
impl ProducerContext for Ctx {
    type DeliveryOpaque = Box<(u32, u64)>;
    fn delivery(&self, r: &DeliveryResult<'_>, id: Box<(u32, u64)>) {
        match r {
            Ok(_) => self.acked.lock().push(*id),
            Err(_) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Returns (acknowledged, failed, report of what a consumer read of the acknowledged ones).
async fn produce_under(
    errors: &[&str],
    records: u64,
    producers: usize,
) -> (u64, u64, testkit::Report) {
    let broker = Broker::mock().unwrap().isolated(1).unwrap();
    let topic = names::topic("mock");
    broker.create_topic(&topic, 4).await.unwrap();
    let run = names::unique("run");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(AtomicU64::new(0));
    let all: Vec<BaseProducer<Ctx>> = (0..producers)
        .map(|_| {
            ClientConfig::new()
                .set("bootstrap.servers", broker.bootstrap())
                .set("enable.idempotence", "true")
                .create_with_context(Ctx {
                    acked: Arc::clone(&acked),
                    failed: Arc::clone(&failed),
                })
                .unwrap()
        })
        .collect();
    let start = Instant::now();
    let mut next_fault = start;
    for i in 0..records {
        if !errors.is_empty() && Instant::now() >= next_fault {
            broker.request_errors("Produce", errors).unwrap();
            next_fault += Duration::from_millis(100);
        }
        let (key, seq) = ((i % 100) as u32, i / 100);
        let producer = &all[key as usize % producers];
        let mut headers = OwnedHeaders::new();
        for (k, v) in envelope::headers(&run, seq) {
            headers = headers.insert(Header {
                key: k,
                value: Some(v.as_bytes()),
            });
        }
        let k = format!("k{key}");
        let record = BaseRecord::with_opaque_to(&topic, Box::new((key, seq)))
            .key(k.as_bytes())
            .payload(&b"v"[..])
            .headers(headers);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        for p in &all {
            p.poll(Duration::ZERO);
        }
        // About 2,000 records/s, like the benchmark's broker-faults scenario.
        if i % 2 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for p in &all {
        p.flush(Duration::from_secs(60)).unwrap();
    }
    broker.clear_request_errors("Produce").unwrap();
    let acked = std::mem::take(&mut *acked.lock());
    let mut verifier = Verifier::new();
    for (key, seq) in &acked {
        verifier.expect(&topic, format!("k{key}").as_bytes(), *seq);
    }
    let mut options = ConsumeOptions::new(broker.bootstrap(), &[&topic], &run);
    // A bound on a stall, not on throughput: a loaded machine delivers slowly.
    options.timeout = Duration::MAX;
    options.stall = Some(Duration::from_secs(20));
    let report = consume(options, verifier, |_, _, _| {})
        .await
        .unwrap()
        .report();
    (acked.len() as u64, failed.load(Ordering::Relaxed), report)
}

#[tokio::test]
async fn without_faults_every_acknowledged_record_is_readable() {
    let (acked, failed, report) = produce_under(&[], 2_000, 8).await;
    println!("no faults: acked {acked}, failed {failed}: {report}");
    assert_eq!(acked, 2_000);
    assert_eq!(report.lost, 0);
}

/// An experiment, not a gate (`cargo test -p bench --test mock_broker -- --ignored`): with
/// Produce errors injected into idempotent producers' requests, librdkafka's mock cluster now and
/// then acknowledges a record it never stores (seen: 1 of 8,000 in one of three runs, with no
/// harvester involved). The benchmark therefore counts "acknowledged but not in the log"
/// separately from loss the harvester could have caused (see RESULTS.md).
#[tokio::test]
#[ignore = "experiment on the mock broker; its loss is intermittent"]
async fn injected_produce_errors_on_the_mock_sometimes_lose_acknowledged_records() {
    let (acked, failed, report) = produce_under(&["NOT_LEADER_FOR_PARTITION"], 8_000, 8).await;
    println!("NOT_LEADER_FOR_PARTITION every 100 ms: acked {acked}, failed {failed}: {report}");
    assert!(acked > 0);
    assert_eq!(report.reordered, 0, "{report}");
}
