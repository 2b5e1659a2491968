//! Passwords, tokens and passphrases in the configuration, kept out of every output.
//!
//! A deployment must not need a secret in its config file, and nothing the harvester prints
//! (logs, `check-config`, errors, `/metrics`, panics, the bench's reports) may carry one. So a
//! [`Secret`] names where the value lives, a file (`{ file = "/run/secrets/pg" }`) or an
//! environment variable (`{ env = "PG_PASSWORD" }`), or holds it inline (`{ value = "..." }`,
//! for tests and throwaway setups); its `Debug` and [`Secret::redacted`] never show the value,
//! and a problem says where the secret should have come from and why it could not, never what
//! was read. This module is a leaf: config sections below and above it use it alike.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What serialised and debug output shows instead of an inline secret.
pub const REDACTED: &str = "<redacted>";

/// A secret: exactly one of `file`, `env` or `value`.
#[derive(Clone, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// A file holding the secret (one trailing newline is dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// An environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// The secret itself (never in `Debug`, nor in [`Secret::redacted`]; prefer `file` or
    /// `env`). Serialising keeps it, so a config written out reads back the same: print
    /// [`crate::Config::redacted`] instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, &self.env, &self.value) {
            (Some(path), None, None) => write!(f, "Secret(file {path:?})"),
            (None, Some(var), None) => write!(f, "Secret(env {var:?})"),
            (None, None, Some(_)) => write!(f, "Secret({REDACTED})"),
            _ => write!(f, "Secret(<ambiguous>)"),
        }
    }
}

impl Secret {
    /// A secret read from `path` when it is needed.
    pub fn from_file(path: impl Into<PathBuf>) -> Self {
        Secret {
            file: Some(path.into()),
            ..Secret::default()
        }
    }

    /// A secret read from the environment variable `var` when it is needed.
    pub fn from_env(var: impl Into<String>) -> Self {
        Secret {
            env: Some(var.into()),
            ..Secret::default()
        }
    }

    /// A secret given inline.
    pub fn inline(value: impl Into<String>) -> Self {
        Secret {
            value: Some(value.into()),
            ..Secret::default()
        }
    }

    /// The same source with an inline value replaced by [`REDACTED`], for printing.
    pub fn redacted(&self) -> Secret {
        Secret {
            value: self.value.as_ref().map(|_| REDACTED.to_owned()),
            ..self.clone()
        }
    }

    /// Reads the secret. The error says where from and why (for a config problem on the
    /// field that holds it), never what was read.
    pub fn read(&self) -> Result<String, String> {
        match (&self.file, &self.env, &self.value) {
            (Some(path), None, None) => std::fs::read_to_string(path)
                .map(|s| {
                    s.strip_suffix('\n')
                        .unwrap_or(&s)
                        .trim_end_matches('\r')
                        .to_owned()
                })
                .map_err(|e| format!("cannot read the secret file {}: {e}", path.display())),
            (None, Some(var), None) => std::env::var(var)
                .map_err(|e| format!("cannot read the environment variable {var:?}: {e}")),
            (None, None, Some(value)) => Ok(value.clone()),
            (None, None, None) => Err("set one of `file`, `env` or `value`".into()),
            _ => Err("set only one of `file`, `env` and `value`".into()),
        }
    }

    /// Why the secret cannot be read now, if it cannot (for `validate()`).
    pub fn problem(&self) -> Option<String> {
        self.read().err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_comes_from_a_file_or_the_environment_and_is_never_shown() {
        let dir = std::env::temp_dir().join(format!("secret-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("pw");
        std::fs::write(&path, "s3cr3t-file\n").unwrap();
        assert_eq!(Secret::from_file(&path).read().unwrap(), "s3cr3t-file");
        std::env::set_var("SECRET_TEST_PW", "s3cr3t-env");
        assert_eq!(
            Secret::from_env("SECRET_TEST_PW").read().unwrap(),
            "s3cr3t-env"
        );

        let inline = Secret::inline("s3cr3t-inline");
        assert!(!format!("{inline:?}").contains("s3cr3t"));
        let kept: Secret = serde_json::from_str(&serde_json::to_string(&inline).unwrap()).unwrap();
        assert_eq!(
            kept.read().unwrap(),
            "s3cr3t-inline",
            "a written config reads back"
        );
        let json = serde_json::to_string(&inline.redacted()).unwrap();
        assert!(
            !json.contains("s3cr3t") && json.contains(REDACTED),
            "{json}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_or_ambiguous_secret_says_why_without_the_value() {
        let missing = Secret::from_file("/nonexistent/secret");
        assert!(missing.problem().unwrap().contains("/nonexistent/secret"));
        let unset = Secret::from_env("SECRET_TEST_SURELY_UNSET");
        assert!(unset
            .problem()
            .unwrap()
            .contains("SECRET_TEST_SURELY_UNSET"));
        let both = Secret {
            env: Some("X".into()),
            value: Some("s3cr3t".into()),
            ..Secret::default()
        };
        let problem = both.problem().unwrap();
        assert!(problem.contains("only one") && !problem.contains("s3cr3t"));
        assert!(Secret::default().problem().is_some());
    }
}
