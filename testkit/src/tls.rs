//! Throwaway TLS material for the secured servers of tests and benchmarks: a certificate
//! authority made for one `scripts/services.sh up` (or one test), certificates for loopback, a
//! client certificate, and the cases a client must refuse (a server certificate of another
//! authority, an expired one, one for another host). PEM only, private keys PKCS#8 and
//! readable by their owner alone: what Kafka's PEM key stores, OpenSSL (librdkafka, Postgres,
//! MariaDB) and rustls all read.

use std::path::Path;

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::TestkitError;

/// The names every server certificate is for: the loopback address and `localhost`.
pub const LOOPBACK: [&str; 2] = ["127.0.0.1", "localhost"];

/// A certificate authority that signs the certificates below.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// A certificate and its private key, as PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: String,
    pub key: String,
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy)]
pub enum Leaf<'a> {
    /// A server of `names` (IP addresses or DNS names); `expired` makes it valid in 2020 only.
    Server { names: &'a [&'a str], expired: bool },
    /// A client whose principal is its common name.
    Client { common_name: &'a str },
}

impl Authority {
    /// A new authority named `name`.
    pub fn new(name: &str) -> Result<Self, TestkitError> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let pem = params.self_signed(&key)?.pem();
        Ok(Authority {
            issuer: Issuer::new(params, key),
            pem,
        })
    }

    /// The authority's own certificate (what a client or server trusts).
    pub fn cert_pem(&self) -> &str {
        &self.pem
    }

    /// A certificate signed by this authority.
    pub fn issue(&self, leaf: Leaf<'_>) -> Result<Issued, TestkitError> {
        let mut params = match leaf {
            Leaf::Server { names, expired } => {
                let mut p = CertificateParams::new(
                    names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
                )?;
                p.distinguished_name.push(DnType::CommonName, names[0]);
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
                if expired {
                    p.not_before = date_time_ymd(2020, 1, 1);
                    p.not_after = date_time_ymd(2020, 12, 31);
                }
                p
            }
            Leaf::Client { common_name } => {
                let mut p = CertificateParams::new(Vec::<String>::new())?;
                p.distinguished_name.push(DnType::CommonName, common_name);
                p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
                p
            }
        };
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// The files [`write_material`] writes, relative to its folder.
pub mod files {
    /// The authority every server and client here trusts.
    pub const CA: &str = "ca.pem";
    /// The servers' certificate (loopback) and key, apart and as one file (Kafka's PEM key store).
    pub const SERVER_CERT: &str = "server.pem";
    pub const SERVER_KEY: &str = "server.key";
    pub const SERVER_BUNDLE: &str = "server-bundle.pem";
    /// A server certificate of the same authority that expired in 2020 (key and certificate).
    pub const EXPIRED_BUNDLE: &str = "expired-bundle.pem";
    /// A server certificate of the same authority for `wrong.example` only.
    pub const WRONG_HOST_BUNDLE: &str = "wrong-host-bundle.pem";
    /// The client certificate (common name [`super::CLIENT_NAME`]) and key.
    pub const CLIENT_CERT: &str = "client.pem";
    pub const CLIENT_KEY: &str = "client.key";
    /// Another authority nobody trusts, and a client certificate it signed.
    pub const OTHER_CA: &str = "other-ca.pem";
    pub const OTHER_CLIENT_CERT: &str = "other-client.pem";
    pub const OTHER_CLIENT_KEY: &str = "other-client.key";
}

/// The common name of the client certificate (a super user of the secured Kafka listeners).
pub const CLIENT_NAME: &str = "admin";

/// Writes a new authority and the certificates of [`files`] into `dir`, unless its
/// [`files::CA`] is there already (the servers started with it keep trusting it).
pub fn write_material(dir: &Path) -> Result<(), TestkitError> {
    if dir.join(files::CA).exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let ca = Authority::new("outbox-harvester test CA")?;
    let server = ca.issue(Leaf::Server {
        names: &LOOPBACK,
        expired: false,
    })?;
    let expired = ca.issue(Leaf::Server {
        names: &LOOPBACK,
        expired: true,
    })?;
    let wrong_host = ca.issue(Leaf::Server {
        names: &["wrong.example"],
        expired: false,
    })?;
    let client = ca.issue(Leaf::Client {
        common_name: CLIENT_NAME,
    })?;
    let other = Authority::new("an authority nobody trusts")?;
    let other_client = other.issue(Leaf::Client {
        common_name: CLIENT_NAME,
    })?;
    write(dir, files::SERVER_CERT, &server.cert, false)?;
    write(dir, files::SERVER_KEY, &server.key, true)?;
    write(dir, files::SERVER_BUNDLE, &bundle(&server), true)?;
    write(dir, files::EXPIRED_BUNDLE, &bundle(&expired), true)?;
    write(dir, files::WRONG_HOST_BUNDLE, &bundle(&wrong_host), true)?;
    write(dir, files::CLIENT_CERT, &client.cert, false)?;
    write(dir, files::CLIENT_KEY, &client.key, true)?;
    write(dir, files::OTHER_CA, other.cert_pem(), false)?;
    write(dir, files::OTHER_CLIENT_CERT, &other_client.cert, false)?;
    write(dir, files::OTHER_CLIENT_KEY, &other_client.key, true)?;
    // Last: its presence says the folder is complete.
    write(dir, files::CA, ca.cert_pem(), false)
}

/// Key first, then the certificate: the order Kafka's PEM key store reads.
fn bundle(issued: &Issued) -> String {
    format!("{}{}", issued.key, issued.cert)
}

fn write(dir: &Path, name: &str, content: &str, private: bool) -> Result<(), TestkitError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(dir.join(name))?;
    file.write_all(content.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn material_is_pem_and_keys_are_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("tls-material-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        write_material(&dir).unwrap();
        let ca = std::fs::read_to_string(dir.join(files::CA)).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let bundle = std::fs::read_to_string(dir.join(files::SERVER_BUNDLE)).unwrap();
        assert!(
            bundle.starts_with("-----BEGIN PRIVATE KEY-----"),
            "{bundle}"
        );
        assert!(bundle.contains("-----BEGIN CERTIFICATE-----"));
        let mode = std::fs::metadata(dir.join(files::CLIENT_KEY))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A second call keeps what is there.
        write_material(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join(files::CA)).unwrap(), ca);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
