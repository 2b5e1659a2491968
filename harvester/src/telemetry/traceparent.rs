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
    /// reader that knows an older version, keeping of its flags only the one version 00 defines
    /// (`sampled`: a later version's other bits mean nothing here, and must not be passed on
    /// under version 00). None when it is malformed, or names the invalid all-zero trace or span
    /// id.
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
        let flags = u8::from_str_radix(f, 16).ok()?;
        let parsed = TraceParent {
            trace_id: u128::from_str_radix(t, 16).ok()?,
            span_id: u64::from_str_radix(s, 16).ok()?,
            flags: if version == "00" { flags } else { flags & 0x01 },
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

/// The value of the header named exactly `name`: Kafka header names are case-sensitive, and the
/// W3C names are lowercase (as the stasher writes them); a `TraceParent` header is someone
/// else's and passes untouched.
pub fn find<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_slice())
}

/// What a row's headers say of its `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<'a> {
    /// No `traceparent` header.
    None,
    /// Exactly one, with this value.
    One(&'a [u8]),
    /// More than one (malformed: which would a consumer read?); the first one's value.
    Many(&'a [u8]),
}

/// The row's `traceparent` header(s), by exact name.
pub fn find_traceparent(headers: &[(String, Vec<u8>)]) -> Found<'_> {
    let mut named = headers.iter().filter(|(k, _)| k == TRACEPARENT);
    match (named.next(), named.next()) {
        (None, _) => Found::None,
        (Some((_, v)), None) => Found::One(v),
        (Some((_, v)), Some(_)) => Found::Many(v),
    }
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
        // A later version's flags: only `sampled` is kept.
        let v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff";
        assert_eq!(TraceParent::parse(v1.as_bytes()).unwrap().flags, 0x01);
        let v1 = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe";
        assert_eq!(TraceParent::parse(v1.as_bytes()).unwrap().flags, 0x00);
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

    fn header(k: &str, v: &str) -> (String, Vec<u8>) {
        (k.to_owned(), v.as_bytes().to_vec())
    }

    #[test]
    fn headers_are_found_by_their_exact_name() {
        let h = vec![header("TraceParent", "x"), header("tracestate", "y")];
        assert_eq!(find(&h, TRACEPARENT), None);
        assert_eq!(find(&h, TRACESTATE), Some(&b"y"[..]));
        assert_eq!(find_traceparent(&h), Found::None);
    }

    #[test]
    fn more_than_one_traceparent_is_told_apart() {
        let one = vec![header("traceparent", "a"), header("TRACEPARENT", "b")];
        assert_eq!(find_traceparent(&one), Found::One(&b"a"[..]));
        let two = vec![header("traceparent", "a"), header("traceparent", "b")];
        assert_eq!(find_traceparent(&two), Found::Many(&b"a"[..]));
    }
}
