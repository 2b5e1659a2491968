//! Settings of the process around the harvester: the HTTP endpoint, logging, and the audit
//! trail of what Kafka acknowledged.
//!
//! They live in the one `Config` so that the reaper's file maps 1:1 onto it; an embedder that
//! has its own HTTP server and logger simply leaves them at their defaults.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::ConfigProblem;

/// The HTTP endpoint (`/metrics`, `/healthz`, `/readyz`, `/leader`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Address to listen on, e.g. `0.0.0.0:9090`; port 0 picks a free port. Default: none
    /// (no endpoint) for embedders; the reaper defaults to `127.0.0.1:9090`.
    pub listen: Option<SocketAddr>,
}

/// Evidence of what Kafka acknowledged, kept apart from the outbox (off by default).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// A file to which each acknowledged record appends one line, `<row id> <partition>
    /// <offset> <key as a JSON string>`, written from the producers' delivery reports before the
    /// row can be purged (in transactional mode: acknowledged into its transaction). Default:
    /// none. It costs a formatted line per record; what it is for: telling a record the broker
    /// lost after acknowledging it from one whose row was deleted without an acknowledgement
    /// (the benchmark's `broker-faults` verdict reads it). Flushed when the harvester stops.
    pub ack_log: Option<PathBuf>,
}

/// Log output of the reaper (embedders keep their own subscriber).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoggingConfig {
    /// A `tracing` filter: `info` (default), `debug`, or per target like
    /// `info,harvester::pipeline=debug`. `RUST_LOG` takes precedence.
    pub level: String,
    /// `human` (default) or `json` (one object per line).
    pub format: LogFormat,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
            format: LogFormat::Human,
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Human,
    Json,
}

impl LoggingConfig {
    /// The filter is checked where it is used: with the `logging` feature (the binaries), which
    /// installs the subscriber. Embedders keep their own subscriber and never read `level`.
    #[cfg(not(feature = "logging"))]
    pub(crate) fn problems(&self) -> Vec<ConfigProblem> {
        Vec::new()
    }

    #[cfg(feature = "logging")]
    pub(crate) fn problems(&self) -> Vec<ConfigProblem> {
        match tracing_subscriber::EnvFilter::try_new(&self.level) {
            Ok(_) => Vec::new(),
            Err(e) => vec![ConfigProblem::new(
                "logging.level",
                format!(
                    "is not a valid filter ({e}); use e.g. \"info\" or \"info,harvester=debug\""
                ),
            )],
        }
    }

    /// Installs a global subscriber on stderr (once; later calls do nothing). The `logging`
    /// feature.
    #[cfg(feature = "logging")]
    pub fn init(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .or_else(|_| tracing_subscriber::EnvFilter::try_new(&self.level))
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let _ = match self.format {
            LogFormat::Human => builder.try_init(),
            LogFormat::Json => builder.json().try_init(),
        };
    }
}
