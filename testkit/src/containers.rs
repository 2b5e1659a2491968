//! Opt-in Postgres in a container (`HARVEST_TESTCONTAINERS=1`), for machines with a Docker daemon.
//!
//! The default path uses a local server (`scripts/services.sh`); this one exists for developers
//! who prefer throwaway containers. Without a daemon, or in a build without testkit's
//! `containers` feature (`cargo test --features testkit/containers`: the Docker client is a
//! large build nobody else needs), it says so in one line and the caller falls back to
//! [`crate::pg::database_url`].

#[cfg(feature = "containers")]
use testcontainers::core::{IntoContainerPort, WaitFor};
#[cfg(feature = "containers")]
use testcontainers::runners::AsyncRunner;
#[cfg(feature = "containers")]
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

use crate::TestkitError;

/// Environment variable that opts in.
pub const OPT_IN: &str = "HARVEST_TESTCONTAINERS";

/// A running Postgres container; stopped when dropped.
#[allow(missing_debug_implementations)]
pub struct PostgresContainer {
    #[cfg(feature = "containers")]
    _container: ContainerAsync<GenericImage>,
    /// URL of the container's `postgres` database.
    pub url: String,
}

/// Whether the user opted in.
pub fn opted_in() -> bool {
    std::env::var(OPT_IN).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Without the `containers` feature: `Ok(None)`, after one line on stderr when opted in.
#[cfg(not(feature = "containers"))]
pub async fn postgres() -> Result<Option<PostgresContainer>, TestkitError> {
    if opted_in() {
        eprintln!("{OPT_IN}=1 but testkit was built without its `containers` feature (cargo test --features testkit/containers); falling back to DATABASE_URL or the local server");
    }
    Ok(None)
}

/// Starts `postgres:16-alpine` with trust auth, if opted in and a daemon answers.
/// Returns `Ok(None)` (after one line on stderr) when not opted in or no daemon is reachable.
#[cfg(feature = "containers")]
pub async fn postgres() -> Result<Option<PostgresContainer>, TestkitError> {
    if !opted_in() {
        return Ok(None);
    }
    let image = GenericImage::new("postgres", "16-alpine")
        .with_exposed_port(5432.tcp())
        .with_wait_for(WaitFor::message_on_stderr(
            "database system is ready to accept connections",
        ))
        .with_env_var("POSTGRES_HOST_AUTH_METHOD", "trust");
    let container = match image.start().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{OPT_IN}=1 but no Docker daemon is usable ({e}); falling back to DATABASE_URL or the local server");
            return Ok(None);
        }
    };
    let port = container
        .get_host_port_ipv4(5432.tcp())
        .await
        .map_err(|e| TestkitError::Containers(format!("no mapped port for postgres: {e}")))?;
    let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
    Ok(Some(PostgresContainer {
        _container: container,
        url,
    }))
}
