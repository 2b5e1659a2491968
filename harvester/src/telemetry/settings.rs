//! `[tracing]`: the harvester's span per record and where the reaper exports spans (OTLP).
//!
//! The settings live here, with the part they configure, and `config` re-exports them (as it
//! does the Kafka and store settings), so telemetry never imports `config`. Off by default. Every field but `enabled` may be left unset, and then the standard
//! OpenTelemetry environment variables decide (`OTEL_EXPORTER_OTLP_ENDPOINT`,
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
    /// The OTLP receiver, e.g. `http://127.0.0.1:4317` (gRPC) or `http://127.0.0.1:4318`
    /// (HTTP; `/v1/traces` is appended when the URL has no path). Default: unset, then
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, then `OTEL_EXPORTER_OTLP_ENDPOINT`, else
    /// `http://localhost:4317` (gRPC) or `http://localhost:4318/v1/traces` (HTTP).
    pub endpoint: Option<String>,
    /// `grpc` or `http` (protobuf over HTTP). Default: unset, then `OTEL_EXPORTER_OTLP_PROTOCOL`
    /// (`grpc` or `http/protobuf`), else `grpc`.
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
    /// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else 10s.
    #[serde(with = "humantime_serde::option")]
    pub export_timeout: Option<Duration>,
}

/// Checked by `validate()`: a ratio outside 0..=1 samples nothing or everything unexpectedly.
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
            if !(e.starts_with("http://") || e.starts_with("https://")) {
                p.push(ConfigProblem::new(
                    "tracing.endpoint",
                    format!("({e:?}) must be an http:// or https:// URL, e.g. \"http://127.0.0.1:4317\"; leave it unset for OTEL_EXPORTER_OTLP_ENDPOINT"),
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
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_the_field() {
        let c = TracingConfig {
            sampling_ratio: Some(1.5),
            endpoint: Some("127.0.0.1:4317".into()),
            service_name: Some(" ".into()),
            export_timeout: Some(Duration::ZERO),
            ..Default::default()
        };
        let fields: Vec<String> = c.problems().into_iter().map(|p| p.field).collect();
        assert_eq!(
            fields,
            [
                "tracing.sampling_ratio",
                "tracing.endpoint",
                "tracing.service_name",
                "tracing.export_timeout"
            ]
        );
        assert!(TracingConfig::default().problems().is_empty());
    }
}
