//! Least privilege on Kafka (README "Kafka ACLs"): the harvester runs as SASL user `harvester`
//! (SASL_SSL, SCRAM-SHA-512) on the shared broker, whose `StandardAuthorizer` allows that user
//! only what a test grants. Each test grants the README's ACLs for its mode, on its own
//! resources, and harvests (0 lost, 0 reordered): these suffice, with no IdempotentWrite on the
//! cluster and no Describe of its own (Write and Read imply it). Then it removes each ACL in
//! turn: the harvest must end within a bound derived from the config's timeouts, with an error
//! naming Kafka's operation, the resource and the ACL to grant, and the outbox must keep every
//! row. Last, with every ACL back, the rows the refused runs left are harvested: none was lost.
//!
//! The ACLs are granted with Kafka's `AclCommand` through the plaintext listener (a super user),
//! as an operator would (`testkit::acl`). The tests run one at a time, each from a principal
//! allowed nothing, and check that the principal holds exactly the ACLs granted: an idempotent
//! producer may initialise with Write on any topic, so another test's grant could otherwise
//! stand in for a missing one.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::World;
use harvester::assign::neli::NeliAssignorConfig;
use harvester::config::{KafkaConfig, LeaderConfig};
use harvester::election::neli::NeliConfig;
use harvester::{Config, Harvester};
use testkit::acl::{self, Acl};
use testkit::secured::{SecuredKafka, HARVESTER};

const PRINCIPAL: &str = "User:harvester";

/// One test at a time holds the principal.
static PRINCIPAL_HELD: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Holds the principal for a test, allowed nothing to begin with.
async fn hold_principal(s: &SecuredKafka) -> tokio::sync::MutexGuard<'static, ()> {
    let held = PRINCIPAL_HELD.lock().await;
    acl::clear(&s.plaintext, PRINCIPAL).unwrap();
    held
}

/// Grants `acls` and checks that the principal holds those and no other.
fn grant_exactly(s: &SecuredKafka, acls: &[Acl]) {
    acl::grant(&s.plaintext, PRINCIPAL, acls).unwrap();
    let held = acl::held(&s.plaintext, PRINCIPAL).unwrap();
    assert_eq!(held.len(), acls.len(), "{PRINCIPAL} holds {held:#?}");
}

/// The secured listeners, or `None` (the test is skipped, saying why) when they are not up.
fn secured() -> Option<SecuredKafka> {
    match SecuredKafka::discover() {
        Ok(s) => Some(s),
        Err(e) => {
            testkit::skip::skip(&format!(
                "least privilege needs the secured Kafka listeners: {e}"
            ));
            None
        }
    }
}

/// The world's config, as `harvester` over SASL_SSL SCRAM-SHA-512, with a short connect bound.
fn as_harvester(world: &World, s: &SecuredKafka) -> Config {
    let mut config = world.config();
    config.kafka = KafkaConfig::with_bootstrap(&s.sasl_ssl)
        .set("security.protocol", "SASL_SSL")
        .set("ssl.ca.location", s.ca())
        .set("sasl.mechanism", "SCRAM-SHA-512")
        .set("sasl.username", HARVESTER)
        .set("sasl.password_file", s.password_file(HARVESTER));
    config.limits.connect_timeout = Duration::from_secs(5);
    config
}

fn leader_topic(config: &Config) -> String {
    config.leader.neli().expect("a neli leader").resolve().topic
}

/// MP/R with the NELI elector: Write on the outbox's topic; Read on NELI's group; Read (its
/// consumer) and Write (its heartbeats) on the leader topic.
fn neli_acls(world: &World, config: &Config) -> Vec<Acl> {
    let leader = leader_topic(config);
    vec![
        Acl::topic("Write", &world.topic),
        Acl::group("Read", &world.group),
        Acl::topic("Read", &leader),
        Acl::topic("Write", &leader),
    ]
}

fn transactional(mut config: Config, id: &str) -> Config {
    config.publish = serde_json::from_value(serde_json::json!({
        "mode": "transactional",
        "transactional_id": id,
    }))
    .unwrap();
    config
}

