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

use super::settings::{endpoint_problem, shown, OtlpProtocol, TracingConfig};
use crate::error::{ConfigProblem, Error};
use crate::Result;

/// `service.name` when neither `tracing.service_name` nor `OTEL_SERVICE_NAME` says.
pub const DEFAULT_SERVICE_NAME: &str = "outbox-harvester";
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The SDK's own default (`OTEL_BSP_MAX_QUEUE_SIZE`).
const DEFAULT_MAX_QUEUE_SIZE: usize = 2048;

/// The export settings in force: each field from `[tracing]`, else its `OTEL_*` variable, else
/// the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub endpoint: String,
    /// Where `endpoint` came from: `tracing.endpoint`, the variable that gave it, or `default`
    /// (errors about the endpoint name it).
    pub endpoint_from: &'static str,
    pub protocol: OtlpProtocol,
    pub sampling_ratio: f64,
    pub service_name: String,
    pub export_interval: Duration,
    pub export_timeout: Duration,
    /// Spans waiting for export beyond which new ones are dropped.
    pub max_queue_size: usize,
}

/// The variables that may stand in for the file's fields, read through one lookup, each value
/// checked as it is read: a bad value is a problem naming the variable, not a silent default.
struct Env<F> {
    get: F,
    problems: Vec<ConfigProblem>,
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    /// The first of `names` that is set, with its name.
    fn first(&self, names: &[&'static str]) -> Option<(&'static str, String)> {
        names.iter().find_map(|&n| (self.get)(n).map(|v| (n, v)))
    }

    /// The first of `names` that is set, parsed by `parse`; a value it refuses is a problem
    /// (`expected` says what was wanted) and counts as unset.
    fn parsed<T>(
        &mut self,
        names: &[&'static str],
        expected: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let (name, value) = self.first(names)?;
        let parsed = parse(value.trim());
        if parsed.is_none() {
            self.problems.push(ConfigProblem::new(
                name,
                format!("({value:?}) must be {expected}; fix it or unset it"),
            ));
        }
        parsed
    }
}

fn protocol(v: &str) -> Option<OtlpProtocol> {
    match v {
        "grpc" => Some(OtlpProtocol::Grpc),
        "http/protobuf" => Some(OtlpProtocol::Http),
        _ => None,
    }
}

fn millis(v: &str) -> Option<Duration> {
    v.parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
}

fn ratio(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|r| (0.0..=1.0).contains(r))
}

fn count(v: &str) -> Option<usize> {
    v.parse::<usize>().ok().filter(|&n| n > 0)
}

impl Resolved {
    /// `config` over the process's environment.
    pub fn from_config(config: &TracingConfig) -> std::result::Result<Self, Vec<ConfigProblem>> {
        Self::over(config, |k| std::env::var(k).ok().filter(|v| !v.is_empty()))
    }

