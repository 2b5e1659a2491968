//! No secret reaches any output. The reaper runs with a Kafka SASL password (from a file) and
//! a database password (from an environment variable), both real and both needed; then with
//! the same secrets inline in its config file, and with wrong ones; and every place a secret
//! could leak is searched for them: its logs at `debug` and its events (stdout, stderr),
//! `check-config`'s output, `/metrics`, `/leader`, `/healthz`, `/readyz`, the errors a refused
//! login produces, and the config's `Debug` (what a panic message or a log of it would print).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::reaper::{reaper_bin, run_to_end, TempFile};
use crate::common::World;
use harvester::config::KafkaConfig;
use harvester::secret::Secret;
use testkit::secured::{SecuredDatabases, SecuredKafka, ADMIN, DB_PASSWORD_USER};

/// The environment variable the reaper reads the database password from.
const DB_PASSWORD_ENV: &str = "HARVEST_TEST_DB_PASSWORD";

/// The test's secrets and the config that uses them.
struct Secrets {
    kafka: String,
    database: String,
}

impl Secrets {
    /// Fails naming the output and the secret's kind (never printing the secret) if `text`
    /// holds one.
    fn assert_absent(&self, what: &str, text: &str) {
        assert!(
            !text.contains(&self.kafka),
            "the Kafka password is in {what}"
        );
        assert!(
            !text.contains(&self.database),
            "the database password is in {what}"
        );
    }
}

/// SASL_SSL with SCRAM-SHA-512 as `admin`, the password read from `password_file`.
fn secured_kafka(s: &SecuredKafka) -> KafkaConfig {
    KafkaConfig::with_bootstrap(&s.sasl_ssl)
        .set("security.protocol", "SASL_SSL")
        .set("ssl.ca.location", s.ca())
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", ADMIN)
}

/// `database.url` for the TLS password user on Postgres.
fn tls_url(d: &SecuredDatabases) -> String {
    let (scheme, rest) = d.postgres.split_once("://").unwrap();
    format!(
        "{scheme}://{DB_PASSWORD_USER}@{rest}?sslmode=verify-full&sslrootcert={}",
        d.tls_file(testkit::tls::files::CA)
    )
}

/// The reaper on `config`, stdout and stderr to files, logging at `debug`.
struct Run {
    child: std::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Run {
    fn start(config: &TempFile, db_password: &str) -> Run {
        let dir = std::env::temp_dir();
        let stdout = dir.join(testkit::names::unique("reaper-out"));
        let stderr = dir.join(testkit::names::unique("reaper-err"));
        let child = Command::new(reaper_bin())
            .args(["--config", config.path(), "--events-json"])
            .env("RUST_LOG", "debug")
            .env(DB_PASSWORD_ENV, db_password)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Run {
            child,
            stdout,
            stderr,
        }
    }

    fn output(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("{}{}", read(&self.stdout), read(&self.stderr))
    }

    /// Its HTTP endpoint, once it printed it (or a failure with its output, once it exited).
    async fn http(&mut self) -> SocketAddr {
        let mut addr = None;
        let mut exited = None;
        testkit::wait_for(
            "the reaper's http endpoint",
            Duration::from_secs(30),
            || {
                addr = self.output().lines().find_map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).ok()?;
                    (v["kind"] == "http").then(|| v["addr"].as_str()?.parse().ok())?
                });
                exited = self.child.try_wait().unwrap();
                std::future::ready(addr.is_some() || exited.is_some())
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", self.output()));
        addr.unwrap_or_else(|| panic!("exited {exited:?}: {}", self.output()))
    }

    /// SIGTERM, then its whole output once it exited.
    fn stop(&mut self) -> String {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let status = self.child.wait().unwrap();
        let out = self.output();
        assert!(status.success(), "exit {status}: {out}");
        let _ = std::fs::remove_file(&self.stdout);
        let _ = std::fs::remove_file(&self.stderr);
        out
    }
}

#[tokio::test]
async fn no_secret_reaches_logs_check_config_metrics_or_errors() {
    let kafka = SecuredKafka::discover().unwrap();
    let Ok(db) = SecuredDatabases::discover().map_err(|why| testkit::skip::skip(&why.to_string()))
    else {
        return;
    };
    let secrets = Secrets {
        kafka: kafka.password(ADMIN).unwrap(),
        database: std::fs::read_to_string(db.password_file("pg"))
            .unwrap()
            .trim_end()
            .to_owned(),
    };
    let world = World::new("secrets", 2).await;
    world.migrate().await;
    let mut config = world.config();
    config.http.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    config.kafka = secured_kafka(&kafka).set("sasl.password_file", kafka.password_file(ADMIN));
    config.database.url = tls_url(&db);
    config.database.password = Some(Secret::from_env(DB_PASSWORD_ENV));
    let file = TempFile::write(
        &format!("{}.toml", testkit::names::unique("secrets")),
        &toml::to_string(&config).unwrap(),
    );
    secrets.assert_absent(
        "the config file",
        &std::fs::read_to_string(&file.0).unwrap(),
    );

    // A harvest with both secrets in use, its endpoints read while it runs.
    let mut run = Run::start(&file, &secrets.database);
    let http = run.http().await;
    world.write(5, 10, 5).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    for path in ["/metrics", "/leader", "/healthz", "/readyz"] {
        let (_, body) = testkit::http::get(http, path).unwrap();
        secrets.assert_absent(path, &body);
    }
    let out = run.stop();
    drop(run);
    report.assert_correct();
    assert!(out.contains("DEBUG"), "the run logged at debug: {out}");
    secrets.assert_absent("the reaper's logs and events", &out);

    // The same secrets inline: check-config prints the effective config, redacted.
    let mut inline = config.clone();
    inline.kafka = secured_kafka(&kafka).set("sasl.password", &secrets.kafka);
    inline.database.password = Some(Secret::inline(&secrets.database));
    let inline_file = TempFile::write(
        &format!("{}.toml", testkit::names::unique("inline")),
        &toml::to_string(&inline).unwrap(),
    );
    let (code, stdout, stderr) = run_to_end(&["check-config", "--config", inline_file.path()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("sasl.password"),
        "prints the effective config: {stdout}"
    );
    secrets.assert_absent("check-config's output", &format!("{stdout}{stderr}"));
    secrets.assert_absent("the config's Debug", &format!("{inline:?}"));

    // Refused logins: the wrong secrets are the known ones now.
    let wrong = Secrets {
        kafka: testkit::names::unique("wrong-kafka-secret"),
        database: testkit::names::unique("wrong-db-secret"),
    };
    let mut bad_kafka = inline.clone();
    bad_kafka.kafka = secured_kafka(&kafka).set("sasl.password", &wrong.kafka);
    let mut bad_db = inline.clone();
    bad_db.database.password = Some(Secret::inline(&wrong.database));
    for (name, bad) in [("kafka", bad_kafka), ("database", bad_db)] {
        let bad_file = TempFile::write(
            &format!("{}.toml", testkit::names::unique("bad")),
            &toml::to_string(&bad).unwrap(),
        );
        let (code, stdout, stderr) = run_to_end(&["--config", bad_file.path()]);
        assert_eq!(
            code, 2,
            "{name}: a refused login is a configuration problem: {stderr}"
        );
        wrong.assert_absent(&format!("the {name} refusal"), &format!("{stdout}{stderr}"));
        secrets.assert_absent(&format!("the {name} refusal"), &format!("{stdout}{stderr}"));
    }
    assert_eq!(
        world.outbox_rows().await,
        0,
        "drained by the first run only"
    );
}
