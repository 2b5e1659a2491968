//! The secured listeners of the shared Kafka broker (`scripts/services.sh up` on one node):
//! TLS, mutual TLS, SASL (SCRAM-SHA-256/512, PLAIN) over TLS and over plaintext, and two TLS
//! listeners whose certificates a client must refuse (expired; for another host). The broker
//! runs Kafka's `StandardAuthorizer`: the plaintext listener and the client certificate are
//! super users, SASL user `admin` too; SASL user `harvester` has only the ACLs granted to it.

use std::path::PathBuf;

use crate::coord::address;
use crate::tls::files;
use crate::TestkitError;

/// Where the secured listeners are, and the files a client needs for them.
#[derive(Debug, Clone)]
pub struct SecuredKafka {
    /// The same broker's plaintext listener (`KAFKA_BROKERS`).
    pub plaintext: String,
    /// TLS, server certificate only (the client is anonymous: a super user).
    pub ssl: String,
    /// TLS with a client certificate required (principal: the certificate's common name).
    pub mtls: String,
    pub sasl_ssl: String,
    pub sasl_plaintext: String,
    /// TLS with a server certificate that expired.
    pub expired: String,
    /// TLS with a server certificate for `wrong.example`.
    pub wrong_host: String,
    /// The TLS material ([`crate::tls::write_material`]).
    pub tls_dir: PathBuf,
    /// `<user>.password` for each SASL user.
    pub users_dir: PathBuf,
}

/// The SASL super user.
pub const ADMIN: &str = "admin";
/// The SASL user with only the ACLs a test grants.
pub const HARVESTER: &str = "harvester";

impl SecuredKafka {
    /// The listeners `scripts/services.sh up` exported; an error says to start them.
    pub fn discover() -> Result<Self, TestkitError> {
        let get = |var: &str| {
            let v = address(var, "");
            if v.trim().is_empty() {
                Err(TestkitError::Broker(format!(
                    "{var} is unset: the secured Kafka listeners are started by `scripts/services.sh up` (one node, our own broker)"
                )))
            } else {
                Ok(v.trim().to_owned())
            }
        };
        Ok(SecuredKafka {
            plaintext: get("KAFKA_BROKERS")?,
            ssl: get("KAFKA_SSL_BROKERS")?,
            mtls: get("KAFKA_MTLS_BROKERS")?,
            sasl_ssl: get("KAFKA_SASL_SSL_BROKERS")?,
            sasl_plaintext: get("KAFKA_SASL_PLAINTEXT_BROKERS")?,
            expired: get("KAFKA_EXPIRED_BROKERS")?,
            wrong_host: get("KAFKA_WRONG_HOST_BROKERS")?,
            tls_dir: get("KAFKA_TLS_DIR")?.into(),
            users_dir: get("KAFKA_USERS_DIR")?.into(),
        })
    }

    /// A file of the TLS material, as a string for a librdkafka property.
    pub fn tls_file(&self, name: &str) -> String {
        self.tls_dir.join(name).display().to_string()
    }

    /// The CA every listener's certificate is signed by.
    pub fn ca(&self) -> String {
        self.tls_file(files::CA)
    }

    /// The file holding `user`'s SASL password.
    pub fn password_file(&self, user: &str) -> String {
        self.users_dir
            .join(format!("{user}.password"))
            .display()
            .to_string()
    }

    /// `user`'s SASL password (for a test that must find it nowhere else).
    pub fn password(&self, user: &str) -> Result<String, TestkitError> {
        Ok(std::fs::read_to_string(self.password_file(user))?
            .trim_end()
            .to_owned())
    }
}

/// The TLS endpoints of the databases `scripts/services.sh up` runs itself (its private Postgres
/// cluster and MariaDB server; a server of the caller's has none the tests know of), each with
/// two TLS-only users: [`DB_PASSWORD_USER`] (a password) and [`DB_CERT_USER`] (the client
/// certificate, common name [`crate::tls::CLIENT_NAME`]).
#[derive(Debug, Clone)]
pub struct SecuredDatabases {
    /// `postgres://127.0.0.1:PORT/postgres`, no user.
    pub postgres: String,
    /// `mysql://127.0.0.1:PORT/test`, no user.
    pub mariadb: String,
    pub tls_dir: PathBuf,
    /// `pg.password` and `mariadb.password`, [`DB_PASSWORD_USER`]'s on each.
    pub users_dir: PathBuf,
}

/// The database user that logs in with a password, over TLS only.
pub const DB_PASSWORD_USER: &str = "harvester_pw";
/// The database user that logs in with the client certificate, over TLS only.
pub const DB_CERT_USER: &str = "harvester_cert";

impl SecuredDatabases {
    /// What `scripts/services.sh up` exported, or why the TLS tests cannot run here.
    pub fn discover() -> Result<Self, String> {
        let get = |var: &str| {
            let v = address(var, "").trim().to_owned();
            if v.is_empty() {
                Err(format!(
                    "{var} is unset: the databases' TLS endpoints are those of the servers \
                     `scripts/services.sh up` starts itself (not a DATABASE_URL or MARIADB_URL \
                     of the caller's)"
                ))
            } else {
                Ok(v)
            }
        };
        Ok(SecuredDatabases {
            postgres: get("DATABASE_TLS_URL")?,
            mariadb: get("MARIADB_TLS_URL")?,
            tls_dir: get("KAFKA_TLS_DIR")?.into(),
            users_dir: get("DB_USERS_DIR")?.into(),
        })
    }

    /// A file of the TLS material.
    pub fn tls_file(&self, name: &str) -> String {
        self.tls_dir.join(name).display().to_string()
    }

    /// The file holding [`DB_PASSWORD_USER`]'s password on `server` (`pg` or `mariadb`).
    pub fn password_file(&self, server: &str) -> PathBuf {
        self.users_dir.join(format!("{server}.password"))
    }
}
