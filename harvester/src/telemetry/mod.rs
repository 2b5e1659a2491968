//! Tracing an event end to end (docs/tracing.md): the W3C trace context a writer stores with its
//! row, the harvester's own span per record, and (feature `otlp`) the exporter that sends spans
//! over OTLP.
//!
//! Three layers, so the library stays free of what an embedder does not ask for: the header
//! names and the `traceparent` parser ([`traceparent`]) need nothing; the spans (feature `otel`)
//! need only the OpenTelemetry API and go to whatever provider is installed; [`install`]
//! (feature `otlp`) brings the SDK and the OTLP exporter, as the reaper uses them. Without
//! `otel`, the pipeline's hooks are an uninhabited type the compiler removes.

mod settings;
pub mod traceparent;

#[cfg(feature = "otlp")]
mod install;
#[cfg(feature = "otel")]
mod malformed;
#[cfg(feature = "otel")]
mod spans;
#[cfg(not(feature = "otel"))]
mod stub;

#[cfg(feature = "otlp")]
pub use install::{install, Resolved, TracingGuard, DEFAULT_SERVICE_NAME};
pub use settings::{OtlpProtocol, TracingConfig};
#[cfg(feature = "otel")]
pub(crate) use spans::{current, PipelineTracing, RecordSpans, ResetWhy, Sending};
#[cfg(not(feature = "otel"))]
pub(crate) use stub::{PipelineTracing, RecordSpans, ResetWhy, Sending};
pub use traceparent::{TraceParent, TRACEPARENT, TRACESTATE};
