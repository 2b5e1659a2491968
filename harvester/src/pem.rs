//! Certificate and key files checked before a client is built.
//!
//! A TLS client given a missing file, or one that holds DER or nothing, fails late and vaguely
//! (often as a handshake error against the server), so `validate()` reads each file named in
//! the config once and says which setting is wrong and why. A leaf: Kafka's, the databases',
//! the electors' and Rink's settings use it alike.

use std::path::Path;

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
