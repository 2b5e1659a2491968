//! How a verifying consumer reaches the broker: its bootstrap servers and any further librdkafka
//! properties, such as a secured listener's.
//!
//! The properties are in the harvester's form: a secret is given as `<property>_file`, the file
//! holding it (`"sasl.password_file"`), and read only when a client is created. So the settings
//! carry no password, and can be handed to a harvester's config, printed or serialised as they
//! are, while the consumer reading the same topic logs in as the harvester does.

use rdkafka::ClientConfig;

use crate::secured::SecuredKafka;
use crate::TestkitError;

/// The SASL mechanism [`ClientSettings::sasl_ssl`] logs in with.
pub const SASL_SSL_MECHANISM: &str = "SCRAM-SHA-512";

/// A Kafka client's way to the broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    pub bootstrap: String,
    /// librdkafka properties on top of `bootstrap.servers`; a secret only as
    /// `<property>_file` (see the module docs).
    pub properties: Vec<(String, String)>,
}

impl ClientSettings {
    /// `bootstrap` with librdkafka's defaults (the plaintext listener).
    pub fn plaintext(bootstrap: &str) -> Self {
        ClientSettings {
            bootstrap: bootstrap.to_owned(),
            properties: Vec::new(),
        }
    }

    /// The broker's SASL_SSL listener as `user`: SCRAM-SHA-512, the throwaway CA, the password
    /// from the user's file.
    pub fn sasl_ssl(secured: &SecuredKafka, user: &str) -> Self {
        let properties = [
            ("security.protocol", "SASL_SSL".to_owned()),
            ("sasl.mechanism", SASL_SSL_MECHANISM.to_owned()),
            ("sasl.username", user.to_owned()),
            ("sasl.password_file", secured.password_file(user)),
            ("ssl.ca.location", secured.ca()),
        ];
        ClientSettings {
            bootstrap: secured.sasl_ssl.clone(),
            properties: properties
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        }
    }

    /// `security.protocol`, librdkafka's default when unset.
    pub fn protocol(&self) -> &str {
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| k == "security.protocol")
            .map_or("PLAINTEXT", |(_, v)| v.as_str())
    }

    /// A librdkafka config with these settings, each `<property>_file` read into `<property>`
    /// (without its trailing newline). An error names the property and the file, never what
    /// the file holds.
    pub fn client_config(&self) -> Result<ClientConfig, TestkitError> {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap);
        for (key, value) in &self.properties {
            match key.strip_suffix("_file") {
                Some(property) => {
                    let secret = std::fs::read_to_string(value).map_err(|e| {
                        TestkitError::Broker(format!("{key}: cannot read the file {value:?}: {e}"))
                    })?;
                    config.set(property, secret.trim_end_matches(['\n', '\r']));
                }
                None => {
                    config.set(key, value);
                }
            }
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_read_from_its_file_into_the_client_only() {
        let dir = std::env::temp_dir().join(crate::names::unique("client-settings"));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("admin.password");
        std::fs::write(&file, "not-in-the-settings\n").unwrap();
        let settings = ClientSettings {
            bootstrap: "127.0.0.1:1".into(),
            properties: vec![
                ("security.protocol".into(), "SASL_SSL".into()),
                ("sasl.password_file".into(), file.display().to_string()),
            ],
        };
        assert_eq!(settings.protocol(), "SASL_SSL");
        assert!(!format!("{settings:?}").contains("not-in-the-settings"));
        let config = settings.client_config().unwrap();
        assert_eq!(config.get("sasl.password"), Some("not-in-the-settings"));
        assert_eq!(config.get("sasl.password_file"), None);
        assert_eq!(config.get("bootstrap.servers"), Some("127.0.0.1:1"));

        let missing = ClientSettings {
            properties: vec![("sasl.password_file".into(), "/nonexistent/pw".into())],
            ..ClientSettings::plaintext("x:1")
        };
        let e = missing.client_config().unwrap_err().to_string();
        assert!(
            e.contains("sasl.password_file") && e.contains("/nonexistent/pw"),
            "{e}"
        );
        assert_eq!(ClientSettings::plaintext("x:1").protocol(), "PLAINTEXT");
        let _ = std::fs::remove_dir_all(dir);
    }
}