/// How long a refused harvester may take to stop: the start's connection check, NELI's
/// session (3 x the lease: joining and reading back the first heartbeat fit in it), a
/// transactional registration (`txn_call_timeout`: the succession plus 5 s), 5 s for
/// librdkafka's connections and retries, and the load margin.
fn bound(config: &Config) -> Duration {
    testkit::within(
        config.limits.connect_timeout
            + config.leader.lease() * 3
            + config.leader.succession()
            + Duration::from_secs(10),
    )
}

/// Which elector a harvester runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Elector {
    Neli,
    /// Another elector, one that needs no Kafka ACL: the mock, leading at once.
    Other,
}

async fn start(world: &World, config: Config, elector: Elector) -> harvester::HarvesterHandle {
    match elector {
        Elector::Neli => Arc::new(Harvester::connect(config).await.unwrap()).spawn(),
        Elector::Other => world.start_leading(config).await,
    }
}

/// Harvests what is in the outbox with `config`; checks 0 lost, 0 reordered, `rows` delivered.
async fn harvests(world: &World, config: Config, rows: u64, what: &str) {
    harvests_under(world, config, Elector::Neli, rows, what).await
}

async fn harvests_under(world: &World, config: Config, elector: Elector, rows: u64, what: &str) {
    let started = Instant::now();
    let handle = start(world, config, elector).await;
    let report = world.verify(Duration::from_secs(60)).await;
    world.drained().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    println!("{what}: harvested in {:?}: {report}", started.elapsed());
    report.assert_correct();
    assert_eq!(report.delivered, rows, "{what}");
    assert_eq!(stats.quarantined, 0, "{what}");
}

/// Starts a harvester with `config`, which must end within [`bound`] with an error naming
/// `missing` (its operation, resource and the ACL), and delete no row.
async fn refused(world: &World, config: Config, missing: &Acl) {
    refused_under(world, config, Elector::Neli, missing).await
}

async fn refused_under(world: &World, config: Config, elector: Elector, missing: &Acl) {
    let rows = world.outbox_rows().await;
    assert!(rows > 0, "rows to refuse");
    let bound = bound(&config);
    let started = Instant::now();
    let handle = start(world, config, elector).await;
    let ended = tokio::time::timeout(bound, handle.wait()).await;
    let took = started.elapsed();
    let err = match ended {
        Ok(Err(e)) => e,
        Ok(Ok(())) => panic!("without {missing}: the harvester ended without an error"),
        Err(_) => panic!("without {missing}: still running after {bound:?}"),
    };
    let text = harvester::chain(&err);
    println!("without {missing}: ended after {took:?}: {text}");
    let kind = match &missing.resource {
        acl::Resource::Topic(_) => "topic",
        acl::Resource::Group(_) => "group",
        acl::Resource::TransactionalId(_) => "transactional id",
        acl::Resource::Cluster => "cluster",
    };
    let op = missing.operation;
    assert!(
        text.contains("kafka refused: the principal may not "),
        "{text}"
    );
    // Without Write on its topic an idempotent producer is refused its producer id too
    // (InitProducerId: Write on some topic or IdempotentWrite on the cluster), and which of the
    // two refusals ends the harvester first is a race the machine's load decides (seen under
    // load); that one names the same fix, Write on the topics it publishes to.
    let producer_id_refused = text.contains("may not use an idempotent producer (InitProducerId)")
        && text.contains("grant it Write on the topics it publishes to");
    if op == "Write" && kind == "topic" && producer_id_refused {
        println!("without {missing}: refused its producer id first (the same fix)");
    } else {
        assert!(
            text.contains(&format!("may not {op}")) && text.contains(&format!(" {kind} \"")),
            "the operation and the resource in: {text}"
        );
        assert!(
            text.contains(&format!("grant it with an ACL: --operation {op} "))
                && text.contains(&missing.resource_args().join(" ")),
            "the ACL in: {text}"
        );
    }
    assert_eq!(
        world.outbox_rows().await,
        rows,
        "without {missing}: rows deleted"
    );
}

