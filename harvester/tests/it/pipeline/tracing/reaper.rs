//! The reaper exports the harvester's spans itself (`[tracing]`, feature `otlp` in `cli`), over
//! gRPC or HTTP, set up by the standard `OTEL_*` variables where the file leaves fields unset, and flushes them
//! when it exits: with an export interval far beyond the test's wait, the spans can only reach
//! Jaeger through the flush at exit.

use std::process::Command;
use std::time::Duration;

use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider};
use opentelemetry::Context;
use testkit::process::{Observed, Signal};

use super::support::{
    consume, events, exporters, jaeger, otlp_endpoint, row_spans, service, spans, trace, MARGIN,
};
use crate::common::backend::{run, Backend};
use crate::common::reaper::{reaper_bin, stop_bound, wait_serving};
use crate::common::World;
use harvester::outbox::StashRecord;

/// The reaper's batch exporter waits this long between exports: longer than the whole test.
const NEVER_DURING_THE_TEST: Duration = Duration::from_secs(600);

/// The reaper's own export timeout (`tracing.export_timeout`'s default, 10 s, set here through
/// `OTEL_EXPORTER_OTLP_TIMEOUT` so the wait below cannot drift from it): the flush at exit
/// ends within it.
const REAPER_EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_reaper_exports_over_otlp_as_the_environment_says_and_flushes_at_exit() {
    run(Backend::Postgres, |b| reaper_flushes_at_exit(b, "grpc")).await
}

/// The same over OTLP/HTTP (protobuf), Jaeger's port 4318.
#[tokio::test]
async fn the_reaper_exports_over_otlp_http_too() {
    run(Backend::Postgres, |b| {
        reaper_flushes_at_exit(b, "http/protobuf")
    })
    .await
}

/// Jaeger's OTLP endpoint for `protocol`: the gRPC one, or the HTTP one on the port beside it.
fn endpoint(protocol: &str) -> String {
    let grpc = otlp_endpoint();
    match protocol {
        "grpc" => grpc,
        _ => match grpc.strip_suffix(":4317") {
            Some(host) => format!("{host}:4318"),
            None => "http://127.0.0.1:4318".into(),
        },
    }
}

async fn reaper_flushes_at_exit(backend: Backend, protocol: &str) {
    let Some(jaeger) = jaeger() else { return };
    let ex = exporters();
    let world = World::on(backend, "hvtracereaper", 1).await;
    world.migrate().await;
    let file = world.reaper_config(|_| {});
    let service_name = format!(
        "reaper-it-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let mut cmd = Command::new(reaper_bin());
    cmd.args([
        "--config",
        file.path(),
        "--events-json",
        "--set",
        "tracing.enabled=true",
    ])
    .env("RUST_LOG", "warn")
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint(protocol))
    .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    .env("OTEL_SERVICE_NAME", &service_name)
    .env(
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        REAPER_EXPORT_TIMEOUT.as_millis().to_string(),
    )
    .env(
        "OTEL_BSP_SCHEDULE_DELAY",
        NEVER_DURING_THE_TEST.as_millis().to_string(),
    );
    let mut reaper = Observed::spawn("traced-reaper", cmd).unwrap();
    wait_serving(&mut reaper).await;

    let tracer = ex.writer.tracer("writer");
    let cx = Context::new().with_span(tracer.start_with_context("place order", &Context::new()));
    let trace_id = cx.span().span_context().trace_id().to_string();
    let record = StashRecord::new(&world.topic, "via-reaper", "v").with_trace_of(&cx);
    let id = world.stash(&[record]).await[0];
    cx.span().end();
    ex.writer.force_flush().unwrap();
    let read = consume(&world, 1, world.first_lead() + world.publishing()).await;
    world.drained().await;

    reaper.signal(Signal::Term).unwrap();
    let status = reaper
        .wait_exit(stop_bound(&world.config()))
        .expect("the reaper exits on SIGTERM");
    assert!(status.success(), "reaper exit: {status}");
    // The flush at exit sent the spans within the reaper's export timeout; MARGIN is for
    // Jaeger to make them queryable.
    let trace = trace(&jaeger, &trace_id, REAPER_EXPORT_TIMEOUT + MARGIN, |all| {
        row_spans(all, &world.topic, id)
            .iter()
            .any(|s| events(s).iter().any(|e| e == "purged"))
    })
    .await;
    let all = spans(&trace);
    let span = row_spans(&all, &world.topic, id)[0];
    assert_eq!(
        service(&trace, span),
        service_name,
        "OTEL_SERVICE_NAME named the service"
    );
    let own = span["spanID"].as_str().unwrap();
    assert_eq!(
        read["via-reaper"].traceparent.as_deref(),
        Some(format!("00-{trace_id}-{own}-01").as_str())
    );
}
