//! How the elector gets into a secured NATS server: TLS (a CA, optionally a client
//! certificate) and one way to log in (a user and password, a token, or a credentials file).
//!
//! Its settings are checked before connecting (files readable and PEM, one login at most), and
//! a refused handshake or login at start names its setting ([`refusal`]) instead of the
//! address, so an operator is sent to the field at fault. No message carries a password or
//! token.

use std::path::PathBuf;

use async_nats::{ConnectErrorKind, ConnectOptions};

use crate::error::ConfigProblem;
use crate::secret::Secret;

/// TLS to NATS: setting it requires TLS of every server (as a `tls://` URL does); `ca` adds
/// to the webpki roots async-nats carries; `cert` and `key` for servers that verify clients.
pub type NatsTls = crate::pem::ClientTls;

/// The access settings as the elector resolves them.
#[derive(Debug, Clone, Default)]
pub struct Access {
    pub tls: Option<NatsTls>,
    pub user: Option<String>,
    pub password: Option<Secret>,
    pub token: Option<Secret>,
    pub credentials_file: Option<PathBuf>,
}

impl Access {
    /// Which login field a refused login names.
    fn login_field(&self) -> &'static str {
        if self.password.is_some() {
            "password"
        } else if self.token.is_some() {
            "token"
        } else if self.credentials_file.is_some() {
            "credentials_file"
        } else {
            "user"
        }
    }
}

/// Problems with the access settings; `problem(name, message)` prefixes the section's field.
pub(crate) fn access_problems(access: &Access, problem: &mut impl FnMut(&str, String)) {
    if let Some(tls) = &access.tls {
        tls.file_problems(problem);
    }
    let logins = [
        access.user.is_some() || access.password.is_some(),
        access.token.is_some(),
        access.credentials_file.is_some(),
    ];
    if logins.iter().filter(|l| **l).count() > 1 {
        problem(
            "user",
            "set one way to log in: user and password, token, or credentials_file".into(),
        );
    }
    match (&access.user, &access.password) {
        (Some(_), None) => problem("password", "is missing: user is set".into()),
        (None, Some(_)) => problem("user", "is missing: password is set".into()),
        (Some(_), Some(password)) => {
            if let Some(p) = password.problem() {
                problem("password", p);
            }
        }
        (None, None) => {}
    }
    if let Some(p) = access.token.as_ref().and_then(Secret::problem) {
        problem("token", p);
    }
    if let Some(path) = &access.credentials_file {
        if let Err(e) = std::fs::metadata(path) {
            problem(
                "credentials_file",
                format!("cannot read {}: {e}", path.display()),
            );
        }
    }
}

/// `options` with the TLS and login of `access` (reading the secrets now). The error is the
/// problem of the field that could not be read.
pub(crate) async fn apply(
    access: &Access,
    mut options: ConnectOptions,
) -> Result<ConnectOptions, ConfigProblem> {
    let field = |name: &str, message: String| ConfigProblem::new(format!("leader.{name}"), message);
    if let Some(tls) = &access.tls {
        options = options.require_tls(true);
        if let Some(ca) = &tls.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
    }
    if let (Some(user), Some(password)) = (&access.user, &access.password) {
        let password = password.read().map_err(|m| field("password", m))?;
        options = options.user_and_password(user.clone(), password);
    }
    if let Some(token) = &access.token {
        options = options.token(token.read().map_err(|m| field("token", m))?);
    }
    if let Some(path) = &access.credentials_file {
        options = options.credentials_file(path).await.map_err(|e| {
            field(
                "credentials_file",
                format!("cannot use {}: {e}", path.display()),
            )
        })?;
    }
    Ok(options)
}

/// The setting at fault when the server refused the handshake or the login, if it did.
pub(crate) fn refusal(access: &Access, e: &async_nats::ConnectError) -> Option<ConfigProblem> {
    let text = crate::error::chain(e);
    let lower = text.to_lowercase();
    // The handshake's failures come as TLS or I/O errors, told apart by rustls's words.
    let tls_error = matches!(e.kind(), ConnectErrorKind::Tls | ConnectErrorKind::Io);
    let (name, fix) = match e.kind() {
        ConnectErrorKind::AuthorizationViolation | ConnectErrorKind::Authentication => (
            access.login_field(),
            "the server refused the login (authorization violation); check the credentials",
        ),
        _ if tls_error
            && (lower.contains("unknownissuer") || lower.contains("invalid peer certificate")) =>
        {
            (
                "tls.ca",
                "the server's certificate is not signed by a trusted CA; name its CA in tls.ca",
            )
        }
        _ if tls_error
            && (lower.contains("certificaterequired") || lower.contains("badcertificate")) =>
        {
            (
                "tls.cert",
                "the server refused the client certificate (or wants one); set tls.cert and tls.key",
            )
        }
        ConnectErrorKind::Tls if lower.contains("certificate") && lower.contains("key") => (
            "tls.cert",
            "the client certificate or its key cannot be used",
        ),
        ConnectErrorKind::Tls if lower.contains("root") || lower.contains("ca") => {
            ("tls.ca", "the CA certificate cannot be used")
        }
        ConnectErrorKind::Tls => ("tls", "the TLS handshake failed"),
        _ => return None,
    };
    Some(ConfigProblem::new(
        format!("leader.{name}"),
        format!("{fix}: {text}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_login_at_most_and_readable_files() {
        let mut names = Vec::new();
        let access = Access {
            tls: Some(NatsTls {
                ca: Some("/nonexistent/ca.pem".into()),
                ..NatsTls::default()
            }),
            user: Some("u".into()),
            password: Some(Secret::from_env("NATS_ACCESS_TEST_SURELY_UNSET")),
            token: Some(Secret::inline("t")),
            credentials_file: None,
        };
        access_problems(&access, &mut |n: &str, _m: String| names.push(n.to_owned()));
        assert_eq!(names, ["tls.ca", "user", "password"]);
    }
}
