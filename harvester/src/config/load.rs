//! Reading a config file: TOML, YAML, JSON, or goharvest's reaper YAML (the `files` feature,
//! which the binaries turn on; an embedder that builds its `Config` in code does not compile
//! the TOML and YAML parsers). Environment and command-line layers go on top ([`super::overrides`]).

use std::path::Path;

use super::goharvest::{is_goharvest, GoharvestFile};
use super::overrides::invalid;
use super::Config;
use crate::error::Error;

impl Config {
    /// Reads a file: `.yaml`/`.yml` (ours, or goharvest's reaper file when it has a top-level
    /// `harvest:`), `.json`, otherwise TOML. Unknown keys are errors naming the key.
    pub fn from_file(path: &Path) -> crate::Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            action: format!("read {}", path.display()),
            source,
        })?;
        let file = path.display().to_string();
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => {
                let doc: serde_yaml::Value =
                    serde_yaml::from_str(&text).map_err(|e| invalid(&file, e.to_string()))?;
                if is_goharvest(&doc) {
                    let g: GoharvestFile =
                        serde_yaml::from_value(doc).map_err(|e| invalid(&file, e.to_string()))?;
                    g.into_config().map_err(Error::InvalidConfig)
                } else {
                    serde_yaml::from_value(doc).map_err(|e| invalid(&file, e.to_string()))
                }
            }
            Some("json") => serde_json::from_str(&text).map_err(|e| invalid(&file, e.to_string())),
            _ => toml::from_str(&text).map_err(|e| invalid(&file, e.to_string())),
        }
    }

    /// The layered config: `file` (or the defaults), then `HARVESTER__*` variables from `env`, then
    /// `overrides`; not yet validated.
    pub fn layered<'a>(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> crate::Result<Config> {
        let base = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        base.with_env(env)?.with_overrides(overrides)
    }
}
