//! How a client gets into etcd: TLS (a CA, optionally a client certificate) and a user with a
//! password. The elector and Rink's assignor (`assign::rink`) both reach etcd, so both take
//! these settings and connect through [`connect`]: one place reads the files and the secret,
//! and one place ([`refusal`]) tells a refused handshake or login from an unreachable cluster,
//! so a start fails naming the setting at fault instead of retrying until the connect bound.
//!
//! Rules: an `https://` endpoint needs `tls.ca` (this build has no system roots: a cluster's
//! CA is named, never implied); `tls` needs `https://` (or bare `host:port`) endpoints; a
//! client certificate comes with its key, both from PEM files; `user` and `password` come
//! together. No message carries the password.

use std::path::Path;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::error::{chain, ConfigProblem, Error};
use crate::pem::read_pem;
use crate::secret::Secret;
use crate::Result;

/// TLS to etcd: `ca` is required (no system roots are used); `cert` and `key` for a cluster
/// started with `--client-cert-auth`.
pub type EtcdTls = crate::pem::ClientTls;

/// The access settings, as the elector and Rink resolve them.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub tls: Option<EtcdTls>,
    pub user: Option<String>,
    pub password: Option<Secret>,
}

impl Access {
    /// Whether a password is set (so a refused login names it).
    fn has_login(&self) -> bool {
        self.user.is_some()
    }
}

/// Problems with the endpoints and the access settings together (a scheme must match the TLS
/// settings); `problem(name, message)` prefixes the section's field.
pub(crate) fn access_problems(
    endpoints: &[String],
    access: &Access,
    problem: &mut impl FnMut(&str, String),
) {
    if endpoints.is_empty() {
        problem(
            "endpoints",
            "is empty; list at least one client URL, e.g. [\"http://127.0.0.1:2379\"]".into(),
        );
    }
    for endpoint in endpoints {
        let endpoint = endpoint.trim();
        if let Some(p) = endpoint_problem(endpoint) {
            problem("endpoints", p);
        } else if endpoint.starts_with("https://") && access.tls.is_none() {
            problem(
                "endpoints",
                format!("{endpoint:?} is https://: set tls.ca to the CA that signed the servers' certificates"),
            );
        } else if endpoint.starts_with("http://") && access.tls.is_some() {
            problem(
                "endpoints",
                format!("{endpoint:?} is plain http:// but tls is set; use https://"),
            );
        }
    }
    if let Some(tls) = &access.tls {
        tls_problems(tls, problem);
    }
    match (&access.user, &access.password) {
        (Some(user), Some(password)) => {
            if user.trim().is_empty() || user.contains(char::is_whitespace) {
                problem(
                    "user",
                    "is blank or holds whitespace; give an etcd user name".into(),
                );
            }
            if let Some(p) = password.problem() {
                problem("password", p);
            }
        }
        (Some(_), None) => problem(
            "password",
            "is missing: user is set; give the password as { file = \"...\" } or { env = \"...\" }"
                .into(),
        ),
        (None, Some(_)) => problem(
            "user",
            "is missing: password is set; name the etcd user".into(),
        ),
        (None, None) => {}
    }
}

/// What is wrong with one endpoint's form, if anything (whether its scheme fits the TLS
/// settings is `access::access_problems`'s to say).
pub(crate) fn endpoint_problem(endpoint: &str) -> Option<String> {
    let hostport = match endpoint.split_once("://") {
        Some(("http" | "https", rest)) => rest,
        Some((scheme, _)) => {
            return Some(format!(
                "{endpoint:?} has the scheme {scheme:?}; use http://host:port or https://host:port"
            ))
        }
        None => endpoint,
    };
    let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
    let Some((host, port)) = hostport.rsplit_once(':') else {
        return Some(format!(
            "{endpoint:?} has no port; write it as http://host:port, e.g. \"http://{hostport}:2379\""
        ));
    };
    if host.is_empty() || host.contains(['/', ',', ' ', '@']) {
        return Some(format!(
            "{endpoint:?} is not http://host:port (one endpoint per entry, no path or credentials)"
        ));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => None,
        _ => Some(format!("{endpoint:?} has no valid port (1-65535)")),
    }
}

fn tls_problems(tls: &EtcdTls, problem: &mut impl FnMut(&str, String)) {
    if tls.ca.is_none() {
        problem(
            "tls.ca",
            "is missing; name the PEM file of the CA that signed the servers' certificates".into(),
        );
    }
    tls.file_problems(problem);
}

