//! What differs between database servers as a whole, before any scenario has a schema on one:
//! what the report records about the server, what the run sets on it (and puts back), and where
//! it keeps its data. One trait, so the command line never asks which database it is on.

use futures::future::BoxFuture;

use crate::mariadb::MariaDbSettings;
use crate::pg::{AutovacuumMode, PgSettings};
use crate::BenchError;

/// A database server, reached by URL.
pub trait Server: Send + Sync + std::fmt::Debug {
    /// The server's settings for the report, with the run's autovacuum choice applied where the
    /// server has one, and what puts the server back when the command ends.
    fn prepare<'a>(
        &'a self,
        url: &'a str,
        autovacuum: AutovacuumMode,
    ) -> BoxFuture<'a, Result<(ServerSettings, Option<Restore>), BenchError>>;

    /// The directory the server keeps its data in (a local server, readable as a superuser).
    fn data_directory<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Option<String>>;
}

/// A server's settings as the report's provenance holds them.
#[derive(Debug, Default)]
pub struct ServerSettings {
    /// Postgres's (the default's when the server is another).
    pub postgres: PgSettings,
    pub mariadb: Option<MariaDbSettings>,
}

/// What the run changed on the server, put back by [`Restore::restore`].
pub struct Restore {
    /// Puts the setting back and closes the connection it holds.
    undo: BoxFuture<'static, ()>,
}

impl Restore {
    /// A restore whose `undo` runs when the command ends.
    pub fn new(undo: BoxFuture<'static, ()>) -> Self {
        Restore { undo }
    }

    pub async fn restore(self) {
        self.undo.await;
    }
}

impl std::fmt::Debug for Restore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Restore")
    }
}
