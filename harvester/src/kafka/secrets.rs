//! Secrets given indirectly, and certificate files checked before a client is created.
//!
//! A password need not be in the configuration: `<property>_file` names a file holding it,
//! `<property>_env` an environment variable. Problems say where a secret should have come from
//! and why it could not, never what was read.

/// Where a secret comes from, by the key's suffix.
#[derive(Clone, Copy)]
pub(super) enum Indirect {
    File,
    Env,
}

pub(super) fn indirect(key: &str) -> Option<(&str, Indirect)> {
    if let Some(p) = key.strip_suffix("_file") {
        return Some((p, Indirect::File));
    }
    key.strip_suffix("_env").map(|p| (p, Indirect::Env))
}

/// Reads a secret; the error says where from and why, never what was read.
pub(super) fn read_secret(how: Indirect, source: &str) -> Result<String, String> {
    match how {
        Indirect::File => std::fs::read_to_string(source)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_owned())
            .map_err(|e| format!("cannot read the file {source:?}: {e}")),
        Indirect::Env => std::env::var(source)
            .map_err(|e| format!("cannot read the environment variable {source:?}: {e}")),
    }
}

/// librdkafka's certificate and key files: each must exist and hold PEM (`ssl.ca.location`
/// may also name a directory, or `probe`).
pub(super) fn pem_problem(key: &str, value: &str) -> Option<String> {
    const PEM_FILES: [&str; 3] = [
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
    ];
    if !PEM_FILES.contains(&key) || (key == "ssl.ca.location" && value == "probe") {
        return None;
    }
    let path = std::path::Path::new(value);
    if key == "ssl.ca.location" && path.is_dir() {
        return None;
    }
    crate::pem::pem_problem(path, "certificate or key")
}

#[cfg(test)]
mod tests {
    use crate::kafka::KafkaConfig;

    #[test]
    fn a_secret_comes_from_a_file_or_the_environment_and_is_never_shown() {
        let dir = std::env::temp_dir().join(format!("kafka-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("password");
        std::fs::write(&file, "s3cret-from-file\n").unwrap();
        std::env::set_var("HARVESTER_TEST_KAFKA_SECRET", "s3cret-from-env");
        let cfg = KafkaConfig::with_bootstrap("b:9092")
            .set("sasl.password_file", file.to_str().unwrap())
            .set("ssl.key.password_env", "HARVESTER_TEST_KAFKA_SECRET");
        let config = cfg.client_config("kafka", "producers", &[]).unwrap();
        assert_eq!(config.get("sasl.password"), Some("s3cret-from-file"));
        assert_eq!(config.get("ssl.key.password"), Some("s3cret-from-env"));
        let shown = format!("{:?}", cfg.redacted());
        assert!(!shown.contains("s3cret"), "{shown}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_secret_that_cannot_be_read_or_is_given_twice_names_the_key() {
        let cfg = KafkaConfig::with_bootstrap("b:9092")
            .set("sasl.password_file", "/nonexistent/kafka-password")
            .set("sasl.username_env", "HARVESTER_TEST_UNSET_VARIABLE")
            .set("ssl.key.password", "x")
            .set("ssl.key.password_file", "/nonexistent/other");
        let problems = cfg.client_config("kafka", "producers", &[]).unwrap_err();
        let text: Vec<_> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(problems.len(), 3, "{text:?}");
        assert!(
            text[0].starts_with("kafka.\"sasl.password_file\": cannot read the file"),
            "{text:?}"
        );
        assert!(
            text[1]
                .starts_with("kafka.\"sasl.username_env\": cannot read the environment variable"),
            "{text:?}"
        );
        assert!(
            text[2].starts_with("kafka.\"ssl.key.password_file\": \"ssl.key.password\" is set too"),
            "{text:?}"
        );
    }

    #[test]
    fn certificate_files_must_exist_and_hold_pem() {
        let dir = std::env::temp_dir().join(format!("kafka-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("ca.der");
        std::fs::write(&not_pem, [0x30u8, 0x82, 0x01]).unwrap();
        for (key, path) in [
            ("ssl.ca.location", "/nonexistent/ca.pem"),
            ("ssl.certificate.location", not_pem.to_str().unwrap()),
        ] {
            let cfg = KafkaConfig::with_bootstrap("b:9092").set(key, path);
            let problems = cfg.client_config("kafka", "producers", &[]).unwrap_err();
            assert_eq!(
                problems[0].field,
                format!("kafka.\"{key}\""),
                "{problems:?}"
            );
        }
        let ca_dir =
            KafkaConfig::with_bootstrap("b:9092").set("ssl.ca.location", dir.to_str().unwrap());
        assert!(ca_dir.resolved("kafka").1.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
