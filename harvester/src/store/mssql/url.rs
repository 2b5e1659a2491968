//! `sqlserver://` and `mssql://` URLs, read into a tiberius [`Config`].
//!
//! Every store here is named by one URL in `database.url`, but tiberius reads ADO.NET and JDBC
//! connection strings, not URLs, so this module reads one:
//!
//! `sqlserver://user:password@host:1433/database?encrypt=false&application_name=billing`
//!
//! - `user` and `password`: a SQL Server login (SQL authentication, the only kind this build
//!   has), percent-encoded like any URL's userinfo (`p%40ss` for `p@ss`); the user is required;
//! - `host`: a name, an IPv4 address or an IPv6 address in brackets; the port defaults to 1433;
//! - `database`: optional (the login's default database otherwise), percent-encoded;
//! - parameters, each at most once:
//!   - `encrypt`: `false` (plain TDS: nothing is encrypted, the login included; the server must
//!     not force encryption), `true` (everything over TLS) or `login` (TLS for the login only).
//!     Without the `mssql-tls` feature the build has no TLS backend: only `false` works, and it
//!     is the default. With it the default is `true`;
//!   - `trust_server_certificate`: `true` accepts any server certificate (no chain or name check;
//!     only on a network you trust), `false` (default) checks it against the system's roots;
//!   - `application_name`: what `APP_NAME()` shows on the server (default `harvester`).
//!
//! Problems name `database.url` and never repeat the password.

use std::fmt;

use tiberius::{AuthMethod, Config, EncryptionLevel};

use crate::error::ConfigProblem;

/// Whether this build has a TLS backend for SQL Server (feature `mssql-tls`).
const TLS: bool = cfg!(feature = "mssql-tls");

/// The schemes of SQL Server URLs.
pub const SCHEMES: [&str; 2] = ["sqlserver://", "mssql://"];

/// What travels encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encrypt {
    /// Nothing (`encrypt=false`): plain TDS.
    Never,
    /// The login only (`encrypt=login`).
    Login,
    /// Everything (`encrypt=true`).
    Always,
}

/// A parsed SQL Server URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub database: Option<String>,
    pub user: String,
    password: String,
    pub encrypt: Encrypt,
    pub trust_server_certificate: bool,
    pub application_name: String,
}

impl Target {
    /// The login's password, given apart from the URL (`database.password`).
    pub(crate) fn set_password(&mut self, password: String) {
        self.password = password;
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("database", &self.database)
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .field("encrypt", &self.encrypt)
            .field("trust_server_certificate", &self.trust_server_certificate)
            .field("application_name", &self.application_name)
            .finish()
    }
}

fn problem(message: impl Into<String>) -> ConfigProblem {
    ConfigProblem::new("database.url", message)
}

const EXAMPLE: &str = "e.g. sqlserver://user:password@host:1433/database";

/// Percent-decodes one part of the URL (`what` names it in the problem).
fn decode(part: &str, what: &str) -> Result<String, ConfigProblem> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    problem(format!(
                        "the {what} of the sqlserver:// URL has a bad percent escape (write % as %25)"
                    ))
                })?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        problem(format!(
            "the {what} of the sqlserver:// URL is not UTF-8 once percent-decoded"
        ))
    })
}

fn flag(name: &str, value: &str) -> Result<bool, ConfigProblem> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" => Ok(true),
        "false" | "no" | "0" => Ok(false),
        _ => Err(problem(format!("has {name}={value:?}; use true or false"))),
    }
}

fn encrypt(value: &str) -> Result<Encrypt, ConfigProblem> {
    let wanted = match value.to_ascii_lowercase().as_str() {
        "false" | "no" | "0" => return Ok(Encrypt::Never),
        "true" | "yes" | "1" => Encrypt::Always,
        "login" => Encrypt::Login,
        _ => {
            return Err(problem(format!(
                "has encrypt={value:?}; use false (plain TDS), true (TLS) or login (TLS for the login only)"
            )))
        }
    };
    if TLS {
        Ok(wanted)
    } else {
        Err(problem(format!(
            "has encrypt={value}, but this build has no TLS for SQL Server: build the harvester \
             with the `mssql-tls` feature, or use encrypt=false where the server accepts \
             unencrypted connections"
        )))
    }
}

/// Whether `url` has a SQL Server scheme.
pub fn is_sqlserver(url: &str) -> bool {
    SCHEMES.iter().any(|s| url.starts_with(s))
}

