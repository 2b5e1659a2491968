//! What the tracing tests share: the process's two span exporters (the harvester's global
//! provider and the writer's own, both to Jaeger over OTLP gRPC), a consumer that reads records
//! with their `traceparent`, and Jaeger's query API.

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use opentelemetry_otlp::{SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Headers, Message};
use rdkafka::ClientConfig;
use serde_json::Value;

use crate::common::World;
use harvester::config::{OtlpProtocol, TracingConfig};
use harvester::telemetry::TracingGuard;

/// How often both providers export (the batch processors' scheduled delay) and how long one
/// export may take: a span is in Jaeger at most `EXPORT_INTERVAL + EXPORT_TIMEOUT` after it
/// ended and was flushed; the waits below add [`MARGIN`] for Jaeger's own ingestion.
pub(super) const EXPORT_INTERVAL: Duration = Duration::from_millis(200);
pub(super) const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
pub(super) const MARGIN: Duration = Duration::from_secs(10);
/// Jaeger's OTLP gRPC receiver: `OTEL_EXPORTER_OTLP_ENDPOINT` (as `scripts/services/jaeger.sh start`
/// prints it), else its default port.
pub(super) fn otlp_endpoint() -> String {
    std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4317".into())
}

/// The process's exporters: the harvester's (the global provider, `telemetry::install`) and the
/// writer's (a provider of its own, another service), on a runtime that outlives every test's.
pub(super) struct Exporters {
    _runtime: tokio::runtime::Runtime,
    pub(super) harvester: TracingGuard,
    pub(super) harvester_service: String,
    pub(super) writer: SdkTracerProvider,
    pub(super) writer_service: String,
}

pub(super) fn exporters() -> &'static Exporters {
    static EXPORTERS: OnceLock<Exporters> = OnceLock::new();
    EXPORTERS.get_or_init(|| {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let _inside = runtime.enter();
        let run = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let harvester_service = format!("harvester-it-{run}");
        let config = TracingConfig {
            enabled: true,
            endpoint: Some(otlp_endpoint()),
            protocol: Some(OtlpProtocol::Grpc),
            sampling_ratio: Some(1.0),
            service_name: Some(harvester_service.clone()),
            export_interval: Some(EXPORT_INTERVAL),
            export_timeout: Some(EXPORT_TIMEOUT),
            max_queue_size: None,
        };
        let harvester = harvester::telemetry::install(&config).unwrap().unwrap();
        let writer_service = format!("writer-it-{run}");
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(otlp_endpoint())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .unwrap();
        let batches = BatchConfigBuilder::default()
            .with_scheduled_delay(EXPORT_INTERVAL)
            .build();
        let writer = SdkTracerProvider::builder()
            .with_span_processor(
                BatchSpanProcessor::builder(exporter)
                    .with_batch_config(batches)
                    .build(),
            )
            .with_resource(
                Resource::builder()
                    .with_service_name(writer_service.clone())
                    .build(),
            )
            .build();
        drop(_inside);
        Exporters {
            _runtime: runtime,
            harvester,
            harvester_service,
            writer,
            writer_service,
        }
    })
}

/// Jaeger's query API: its address, and the path it is served under (empty at the root, or
/// e.g. `/jaeger` behind a prefix).
#[derive(Debug, Clone)]
pub(super) struct Jaeger {
    addr: SocketAddr,
    base: String,
}

/// Jaeger's query API (`JAEGER_QUERY_URL`), or None after `testkit::skip`; a URL that does not
/// name a reachable host fails the test with what was wrong.
pub(super) fn jaeger() -> Option<Jaeger> {
    let Ok(raw) = std::env::var("JAEGER_QUERY_URL") else {
        testkit::skip::skip(
            "JAEGER_QUERY_URL is unset: start Jaeger with scripts/services/jaeger.sh start",
        );
        return None;
    };
    let url = url::Url::parse(&raw)
        .unwrap_or_else(|e| panic!("JAEGER_QUERY_URL ({raw:?}) is not a URL: {e}"));
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        panic!("JAEGER_QUERY_URL ({raw:?}) names no host and port");
    };
    let addr = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| panic!("JAEGER_QUERY_URL ({raw:?}): cannot resolve {host}:{port}"));
    let base = url.path().trim_end_matches('/').to_owned();
    Some(Jaeger { addr, base })
}

