//! How a test or benchmark record identifies itself: run id and per-key sequence in headers.
//!
//! Headers (not the value) carry the identity so payload sizes stay whatever the workload
//! asks for, and the same envelope works for the native and the goharvest-shaped table.

/// Header holding the run id.
pub const RUN_HEADER: &str = "x-run";
/// Header holding the per-key sequence number, in decimal.
pub const SEQ_HEADER: &str = "x-seq";

/// The two headers for one record.
pub fn headers(run: &str, seq: u64) -> [(&'static str, String); 2] {
    [(RUN_HEADER, run.to_owned()), (SEQ_HEADER, seq.to_string())]
}

/// Extracts (run, seq) from header pairs, if both are present and well formed.
pub fn parse<'a, I>(headers: I) -> Option<(String, u64)>
where
    I: IntoIterator<Item = (&'a str, Option<&'a [u8]>)>,
{
    let (mut run, mut seq) = (None, None);
    for (name, value) in headers {
        match name {
            RUN_HEADER => {
                run = value
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .map(str::to_owned)
            }
            SEQ_HEADER => {
                seq = value
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|s| s.parse().ok())
            }
            _ => {}
        }
    }
    Some((run?, seq?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let h = headers("r1", 42);
        let pairs = h.iter().map(|(k, v)| (*k, Some(v.as_bytes())));
        assert_eq!(parse(pairs), Some(("r1".to_owned(), 42)));
    }

    #[test]
    fn missing_or_malformed_is_none() {
        assert_eq!(parse([(RUN_HEADER, Some(&b"r"[..]))]), None);
        assert_eq!(
            parse([(RUN_HEADER, Some(&b"r"[..])), (SEQ_HEADER, Some(&b"x"[..]))]),
            None
        );
    }
}