/// Reads a `sqlserver://` or `mssql://` URL.
pub fn parse(url: &str) -> Result<Target, ConfigProblem> {
    let rest = SCHEMES
        .iter()
        .find_map(|s| url.strip_prefix(s))
        .ok_or_else(|| {
            problem(format!(
                "must start with sqlserver:// or mssql://, {EXAMPLE}"
            ))
        })?;
    let (before_query, query) = match rest.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match before_query.split_once('/') {
        Some((a, p)) => (a, p),
        None => (before_query, ""),
    };
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (u, h),
        None => {
            return Err(problem(format!(
                "a sqlserver:// URL needs a user (SQL Server authentication), {EXAMPLE}"
            )))
        }
    };
    let (user, password) = match userinfo.split_once(':') {
        Some((u, p)) => (decode(u, "user")?, decode(p, "password")?),
        None => (decode(userinfo, "user")?, String::new()),
    };
    if user.is_empty() {
        return Err(problem(format!(
            "a sqlserver:// URL needs a user (SQL Server authentication), {EXAMPLE}"
        )));
    }
    let (host, port) = host_port(hostport)?;
    let database = match path {
        "" => None,
        p if p.contains('/') => {
            return Err(problem(format!(
                "has the path /{p}; the path is one database name, {EXAMPLE}"
            )))
        }
        p => Some(decode(p, "database")?),
    };
    let mut target = Target {
        host,
        port,
        database,
        user,
        password,
        encrypt: if TLS { Encrypt::Always } else { Encrypt::Never },
        trust_server_certificate: false,
        application_name: "harvester".to_owned(),
    };
    let mut seen = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value = decode(value, "parameters")?;
        if seen.contains(&key) {
            return Err(problem(format!("has the parameter {key} twice")));
        }
        seen.push(key);
        match key {
            "encrypt" => target.encrypt = encrypt(&value)?,
            "trust_server_certificate" => {
                target.trust_server_certificate = flag(key, &value)?;
            }
            "application_name" if !value.is_empty() => target.application_name = value,
            "application_name" => {
                return Err(problem("has an empty application_name"));
            }
            other => {
                return Err(problem(format!(
                    "has the parameter {other:?}, which a sqlserver:// URL does not take \
                     (encrypt, trust_server_certificate, application_name)"
                )))
            }
        }
    }
    Ok(target)
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn host_port(hostport: &str) -> Result<(String, u16), ConfigProblem> {
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or_else(|| {
            problem(
                "has an IPv6 host without its closing bracket, e.g. sqlserver://u:p@[::1]:1433/db",
            )
        })?;
        match after {
            "" => (host, None),
            a => match a.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err(problem("has text after the IPv6 host's bracket")),
            },
        }
    } else {
        match hostport.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err(problem(format!(
            "a sqlserver:// URL needs a host, {EXAMPLE}"
        )));
    }
    let port = match port {
        None => 1433,
        Some(p) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            problem(format!(
                "has the port {p:?}, which is not a number from 1 to 65535"
            ))
        })?,
    };
    Ok((host.to_owned(), port))
}

impl Target {
    /// The tiberius configuration of this target. The TCP connection is the pool's
    /// (`pool.rs`), so the host and port here only name the server in the login and the TLS
    /// handshake. tiberius's own per-response deadline is off: the pool bounds each statement.
    pub fn config(&self, handshake: std::time::Duration) -> Config {
        let mut config = Config::new();
        config.host(&self.host);
        config.port(self.port);
        if let Some(db) = &self.database {
            config.database(db);
        }
        config.authentication(AuthMethod::sql_server(&self.user, &self.password));
        config.application_name(&self.application_name);
        config.encryption(match self.encrypt {
            Encrypt::Never => EncryptionLevel::NotSupported,
            Encrypt::Login => EncryptionLevel::Off,
            Encrypt::Always => EncryptionLevel::Required,
        });
        if self.trust_server_certificate {
            config.trust_cert();
        }
        config.handshake_timeout(Some(handshake));
        config.command_timeout(None);
        config
    }