fn invalid(field: &str, name: &str, message: String) -> Error {
    Error::InvalidConfig(vec![ConfigProblem::new(format!("{field}.{name}"), message)])
}

/// The client options for `access`, reading its files and password now (a file changed since
/// `validate()` is still named). `field` is the section (`leader`).
fn options(access: &Access, field: &str) -> Result<ConnectOptions> {
    let mut options = ConnectOptions::new();
    if let Some(tls) = &access.tls {
        let ca = tls.ca.as_deref().unwrap_or(Path::new(""));
        let ca = read_pem(ca, "CA certificate").map_err(|m| invalid(field, "tls.ca", m))?;
        let mut t = TlsOptions::new().ca_certificate(Certificate::from_pem(ca));
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            let cert = read_pem(cert, "certificate").map_err(|m| invalid(field, "tls.cert", m))?;
            let key = read_pem(key, "private key").map_err(|m| invalid(field, "tls.key", m))?;
            t = t.identity(Identity::from_pem(cert, key));
        }
        options = options.with_tls(t);
    }
    if let (Some(user), Some(password)) = (&access.user, &access.password) {
        let password = password.read().map_err(|m| invalid(field, "password", m))?;
        // The token etcd hands out expires (5 min by default): log in again when it does.
        options = options
            .with_user(user.clone(), password)
            .with_auto_token_refresh(true);
    }
    Ok(options)
}

/// A client for `endpoints`. Without a user, connecting is lazy (nothing is sent until the
/// first request); with one, it logs in now. The caller bounds both.
pub(crate) async fn connect(
    endpoints: &[String],
    access: &Access,
    field: &str,
    connect_timeout: Duration,
    tcp_keepalive: Duration,
) -> Result<Client> {
    crate::pem::ensure_crypto_provider();
    let options = options(access, field)?
        .with_connect_timeout(connect_timeout)
        .with_tcp_keepalive(tcp_keepalive);
    Client::connect(endpoints, Some(options))
        .await
        .map_err(Error::coordination(
            "etcd",
            format!("set up a client for {}", endpoints.join(",")),
        ))
}

/// The setting at fault when the cluster refused this client (a TLS handshake, a login, a
/// permission), as a problem naming it (`field`: the section); `None` for anything a retry may
/// fix (an unreachable or starting server).
/// What to add to an unreachable cluster's message when the last error was a TLS connection
/// closed on a client without a certificate. TLS 1.3: the client's side of the handshake
/// completes before the server checks for a client certificate, so the server's "certificate
/// required" alert can lose the race with its closing the connection, which is then all the
/// client sees. The same error is also what a restarting server gives, so it is a hint at the
/// end of the attempts, never a refusal that stops them.
pub(crate) fn closed_hint(access: &Access, field: &str, why: &str) -> String {
    let lower = why.to_lowercase();
    let closed = lower.contains("connection closed") || lower.contains("connection reset");
    if closed && access.tls.as_ref().is_some_and(|t| t.cert.is_none()) {
        format!("; if the server checks client certificates (--client-cert-auth), set {field}.tls.cert and {field}.tls.key")
    } else {
        String::new()
    }
}