    /// `config` over the variables `env` gives; the problems of the variables it read (each
    /// named), if any.
    pub fn over(
        config: &TracingConfig,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Self, Vec<ConfigProblem>> {
        let mut env = Env {
            get: env,
            problems: Vec::new(),
        };
        let protocol = config
            .protocol
            .or_else(|| {
                env.parsed(
                    &[
                        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                        "OTEL_EXPORTER_OTLP_PROTOCOL",
                    ],
                    "grpc or http/protobuf (http/json is not supported)",
                    protocol,
                )
            })
            .unwrap_or(OtlpProtocol::Grpc);
        let (endpoint, endpoint_from) = endpoint(config, &env, protocol);
        if let Some(problem) = endpoint_problem(&endpoint).filter(|_| endpoint_from != FIELD) {
            env.problems.push(ConfigProblem::new(
                endpoint_from,
                format!("({:?}) {problem}; fix it or unset it", shown(&endpoint)),
            ));
        }
        let resolved = Resolved {
            endpoint,
            endpoint_from,
            protocol,
            sampling_ratio: config
                .sampling_ratio
                .or_else(|| {
                    env.parsed(
                        &["OTEL_TRACES_SAMPLER_ARG"],
                        "a ratio between 0.0 and 1.0",
                        ratio,
                    )
                })
                .unwrap_or(1.0),
            service_name: config
                .service_name
                .clone()
                .or_else(|| env.first(&["OTEL_SERVICE_NAME"]).map(|(_, v)| v))
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.into()),
            export_interval: config
                .export_interval
                .or_else(|| {
                    env.parsed(&["OTEL_BSP_SCHEDULE_DELAY"], "milliseconds above 0", millis)
                })
                .unwrap_or(DEFAULT_INTERVAL),
            export_timeout: config
                .export_timeout
                .or_else(|| {
                    env.parsed(
                        &[
                            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                            "OTEL_EXPORTER_OTLP_TIMEOUT",
                        ],
                        "milliseconds above 0",
                        millis,
                    )
                })
                .unwrap_or(DEFAULT_TIMEOUT),
            max_queue_size: config
                .max_queue_size
                .or_else(|| env.parsed(&["OTEL_BSP_MAX_QUEUE_SIZE"], "a count above 0", count))
                .unwrap_or(DEFAULT_MAX_QUEUE_SIZE),
        };
        if env.problems.is_empty() {
            Ok(resolved)
        } else {
            Err(env.problems)
        }
    }
}

/// The file's field, as `endpoint_from` names it.
const FIELD: &str = "tracing.endpoint";

/// The endpoint and where it came from (see [`TracingConfig::endpoint`] for the rules): the
/// file's as given but for `/v1/traces` on a bare HTTP URL; the signal-specific variable as
/// given; the generic one with `/v1/traces` appended over HTTP.
fn endpoint<F: Fn(&str) -> Option<String>>(
    config: &TracingConfig,
    env: &Env<F>,
    protocol: OtlpProtocol,
) -> (String, &'static str) {
    let http = protocol == OtlpProtocol::Http;
    if let Some(e) = &config.endpoint {
        return (if http { with_traces_path(e) } else { e.clone() }, FIELD);
    }
    if let Some((name, e)) = env.first(&["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]) {
        return (e, name);
    }
    if let Some((name, e)) = env.first(&["OTEL_EXPORTER_OTLP_ENDPOINT"]) {
        let e = if http {
            format!("{}/v1/traces", e.trim_end_matches('/'))
        } else {
            e
        };
        return (e, name);
    }
    let e = if http {
        "http://localhost:4318/v1/traces"
    } else {
        "http://localhost:4317"
    };
    (e.into(), "default")
}

/// The file's HTTP endpoint: `/v1/traces` appended when the URL has no path of its own.
fn with_traces_path(endpoint: &str) -> String {
    let after_scheme = endpoint.split_once("://").map_or("", |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(at) if !after_scheme[at..].trim_end_matches('/').is_empty() => endpoint.to_owned(),
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
    let r = Resolved::from_config(config).map_err(Error::InvalidConfig)?;
    let exporter = exporter(&r).map_err(|e| {
        Error::InvalidConfig(vec![ConfigProblem::new(
            r.endpoint_from,
            format!(
                "({:?}, {:?}): cannot build the OTLP exporter: {e}; give an http:// URL of an OTLP receiver",
                r.endpoint, r.protocol
            ),
        )])
    })?;
    // Spans beyond the queue are dropped by the processor, never waited for: the shard that
    // ends a span does not block on the exporter.
    let batches = BatchConfigBuilder::default()
        .with_scheduled_delay(r.export_interval)
        .with_max_queue_size(r.max_queue_size)
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
        max_queue_size = r.max_queue_size,
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

    fn resolved(config: &TracingConfig, vars: &[(&str, &str)]) -> Resolved {
        Resolved::over(config, env(vars)).unwrap()
    }

    fn refused(vars: &[(&str, &str)]) -> Vec<String> {
        let problems = Resolved::over(&TracingConfig::default(), env(vars)).unwrap_err();
        problems.into_iter().map(|p| p.field).collect()
    }

    #[test]
    fn the_file_wins_over_the_environment_over_the_defaults() {
        let none = TracingConfig::default();
        let r = resolved(&none, &[]);
        assert_eq!(r.endpoint, "http://localhost:4317");
        assert_eq!(r.endpoint_from, "default");
        assert_eq!(r.protocol, OtlpProtocol::Grpc);
        assert_eq!(r.sampling_ratio, 1.0);
        assert_eq!(r.service_name, DEFAULT_SERVICE_NAME);
        assert_eq!(r.export_interval, Duration::from_secs(5));
        assert_eq!(r.max_queue_size, 2048);
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ("OTEL_SERVICE_NAME", "from-env"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "100"),
        ];
        let r = resolved(&none, &vars);
        assert_eq!(r.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(r.endpoint_from, "OTEL_EXPORTER_OTLP_ENDPOINT");
        assert_eq!(r.protocol, OtlpProtocol::Http);
        assert_eq!(r.sampling_ratio, 0.25);
        assert_eq!(r.service_name, "from-env");
        assert_eq!(r.export_interval, Duration::from_millis(200));
        assert_eq!(r.max_queue_size, 100);
        let file = TracingConfig {
            endpoint: Some("http://jaeger:4317".into()),
            protocol: Some(OtlpProtocol::Grpc),
            sampling_ratio: Some(0.5),
            service_name: Some("from-file".into()),
            max_queue_size: Some(10),
            ..Default::default()
        };
        let r = resolved(&file, &vars);
        assert_eq!(r.endpoint, "http://jaeger:4317");
        assert_eq!(r.endpoint_from, "tracing.endpoint");
        assert_eq!(r.sampling_ratio, 0.5);
        assert_eq!(r.service_name, "from-file");
        assert_eq!(r.max_queue_size, 10);
    }

    #[test]
    fn endpoints_follow_the_spec_for_the_traces_path() {
        let http = TracingConfig {
            protocol: Some(OtlpProtocol::Http),
            ..Default::default()
        };
        // The signal-specific variable: as given.
        let vars = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:4318/custom")];
        assert_eq!(resolved(&http, &vars).endpoint, "http://h:4318/custom");
        let vars = [("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:4318")];
        assert_eq!(resolved(&http, &vars).endpoint, "http://h:4318");
        // The generic one: `/v1/traces` appended, path or not.
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4318/base/")];
        assert_eq!(
            resolved(&http, &vars).endpoint,
            "http://h:4318/base/v1/traces"
        );
        // The file's: as given with a path, `/v1/traces` without one.
        let file = |e: &str| TracingConfig {
            endpoint: Some(e.into()),
            ..http.clone()
        };
        assert_eq!(
            resolved(&file("http://h:4318/"), &[]).endpoint,
            "http://h:4318/v1/traces"
        );
        assert_eq!(
            resolved(&file("http://h:4318/x/y"), &[]).endpoint,
            "http://h:4318/x/y"
        );
        // gRPC: as given, whatever the source.
        let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:4317")];
        let grpc = resolved(&TracingConfig::default(), &vars);
        assert_eq!(grpc.endpoint, "http://h:4317");
    }

    #[test]
    fn bad_variables_are_errors_naming_the_variable() {
        assert_eq!(
            refused(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]),
            ["OTEL_EXPORTER_OTLP_PROTOCOL"]
        );
        assert_eq!(
            refused(&[("OTEL_TRACES_SAMPLER_ARG", "half")]),
            ["OTEL_TRACES_SAMPLER_ARG"]
        );
        assert_eq!(
            refused(&[("OTEL_TRACES_SAMPLER_ARG", "1.5")]),
            ["OTEL_TRACES_SAMPLER_ARG"]
        );
        assert_eq!(
            refused(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://vendor:4317")]),
            ["OTEL_EXPORTER_OTLP_ENDPOINT"]
        );
        assert_eq!(
            refused(&[
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4317"),
                ("OTEL_BSP_SCHEDULE_DELAY", "soon"),
                ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
            ]),
            [
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_BSP_SCHEDULE_DELAY",
                "OTEL_BSP_MAX_QUEUE_SIZE"
            ]
        );
    }
}