/// `GET path` on Jaeger's query API, its JSON when it answers 200. Blocking: call it off the
/// async runtime ([`trace`] does).
fn get(jaeger: &Jaeger, path: &str) -> Option<Value> {
    let (status, body) = testkit::http::get(jaeger.addr, &format!("{}{path}", jaeger.base)).ok()?;
    (status == 200)
        .then(|| serde_json::from_str(&body).ok())
        .flatten()
}

/// A record as the consumer read it.
#[derive(Debug)]
pub(super) struct Consumed {
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) traceparent: Option<String>,
    pub(super) tracestate: Option<String>,
}

/// Reads `count` records of `topic` from the start, by key; fails after `within`.
pub(super) async fn consume(
    world: &World,
    count: usize,
    within: Duration,
) -> HashMap<String, Consumed> {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", world.broker.bootstrap())
        .set("group.id", format!("trace-reader-{}", world.topic))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[&world.topic]).unwrap();
    let mut read = HashMap::new();
    let deadline = tokio::time::Instant::now() + within;
    while read.len() < count {
        let m = tokio::time::timeout_at(deadline, consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("read {} of {count} records within {within:?}", read.len()))
            .unwrap();
        let header = |name: &str| {
            m.headers().and_then(|h| {
                h.iter()
                    .find(|h| h.key == name)
                    .and_then(|h| h.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            })
        };
        let (traceparent, tracestate) = (header("traceparent"), header("tracestate"));
        let key = String::from_utf8_lossy(m.key().unwrap()).into_owned();
        let r = Consumed {
            partition: m.partition(),
            offset: m.offset(),
            traceparent,
            tracestate,
        };
        read.insert(key, r);
    }
    read
}

/// The trace's spans once `want(spans)` holds, polling Jaeger (off the runtime's workers) for
/// at most `within`.
pub(super) async fn trace(
    jaeger: &Jaeger,
    trace_id: &str,
    within: Duration,
    want: impl Fn(&[Value]) -> bool,
) -> Value {
    let path = format!("/api/traces/{trace_id}");
    let deadline = Instant::now() + within;
    let mut last = Value::Null;
    loop {
        let (jaeger, path) = (jaeger.clone(), path.clone());
        let got = tokio::task::spawn_blocking(move || get(&jaeger, &path))
            .await
            .expect("the query task");
        let ok = got.as_ref().is_some_and(|t| want(&spans(t)));
        if let Some(t) = got {
            last = t;
        }
        if ok {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "the trace in Jaeger: not as wanted within {within:?}; Jaeger has: {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(super) fn spans(trace: &Value) -> Vec<Value> {
    trace["data"][0]["spans"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A span's tag `key`, as text.
pub(super) fn tag(span: &Value, key: &str) -> Option<String> {
    let t = span["tags"].as_array()?.iter().find(|t| t["key"] == key)?;
    Some(match &t["value"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    })
}

pub(super) fn service<'a>(trace: &'a Value, span: &Value) -> &'a str {
    let process = span["processID"].as_str().unwrap_or_default();
    trace["data"][0]["processes"][process]["serviceName"]
        .as_str()
        .unwrap_or_default()
}

/// The names of a span's events (Jaeger's logs), in order.
pub(super) fn events(span: &Value) -> Vec<String> {
    span["logs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| {
            let fields = l["fields"].as_array()?;
            let event = fields.iter().find(|f| f["key"] == "event")?;
            event["value"].as_str().map(str::to_owned)
        })
        .collect()
}

/// The harvester's spans of row `id` (operation `send <topic>`), by start time.
pub(super) fn row_spans<'a>(all: &'a [Value], topic: &str, id: i64) -> Vec<&'a Value> {
    let name = format!("send {topic}");
    let mut found: Vec<&Value> = all
        .iter()
        .filter(|s| {
            s["operationName"] == name.as_str() && tag(s, "outbox.id") == Some(id.to_string())
        })
        .collect();
    found.sort_by_key(|s| s["startTime"].as_u64());
    found
}