    /// For logs: `host:port/database`.
    pub fn describe(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match &self.database {
            Some(db) => format!("{host}:{}/{db}", self.port),
            None => format!("{host}:{}", self.port),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_urls_are_read() {
        let t = parse(
            "sqlserver://app%40corp:p%40ss%3Aword@db.example:1444/orders%20db?encrypt=false&application_name=billing&trust_server_certificate=true",
        )
        .unwrap();
        assert_eq!(t.host, "db.example");
        assert_eq!(t.port, 1444);
        assert_eq!(t.database.as_deref(), Some("orders db"));
        assert_eq!(t.user, "app@corp");
        assert_eq!(t.password, "p@ss:word");
        assert_eq!(t.encrypt, Encrypt::Never);
        assert!(t.trust_server_certificate);
        assert_eq!(t.application_name, "billing");
        assert_eq!(t.describe(), "db.example:1444/orders db");
        assert_eq!(
            t.config(std::time::Duration::from_secs(1)).get_addr(),
            "db.example:1444"
        );
    }

    #[test]
    fn defaults_and_the_mssql_scheme() {
        let t = parse("mssql://sa@localhost").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("localhost", 1433));
        assert_eq!(t.database, None);
        assert_eq!(t.password, "");
        assert_eq!(t.application_name, "harvester");
        assert!(!t.trust_server_certificate);
        assert_eq!(
            t.encrypt,
            if TLS { Encrypt::Always } else { Encrypt::Never }
        );
        let t = parse("sqlserver://sa:pw@[::1]:1500/db").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 1500));
        assert_eq!(t.describe(), "[::1]:1500/db");
        assert_eq!(parse("sqlserver://sa:pw@[fe80::1]/").unwrap().port, 1433);
        assert!(is_sqlserver("sqlserver://x") && is_sqlserver("mssql://x"));
        assert!(!is_sqlserver("postgres://x") && !is_sqlserver("sqlserver:/x"));
    }

    #[test]
    fn the_password_never_shows() {
        let t = parse("sqlserver://sa:hunter2@h/db").unwrap();
        assert!(!format!("{t:?}").contains("hunter2"), "{t:?}");
        assert!(!format!("{:?}", t.config(std::time::Duration::from_secs(1))).contains("hunter2"));
        let p = parse("sqlserver://sa:hunter2@h:99999/db").unwrap_err();
        assert!(!p.message.contains("hunter2"), "{p}");
    }

    #[test]
    fn bad_urls_say_what_is_wrong_under_database_url() {
        let cases = [
            ("sqlserver://host:1433/db", "needs a user"),
            ("sqlserver://:pw@host/db", "needs a user"),
            ("sqlserver://sa:pw@/db", "needs a host"),
            ("sqlserver://sa:pw@:1433/db", "needs a host"),
            ("sqlserver://sa:pw@h:0/db", "not a number from 1 to 65535"),
            ("sqlserver://sa:pw@h:x/db", "not a number from 1 to 65535"),
            ("sqlserver://sa:pw@[::1/db", "closing bracket"),
            ("sqlserver://sa:pw@[::1]x/db", "after the IPv6 host"),
            ("sqlserver://sa:pw@h/db/more", "one database name"),
            (
                "sqlserver://sa:p%zz@h/db",
                "password of the sqlserver:// URL has a bad percent",
            ),
            ("sqlserver://sa:p%ff@h/db", "not UTF-8"),
            ("sqlserver://sa@h/db?encrypt=maybe", "use false (plain TDS)"),
            (
                "sqlserver://sa@h/db?trust_server_certificate=sure",
                "use true or false",
            ),
            ("sqlserver://sa@h/db?timeout=5", "does not take"),
            ("sqlserver://sa@h/db?encrypt=false&encrypt=false", "twice"),
            (
                "sqlserver://sa@h/db?application_name=",
                "empty application_name",
            ),
            ("postgres://u@h/db", "must start with sqlserver://"),
        ];
        for (url, why) in cases {
            let p = parse(url).unwrap_err();
            assert_eq!(p.field, "database.url", "{url}");
            assert!(p.message.contains(why), "{url}: {}", p.message);
            assert!(p.message.starts_with(char::is_lowercase), "{}", p.message);
        }
    }

    #[test]
    fn encryption_needs_the_tls_feature() {
        for value in ["true", "login"] {
            let got = parse(&format!("sqlserver://sa@h/db?encrypt={value}"));
            if TLS {
                assert!(got.is_ok(), "{got:?}");
            } else {
                let p = got.unwrap_err();
                assert!(p.message.contains("`mssql-tls` feature"), "{}", p.message);
                assert!(p.message.contains("encrypt=false"), "{}", p.message);
            }
        }
    }
}