pub(crate) fn refusal(access: &Access, field: &str, e: &Error) -> Option<ConfigProblem> {
    if let Error::InvalidConfig(problems) = e {
        return problems.first().cloned();
    }
    let text = chain(e);
    let lower = text.to_lowercase();
    let ca = access
        .tls
        .as_ref()
        .and_then(|t| t.ca.as_deref())
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let (name, fix) = if lower.contains("unknownissuer")
        || lower.contains("invalid peer certificate")
    {
        (
            "tls.ca",
            format!("the server's certificate is not trusted by the CA in {ca:?}; name the CA that signed it"),
        )
    } else if lower.contains("certificaterequired") || lower.contains("certificate required") {
        (
            "tls.cert",
            "the server wants a client certificate (--client-cert-auth); set tls.cert and tls.key"
                .into(),
        )
    } else if lower.contains("badcertificate")
        || lower.contains("unknownca")
        || lower.contains("bad certificate")
    {
        (
            "tls.cert",
            "the server refused the client certificate; give one signed by its --trusted-ca-file"
                .into(),
        )
    } else if lower.contains("invalidcontenttype") || lower.contains("corrupt message") {
        (
            "endpoints",
            "the server does not speak TLS there; use http:// and no tls, or the cluster's TLS port".into(),
        )
    } else if lower.contains("authentication failed")
        || lower.contains("invalid user id or password")
    {
        (
            if access.has_login() {
                "password"
            } else {
                "user"
            },
            "etcd refused the login (authentication failed, invalid user or password)".into(),
        )
    } else if lower.contains("user name is empty") || lower.contains("invalid auth token") {
        (
            "user",
            "etcd has authentication enabled; set user and password".into(),
        )
    } else if lower.contains("permission denied") {
        (
            "user",
            "etcd denied the request (permission denied); grant the user's role readwrite on the prefix".into(),
        )
    } else {
        return None;
    };
    Some(ConfigProblem::new(
        format!("{field}.{name}"),
        format!("{fix}: {text}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(endpoints: &[&str], access: &Access) -> Vec<(String, String)> {
        let endpoints: Vec<String> = endpoints.iter().map(|e| e.to_string()).collect();
        let mut out = Vec::new();
        access_problems(&endpoints, access, &mut |n: &str, m: String| {
            out.push((n.to_owned(), m))
        });
        out
    }

    #[test]
    fn schemes_tls_files_and_logins_are_checked_together() {
        assert!(problems(&["http://e:2379"], &Access::default()).is_empty());
        let https = problems(&["https://e:2379"], &Access::default());
        assert_eq!(https[0].0, "endpoints", "{https:?}");
        assert!(https[0].1.contains("tls.ca"), "{https:?}");
        let tls = Access {
            tls: Some(EtcdTls {
                ca: Some("/nonexistent/ca.pem".into()),
                cert: Some("/nonexistent/c.pem".into()),
                key: None,
            }),
            ..Access::default()
        };
        let p = problems(&["http://e:2379"], &tls);
        let names: Vec<_> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["endpoints", "tls.ca", "tls.key"], "{p:?}");
        assert!(p[1].1.contains("/nonexistent/ca.pem"), "{p:?}");
        let login = Access {
            user: Some("harvester".into()),
            password: Some(Secret::from_file("/nonexistent/pw")),
            ..Access::default()
        };
        let p = problems(&["e:2379"], &login);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "password");
        let no_password = Access {
            user: Some("harvester".into()),
            ..Access::default()
        };
        assert_eq!(problems(&["e:2379"], &no_password)[0].0, "password");
    }

    #[test]
    fn refusals_name_the_setting_never_the_password() {
        let access = Access {
            user: Some("harvester".into()),
            password: Some(Secret::inline("s3cr3t")),
            ..Access::default()
        };
        let login = Error::coordination("etcd", "grant")(etcd_client::Error::InvalidArgs(
            "etcdserver: authentication failed, invalid user ID or password".into(),
        ));
        let p = refusal(&access, "leader", &login).unwrap();
        assert_eq!(p.field, "leader.password");
        assert!(!p.message.contains("s3cr3t"));
        let tls = Error::coordination("etcd", "grant")(etcd_client::Error::InvalidArgs(
            "invalid peer certificate: UnknownIssuer".into(),
        ));
        assert_eq!(
            refusal(&access, "leader", &tls).unwrap().field,
            "leader.tls.ca"
        );
        let down = Error::coordination("etcd", "grant")(etcd_client::Error::InvalidArgs(
            "connection refused".into(),
        ));
        assert!(refusal(&access, "leader", &down).is_none());
        // A TLS connection closed on a client without a certificate: a hint, never a refusal
        // (a restarting server closes connections too).
        let closed = "hyper::Error(Canceled, \"connection closed\")";
        let closed_err =
            Error::coordination("etcd", "grant")(etcd_client::Error::InvalidArgs(closed.into()));
        let no_cert = Access {
            tls: Some(EtcdTls {
                ca: Some("/ca.pem".into()),
                cert: None,
                key: None,
            }),
            ..Access::default()
        };
        assert!(refusal(&no_cert, "leader", &closed_err).is_none());
        assert!(closed_hint(&no_cert, "leader", closed).contains("leader.tls.cert"));
        assert!(
            closed_hint(&access, "leader", closed).is_empty(),
            "no TLS: no hint"
        );
        assert!(closed_hint(&no_cert, "leader", "connection refused").is_empty());
    }
}
