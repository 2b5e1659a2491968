//! A second reader, independent of ours: Kafka's own Java console consumer (from the same jars
//! as the broker, `scripts/services/kafka.sh tool`), so the verifying consumer (rdkafka) is not the only
//! judge of what was published.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::TestkitError;

/// One record as the console consumer printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleRecord {
    pub partition: i32,
    pub offset: i64,
    /// Header pairs in the record's order.
    pub headers: Vec<(String, String)>,
    pub key: String,
    pub value: String,
}

impl ConsoleRecord {
    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads `count` records of `topic` from the beginning with
/// `org.apache.kafka.tools.consumer.ConsoleConsumer` (read_uncommitted, the Java client's
/// default), giving up after `idle` without a record. Keys, values and header values must be
/// UTF-8 without tabs, commas or line breaks.
pub fn read_all(
    bootstrap: &str,
    topic: &str,
    count: usize,
    idle: Duration,
) -> Result<Vec<ConsoleRecord>, TestkitError> {
    read_isolated(bootstrap, topic, count, idle, "read_uncommitted")
}

/// [`read_all`] with `--isolation-level` `isolation` (`read_committed` or `read_uncommitted`).
pub fn read_isolated(
    bootstrap: &str,
    topic: &str,
    count: usize,
    idle: Duration,
    isolation: &str,
) -> Result<Vec<ConsoleRecord>, TestkitError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/services/kafka.sh");
    let out = Command::new(script)
        .args([
            "tool",
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--from-beginning",
            "--max-messages",
            &count.to_string(),
            "--timeout-ms",
            &idle.as_millis().to_string(),
            "--isolation-level",
            isolation,
            "--property",
            "print.partition=true",
            "--property",
            "print.offset=true",
            "--property",
            "print.headers=true",
            "--property",
            "print.key=true",
        ])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(parse_line)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            TestkitError::Broker(format!(
                "console consumer: {e}; its stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })
}

/// `Partition:P<TAB>Offset:O<TAB>h1:v1,h2:v2<TAB>KEY<TAB>VALUE` (`NO_HEADERS` when none).
pub fn parse_line(line: &str) -> Result<ConsoleRecord, String> {
    let fields: Vec<&str> = line.splitn(5, '\t').collect();
    let [partition, offset, headers, key, value] = fields[..] else {
        return Err(format!("not five tab-separated fields: {line:?}"));
    };
    let number = |field: &str, label: &str| {
        field
            .strip_prefix(label)
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(|| format!("no {label}N in {line:?}"))
    };
    let headers = if headers == "NO_HEADERS" {
        Vec::new()
    } else {
        headers
            .split(',')
            .map(|pair| {
                pair.split_once(':')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| format!("header {pair:?} in {line:?}"))
            })
            .collect::<Result<_, _>>()?
    };
    Ok(ConsoleRecord {
        partition: i32::try_from(number(partition, "Partition:")?).map_err(|e| e.to_string())?,
        offset: number(offset, "Offset:")?,
        headers,
        key: key.to_owned(),
        value: value.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_with_headers_parses() {
        let r = parse_line("Partition:1\tOffset:0\tx-run:r1,x-seq:7\tk1\tval one").unwrap();
        assert_eq!(
            r,
            ConsoleRecord {
                partition: 1,
                offset: 0,
                headers: vec![("x-run".into(), "r1".into()), ("x-seq".into(), "7".into())],
                key: "k1".into(),
                value: "val one".into(),
            }
        );
        assert_eq!(r.header("x-seq"), Some("7"));
    }

    #[test]
    fn no_headers_and_a_bad_line() {
        let r = parse_line("Partition:0\tOffset:12\tNO_HEADERS\tk\tv").unwrap();
        assert!(r.headers.is_empty());
        assert!(parse_line("Processed a total of 3 messages").is_err());
    }
}
