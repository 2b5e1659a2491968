//! `install` (feature `otlp`): the OpenTelemetry SDK's tracer provider, exporting over OTLP
//! (gRPC through tonic, or protobuf over HTTP), set as the global provider the harvester's
//! spans go to; and the guard that flushes it at exit.
//!
//! Settings come from `[tracing]` first, then the standard `OTEL_*` variables, then the
//! defaults ([`Resolved`]): one place says which wins, and the reaper logs what it resolved.

use std::time::Duration;

use opentelemetry::global;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

use super::settings::{OtlpProtocol, TracingConfig};
use crate::error::{ConfigProblem, Error};
use crate::Result;

/// `service.name` when neither `tracing.service_name` nor `OTEL_SERVICE_NAME` says.
pub const DEFAULT_SERVICE_NAME: &str = "outbox-harvester";
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The export settings in force: each field from `[tracing]`, else its `OTEL_*` variable, else
/// the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    pub sampling_ratio: f64,
    pub service_name: String,
    pub export_interval: Duration,
    pub export_timeout: Duration,
}

fn millis(v: Option<String>) -> Option<Duration> {
    v?.trim().parse::<u64>().ok().map(Duration::from_millis)
}

impl Resolved {
    /// `config` over the process's environment.
    pub fn from_config(config: &TracingConfig) -> Self {
        Self::over(config, |k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// `config` over the variables `env` gives.
    pub fn over(config: &TracingConfig, env: impl Fn(&str) -> Option<String>) -> Self {
        let first = |names: &[&str]| names.iter().find_map(|n| env(n));
        let protocol = config.protocol.unwrap_or_else(|| {
            match first(&[
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ]) {
                Some(p) if p.trim().starts_with("http") => OtlpProtocol::Http,
                _ => OtlpProtocol::Grpc,
            }
        });
        let endpoint = config
            .endpoint
            .clone()
            .or_else(|| first(&["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]))
            .or_else(|| first(&["OTEL_EXPORTER_OTLP_ENDPOINT"]))
            .unwrap_or_else(|| match protocol {
                OtlpProtocol::Grpc => "http://localhost:4317".into(),
                OtlpProtocol::Http => "http://localhost:4318".into(),
            });
        Resolved {
            endpoint: with_traces_path(endpoint, protocol),
            protocol,
            sampling_ratio: config.sampling_ratio.unwrap_or_else(|| {
                first(&["OTEL_TRACES_SAMPLER_ARG"])
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|r| (0.0..=1.0).contains(r))
                    .unwrap_or(1.0)
            }),
            service_name: config
                .service_name
                .clone()
                .or_else(|| first(&["OTEL_SERVICE_NAME"]))
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.into()),
            export_interval: config
                .export_interval
                .or_else(|| millis(first(&["OTEL_BSP_SCHEDULE_DELAY"])))
                .unwrap_or(DEFAULT_INTERVAL),
            export_timeout: config
                .export_timeout
                .or_else(|| {
                    millis(first(&[
                        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                        "OTEL_EXPORTER_OTLP_TIMEOUT",
                    ]))
                })
                .unwrap_or(DEFAULT_TIMEOUT),
        }
    }
}

/// OTLP over HTTP posts to `/v1/traces`: appended when the URL has no path of its own.
fn with_traces_path(endpoint: String, protocol: OtlpProtocol) -> String {
    if protocol == OtlpProtocol::Grpc {
        return endpoint;
    }
    let after_scheme = endpoint.split_once("://").map_or("", |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(at) if !after_scheme[at..].trim_end_matches('/').is_empty() => endpoint,
        _ => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
    }
}

/// The installed provider: flushed and shut down when dropped (the reaper holds it until it
/// exits). Drop it outside a current-thread runtime's thread: the export it waits for needs
/// the runtime (gRPC).
#[derive(Debug)]
pub struct TracingGuard {
    provider: SdkTracerProvider,
}

impl TracingGuard {
    /// Exports every span ended so far, now (blocks until the receiver answered or the
    /// export timed out).
    pub fn flush(&self) {
        if let Err(e) = self.provider.force_flush() {
            tracing::warn!("tracing: flushing the spans failed: {e}");
        }
    }
}

impl Drop for TracingGuard {
    fn drop(&mut self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!("tracing: flushing the spans at exit failed: {e}");
        }
    }
}

fn exporter(r: &Resolved) -> std::result::Result<SpanExporter, String> {
    let built = match r.protocol {
        OtlpProtocol::Grpc => {
            if tokio::runtime::Handle::try_current().is_err() {
                return Err("the gRPC exporter must be built inside a Tokio runtime".into());
            }
            SpanExporter::builder()
                .with_tonic()
                .with_endpoint(&r.endpoint)
                .with_timeout(r.export_timeout)
                .build()
        }
        OtlpProtocol::Http => SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(&r.endpoint)
            .with_timeout(r.export_timeout)
            .build(),
    };
    built.map_err(|e| e.to_string())
}

/// Installs the global tracer provider `config` describes (resolved with the `OTEL_*`
/// variables, see [`Resolved`]) and returns its guard; None when `tracing.enabled` is false
/// (nothing is installed, no span is made). Call it inside a Tokio runtime, before the
/// harvester starts.
pub fn install(config: &TracingConfig) -> Result<Option<TracingGuard>> {
    if !config.enabled {
        return Ok(None);
    }
    let r = Resolved::from_config(config);
    let exporter = exporter(&r).map_err(|e| {
        Error::InvalidConfig(vec![ConfigProblem::new(
            "tracing.endpoint",
            format!(
                "({:?}, {:?}): cannot build the OTLP exporter: {e}; give an http:// URL of an OTLP receiver",
                r.endpoint, r.protocol
            ),
        )])
    })?;
    let batches = BatchConfigBuilder::default()
        .with_scheduled_delay(r.export_interval)
        .build();
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batches)
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            r.sampling_ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(r.service_name.clone())
                .build(),
        )
        .build();
    global::set_tracer_provider(provider.clone());
    tracing::info!(
        endpoint = %r.endpoint,
        protocol = ?r.protocol,
        sampling_ratio = r.sampling_ratio,
        service = %r.service_name,
        "tracing: exporting spans over OTLP"
    );
    Ok(Some(TracingGuard { provider }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_file_wins_over_the_environment_over_the_defaults() {
        let none = TracingConfig::default();
        let r = Resolved::over(&none, env(&[]));
        assert_eq!(r.endpoint, "http://localhost:4317");
        assert_eq!(r.protocol, OtlpProtocol::Grpc);
        assert_eq!(r.sampling_ratio, 1.0);
        assert_eq!(r.service_name, DEFAULT_SERVICE_NAME);
        assert_eq!(r.export_interval, Duration::from_secs(5));
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_SERVICE_NAME", "from-env"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ];
        let r = Resolved::over(&none, env(&vars));
        assert_eq!(r.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(r.protocol, OtlpProtocol::Http);
        assert_eq!(r.sampling_ratio, 0.25);
        assert_eq!(r.service_name, "from-env");
        assert_eq!(r.export_interval, Duration::from_millis(200));
        let file = TracingConfig {
            endpoint: Some("http://jaeger:4317".into()),
            protocol: Some(OtlpProtocol::Grpc),
            sampling_ratio: Some(0.5),
            service_name: Some("from-file".into()),
            ..Default::default()
        };
        let r = Resolved::over(&file, env(&vars));
        assert_eq!(r.endpoint, "http://jaeger:4317");
        assert_eq!(r.sampling_ratio, 0.5);
        assert_eq!(r.service_name, "from-file");
    }

    #[test]
    fn http_endpoints_get_the_traces_path_unless_they_have_one() {
        let http = OtlpProtocol::Http;
        assert_eq!(
            with_traces_path("http://h:4318/".into(), http),
            "http://h:4318/v1/traces"
        );
        assert_eq!(
            with_traces_path("http://h:4318/x/y".into(), http),
            "http://h:4318/x/y"
        );
        assert_eq!(
            with_traces_path("http://h:4317".into(), OtlpProtocol::Grpc),
            "http://h:4317"
        );
    }
}
