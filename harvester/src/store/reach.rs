//! How a SQL store reaches its server: securely, and failing early and by name.
//!
//! Managed databases require TLS and production ones a password that is no business of the
//! config file. So the URL's TLS parameters (Postgres `sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`; MariaDB/MySQL `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key`) are checked before anything
//! connects, the password may come from `database.password` (a [`Secret`]), and a refused
//! connection is told apart (wrong password, unknown CA, expired certificate, host name
//! mismatch, a server without TLS) and reported as a configuration problem naming the setting,
//! never showing the secret, so the start fails at once instead of retrying what cannot work.

use std::path::Path;

use crate::error::ConfigProblem;
use crate::secret::Secret;

/// The field a URL parameter's problem is reported under.
const URL: &str = "database.url";
/// The field of the password given apart from the URL.
const PASSWORD: &str = "database.password";

/// A database family's TLS parameters in its URL.
struct TlsParams {
    mode: &'static str,
    /// The certificate files (CA, client certificate, client key), each by every name the
    /// URL parser takes; the first is the one to write.
    files: [&'static [&'static str]; 3],
}

const POSTGRES: TlsParams = TlsParams {
    mode: "sslmode",
    files: [
        &["sslrootcert", "ssl-root-cert", "ssl-ca"],
        &["sslcert", "ssl-cert"],
        &["sslkey", "ssl-key"],
    ],
};

const MYSQL: TlsParams = TlsParams {
    mode: "ssl-mode",
    files: [
        &["ssl-ca", "sslca"],
        &["ssl-cert", "sslcert"],
        &["ssl-key", "sslkey"],
    ],
};

fn params_of(url: &str) -> Option<&'static TlsParams> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Some(&POSTGRES)
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        Some(&MYSQL)
    } else {
        None
    }
}

/// The URL's query parameters, decoded (none when it does not parse: the store's own parser
/// reports that).
fn query(url: &str) -> Vec<(String, String)> {
    url::Url::parse(url)
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Problems with the URL's TLS files and with the password's source.
pub(crate) fn problems(url: &str, password: Option<&Secret>) -> Vec<ConfigProblem> {
    let mut p = Vec::new();
    if let Some(params) = params_of(url) {
        let query = query(url);
        let given = |names: &[&str]| query.iter().find(|(k, _)| names.contains(&k.as_str()));
        for names in params.files {
            if let Some((name, path)) = given(names) {
                if let Some(why) = crate::pem::pem_problem(Path::new(path), "certificate or key") {
                    p.push(ConfigProblem::new(URL, format!("its {name}: {why}")));
                }
            }
        }
        let [_, cert, key] = params.files.map(|names| names[0]);
        if given(params.files[1]).is_some() != given(params.files[2]).is_some() {
            p.push(ConfigProblem::new(
                URL,
                format!(
                    "give both {cert} and {key} (the client certificate and its key), or neither"
                ),
            ));
        }
    }
    if let Some(secret) = password {
        if let Some(why) = secret.problem() {
            p.push(ConfigProblem::new(PASSWORD, why));
        }
        if url_has_password(url) {
            p.push(ConfigProblem::new(
                PASSWORD,
                "the URL holds a password too; give it in one place only (preferably here, from \
                 a file or an environment variable)",
            ));
        }
    }
    p
}

fn url_has_password(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| u.password().is_some())
}

/// The password given apart from the URL, read now.
pub(crate) fn password(secret: Option<&Secret>) -> crate::Result<Option<String>> {
    secret
        .map(|s| {
            s.read()
                .map_err(|why| crate::Error::InvalidConfig(vec![ConfigProblem::new(PASSWORD, why)]))
        })
        .transpose()
}

/// A connection's failure as the error to report: a configuration problem naming the setting
/// when the server refused (see [`refusal`]), else a database error naming the server.
pub(crate) fn refused(e: sqlx::Error, database: &crate::store::DatabaseConfig) -> crate::Error {
    match refusal(&e, &database.url, database.password.is_some()) {
        Some(problem) => crate::Error::InvalidConfig(vec![problem]),
        None => crate::Error::db(format!("connect to {}", database.redacted_url()))(e),
    }
}