/// Grants `acls`, harvests with them, then removes each in turn and expects the refusal;
/// finally harvests what the refused runs left, with every ACL back.
async fn each_acl_is_needed(world: &mut World, s: &SecuredKafka, config: Config, acls: &[Acl]) {
    grant_exactly(s, acls);
    world.write(10, 20, 10).await;
    harvests(world, config.clone(), 200, "with exactly these ACLs").await;
    // A new run id: the final check counts only what the refused runs left.
    world.run = testkit::names::unique("run");
    for (i, missing) in acls.iter().enumerate() {
        acl::revoke(&s.plaintext, PRINCIPAL, std::slice::from_ref(missing)).unwrap();
        world.write_keys(&format!("r{i}k"), 4, 5, 5).await;
        refused(world, config.clone(), missing).await;
        acl::grant(&s.plaintext, PRINCIPAL, std::slice::from_ref(missing)).unwrap();
    }
    let left = 20 * acls.len() as u64;
    harvests(world, config, left, "what the refused runs left").await;
}

#[tokio::test]
async fn neli_and_idempotent_producers_need_exactly_the_documented_acls() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let mut world = World::new("lpneli", 2).await;
    world.migrate().await;
    let config = as_harvester(&world, &s);
    let acls = neli_acls(&world, &config);
    each_acl_is_needed(&mut world, &s, config, &acls).await;
}

#[tokio::test]
async fn transactional_publishing_needs_exactly_the_documented_acls() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let mut world = World::new("lptxn", 2).await;
    world.migrate().await;
    let id = testkit::names::unique("lptxn");
    let config = transactional(as_harvester(&world, &s), &id);
    let mut acls = neli_acls(&world, &config);
    acls.push(Acl::transactional_ids("Write", &format!("{id}-")));
    each_acl_is_needed(&mut world, &s, config, &acls).await;
}

/// MP/R under another elector, where the harvester writes to no topic but the outbox's: Write
/// on it is all the idempotent producers need, no IdempotentWrite on the cluster (KIP-679,
/// Kafka 3.0: InitProducerId is allowed to a principal that may Write to any topic). Without
/// it InitProducerId is refused (CLUSTER_AUTHORIZATION_FAILED) and the error names the topic.
#[tokio::test]
async fn idempotent_producers_need_only_write_on_their_topic() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let mut world = World::new("lpidem", 2).await;
    world.migrate().await;
    let config = as_harvester(&world, &s);
    let write = Acl::topic("Write", &world.topic);
    grant_exactly(&s, std::slice::from_ref(&write));
    world.write(10, 20, 10).await;
    harvests_under(
        &world,
        config.clone(),
        Elector::Other,
        200,
        "with Write on the topic",
    )
    .await;
    world.run = testkit::names::unique("run");
    acl::revoke(&s.plaintext, PRINCIPAL, std::slice::from_ref(&write)).unwrap();
    world.write_keys("r", 4, 5, 5).await;
    refused_under(&world, config.clone(), Elector::Other, &write).await;
    acl::grant(&s.plaintext, PRINCIPAL, std::slice::from_ref(&write)).unwrap();
    harvests_under(
        &world,
        config,
        Elector::Other,
        20,
        "what the refused run left",
    )
    .await;
}

/// NELI creates its leader topic when it is missing: Create on that topic is then needed too.
#[tokio::test]
async fn neli_creating_its_leader_topic_needs_create_on_it() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let world = World::new("lpcreate", 1).await;
    world.migrate().await;
    let with_leader = |topic: &str| {
        let mut config = as_harvester(&world, &s);
        config.leader = NeliConfig {
            topic: Some(topic.to_owned()),
            ..config.leader.neli().unwrap().clone()
        }
        .into();
        config
    };
    let created = with_leader(&testkit::names::topic("lpcreated"));
    let mut acls = neli_acls(&world, &created);
    acls.push(Acl::topic("Create", &leader_topic(&created)));
    grant_exactly(&s, &acls);
    world.write(4, 5, 5).await;
    harvests(&world, created, 20, "creating the leader topic").await;

    let uncreated = with_leader(&testkit::names::topic("lpuncreated"));
    let leader = leader_topic(&uncreated);
    acl::grant(
        &s.plaintext,
        PRINCIPAL,
        &[Acl::topic("Read", &leader), Acl::topic("Write", &leader)],
    )
    .unwrap();
    world.write_keys("r", 4, 5, 5).await;
    refused(&world, uncreated, &Acl::topic("Create", &leader)).await;
}

