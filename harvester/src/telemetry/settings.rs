//! `[tracing]`: the harvester's span per record and where the reaper exports spans (OTLP).
//!
//! The settings live here, with the part they configure, and `config` re-exports them (as it
//! does the Kafka and store settings), so telemetry never imports `config`. Off by default.
//! Every field but `enabled` may be left unset, and then the standard OpenTelemetry
//! environment variables decide (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER_ARG`, ...): a value in the file wins over the
//! environment, the environment over the built-in default. `telemetry::Resolved` applies that
//! order (feature `otlp`); an embedder that installs its own provider uses only `enabled`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;

/// The harvester's spans and their export (docs/tracing.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TracingConfig {
    /// Whether the harvester makes a span per record it publishes (a child of the writer's
    /// trace context when the row has one) and publishes that span's context as the record's
    /// `traceparent`. Default false: rows' headers pass through unread. Needs the `otel`
    /// feature (the reaper has it); the reaper then exports over OTLP (`otlp`).
    pub enabled: bool,
    /// The OTLP receiver, a plain `http://` URL (no TLS backend is built in: for an `https://`
    /// receiver, export to a local collector that forwards), e.g. `http://127.0.0.1:4317`
    /// (gRPC) or `http://127.0.0.1:4318` (HTTP). Over HTTP this value is used as given when it
    /// has a path, and gets `/v1/traces` when it has none (so the port alone works). Default:
    /// unset, then `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as given, as the OpenTelemetry
    /// spec says of the signal-specific variable), then `OTEL_EXPORTER_OTLP_ENDPOINT` (over
    /// HTTP, `/v1/traces` appended to its path, as the spec says of the generic one), else
    /// `http://localhost:4317` (gRPC) or `http://localhost:4318/v1/traces` (HTTP).
    pub endpoint: Option<String>,
    /// `grpc` or `http` (protobuf over HTTP). Default: unset, then
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, then `OTEL_EXPORTER_OTLP_PROTOCOL` (`grpc` or
    /// `http/protobuf`; `http/json` is not supported and refused), else `grpc`.
    pub protocol: Option<OtlpProtocol>,
    /// The share of new traces sampled, 0.0 to 1.0, parent-based: a record whose writer's
    /// context is sampled (or not) follows it, and a record without one starts a trace sampled
    /// at this ratio by trace id. Default: unset, then `OTEL_TRACES_SAMPLER_ARG`, else 1.0.
    pub sampling_ratio: Option<f64>,
    /// The `service.name` of the harvester's spans. Default: unset, then `OTEL_SERVICE_NAME`,
    /// else `outbox-harvester`.
    pub service_name: Option<String>,
    /// How often the batch exporter sends what it gathered. Default: unset, then
    /// `OTEL_BSP_SCHEDULE_DELAY` (milliseconds), else 5s.
    #[serde(with = "humantime_serde::option")]
    pub export_interval: Option<Duration>,
    /// How long one export may take before it is abandoned. Default: unset, then
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, then `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds),
    /// else 10s.
    #[serde(with = "humantime_serde::option")]
    pub export_timeout: Option<Duration>,
    /// How many ended spans may wait for export. Spans beyond it are dropped, not waited for:
    /// publishing never blocks on tracing (a slow or absent receiver costs spans, not
    /// throughput). Default: unset, then `OTEL_BSP_MAX_QUEUE_SIZE`, else 2048 (the SDK's).
    pub max_queue_size: Option<usize>,
}

/// `Config` is `Eq`, and this struct is part of it; `sampling_ratio` is an `f64`, which is only
/// `PartialEq` because NaN is not equal to itself. `validate()` refuses NaN (it is outside
/// 0.0..=1.0), so in a valid config equality is reflexive and `Eq` holds.
impl Eq for TracingConfig {}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OtlpProtocol {
    /// OTLP over gRPC (port 4317 by convention).
    Grpc,
    /// OTLP protobuf over HTTP (port 4318, path `/v1/traces`).
    Http,
}

impl TracingConfig {
    pub(crate) fn problems(&self) -> Vec<ConfigProblem> {
        let mut p = Vec::new();
        if self.enabled && !cfg!(feature = "otel") {
            p.push(ConfigProblem::new(
                "tracing.enabled",
                "needs the harvester built with the `otel` feature (spans to the provider you install) or `otlp` (and `telemetry::install`); set it to false or enable the feature",
            ));
        }
        if let Some(r) = self.sampling_ratio.filter(|r| !(0.0..=1.0).contains(r)) {
            p.push(ConfigProblem::new(
                "tracing.sampling_ratio",
                format!("({r}) must be between 0.0 (no new trace sampled) and 1.0 (every one); leave it unset for OTEL_TRACES_SAMPLER_ARG or 1.0"),
            ));
        }
        if let Some(e) = self.endpoint.as_deref() {
            if let Some(problem) = endpoint_problem(e) {
                p.push(ConfigProblem::new(
                    "tracing.endpoint",
                    format!(
                        "({:?}) {problem}; leave it unset for OTEL_EXPORTER_OTLP_ENDPOINT",
                        shown(e)
                    ),
                ));
            }
        }
        if self
            .service_name
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            p.push(ConfigProblem::new(
                "tracing.service_name",
                "is empty; name the service, or leave it unset for OTEL_SERVICE_NAME or \"outbox-harvester\"",
            ));
        }
        if self.export_timeout.is_some_and(|t| t.is_zero()) {
            p.push(ConfigProblem::new(
                "tracing.export_timeout",
                "must be above 0; leave it unset for OTEL_EXPORTER_OTLP_TIMEOUT or 10s",
            ));
        }
        if self.export_interval.is_some_and(|t| t.is_zero()) {
            p.push(ConfigProblem::new(
                "tracing.export_interval",
                "must be above 0; leave it unset for OTEL_BSP_SCHEDULE_DELAY or 5s",
            ));
        }
        if self.max_queue_size == Some(0) {
            p.push(ConfigProblem::new(
                "tracing.max_queue_size",
                "must be above 0 (0 would drop every span); leave it unset for OTEL_BSP_MAX_QUEUE_SIZE or 2048",
            ));
        }
        p
    }
}

/// What is wrong with an OTLP endpoint URL, if anything: it must be plain `http://` (no TLS
/// backend is built), and hold no credentials (they would be sent in clear and printed wherever
/// the endpoint is: logs, `check-config`).
pub(crate) fn endpoint_problem(url: &str) -> Option<&'static str> {
    if userinfo_end(url).is_some() {
        Some("holds credentials (user:password@); give them as OTEL_EXPORTER_OTLP_HEADERS, never in the URL")
    } else if url.starts_with("http://") {
        None
    } else if url.starts_with("https://") {
        Some("is https://, but the harvester is built without a TLS backend for the exporter; give a plain http:// receiver (e.g. an OpenTelemetry Collector nearby that forwards over TLS)")
    } else {
        Some("must be an http:// URL, e.g. \"http://127.0.0.1:4317\"")
    }
}