/// A refused connection as the configuration problem that causes it, when it is one: a login
/// refused, a certificate not trusted, expired or for another host, a server without TLS.
/// `None` for what may pass (an unreachable server, a timeout), which stays a database error.
pub(crate) fn refusal(e: &sqlx::Error, url: &str, password_apart: bool) -> Option<ConfigProblem> {
    let mode = params_of(url).map_or("sslmode", |p| p.mode);
    let ca = params_of(url).map_or("sslrootcert", |p| p.files[0][0]);
    if let sqlx::Error::Database(db) = e {
        let code = db.code().unwrap_or_default();
        // Postgres: 28P01 invalid_password, 28000 invalid_authorization_specification (pg_hba,
        // certificate login); MySQL: SQLSTATE 28000 for access denied (1045).
        if code == "28P01" || code == "28000" {
            let field = if password_apart { PASSWORD } else { URL };
            return Some(ConfigProblem::new(
                field,
                format!(
                    "the server refused the login: {} (check the user, the password, the client \
                     certificate and {mode})",
                    db.message()
                ),
            ));
        }
        return None;
    }
    let text = match e {
        sqlx::Error::Tls(source) => source.to_string(),
        sqlx::Error::Io(source) => source.to_string(),
        sqlx::Error::Configuration(source) => {
            return Some(ConfigProblem::new(URL, format!("cannot be used: {source}")))
        }
        _ => return None,
    };
    tls_refusal(&text, mode, ca)
}

/// A TLS failure's text (rustls's certificate errors) as the setting to fix.
fn tls_refusal(text: &str, mode: &str, ca: &str) -> Option<ConfigProblem> {
    let why = if text.contains("UnknownIssuer") || text.contains("unknown issuer") {
        format!("the server's certificate is not signed by a trusted CA; set {ca} to the CA that signed it")
    } else if text.contains("NotValidForName") || text.contains("not valid for name") {
        format!(
            "the server's certificate is not valid for the host in the URL; connect by a name the \
             certificate holds ({mode}=verify-full checks it)"
        )
    } else if text.contains("Expired") || text.contains("expired") {
        "the server's certificate has expired; renew it (the client refuses it)".to_owned()
    } else if text.contains("does not support TLS") || text.contains("server does not support SSL")
    {
        format!("the server does not offer TLS, which {mode} requires; enable TLS on it or change {mode}")
    } else if text.contains("certificate") || text.contains("tls") || text.contains("TLS") {
        format!("the TLS handshake failed; check {mode}, {ca} and the client certificate")
    } else {
        return None;
    };
    Some(ConfigProblem::new(URL, format!("{why} ({text})")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_non_pem_tls_files_are_named_by_their_parameter() {
        let p = problems(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            None,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "database.url");
        assert!(
            p[0].message.starts_with("its sslrootcert: cannot read"),
            "{}",
            p[0].message
        );

        let not_pem = std::env::temp_dir().join(format!("not-pem-{}", std::process::id()));
        std::fs::write(&not_pem, "hello").unwrap();
        let url = format!(
            "mysql://u@h/db?ssl-mode=VERIFY_CA&ssl-ca={}",
            not_pem.display()
        );
        let p = problems(&url, None);
        assert!(
            p[0].message.contains("ssl-ca") && p[0].message.contains("no PEM"),
            "{p:?}"
        );
        std::fs::remove_file(not_pem).unwrap();

        let p = problems("postgres://u@h/db?sslcert=/etc/hostname", None);
        assert!(
            p.iter()
                .any(|p| p.message.contains("give both sslcert and sslkey")),
            "{p:?}"
        );
    }

    #[test]
    fn a_password_in_two_places_or_unreadable_is_refused_without_showing_it() {
        let p = problems("postgres://u:s3cr3t@h/db", Some(&Secret::inline("other")));
        assert_eq!(p[0].field, "database.password");
        assert!(!format!("{p:?}").contains("s3cr3t"));
        let p = problems(
            "postgres://u@h/db",
            Some(&Secret::from_env("SURELY_UNSET_PG_PW")),
        );
        assert!(p[0].message.contains("SURELY_UNSET_PG_PW"), "{p:?}");
        assert!(problems("postgres://u@h/db", Some(&Secret::inline("pw"))).is_empty());
    }

    #[test]
    fn certificate_failures_name_the_setting_to_fix() {
        let p = tls_refusal(
            "invalid peer certificate: UnknownIssuer",
            "sslmode",
            "sslrootcert",
        )
        .unwrap();
        assert!(p.message.contains("set sslrootcert"), "{}", p.message);
        let p = tls_refusal(
            "invalid peer certificate: NotValidForName",
            "ssl-mode",
            "ssl-ca",
        )
        .unwrap();
        assert!(p.message.contains("ssl-mode=verify-full"), "{}", p.message);
        assert!(tls_refusal("connection reset by peer", "sslmode", "sslrootcert").is_none());
    }
}
