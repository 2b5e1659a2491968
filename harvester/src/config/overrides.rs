//! Overrides from the environment and the command line, each naming the field it touched when
//! it is wrong.
//!
//! Overrides go through the serialized form of [`Config`] so that every field is reachable by
//! its documented path (`limits.max_in_flight_records`) without a hand-kept list of flags.

use serde_json::Value;

use super::{Config, LeaderConfig, PublishConfig};
use crate::error::{ConfigProblem, Error};

/// Prefix of environment overrides: `HARVESTER__LIMITS__MAX_IN_FLIGHT_RECORDS=500` sets
/// `limits.max_in_flight_records`; for Kafka properties, `_` becomes `.`:
/// `HARVESTER__KAFKA__BOOTSTRAP_SERVERS=b:9092` sets `kafka."bootstrap.servers"`.
pub const ENV_PREFIX: &str = "HARVESTER__";

/// Sections whose keys are librdkafka property names (dotted, free-form).
const FREE_FORM: [&str; 2] = ["kafka", "producer_kafka"];

pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::InvalidConfig(vec![ConfigProblem::new(field, message)])
}

impl Config {
    /// Applies `path=value` overrides (`limits.send_concurrency=4`,
    /// `kafka."bootstrap.servers"=b:9092` or `kafka.bootstrap.servers=b:9092`). Values are read
    /// as JSON when they parse (numbers, booleans, null, arrays), else as strings.
    /// `leader.kind=etcd` switches the elector (its fields start from their defaults), so
    /// `leader.kind=zookeeper leader.session_timeout=3s` works in either order; so does
    /// `publish.mode=transactional publish.transactional_id=orders`.
    pub fn with_overrides<'a, I>(self, overrides: I) -> crate::Result<Config>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut tree = serde_json::to_value(&self).map_err(|e| invalid("config", e.to_string()))?;
        let overrides: Vec<(&str, &str)> = overrides.into_iter().collect();
        // A change of elector kind comes first, whatever its place: the other `leader.*`
        // overrides name the new kind's fields, which start from their defaults.
        if let Some((path, kind)) = overrides
            .iter()
            .rev()
            .find(|(path, _)| split_path(path) == ["leader", "kind"])
        {
            if tree["leader"]["kind"].as_str() != Some(*kind) {
                let leader = LeaderConfig::defaults(kind).map_err(|e| invalid(*path, e))?;
                tree["leader"] =
                    serde_json::to_value(leader).map_err(|e| invalid(*path, e.to_string()))?;
            }
        }
        // Likewise a change of publishing mode: `publish.*` overrides name the new mode's fields.
        if let Some((path, mode)) = overrides
            .iter()
            .rev()
            .find(|(path, _)| split_path(path) == ["publish", "mode"])
        {
            if tree["publish"]["mode"].as_str() != Some(*mode) {
                let publish = PublishConfig::defaults(mode).map_err(|e| invalid(*path, e))?;
                tree["publish"] =
                    serde_json::to_value(publish).map_err(|e| invalid(*path, e.to_string()))?;
            }
        }
        let mut touched = Vec::new();
        let mut unset = Vec::new();
        for (path, raw) in overrides {
            let segments = split_path(path);
            if segments.is_empty() {
                return Err(invalid(path, "is empty; use e.g. limits.send_buffer=20"));
            }
            let value = match serde_json::from_str::<Value>(raw) {
                Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null | Value::Array(_))) => v,
                _ => Value::String(raw.to_owned()),
            };
            set(&mut tree, &segments, value, path, &mut unset)?;
            touched.push(path.to_owned());
        }
        serde_json::from_value(tree)
            .map_err(|e| invalid(format!("override of {}", touched.join(", ")), e.to_string()))
    }

    /// Overrides from `HARVESTER__*` environment variables (see [`ENV_PREFIX`]).
    pub fn with_env(
        self,
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> crate::Result<Config> {
        let pairs: Vec<(String, String)> = vars
            .into_iter()
            .filter_map(|(k, v)| Some((env_path(k.strip_prefix(ENV_PREFIX)?)?, v)))
            .collect();
        self.with_overrides(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

/// `LIMITS__MAX_IN_FLIGHT_RECORDS` -> `limits.max_in_flight_records`;
/// `KAFKA__SASL_USERNAME` -> `kafka."sasl.username"`.
fn env_path(rest: &str) -> Option<String> {
    let mut parts = rest.split("__").map(str::to_lowercase);
    let first = parts.next().filter(|s| !s.is_empty())?;
    let tail: Vec<String> = parts.collect();
    if FREE_FORM.contains(&first.as_str()) {
        let key = tail.join("__").replace('_', ".");
        return (!key.is_empty()).then(|| format!("{first}.\"{key}\""));
    }
    Some(
        std::iter::once(first)
            .chain(tail)
            .collect::<Vec<_>>()
            .join("."),
    )
}

/// Splits on dots outside double quotes; under `kafka`, the rest is one property name.
fn split_path(path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in path.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => out.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    out.push(current);
    if out.first().is_some_and(|f| FREE_FORM.contains(&f.as_str())) && out.len() > 2 {
        let key = out[1..].join(".");
        out.truncate(1);
        out.push(key);
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Sets `segments` to `value`. A section that was unset (null, e.g. `leader.tls`) lists no
/// fields to check against: `unset` remembers the ones overrides filled in, whose keys are
/// checked when the config is read back (`deny_unknown_fields`).
fn set(
    tree: &mut Value,
    segments: &[String],
    value: Value,
    path: &str,
    unset: &mut Vec<Vec<String>>,
) -> crate::Result<()> {
    let mut node = tree;
    for (i, seg) in segments.iter().enumerate() {
        let was_unset = unset.iter().any(|u| u.as_slice() == &segments[..i]);
        let last = i + 1 == segments.len();
        let map = node
            .as_object_mut()
            .ok_or_else(|| invalid(path, format!("`{seg}` is below a value, not a section")))?;
        // Kafka properties are free-form; every other section's fields are fixed.
        let free_form = i == 1 && FREE_FORM.contains(&segments[0].as_str());
        if !free_form && !was_unset && !map.contains_key(seg.as_str()) {
            let known: Vec<&str> = map.keys().map(String::as_str).collect();
            return Err(invalid(
                path,
                format!("`{seg}` is not a field here; known: {}", known.join(", ")),
            ));
        }
        if last {
            // librdkafka properties are strings, whatever they look like.
            let value = match value {
                Value::String(_) => value,
                other if free_form => Value::String(other.to_string()),
                other => other,
            };
            map.insert(seg.clone(), value);
            return Ok(());
        }
        node = map.entry(seg.clone()).or_insert(Value::Null);
        if node.is_null() {
            *node = Value::Object(serde_json::Map::new());
            unset.push(segments[..=i].to_vec());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_reach_nested_fields_and_kafka_properties() {
        let c = Config::default()
            .with_overrides([
                ("limits.max_in_flight_records", "500"),
                ("kafka.bootstrap.servers", "b:1"),
                ("kafka.\"compression.type\"", "lz4"),
                ("limits.drain_timeout", "2s"),
                ("leader.group_id", "billing"),
                ("producer_kafka.linger.ms", "20"),
            ])
            .unwrap();
        assert_eq!(
            c.limits.max_in_flight_records,
            crate::config::Adaptive::Fixed(500)
        );
        assert_eq!(c.kafka.get("bootstrap.servers"), Some("b:1"));
        assert_eq!(c.kafka.get("compression.type"), Some("lz4"));
        assert_eq!(
            c.limits.drain_timeout,
            Some(std::time::Duration::from_secs(2))
        );
        assert_eq!(
            c.leader.neli().unwrap().group_id.as_deref(),
            Some("billing")
        );
        assert_eq!(c.producer_kafka.get("linger.ms"), Some("20"));
    }

    #[test]
    fn an_unset_database_password_is_given_by_an_override() {
        let c = Config::default()
            .with_overrides([("database.password.env", "DB_PASSWORD")])
            .unwrap();
        let password = c.database.password.as_ref().expect("the password was set");
        assert_eq!(password.env.as_deref(), Some("DB_PASSWORD"));
    }

    #[test]
    #[cfg(feature = "etcd")]
    fn an_unset_section_is_filled_field_by_field() {
        let c = Config::default()
            .with_overrides([
                ("leader.kind", "etcd"),
                ("leader.tls.ca", "/tls/ca.pem"),
                ("leader.tls.cert", "/tls/client.pem"),
                ("leader.password.file", "/run/pw"),
            ])
            .unwrap();
        let LeaderConfig::Etcd(e) = &c.leader else {
            panic!("{:?}", c.leader)
        };
        let tls = e.tls.as_ref().unwrap();
        assert_eq!(tls.ca.as_deref(), Some(std::path::Path::new("/tls/ca.pem")));
        assert_eq!(
            tls.cert.as_deref(),
            Some(std::path::Path::new("/tls/client.pem"))
        );
        assert!(e.password.as_ref().unwrap().file.is_some());
        // Keys of a filled-in section are still checked, when the config is read back.
        let bad = Config::default()
            .with_overrides([("leader.kind", "etcd"), ("leader.tls.bogus", "x")])
            .unwrap_err()
            .to_string();
        assert!(bad.contains("bogus"), "{bad}");
    }

    #[cfg(feature = "zookeeper")]
    #[test]
    fn a_kind_override_switches_the_elector_in_any_order() {
        let c = Config::default()
            .with_overrides([
                ("leader.session_timeout", "3s"),
                ("leader.kind", "zookeeper"),
                ("leader.servers", r#"["zk1:2181", "zk2:2181"]"#),
            ])
            .unwrap();
        let LeaderConfig::ZooKeeper(z) = &c.leader else {
            panic!("{:?}", c.leader)
        };
        assert_eq!(z.session_timeout, std::time::Duration::from_secs(3));
        assert_eq!(z.servers, ["zk1:2181", "zk2:2181"]);
        let e = Config::default()
            .with_overrides([("leader.kind", "raft")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("leader.kind") && e.contains("zookeeper"), "{e}");
    }

    #[test]
    fn unknown_or_malformed_overrides_name_the_field() {
        let e = Config::default()
            .with_overrides([("limits.max_inflight", "5")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("limits.max_inflight") && e.contains("max_in_flight_records"),
            "{e}"
        );
        let e = Config::default()
            .with_overrides([("limits.drain_timeout", "soon")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("limits.drain_timeout"), "{e}");
    }

    #[test]
    fn env_names_map_to_paths() {
        assert_eq!(
            env_path("LIMITS__SEND_BUFFER").unwrap(),
            "limits.send_buffer"
        );
        assert_eq!(
            env_path("KAFKA__BOOTSTRAP_SERVERS").unwrap(),
            "kafka.\"bootstrap.servers\""
        );
        let c = Config::default()
            .with_env([
                ("HARVESTER__LIMITS__SEND_BUFFER".to_owned(), "3".to_owned()),
                ("PATH".to_owned(), "/bin".to_owned()),
            ])
            .unwrap();
        assert_eq!(c.limits.send_buffer, 3);
    }
}