/// Where a URL's `user:password@` ends (the index of its `@`), if it has one.
fn userinfo_end(url: &str) -> Option<usize> {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority = &url[start..];
    let authority = &authority[..authority.find(['/', '?', '#']).unwrap_or(authority.len())];
    authority.rfind('@').map(|i| start + i)
}

/// An endpoint as a message may print it: any credentials replaced.
pub(crate) fn shown(url: &str) -> String {
    match userinfo_end(url) {
        Some(at) => {
            let start = url.find("://").map_or(0, |i| i + 3);
            format!("{}<redacted>{}", &url[..start], &url[at..])
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_with_credentials_is_refused_without_printing_them() {
        let c = TracingConfig {
            endpoint: Some("http://otel:s3cret@collector:4317/v1/traces".into()),
            ..Default::default()
        };
        let p = c.problems();
        assert_eq!(p.len(), 1);
        assert!(p[0].message.contains("credentials"), "{}", p[0].message);
        assert!(!p[0].message.contains("s3cret"), "{}", p[0].message);
        assert!(
            p[0].message.contains("http://<redacted>@collector:4317"),
            "{}",
            p[0].message
        );
        assert_eq!(
            shown("http://collector:4317/a@b"),
            "http://collector:4317/a@b"
        );
    }

    #[test]
    fn problems_name_the_field() {
        let c = TracingConfig {
            sampling_ratio: Some(f64::NAN),
            endpoint: Some("127.0.0.1:4317".into()),
            service_name: Some(" ".into()),
            export_timeout: Some(Duration::ZERO),
            export_interval: Some(Duration::ZERO),
            max_queue_size: Some(0),
            ..Default::default()
        };
        let fields: Vec<String> = c.problems().into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "tracing.sampling_ratio",
                "tracing.endpoint",
                "tracing.service_name",
                "tracing.export_timeout",
                "tracing.export_interval",
                "tracing.max_queue_size",
            ]
        );
        assert!(TracingConfig::default().problems().is_empty());
    }

    #[test]
    fn an_https_endpoint_is_refused_with_its_fix() {
        let c = TracingConfig {
            endpoint: Some("https://collector:4317".into()),
            ..Default::default()
        };
        let p = c.problems();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].field, "tracing.endpoint");
        assert!(p[0].message.contains("plain http://"), "{}", p[0].message);
    }
}
