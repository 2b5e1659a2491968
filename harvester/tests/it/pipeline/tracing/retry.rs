//! A delivery that fails is on its span (status error, an `exception` event), and the retry of
//! the row (reset, marked again, sent again) is a span of its own with `outbox.attempt` 2, whose
//! context the record carries. On the embedded broker (librdkafka's mock), which refuses the
//! first Produce request with INVALID_RECORD, a failure handed back to the harvester; the
//! harvester is elected off the broker so the error lands on the record.

use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::Context;

use super::support::{
    consume, events, exporters, jaeger, row_spans, spans, tag, trace, EXPORT_INTERVAL,
    EXPORT_TIMEOUT, MARGIN,
};
use crate::common::backend::{run, Backend};
use crate::common::faults::elected_off_the_broker;
use crate::common::World;
use harvester::outbox::StashRecord;

#[tokio::test]
async fn a_failed_delivery_ends_its_span_with_the_error_and_the_retry_is_a_new_span() {
    run(Backend::Postgres, failed_then_retried).await
}

async fn failed_then_retried(backend: Backend) {
    let Some(jaeger) = jaeger() else { return };
    let ex = exporters();
    let world = World::with_faults(backend, "hvtraceretry").await;
    let mut config = world.config();
    config.tracing.enabled = true;
    config.leader = elected_off_the_broker(&world);
    let handle = world.start(config).await;
    testkit::wait_for("leadership", world.first_lead(), || {
        std::future::ready(handle.harvester.is_leader())
    })
    .await
    .unwrap();
    world
        .broker
        .request_errors("Produce", &["INVALID_RECORD"])
        .unwrap();

    let tracer = ex.writer.tracer("writer");
    let cx = Context::new().with_span(tracer.start_with_context("place order", &Context::new()));
    let trace_id = cx.span().span_context().trace_id().to_string();
    let record = StashRecord::new(&world.topic, "retried", "v").with_trace_of(&cx);
    let id = world.stash(&[record]).await[0];
    cx.span().end();
    ex.writer.force_flush().unwrap();

    let read = consume(&world, 1, world.publishing()).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    ex.harvester.flush();
    assert!(
        stats.delivery_failures >= 1,
        "the injected error reached the record"
    );

    let within = EXPORT_INTERVAL + EXPORT_TIMEOUT + MARGIN;
    let outcome = |s: &&serde_json::Value| tag(s, "outbox.outcome");
    let trace = trace(&jaeger, &trace_id, within, |all| {
        let found = row_spans(all, &world.topic, id);
        let ended = |o: &str| found.iter().any(|s| outcome(s).as_deref() == Some(o));
        ended("failed") && ended("purged")
    })
    .await;
    let all = spans(&trace);
    let found = row_spans(&all, &world.topic, id);
    let with = |o: &str| -> Vec<&serde_json::Value> {
        found
            .iter()
            .copied()
            .filter(|s| outcome(s).as_deref() == Some(o))
            .collect()
    };
    let (failures, delivered) = (with("failed"), with("purged"));
    assert_eq!(delivered.len(), 1, "one span delivered the row");
    assert_eq!(
        failures.len() + delivered.len(),
        found.len(),
        "every other span of the row failed"
    );
    let delivered = delivered[0];
    let failed = *failures
        .iter()
        .find(|s| tag(s, "outbox.attempt").as_deref() == Some("1"))
        .expect("the first attempt failed");
    assert_eq!(tag(failed, "otel.status_code").as_deref(), Some("ERROR"));
    assert_eq!(tag(failed, "outbox.outcome").as_deref(), Some("failed"));
    assert!(
        events(failed).iter().any(|e| e == "exception"),
        "the error is an exception event: {:?}",
        events(failed)
    );
    assert_eq!(
        tag(delivered, "outbox.attempt"),
        Some((failures.len() + 1).to_string()),
        "the attempt after every failed one"
    );
    assert_eq!(
        events(delivered),
        ["marked", "sent", "acknowledged", "purged"]
    );
    let got = &read["retried"];
    assert_eq!(
        tag(delivered, "messaging.kafka.offset"),
        Some(got.offset.to_string())
    );
    let own = delivered["spanID"].as_str().unwrap();
    assert_eq!(
        got.traceparent.as_deref(),
        Some(format!("00-{trace_id}-{own}-01").as_str()),
        "the record carries the delivered attempt's span"
    );
    println!(
        "retried: {} spans for row {id}, {} delivery failures",
        found.len(),
        stats.delivery_failures
    );
}
