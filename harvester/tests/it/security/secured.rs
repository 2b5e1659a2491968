//! Harvesting through Kafka's secured listeners (`scripts/services.sh up`: TLS, mutual TLS,
//! SASL SCRAM-SHA-256/512 and PLAIN over TLS and over plaintext), with every client the
//! harvester opens (the start's metadata check, NELI's consumer and heartbeat producer, the
//! outbox's producers) on the secured listener and the SASL password read from a file, never
//! written in the configuration. The check is the one every suite ends with: 0 lost, 0
//! reordered. The topic is created and verified through the plaintext listener of the same
//! broker.

use std::time::Duration;

use crate::common::reaper::{Reaper, TempFile};
use crate::common::World;
use harvester::config::KafkaConfig;
use testkit::secured::{SecuredKafka, ADMIN};
use testkit::tls::files;

/// Each secured way in, named, as a user would configure it.
fn ways_in(s: &SecuredKafka) -> Vec<(&'static str, KafkaConfig)> {
    let sasl = |bootstrap: &str, protocol: &str, mechanism: &str| {
        let mut c = KafkaConfig::with_bootstrap(bootstrap)
            .set("security.protocol", protocol)
            .set("sasl.mechanism", mechanism)
            .set("sasl.username", ADMIN)
            .set("sasl.password_file", s.password_file(ADMIN));
        if protocol == "SASL_SSL" {
            c = c.set("ssl.ca.location", s.ca());
        }
        c
    };
    vec![
        (
            "SSL",
            KafkaConfig::with_bootstrap(&s.ssl)
                .set("security.protocol", "SSL")
                .set("ssl.ca.location", s.ca()),
        ),
        (
            "SSL with a client certificate",
            KafkaConfig::with_bootstrap(&s.mtls)
                .set("security.protocol", "SSL")
                .set("ssl.ca.location", s.ca())
                .set("ssl.certificate.location", s.tls_file(files::CLIENT_CERT))
                .set("ssl.key.location", s.tls_file(files::CLIENT_KEY)),
        ),
        (
            "SASL_SSL SCRAM-SHA-512",
            sasl(&s.sasl_ssl, "SASL_SSL", "SCRAM-SHA-512"),
        ),
        (
            "SASL_SSL SCRAM-SHA-256",
            sasl(&s.sasl_ssl, "SASL_SSL", "SCRAM-SHA-256"),
        ),
        ("SASL_SSL PLAIN", sasl(&s.sasl_ssl, "SASL_SSL", "PLAIN")),
        (
            "SASL_PLAINTEXT SCRAM-SHA-256",
            sasl(&s.sasl_plaintext, "SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ),
        (
            "SASL_PLAINTEXT PLAIN",
            sasl(&s.sasl_plaintext, "SASL_PLAINTEXT", "PLAIN"),
        ),
    ]
}

#[tokio::test]
async fn every_secured_listener_harvests_without_loss_or_reorder() {
    let secured = SecuredKafka::discover().unwrap();
    for (name, kafka) in ways_in(&secured) {
        let world = World::new("sec", 2).await;
        world.migrate().await;
        let mut config = world.config();
        config.kafka = kafka;
        config.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let handle = world.start(config).await;
        world.write(10, 20, 10).await;
        let report = world.verify(Duration::from_secs(60)).await;
        world.drained().await;
        handle.stop().await.unwrap();
        println!("{name}: {report}");
        report.assert_correct();
        assert_eq!(report.delivered, 200, "{name}");
    }
}

/// The reaper's readiness probe is a Kafka client of its own: on the SASL_SSL listener with the
/// password in a file, the reaper starts and `/readyz` answers 200 (the probe once handed
/// `sasl.password_file` to librdkafka as it was, and the reaper did not start).
#[tokio::test]
async fn the_reapers_readiness_probe_reads_the_password_file() {
    let secured = SecuredKafka::discover().unwrap();
    let (_, kafka) = ways_in(&secured)
        .into_iter()
        .find(|(name, _)| *name == "SASL_SSL SCRAM-SHA-512")
        .unwrap();
    let world = World::new("secready", 1).await;
    world.migrate().await;
    let mut config = world.config();
    config.kafka = kafka;
    config.http.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let file = TempFile::write(
        &format!("{}.toml", testkit::names::unique("secready")),
        &toml::to_string(&config).unwrap(),
    );
    let mut reaper = Reaper::spawn("secready", &file).await;
    // librdkafka's first connection and login: within the reaper's own connect bound.
    let connect = config.limits.connect_timeout;
    testkit::wait_for("/readyz answers 200", testkit::within(connect), || async {
        reaper.get("/readyz").await.0 == 200
    })
    .await
    .unwrap();
    reaper.proc.signal(testkit::process::Signal::Term).unwrap();
    let stop = testkit::within(crate::common::reaper::stop_bound(&config));
    assert!(reaper.proc.wait_exit(stop).is_some());
}

/// A broker that refuses the TLS handshake or the SASL login, and certificate files that cannot
/// be used, fail the start within the connect bound (plus a margin for librdkafka's first
/// connection) as a configuration problem naming the setting to fix and the cause; the reaper
/// then exits 2 and the outbox is untouched. No message carries the password.
#[tokio::test]
async fn a_refused_handshake_or_login_fails_the_start_naming_the_setting() {
    let s = SecuredKafka::discover().unwrap();
    let world = World::new("secbad", 1).await;
    world.migrate().await;
    world.write(2, 2, 2).await;
    let dir = std::env::temp_dir().join(testkit::names::unique("secbad"));
    std::fs::create_dir_all(&dir).unwrap();
    let wrong_password = dir.join("wrong.password");
    std::fs::write(&wrong_password, "not-the-password\n").unwrap();
    let not_pem = dir.join("ca.der");
    std::fs::write(&not_pem, [0x30u8, 0x82, 0x01, 0x0a]).unwrap();
    let tls = |bootstrap: &str, ca: String| {
        KafkaConfig::with_bootstrap(bootstrap)
            .set("security.protocol", "SSL")
            .set("ssl.ca.location", ca)
    };
    let scram = KafkaConfig::with_bootstrap(&s.sasl_ssl)
        .set("security.protocol", "SASL_SSL")
        .set("ssl.ca.location", s.ca())
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", ADMIN);
    let cases = [
        (
            "wrong password",
            scram
                .clone()
                .set("sasl.password_file", wrong_password.display().to_string()),
            "kafka.\"sasl.password_file\"",
        ),
        (
            "a mechanism the listener does not enable",
            scram
                .clone()
                .set("sasl.mechanism", "OAUTHBEARER")
                .set("enable.sasl.oauthbearer.unsecure.jwt", "true")
                .set("sasl.oauthbearer.config", "principal=admin"),
            "kafka.\"sasl.mechanism\"",
        ),
        (
            "an unknown CA",
            tls(&s.ssl, s.tls_file(files::OTHER_CA)),
            "kafka.\"ssl.ca.location\"",
        ),
        (
            "an expired certificate",
            tls(&s.expired, s.ca()),
            "kafka.\"ssl.ca.location\"",
        ),
        (
            "a certificate for another host",
            tls(&s.wrong_host, s.ca()),
            "kafka.\"ssl.ca.location\"",
        ),
        (
            "no client certificate where one is required",
            tls(&s.mtls, s.ca()),
            "kafka.\"ssl.certificate.location\"",
        ),
        (
            "TLS to a plaintext listener",
            tls(&s.plaintext, s.ca()),
            "kafka.\"security.protocol\"",
        ),
        (
            "a CA file that does not exist",
            tls(&s.ssl, dir.join("absent.pem").display().to_string()),
            "kafka.\"ssl.ca.location\"",
        ),
        (
            "a CA file that is not PEM",
            tls(&s.ssl, not_pem.display().to_string()),
            "kafka.\"ssl.ca.location\"",
        ),
    ];
    let password = s.password(ADMIN).unwrap();
    for (name, kafka, field) in cases {
        let mut config = world.config();
        config.kafka = kafka;
        config.limits.connect_timeout = Duration::from_secs(5);
        let bound = testkit::within(config.limits.connect_timeout);
        let started = std::time::Instant::now();
        let err = harvester::Harvester::connect(config)
            .await
            .err()
            .unwrap_or_else(|| panic!("{name}: the start succeeded"));
        let took = started.elapsed();
        let text = err.to_string();
        println!("{name}: after {took:?}: {text}");
        let problems = err
            .config_problems()
            .unwrap_or_else(|| panic!("{name}: not a configuration problem: {text}"));
        assert_eq!(problems[0].field, field, "{name}: {text}");
        assert!(took < bound, "{name}: {took:?}");
        assert!(!text.contains(&password), "{name}: the password in {text}");
    }
    assert_eq!(world.outbox_rows().await, 4, "nothing deleted");
    std::fs::remove_dir_all(&dir).unwrap();
}
