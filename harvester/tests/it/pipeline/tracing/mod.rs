//! One event traced end to end, on every backend (`postgres::...`, `mariadb::...`): rows stashed
//! inside a writer's span (the OpenTelemetry SDK, exporting to Jaeger), harvested to the real
//! Kafka with harvester tracing on, read back by a consumer; then the trace as Jaeger stored it
//! must show the writer's span, the harvester's `send <topic>` spans as its children at the
//! partitions and offsets the consumer read, and each record's `traceparent` naming its
//! harvester span. A row without a context publishes no `traceparent`; a malformed one is
//! published as written and counted. A failed delivery ([`retry`]) ends its span with the error,
//! and the retry is a span of its own. The reaper ([`reaper`]) exports as the `OTEL_*`
//! variables say and flushes at exit.
//!
//! Needs Jaeger (`scripts/services/jaeger.sh start`, `JAEGER_QUERY_URL`): skipped without it, failed
//! where services are required.

mod reaper;
mod retry;
mod support;

use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::Context;

use crate::common::{Backend, World};
use crate::on_every_backend;
use harvester::outbox::StashRecord;
use support::{
    consume, events, exporters, jaeger, row_spans, service, spans, tag, trace, EXPORT_INTERVAL,
    EXPORT_TIMEOUT, MARGIN,
};

/// The `tracestate` the traced rows carry (vendor data the harvester must pass unchanged).
const TRACESTATE: &str = "vendor=x";

on_every_backend!(a_writers_trace_continues_through_the_harvester_to_the_consumer);

async fn a_writers_trace_continues_through_the_harvester_to_the_consumer(backend: Backend) {
    traced_harvest(backend, false).await
}

/// The same in transactional mode: a record is acknowledged into its transaction and purged
/// when the transaction commits; the consumer reads committed records only.
#[tokio::test]
async fn in_transactional_mode_the_trace_is_the_same() {
    crate::common::backend::run(Backend::Postgres, |b| traced_harvest(b, true)).await
}

async fn traced_harvest(backend: Backend, transactional: bool) {
    let Some(jaeger) = jaeger() else { return };
    let ex = exporters();
    let world = World::on(backend, "hvtrace", 2).await;
    world.migrate().await;
    let mut config = world.config();
    config.tracing.enabled = true;
    if transactional {
        config.publish = serde_json::from_value(serde_json::json!({
            "mode": "transactional",
            "transactional_id": format!("hvtrace-{}", uuid::Uuid::new_v4()),
            "linger": "20ms",
        }))
        .unwrap();
        config.validate().unwrap();
    }
    let handle = world.start(config).await;
    testkit::wait_for("leadership", world.first_lead(), || {
        std::future::ready(handle.harvester.is_leader())
    })
    .await
    .unwrap();

    // The writer's transaction, inside its span: three traced rows, one without a context,
    // one with a malformed context.
    // The traced rows carry a `tracestate` too, which must reach the consumer unchanged.
    let tracer = ex.writer.tracer("writer");
    let cx = Context::new().with_span(tracer.start_with_context("place orders", &Context::new()));
    let writer_span = cx.span().span_context().clone();
    let writers = format!("00-{}-{}-01", writer_span.trace_id(), writer_span.span_id());
    let mut records: Vec<StashRecord> = (0..3)
        .map(|i| {
            StashRecord::new(&world.topic, format!("traced-{i}"), "v")
                .trace_context(&writers, Some(TRACESTATE))
        })
        .collect();
    records.push(StashRecord::new(&world.topic, "plain", "v"));
    records.push(
        StashRecord::new(&world.topic, "malformed", "v").trace_context("not-a-traceparent", None),
    );
    let ids = world.stash(&records).await;
    cx.span().end();
    ex.writer.force_flush().unwrap();

    let read = consume(&world, records.len(), world.publishing()).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    let leader = handle.harvester.leader_id().map(|id| id.to_string());
    handle.stop().await.unwrap();
    ex.harvester.flush();

    let trace_id = writer_span.trace_id().to_string();
    let within = EXPORT_INTERVAL + EXPORT_TIMEOUT + MARGIN;
    let trace = trace(&jaeger, &trace_id, within, |all| {
        ids.iter().take(3).all(|id| {
            row_spans(all, &world.topic, *id)
                .iter()
                .any(|s| events(s).iter().any(|e| e == "purged"))
        })
    })
    .await;
    if let Ok(path) = std::env::var("HARVEST_TRACE_JSON") {
        if backend == Backend::Postgres && !transactional {
            std::fs::write(&path, serde_json::to_string_pretty(&trace).unwrap()).unwrap();
        }
    }
    let all = spans(&trace);
    let writer_id = writer_span.span_id().to_string();
    let writer = all
        .iter()
        .find(|s| s["spanID"] == writer_id.as_str())
        .expect("the writer's span");
    assert_eq!(service(&trace, writer), ex.writer_service);

    for (i, id) in ids.iter().take(3).enumerate() {
        let got = &read[&format!("traced-{i}")];
        let found = row_spans(&all, &world.topic, *id);
        assert_eq!(found.len(), 1, "one harvester span for row {id}");
        let span = found[0];
        assert_eq!(service(&trace, span), ex.harvester_service);
        assert_eq!(span["references"][0]["refType"], "CHILD_OF");
        assert_eq!(
            span["references"][0]["spanID"],
            writer_id.as_str(),
            "the writer's span is the parent"
        );
        assert_eq!(tag(span, "span.kind").as_deref(), Some("producer"));
        assert_eq!(tag(span, "messaging.system").as_deref(), Some("kafka"));
        assert_eq!(
            tag(span, "messaging.destination.name"),
            Some(world.topic.clone())
        );
        assert_eq!(
            tag(span, "messaging.destination.partition.id"),
            Some(got.partition.to_string())
        );
        assert_eq!(
            tag(span, "messaging.kafka.offset"),
            Some(got.offset.to_string())
        );
        assert_eq!(tag(span, "outbox.attempt").as_deref(), Some("1"));
        assert_eq!(tag(span, "outbox.outcome").as_deref(), Some("purged"));
        assert_eq!(
            tag(span, "harvester.leader_id"),
            leader,
            "the leader id that marked the row"
        );
        assert!(tag(span, "harvester.term").is_some());
        assert_eq!(events(span), ["marked", "sent", "acknowledged", "purged"]);
        let own = span["spanID"].as_str().unwrap();
        assert_eq!(
            got.traceparent.as_deref(),
            Some(format!("00-{trace_id}-{own}-01").as_str()),
            "the record carries the harvester span's context"
        );
        assert_eq!(
            got.tracestate.as_deref(),
            Some(TRACESTATE),
            "the writer's tracestate passes unchanged"
        );
    }
    assert_eq!(
        read["plain"].traceparent, None,
        "no context, no traceparent"
    );
    assert_eq!(
        read["malformed"].traceparent.as_deref(),
        Some("not-a-traceparent"),
        "a malformed context is published as written"
    );
    assert_eq!(stats.trace_context_malformed, 1);
    println!(
        "{backend:?} (transactional: {transactional}): trace {trace_id}, {} spans",
        all.len()
    );
}

