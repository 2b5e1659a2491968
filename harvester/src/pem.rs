//! Certificate and key files checked before a client is built, and the crypto provider of the
//! rustls clients built from them.
//!
//! A TLS client given a missing file, or one that holds DER or nothing, fails late and vaguely
//! (often as a handshake error against the server), so `validate()` reads each file named in
//! the config once and says which setting is wrong and why. A leaf: Kafka's, the databases',
//! the electors' and Rink's settings use it alike.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Installs ring as the process's rustls crypto provider unless one is installed already (by
/// the application, or an earlier call). rustls chooses one by itself only when exactly one is
/// built in; with `mssql-tls` (tiberius's rustls brings aws-lc) two are, and a client built
/// without an installed provider panics. Called before every rustls client (NATS, etcd, the
/// databases) is built.
pub(crate) fn ensure_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A client's TLS files (etcd's `leader.tls`, NATS's): the CA that signed the servers'
/// certificates and, for servers that verify clients, this client's certificate and key. PEM
/// files. Whether `ca` is required, and which roots are trusted without it, is the section's
/// to say ([`crate::election::etcd`]: required; NATS: the webpki roots besides).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientTls {
    /// The CA certificate(s) to trust (PEM). Default none; etcd's and Rink's `tls` requires it
    /// (no system roots are used), NATS adds it to the webpki roots it carries.
    pub ca: Option<PathBuf>,
    /// This client's certificate (PEM), with `key`. Default none.
    pub cert: Option<PathBuf>,
    /// The private key of `cert` (PEM file; keys are never inline). Default none.
    pub key: Option<PathBuf>,
}

impl ClientTls {
    /// The problems of these files, each under its field (see [`tls_file_problems`]).
    #[allow(dead_code)] // used by the electors behind the nats and etcd features
    pub(crate) fn file_problems(&self, problem: &mut impl FnMut(&str, String)) {
        tls_file_problems(
            self.ca.as_deref(),
            self.cert.as_deref(),
            self.key.as_deref(),
            problem,
        );
    }
}

/// Why the file at `path` cannot serve as PEM (`what`: "certificate", "private key"), if it
/// cannot: unreadable, or no `-----BEGIN ` line in it. The message names the file, never its
/// content.
pub(crate) fn pem_problem(path: &Path, what: &str) -> Option<String> {
    match std::fs::read(path) {
        Err(e) => Some(format!(
            "cannot read the {what} file {}: {e}",
            path.display()
        )),
        Ok(bytes) if !bytes.windows(11).any(|w| w == b"-----BEGIN ") => Some(format!(
            "the file {} holds no PEM (no \"-----BEGIN \" line); give a PEM {what} file",
            path.display()
        )),
        Ok(_) => None,
    }
}

/// Reads a PEM file checked by [`pem_problem`] (the error says which file and why).
#[allow(dead_code)] // used by the electors behind the nats, zookeeper and etcd features
pub(crate) fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    if let Some(p) = pem_problem(path, what) {
        return Err(p);
    }
    std::fs::read(path).map_err(|e| format!("cannot read the {what} file {}: {e}", path.display()))
}

/// The problems of a client's TLS files, each under its field (`tls.ca`, `tls.cert`,
/// `tls.key`): the CA and a certificate with its key must be PEM files; a certificate comes
/// with its key (an unpaired one is reported missing its pair, not read).
#[allow(dead_code)] // used by the electors behind the nats and etcd features
pub(crate) fn tls_file_problems(
    ca: Option<&Path>,
    cert: Option<&Path>,
    key: Option<&Path>,
    problem: &mut impl FnMut(&str, String),
) {
    let mut check = |field: &str, path: &Path, what: &str| {
        if let Some(p) = pem_problem(path, what) {
            problem(field, p);
        }
    };
    if let Some(ca) = ca {
        check("tls.ca", ca, "CA certificate");
    }
    match (cert, key) {
        (Some(cert), Some(key)) => {
            check("tls.cert", cert, "certificate");
            check("tls.key", key, "private key");
        }
        (Some(_), None) => problem(
            "tls.key",
            "is missing: tls.cert is set; name its key's PEM file".into(),
        ),
        (None, Some(_)) => problem(
            "tls.cert",
            "is missing: tls.key is set; name the certificate's PEM file".into(),
        ),
        (None, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `mssql-tls` both ring and aws-lc are built in, and rustls's `builder()` panics
    /// unless a provider was installed (CI runs this with that feature).
    #[test]
    fn rustls_clients_have_a_provider_whatever_the_features() {
        ensure_crypto_provider();
        ensure_crypto_provider();
        let roots = rustls::RootCertStore::empty();
        let _ = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
    }

    #[test]
    fn a_missing_or_non_pem_file_is_named() {
        let dir = std::env::temp_dir().join(format!("pem-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let der = dir.join("ca.der");
        std::fs::write(&der, [0x30u8, 0x82, 0x01]).unwrap();
        let pem = dir.join("ca.pem");
        std::fs::write(
            &pem,
            "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert!(pem_problem(&der, "CA certificate")
            .unwrap()
            .contains("no PEM"));
        assert!(
            pem_problem(Path::new("/nonexistent/ca.pem"), "CA certificate")
                .unwrap()
                .contains("/nonexistent/ca.pem")
        );
        assert!(pem_problem(&pem, "CA certificate").is_none());
        assert!(read_pem(&pem, "CA certificate").is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
