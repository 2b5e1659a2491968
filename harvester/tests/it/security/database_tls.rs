//! Harvesting over TLS to the database (`scripts/services.sh up`'s private Postgres cluster and
//! MariaDB server serve TLS with a throwaway CA): as a user that logs in with a password (read
//! from a file, never in the configuration) and as one that logs in with a client certificate,
//! both checking the server's certificate, each ending with the check every suite ends with: 0
//! lost, 0 reordered. Then what a user gets wrong: a wrong password, a CA that did not sign the
//! server's certificate, no client certificate, a CA file that does not exist: the start fails
//! within the connect bound naming the setting, the password nowhere in the text, nothing
//! deleted.

use std::time::Duration;

use crate::common::{Backend, World};
use harvester::secret::Secret;
use testkit::secured::{SecuredDatabases, DB_CERT_USER, DB_PASSWORD_USER};
use testkit::tls::files;

/// The TLS server of `backend`'s family: its base URL (no user), the parameter names of the
/// verification mode, its value, the CA, client certificate and key; the password file's name.
struct Family {
    base: String,
    verify: &'static str,
    ca: &'static str,
    cert: &'static str,
    key: &'static str,
    password: &'static str,
}

fn family(s: &SecuredDatabases, backend: Backend) -> Family {
    match backend {
        Backend::Postgres => Family {
            base: s.postgres.clone(),
            verify: "sslmode=verify-full",
            ca: "sslrootcert",
            cert: "sslcert",
            key: "sslkey",
            password: "pg",
        },
        Backend::MariaDb => Family {
            base: s.mariadb.clone(),
            verify: "ssl-mode=VERIFY_IDENTITY",
            ca: "ssl-ca",
            cert: "ssl-cert",
            key: "ssl-key",
            password: "mariadb",
        },
        other => panic!("no TLS server for {other:?}"),
    }
}

/// `database.url` for `user` on the world's database, with `query` appended.
fn url(f: &Family, world: &World, user: &str, query: &str) -> String {
    let (scheme, rest) = f.base.split_once("://").unwrap();
    let (host, db) = rest.split_once('/').unwrap();
    let db = match world.backend() {
        // MariaDB's test database is the table's namespace; Postgres's is a schema of `db`.
        Backend::MariaDb => world.table().schema.clone().unwrap(),
        _ => db.to_owned(),
    };
    format!("{scheme}://{user}@{host}/{db}?{query}")
}

fn secured() -> Option<SecuredDatabases> {
    SecuredDatabases::discover()
        .map_err(|why| testkit::skip::skip(&why.to_string()))
        .ok()
}

async fn harvests_over_tls(backend: Backend) {
    let Some(s) = secured() else { return };
    let f = family(&s, backend);
    let ca = format!("{}={}", f.ca, s.tls_file(files::CA));
    let client = format!(
        "{}={}&{}={}",
        f.cert,
        s.tls_file(files::CLIENT_CERT),
        f.key,
        s.tls_file(files::CLIENT_KEY)
    );
    for (name, user, query, password) in [
        (
            "a password from a file",
            DB_PASSWORD_USER,
            format!("{}&{ca}", f.verify),
            Some(Secret::from_file(s.password_file(f.password))),
        ),
        (
            "a client certificate",
            DB_CERT_USER,
            format!("{}&{ca}&{client}", f.verify),
            None,
        ),
    ] {
        let world = World::on(backend, "dbtls", 2).await;
        world.migrate().await;
        let mut config = world.config();
        config.database.url = url(&f, &world, user, &query);
        config.database.password = password;
        config.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let handle = world.start(config).await;
        world.write(10, 20, 10).await;
        let report = world.verify(Duration::from_secs(60)).await;
        world.drained().await;
        handle.stop().await.unwrap();
        println!("{}, {name}: {report}", backend.name());
        report.assert_correct();
        assert_eq!(report.delivered, 200, "{name}");
    }
}

async fn refused_logins_and_certificates_name_the_setting(backend: Backend) {
    let Some(s) = secured() else { return };
    let f = family(&s, backend);
    let world = World::on(backend, "dbtlsbad", 1).await;
    world.migrate().await;
    world.write(2, 2, 2).await;
    let dir = std::env::temp_dir().join(testkit::names::unique("dbtlsbad"));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong = dir.join("wrong.password");
    std::fs::write(&wrong, "not-the-password\n").unwrap();
    let password = std::fs::read_to_string(s.password_file(f.password)).unwrap();
    let right = Some(Secret::from_file(s.password_file(f.password)));
    let ca = |file: String| format!("{}&{}={file}", f.verify, f.ca);
    let cases = [
        (
            "wrong password",
            DB_PASSWORD_USER,
            ca(s.tls_file(files::CA)),
            Some(Secret::from_file(&wrong)),
            "database.password",
            "refused the login",
        ),
        (
            "a CA that did not sign the server's certificate",
            DB_PASSWORD_USER,
            ca(s.tls_file(files::OTHER_CA)),
            right.clone(),
            "database.url",
            f.ca,
        ),
        (
            "no client certificate for the certificate user",
            DB_CERT_USER,
            ca(s.tls_file(files::CA)),
            None,
            "database.url",
            "refused the login",
        ),
    ];
    for (name, user, query, secret, field, says) in cases {
        let mut config = world.config();
        config.database.url = url(&f, &world, user, &query);
        config.database.password = secret;
        config.database.connect_timeout = Duration::from_secs(5);
        let bound = testkit::within(config.database.connect_timeout);
        let started = std::time::Instant::now();
        let err = harvester::Harvester::connect(config)
            .await
            .err()
            .unwrap_or_else(|| panic!("{name}: the start succeeded"));
        let took = started.elapsed();
        let text = err.to_string();
        println!("{}, {name}: after {took:?}: {text}", backend.name());
        let problems = err
            .config_problems()
            .unwrap_or_else(|| panic!("{name}: not a configuration problem: {text}"));
        assert_eq!(problems[0].field, field, "{name}: {text}");
        assert!(text.contains(says), "{name}: {text}");
        assert!(took < bound, "{name}: {took:?}");
        assert!(
            !text.contains(password.trim()),
            "{name}: the password in {text}"
        );
    }
    // Check time: a CA file that does not exist is named before anything connects.
    let mut config = world.config();
    let absent = dir.join("absent.pem").display().to_string();
    config.database.url = url(&f, &world, DB_PASSWORD_USER, &ca(absent));
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("database.url") && err.contains(f.ca), "{err}");
    assert_eq!(world.outbox_rows().await, 4, "nothing deleted");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn postgres_harvests_over_tls_with_a_password_or_a_client_certificate() {
    harvests_over_tls(Backend::Postgres).await
}

#[tokio::test]
async fn mariadb_harvests_over_tls_with_a_password_or_a_client_certificate() {
    harvests_over_tls(Backend::MariaDb).await
}

#[tokio::test]
async fn postgres_refused_logins_and_certificates_name_the_setting() {
    refused_logins_and_certificates_name_the_setting(Backend::Postgres).await
}

#[tokio::test]
async fn mariadb_refused_logins_and_certificates_name_the_setting() {
    refused_logins_and_certificates_name_the_setting(Backend::MariaDb).await
}