/// With harvester tracing off (the default) the writer's headers are published exactly as
/// written: the consumer's `traceparent` is the writer's span, and the harvester makes no span;
/// a malformed context is not even read (the counter stays 0).
#[tokio::test]
async fn with_tracing_off_the_writers_context_passes_unchanged() {
    crate::common::backend::run(Backend::Postgres, untraced_harvester).await
}

async fn untraced_harvester(backend: Backend) {
    let Some(jaeger) = jaeger() else { return };
    let ex = exporters();
    let world = World::on(backend, "hvtraceoff", 1).await;
    world.migrate().await;
    let tracer = ex.writer.tracer("writer");
    let cx = Context::new().with_span(tracer.start_with_context("place order", &Context::new()));
    let sc = cx.span().span_context().clone();
    let record = StashRecord::new(&world.topic, "untraced", "v").with_trace_of(&cx);
    let written = record.headers.clone();
    let malformed =
        StashRecord::new(&world.topic, "malformed", "v").trace_context("not-a-traceparent", None);
    let id = world.stash(&[record, malformed]).await[0];
    cx.span().end();
    ex.writer.force_flush().unwrap();
    let handle = world.start(world.config()).await;
    let read = consume(&world, 2, world.first_lead() + world.publishing()).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    assert_eq!(
        read["malformed"].traceparent.as_deref(),
        Some("not-a-traceparent")
    );
    assert_eq!(
        stats.trace_context_malformed, 0,
        "with tracing off headers are not read"
    );
    ex.harvester.flush();
    let writers = format!("00-{}-{}-01", sc.trace_id(), sc.span_id());
    assert_eq!(
        read["untraced"].traceparent.as_deref(),
        Some(writers.as_str())
    );
    assert_eq!(
        written[0].1,
        writers.as_bytes(),
        "the stasher stored the writer's span"
    );
    // The writer's span is in Jaeger; once it is, nothing of the harvester is in its trace.
    let trace_id = sc.trace_id().to_string();
    let within = EXPORT_INTERVAL + EXPORT_TIMEOUT + MARGIN;
    let trace = trace(&jaeger, &trace_id, within, |all| !all.is_empty()).await;
    assert!(row_spans(&spans(&trace), &world.topic, id).is_empty());
}
