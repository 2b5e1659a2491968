//! The trace contexts a record's span is made between: the writer's, read from the row's
//! headers (its parent), and the span's own, written as the `traceparent` the record is
//! published with. Both on the per-record path with tracing on, so neither allocates unless
//! it must: the published header is a fixed 55-byte array, and `tracestate` is parsed only when
//! the writer sampled its trace (a parent-based sampler does not record the child of an
//! unsampled parent, and nothing else reads the state).

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;

use crate::telemetry::traceparent::{find, find_traceparent, Found, TraceParent, TRACESTATE};

/// The length of a version-00 `traceparent`.
pub(super) const HEADER_LEN: usize = 55;

/// What a row's headers give the record's span as its parent.
pub(super) enum Parent<'a> {
    /// No `traceparent`: the span starts a trace of its own.
    None,
    /// The writer's context, a remote parent.
    Writer(SpanContext),
    /// A malformed `traceparent` (its value, and why): published untouched, counted.
    Malformed(&'a [u8], &'static str),
}

/// The writer's context in the row's headers.
pub(super) fn writer_context(headers: &[(String, Vec<u8>)]) -> Parent<'_> {
    let value = match find_traceparent(headers) {
        Found::None => return Parent::None,
        Found::Many(value) => return Parent::Malformed(value, "more than one traceparent header"),
        Found::One(value) => value,
    };
    let Some(parent) = TraceParent::parse(value) else {
        return Parent::Malformed(value, "not a W3C traceparent");
    };
    let state = if parent.sampled() {
        find(headers, TRACESTATE)
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<TraceState>().ok())
            .unwrap_or_default()
    } else {
        TraceState::default()
    };
    Parent::Writer(SpanContext::new(
        TraceId::from_bytes(parent.trace_id.to_be_bytes()),
        SpanId::from_bytes(parent.span_id.to_be_bytes()),
        TraceFlags::new(parent.flags),
        true,
        state,
    ))
}

/// The `traceparent` header of a span context (version 00), without allocating.
pub(super) fn header_bytes(cx: &SpanContext) -> [u8; HEADER_LEN] {
    let mut out = [b'-'; HEADER_LEN];
    out[..2].copy_from_slice(b"00");
    hex_into(&mut out[3..35], &cx.trace_id().to_bytes());
    hex_into(&mut out[36..52], &cx.span_id().to_bytes());
    hex_into(&mut out[53..55], &[cx.trace_flags().to_u8()]);
    out
}

/// Lowercase hex of `bytes` into `out` (twice as long).
fn hex_into(out: &mut [u8], bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = HEX[usize::from(b >> 4)];
        pair[1] = HEX[usize::from(b & 0x0f)];
    }
}

/// The `traceparent` header of a span context (version 00), as text.
pub(crate) fn traceparent_of(cx: &SpanContext) -> String {
    String::from_utf8_lossy(&header_bytes(cx)).into_owned()
}

/// The current context's `traceparent` and `tracestate` (None when it has no valid span).
pub(crate) fn current(cx: &Context) -> Option<(String, Option<String>)> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    let state = sc.trace_state().header();
    Some((traceparent_of(sc), (!state.is_empty()).then_some(state)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn h(k: &str, v: &str) -> (String, Vec<u8>) {
        (k.to_owned(), v.as_bytes().to_vec())
    }

    #[test]
    fn the_header_prints_back_as_parsed() {
        let Parent::Writer(cx) = writer_context(&[h("traceparent", GOOD)]) else {
            panic!("a valid context");
        };
        assert_eq!(&header_bytes(&cx)[..], GOOD.as_bytes());
        assert_eq!(traceparent_of(&cx), GOOD);
    }

    #[test]
    fn the_state_is_read_for_a_sampled_parent_only() {
        let sampled = [h("traceparent", GOOD), h("tracestate", "vendor=x")];
        let Parent::Writer(cx) = writer_context(&sampled) else {
            panic!("a valid context");
        };
        assert_eq!(cx.trace_state().header(), "vendor=x");
        let unsampled = [
            h("traceparent", &GOOD.replace("-01", "-00")),
            h("tracestate", "vendor=x"),
        ];
        let Parent::Writer(cx) = writer_context(&unsampled) else {
            panic!("a valid context");
        };
        assert_eq!(cx.trace_state().header(), "");
    }

    #[test]
    fn two_traceparents_or_a_bad_one_are_malformed() {
        let two = [h("traceparent", GOOD), h("traceparent", GOOD)];
        assert!(matches!(writer_context(&two), Parent::Malformed(_, _)));
        let bad = [h("traceparent", "x")];
        assert!(matches!(writer_context(&bad), Parent::Malformed(b"x", _)));
        let other_case = [h("TraceParent", GOOD)];
        assert!(matches!(writer_context(&other_case), Parent::None));
    }
}
