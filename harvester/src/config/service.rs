//! Settings of the process around the harvester: the HTTP endpoint and logging.
//!
//! They live in the one `Config` so that the reaper's file maps 1:1 onto it; an embedder that
//! has its own HTTP server and logger simply leaves them at their defaults.

use std::net::SocketAddr;

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