/// The world's config as `harvester`, sharing 4 buckets with `neli_buckets` on leader topic
/// `topic`.
fn sharing(world: &World, s: &SecuredKafka, topic: &str, create_topic: bool) -> Config {
    let mut config = as_harvester(world, s);
    config.leader = LeaderConfig::NeliBuckets(NeliAssignorConfig {
        group_id: Some(world.group.clone()),
        topic: Some(topic.to_owned()),
        heartbeat_timeout: Duration::from_secs(1),
        min_poll_interval: Duration::from_millis(50),
        create_topic,
        buckets: 4,
        ..Default::default()
    });
    config
}

/// Bucket sharing with `neli_buckets`: as for NELI, Read on the group and Read and Write on the
/// leader topic (`<group>.neli-buckets`, created here beforehand), plus Read on the heartbeat
/// reader's group (`<group>.reader`). Each one missing ends the assignor (so the harvester)
/// with the refusal, before any bucket is harvested. Creating the topic needs Create on it.
#[tokio::test]
async fn neli_buckets_needs_exactly_the_documented_acls() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let mut world = World::new("lpbuckets", 2).await;
    world.migrate().await;
    let leader = testkit::names::topic("lpbuckets.neli-buckets");
    world.broker.create_topic(&leader, 4).await.unwrap();
    let config = sharing(&world, &s, &leader, false);
    let LeaderConfig::NeliBuckets(assignor) = &config.leader else {
        unreachable!()
    };
    let reader_group = assignor.resolve().reader_group();
    let acls = vec![
        Acl::topic("Write", &world.topic),
        Acl::group("Read", &world.group),
        Acl::group("Read", &reader_group),
        Acl::topic("Read", &leader),
        Acl::topic("Write", &leader),
    ];
    each_acl_is_needed(&mut world, &s, config, &acls).await;

    let uncreated = testkit::names::topic("lpbuckets.uncreated");
    acl::grant(
        &s.plaintext,
        PRINCIPAL,
        &[
            Acl::topic("Read", &uncreated),
            Acl::topic("Write", &uncreated),
        ],
    )
    .unwrap();
    world.write_keys("c", 4, 5, 5).await;
    let creating = sharing(&world, &s, &uncreated, true);
    refused(&world, creating, &Acl::topic("Create", &uncreated)).await;
}

/// The bench's verifier (README "Kafka ACLs"): Read on the topic it checks and on its groups,
/// named `verifier-<unique>` (a prefixed ACL). With both it verifies what a harvester wrote;
/// without either it fails at once, naming the ACL, instead of reporting the records lost.
#[tokio::test]
async fn the_verifier_needs_read_on_its_topic_and_group_prefix() {
    let Some(s) = secured() else { return };
    let _held = hold_principal(&s).await;
    let world = World::new("lpverify", 2).await;
    world.migrate().await;
    world.write(4, 5, 5).await;
    let handle = world.start_leading(world.config()).await;
    world.drained().await;
    handle.stop().await.unwrap();
    let group = Acl {
        prefixed: true,
        ..Acl::group("Read", testkit::verify::GROUP_PREFIX)
    };
    let acls = [Acl::topic("Read", &world.topic), group];
    grant_exactly(&s, &acls);
    let client = testkit::verify::ClientSettings::sasl_ssl(&s, HARVESTER);
    let timeout = Duration::from_secs(30);
    let report = world.verify_through(&client, timeout).await.unwrap();
    println!("with exactly these ACLs: {report}");
    report.assert_correct();
    assert_eq!(report.delivered, 20);
    for missing in &acls {
        acl::revoke(&s.plaintext, PRINCIPAL, std::slice::from_ref(missing)).unwrap();
        let started = Instant::now();
        let err = world.verify_through(&client, timeout).await.unwrap_err();
        let text = err.to_string();
        println!(
            "without {missing}: failed after {:?}: {text}",
            started.elapsed()
        );
        assert!(started.elapsed() < timeout, "a refusal, not the timeout");
        assert!(
            text.contains("may not Read") && text.contains(&missing.resource_args().join(" ")),
            "the ACL in: {text}"
        );
        acl::grant(&s.plaintext, PRINCIPAL, std::slice::from_ref(missing)).unwrap();
    }
    world.verify(timeout).await.assert_correct();
}
