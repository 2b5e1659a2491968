//! The header columns of the stores without arrays (MariaDB, SQL Server): a row's headers are
//! two JSON arrays of the same length, `header_keys` (names, strings) and `header_values` (values,
//! base64 strings, since JSON holds text and header values are bytes). Two parallel arrays rather
//! than one array of pairs keep the Postgres native table's layout, and with it the same poison
//! rule: arrays of different lengths (and here also anything that is not an array of strings, or
//! bad base64) make the row poison, quarantined with the cause, never an error that stops
//! marking. One codec for both, so the two tables hold the same text for the same headers.
//!
//! Base64 is [`crate::base64`]'s: RFC 4648 with padding, whose decoder skips ASCII whitespace,
//! so values written with MariaDB's `TO_BASE64()` (which breaks lines) decode.

use crate::base64::{decode as unbase64, encode as base64};
use crate::outbox::{zip_headers, Poison};

/// The two JSON columns of `headers`: names, and base64 values (what the stasher writes; a
/// bulk loader writing rows itself uses this too, so the store reads them back alike).
pub fn encode(headers: &[(String, Vec<u8>)]) -> (String, String) {
    let keys: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<String> = headers.iter().map(|(_, v)| base64(v)).collect();
    (
        serde_json::Value::from(keys).to_string(),
        serde_json::Value::from(values).to_string(),
    )
}

/// The headers of row `id` from its two JSON columns, or the poison that says what is wrong.
pub fn decode(id: i64, keys: &[u8], values: &[u8]) -> Result<Vec<(String, Vec<u8>)>, Poison> {
    let strings = |column: &str, json: &[u8]| {
        serde_json::from_slice::<Vec<String>>(json).map_err(|e| Poison {
            id,
            reason: format!("row {id}: {column} is not a JSON array of strings ({e})"),
        })
    };
    let keys = strings("header_keys", keys)?;
    let encoded = strings("header_values", values)?;
    let mut values = Vec::with_capacity(encoded.len());
    for (i, v) in encoded.iter().enumerate() {
        values.push(unbase64(v).ok_or_else(|| Poison {
            id,
            reason: format!("row {id}: header value {i} is not base64"),
        })?);
    }
    zip_headers(id, keys, values, |v| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_through_their_columns() {
        let headers = vec![
            ("trace".to_owned(), b"abc".to_vec()),
            ("bin".to_owned(), vec![0, 255, 7]),
            ("empty".to_owned(), Vec::new()),
            ("ünï\"code".to_owned(), "✓".as_bytes().to_vec()),
        ];
        let (keys, values) = encode(&headers);
        assert_eq!(keys, r#"["trace","bin","empty","ünï\"code"]"#);
        assert_eq!(values, r#"["YWJj","AP8H","","4pyT"]"#);
        assert_eq!(decode(1, keys.as_bytes(), values.as_bytes()), Ok(headers));
        assert_eq!(encode(&[]), ("[]".to_owned(), "[]".to_owned()));
        assert_eq!(decode(1, b"[]", b"[]"), Ok(Vec::new()));
        // Line breaks inside a value (as some base64 writers put them) are skipped.
        assert_eq!(
            decode(1, br#"["a"]"#, b"[\"YW\\r\\nJj\"]"),
            Ok(vec![("a".to_owned(), b"abc".to_vec())])
        );
    }

    #[test]
    fn malformed_headers_are_poison_naming_the_row() {
        let cases: [(&str, &str, &str); 6] = [
            (
                r#"["a","b"]"#,
                r#"["AQ=="]"#,
                "header arrays differ in length",
            ),
            (
                r#"{"a":1}"#,
                "[]",
                "header_keys is not a JSON array of strings",
            ),
            (
                r#"["a"]"#,
                "[1]",
                "header_values is not a JSON array of strings",
            ),
            ("not json", "[]", "header_keys"),
            ("", "[]", "header_keys"),
            (r#"["a"]"#, r#"["@@@@"]"#, "header value 0 is not base64"),
        ];
        for (keys, values, why) in cases {
            let p = decode(9, keys.as_bytes(), values.as_bytes()).unwrap_err();
            assert_eq!(p.id, 9);
            assert!(
                p.reason.starts_with("row 9: ") && p.reason.contains(why),
                "{}",
                p.reason
            );
        }
    }
}
