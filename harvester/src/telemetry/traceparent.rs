//! The W3C trace context headers (`traceparent`, `tracestate`) as the outbox stores them: two
//! row headers, published as the Kafka record's headers of the same names (OpenTelemetry's Kafka
//! conventions). Parsing is plain code with no dependency, so the stasher's API and the tests can
//! use it without the `otel` feature; the pipeline parses only when harvester tracing is on.

/// The header that carries the trace and parent span (`00-<trace id>-<span id>-<flags>`).
pub const TRACEPARENT: &str = "traceparent";
/// The header that carries vendor-specific trace state (`key=value,...`).
pub const TRACESTATE: &str = "tracestate";

/// A parsed `traceparent`: its ids and flags as the header has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: u128,
    pub span_id: u64,
    pub flags: u8,
}

impl TraceParent {
    /// Parses a `traceparent` header value (W3C Trace Context, level 1): version `00` exactly as
    /// specified; a later version (not `ff`) by its first four fields, as the spec asks of a
    /// reader that knows an older version. None when it is malformed, or names the invalid
    /// all-zero trace or span id.
    pub fn parse(value: &[u8]) -> Option<TraceParent> {
        let text = std::str::from_utf8(value).ok()?;
        if text.len() < 55 || !text.is_char_boundary(55) {
            return None;
        }
        let (head, rest) = text.split_at(55);
        let version = head.get(..2)?;
        if version == "ff" || (version == "00" && !rest.is_empty()) {
            return None;
        }
        if !rest.is_empty() && !rest.starts_with('-') {
            return None;
        }
        let mut fields = head.split('-');
        let (v, t, s, f) = (
            fields.next()?,
            fields.next()?,
            fields.next()?,
            fields.next()?,
        );
        let lower_hex = |x: &str, n: usize| {
            x.len() == n
                && x.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !(lower_hex(v, 2) && lower_hex(t, 32) && lower_hex(s, 16) && lower_hex(f, 2)) {
            return None;
        }
        let parsed = TraceParent {
            trace_id: u128::from_str_radix(t, 16).ok()?,
            span_id: u64::from_str_radix(s, 16).ok()?,
            flags: u8::from_str_radix(f, 16).ok()?,
        };
        (parsed.trace_id != 0 && parsed.span_id != 0).then_some(parsed)
    }

    /// The header value (version `00`).
    pub fn header(&self) -> String {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id, self.span_id, self.flags
        )
    }

    /// Whether the writer sampled its trace (the `sampled` flag).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }
}

/// The value of the first header named `name` (ASCII case-insensitive, as Kafka clients treat
/// these names in practice; the stasher writes them lowercase).
pub fn find<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_header_parses_and_prints_back() {
        let p = TraceParent::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(p.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(p.span_id, 0x00f067aa0ba902b7);
        assert!(p.sampled());
        assert_eq!(p.header(), GOOD);
        // A later version: its first four fields, whatever follows a dash.
        let v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-extra";
        assert!(!TraceParent::parse(v1.as_bytes()).unwrap().sampled());
    }

    #[test]
    fn malformed_headers_do_not_parse() {
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ] {
            assert_eq!(TraceParent::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(TraceParent::parse(&[0xff; 55]), None);
    }

    #[test]
    fn headers_are_found_by_name_whatever_the_case() {
        let h = vec![("TraceParent".to_owned(), b"x".to_vec())];
        assert_eq!(find(&h, TRACEPARENT), Some(&b"x"[..]));
        assert_eq!(find(&h, TRACESTATE), None);
    }
}
