#![cfg(feature = "nats")]
//! The NATS KV elector against a real nats-server with JetStream: the shared one
//! (`scripts/services.sh up`, `NATS_URL`) for elections, a private one for stopping and
//! restarting the server under a leader. Each test uses a bucket of its own.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harvester::election::nats_kv::{NatsKv, NatsKvConfig};
use harvester::election::{ElectionEvent, Elector, ElectorState, EventStream, Term};
use harvester::Error;
use testkit::names;

use crate::electors::{
    acquired, assert_leads_for, assert_sole_leader, leaders, next_event, wait_count, wait_leader,
    Sampler, PROMPT,
};

const TTL: Duration = Duration::from_secs(2);
const CAMPAIGN: Duration = Duration::from_millis(200);

fn nats_url() -> String {
    if let Ok(url) = std::env::var("NATS_URL") {
        if !url.is_empty() {
            return url;
        }
    }
    let env =
        std::fs::read_to_string(testkit::state_dir().join("services.env")).unwrap_or_default();
    env.lines()
        .find_map(|l| l.strip_prefix("export NATS_URL="))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into())
}

fn bucket(prefix: &str) -> String {
    names::unique(prefix).replace('.', "_")
}

fn config(url: &str, bucket: &str, name: &str) -> NatsKvConfig {
    NatsKvConfig {
        url: url.into(),
        bucket: bucket.into(),
        key: Some("leader".into()),
        ttl: TTL,
        campaign_interval: CAMPAIGN,
        name: Some(name.into()),
        connect_timeout: Duration::from_secs(3),
        ..Default::default()
    }
}

async fn start(url: &str, bucket: &str, name: &str) -> NatsKv {
    NatsKv::start(&config(url, bucket, name)).await.unwrap()
}

async fn drop_bucket(url: &str, bucket: &str) {
    if let Ok(client) = async_nats::connect(url).await {
        let js = async_nats::jetstream::new(client);
        let _ = js.delete_key_value(bucket).await;
    }
}

/// A KV bucket made by an operator. As a stream: async-nats' create_key_value cannot read the
/// account info of nats-server 2.9.
async fn make_bucket(url: &str, bucket: &str, max_age: Duration) {
    let client = async_nats::connect(url).await.unwrap();
    async_nats::jetstream::new(client)
        .create_stream(async_nats::jetstream::stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            max_age,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            ..Default::default()
        })
        .await
        .unwrap();
}

/// The revision of the leader key (every renewal writes it): a revision that moved over a
/// window proves the leader renewed meanwhile, so the others faced a live key, not a lapsed one.
async fn key_revision(url: &str, bucket: &str) -> u64 {
    let client = async_nats::connect(url).await.unwrap();
    let kv = async_nats::jetstream::new(client)
        .get_key_value(bucket)
        .await
        .unwrap();
    kv.entry("leader").await.unwrap().map_or(0, |e| e.revision)
}

/// Closes every elector and waits (bounded by its revoke timeout) for each to end cleanly.
async fn close_all(electors: &[Arc<NatsKv>]) {
    for e in electors {
        e.close();
    }
    for e in electors {
        tokio::time::timeout(testkit::within(e.settings().revoke_timeout), e.closed())
            .await
            .expect("closed in time")
            .expect("an orderly close is Ok");
    }
}

fn distinct_terms(terms: &[Arc<parking_lot::Mutex<Vec<Term>>>]) -> (Vec<Term>, usize) {
    let all: Vec<Term> = terms.iter().flat_map(|t| t.lock().clone()).collect();
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    (all, distinct.len())
}

/// Acquired terms of one elector, collected on a task; revocations acknowledged at once.
fn collect(events: EventStream) -> Arc<parking_lot::Mutex<Vec<Term>>> {
    let terms = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = Arc::clone(&terms);
    harvester::election::on_event(events, move |e| match e {
        ElectionEvent::Acquired { term } => seen.lock().push(term),
        ElectionEvent::Revoked { ack, .. } => ack.ack(),
        ElectionEvent::Fenced { .. } => {}
    });
    terms
}

/// A winner over a free key acts only after the stand-down (the port's lifecycle clauses run in
/// `tests/election/contract`), and its renewals reach the server: the key's revision moves
/// while it leads in one term.
#[tokio::test]
async fn a_free_key_is_acted_on_after_the_stand_down_and_renewed() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-one");
    let started = Instant::now();
    let elector = start(&url, &b, "solo").await;
    let mut events = elector.take_events().unwrap();
    let stand_down = elector.settings().stand_down;
    let term = acquired(&mut events, testkit::within(stand_down)).await;
    let acquired_in = started.elapsed();
    println!("one contender: acquired after {acquired_in:?} (stand-down {stand_down:?})");
    assert!(
        acquired_in >= stand_down,
        "a winner over a free key acts only after the stand-down"
    );
    let before = key_revision(&url, &b).await;
    assert_leads_for(&elector, term, TTL * 2).await;
    assert!(
        key_revision(&url, &b).await > before,
        "renewals reached the server"
    );
    elector.close();
    drop(events);
    tokio::time::timeout(PROMPT, elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    drop_bucket(&url, &b).await;
}

/// Three contenders: the leader's key is renewed while the others campaign against it every
/// campaign interval, and a resigned key goes to the next campaign at once, without the
/// stand-down (never two leaders and distinct terms: `tests/election/contract`).
#[tokio::test]
async fn a_resigned_key_goes_to_the_next_campaign_at_once() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-three");
    let mut electors = Vec::new();
    for i in 0..3 {
        let e = start(&url, &b, &format!("m{i}")).await;
        collect(e.take_events().unwrap());
        electors.push(Arc::new(e));
    }
    let succession = config(&url, &b, "m0").succession();
    let first = wait_leader(&electors, testkit::within(succession)).await;
    let before = key_revision(&url, &b).await;
    let samples = assert_sole_leader(&electors, first, TTL * 3).await;
    assert!(key_revision(&url, &b).await > before, "renewed meanwhile");
    println!(
        "three contenders: m{first} alone in all {samples} samples over {:?}",
        TTL * 3
    );
    let mut order = vec![first];
    for _ in 0..2 {
        let leader = *order.last().unwrap();
        let closed_at = Instant::now();
        electors[leader].close();
        let next = wait_leader(&electors, testkit::within(CAMPAIGN)).await;
        println!(
            "three contenders: m{leader} closed, m{next} leads after {:?}",
            closed_at.elapsed()
        );
        assert!(!order.contains(&next));
        order.push(next);
    }
    close_all(&electors).await;
    drop_bucket(&url, &b).await;
}

/// The TTL of the tests that tell a hand-over from a lapse by time: at 8 s a winner of a lapsed
/// key stands down 6.05 s before acting, more than [`testkit::LOAD_MARGIN`] beyond a campaign
/// interval, which is all a handed-over key waits.
const HAND_OVER_TTL: Duration = Duration::from_secs(8);

#[tokio::test]
async fn close_waits_for_the_ack_then_a_successor_leads_at_once() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-close");
    let hand_over = |name: &str| NatsKvConfig {
        ttl: HAND_OVER_TTL,
        ..config(&url, &b, name)
    };
    let a = NatsKv::start(&hand_over("a")).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, testkit::within(a.settings().stand_down)).await;
    let b_el = NatsKv::start(&hand_over("b")).await.unwrap();
    let mut b_events = b_el.take_events().unwrap();
    // b campaigns every campaign interval: two of them against a's key.
    testkit::assert_holds_for(
        "a leads, b waits",
        CAMPAIGN * 2,
        Duration::from_millis(5),
        || async { a.is_leader() && !b_el.is_leader() },
    )
    .await;

    a.close();
    let ack = match next_event(&mut a_events, PROMPT).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(a_term));
            ack
        }
        other => panic!("expected revoked, got {other:?}"),
    };
    // Hold the barrier past a TTL: nobody leads meanwhile, and the key's revision moving
    // proves a kept renewing it through the hold (so b faced a live key).
    let before = key_revision(&url, &b).await;
    let held = HAND_OVER_TTL + Duration::from_millis(500);
    testkit::assert_holds_for(
        "no leader while the barrier is held",
        held,
        Duration::from_millis(5),
        || async { !a.is_leader() && !b_el.is_leader() },
    )
    .await;
    assert!(
        key_revision(&url, &b).await > before,
        "the key is renewed until the ack"
    );
    let acked_at = Instant::now();
    ack.ack();
    let stand_down = b_el.settings().stand_down;
    let b_term = acquired(&mut b_events, stand_down).await;
    let latency = acked_at.elapsed();
    println!(
        "close: barrier held {held:?} with no successor; successor acquired {latency:?} after the ack (stand-down would be {stand_down:?})"
    );
    assert!(
        latency < stand_down,
        "handed over, without the stand-down: {latency:?}"
    );
    assert_ne!(a_term, b_term);
    tokio::time::timeout(PROMPT, a.closed())
        .await
        .unwrap()
        .unwrap();
    b_el.close();
    match next_event(&mut b_events, PROMPT).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(b_term));
            ack.ack();
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(PROMPT, b_el.closed())
        .await
        .unwrap()
        .unwrap();
    drop_bucket(&url, &b).await;
}

#[tokio::test]
async fn a_foreign_write_fences_the_leader_at_its_next_renewal() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-foreign");
    let leader = start(&url, &b, "victim").await;
    let mut events = leader.take_events().unwrap();
    acquired(&mut events, testkit::within(leader.settings().stand_down)).await;
    let client = async_nats::connect(&url).await.unwrap();
    let kv = async_nats::jetstream::new(client)
        .get_key_value(b.as_str())
        .await
        .unwrap();
    let written = Instant::now();
    kv.put("leader", "intruder".into()).await.unwrap();
    // Its next renewal, at most a renew interval away, finds the key rewritten. (The lease's
    // own deadline, TTL/5 later, cannot be told from it by time under load at this TTL.)
    let renew_interval = leader.settings().renew_interval;
    match next_event(&mut events, testkit::within(renew_interval)).await {
        ElectionEvent::Fenced { .. } => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = written.elapsed();
    println!(
        "foreign write: fenced {fenced_after:?} after it (renewal interval {renew_interval:?})"
    );
    assert!(!leader.is_leader());
    leader.close();
    tokio::time::timeout(PROMPT, leader.closed())
        .await
        .unwrap()
        .unwrap();
    drop_bucket(&url, &b).await;
}

struct NatsHandle {
    root: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl NatsHandle {
    fn script(&self, action: &str) -> String {
        let out = Command::new(self.root.join("scripts/services.sh"))
            .args(["private-nats", action])
            .arg(&self.dir)
            .arg(self.port.to_string())
            .output()
            .expect("run scripts/services.sh");
        assert!(
            out.status.success(),
            "private-nats {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

struct PrivateNats {
    root: PathBuf,
    dir: PathBuf,
    port: u16,
    url: String,
}

impl PrivateNats {
    /// The same server, for another thread (does not stop it when dropped).
    fn handle(&self) -> NatsHandle {
        NatsHandle {
            root: self.root.clone(),
            dir: self.dir.clone(),
            port: self.port,
        }
    }

    fn script(&self, action: &str) -> String {
        self.handle().script(action)
    }

    fn up() -> PrivateNats {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let offset = std::process::id() as u16 % 100;
        let port = (0..100)
            .map(|i| 14300 + (offset + i) % 100)
            .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
            .expect("a free port in 14300-14399");
        let dir = std::env::temp_dir().join(names::unique("nkv-nats"));
        let mut nats = PrivateNats {
            root,
            dir,
            port,
            url: String::new(),
        };
        nats.url = nats.script("up");
        nats
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        let _ = Command::new(self.root.join("scripts/services.sh"))
            .args(["private-nats", "down"])
            .arg(&self.dir)
            .arg(self.port.to_string())
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_stopped_server_fences_the_leader_and_leadership_returns_with_it() {
    testkit::init_tracing();
    let nats = PrivateNats::up();
    let b = bucket("nkv-down");
    let electors = vec![
        Arc::new(start(&nats.url, &b, "p0").await),
        Arc::new(start(&nats.url, &b, "p1").await),
    ];
    let mut fenced = Vec::new();
    let mut all_terms = Vec::new();
    for e in &electors {
        let seen = Arc::new(AtomicUsize::new(0));
        let terms = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (s, t) = (seen.clone(), terms.clone());
        harvester::election::on_event(e.take_events().unwrap(), move |ev| match ev {
            ElectionEvent::Fenced { .. } => {
                s.fetch_add(1, Ordering::SeqCst);
            }
            ElectionEvent::Acquired { term } => t.lock().push(term),
            ElectionEvent::Revoked { ack, .. } => ack.ack(),
        });
        fenced.push(seen);
        all_terms.push(terms);
    }
    let succession = config(&nats.url, &b, "p0").succession();
    let leader = wait_leader(&electors, testkit::within(succession)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    let stopping = Instant::now();
    tokio::task::spawn_blocking({
        let nats = nats.handle();
        move || nats.script("down")
    })
    .await
    .unwrap();
    // The server wrote nothing after it exited: the leader's deadline is at most a lease after
    // that, and is_leader() answers by the deadline whoever asks, however late.
    let stopped_at = Instant::now();
    testkit::wait_until(
        "the leader stops leading",
        stopped_at + testkit::within(lease),
        || async { !electors[leader].is_leader() },
    )
    .await
    .unwrap();
    let last_leading = sampler.last_leading(leader).expect("it led");
    println!(
        "server down: p{leader} last seen leading {:?} after the stop began (nats-server took {:?} to exit; lease {lease:?})",
        last_leading.saturating_duration_since(stopping),
        stopped_at - stopping
    );
    assert!(last_leading < stopped_at + lease, "fenced within the lease");
    wait_count("a Fenced event", 1, || {
        fenced[leader].load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(fenced[leader].load(Ordering::SeqCst), 1, "one Fenced event");
    testkit::assert_holds_for(
        "nobody leads without the server",
        TTL,
        Duration::from_millis(20),
        || async { leaders(&electors).is_empty() },
    )
    .await;

    let restarted_at = Instant::now();
    nats.script("up");
    // The clients reconnect (async-nats backs off up to 4 s), then the key left from before
    // the outage expires and its winner stands down: a succession.
    let recovery = succession + Duration::from_secs(4);
    let next = wait_leader(&electors, testkit::within(recovery)).await;
    println!(
        "server back: p{next} leads {:?} after the restart began",
        restarted_at.elapsed()
    );
    let (most, n) = sampler.finish();
    println!("server down/up: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
    wait_count("a second term collected", 2, || {
        distinct_terms(&all_terms).0.len()
    })
    .await;
    let (terms, distinct) = distinct_terms(&all_terms);
    assert_eq!(terms.len(), 2, "a new term after recovery: {terms:?}");
    assert_eq!(distinct, 2, "terms are never reused");
    close_all(&electors).await;
}

fn problem_fields(e: &Error) -> Vec<String> {
    match e {
        Error::InvalidConfig(p) => p.iter().map(|p| p.field.clone()).collect(),
        other => panic!("expected invalid config, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_server_is_invalid_config_naming_the_url_within_the_timeout() {
    testkit::init_tracing();
    // Refused: nobody listens.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = config(&format!("nats://127.0.0.1:{port}"), "b", "x");
    c.connect_timeout = Duration::from_secs(2);
    let t = Instant::now();
    let e = NatsKv::start(&c).await.unwrap_err();
    let refused_in = t.elapsed();
    println!("unreachable (refused): {refused_in:?}: {e}");
    assert_eq!(problem_fields(&e), ["leader.url"]);
    assert!(refused_in < testkit::within(c.connect_timeout));

    // Silent: accepts connections (the kernel does) but never says INFO.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = NatsKvConfig {
        url: format!("nats://{}", silent.local_addr().unwrap()),
        connect_timeout: Duration::from_secs(1),
        ..c
    };
    let t = Instant::now();
    let e = NatsKv::start(&c).await.unwrap_err();
    let silent_in = t.elapsed();
    println!(
        "unreachable (silent): {silent_in:?} with connect_timeout {:?}: {e}",
        c.connect_timeout
    );
    assert_eq!(problem_fields(&e), ["leader.url"]);
    assert!(silent_in < testkit::within(c.connect_timeout));
}

#[tokio::test]
async fn bad_settings_are_invalid_config_naming_the_field() {
    let base = config("nats://127.0.0.1:4222", "b", "x");
    let cases: [(&str, NatsKvConfig); 6] = [
        (
            "leader.ttl",
            NatsKvConfig {
                ttl: Duration::from_millis(200),
                campaign_interval: Duration::from_millis(100),
                ..base.clone()
            },
        ),
        (
            "leader.ttl",
            NatsKvConfig {
                ttl: Duration::from_secs(7200),
                ..base.clone()
            },
        ),
        (
            "leader.campaign_interval",
            NatsKvConfig {
                campaign_interval: TTL * 2,
                ..base.clone()
            },
        ),
        (
            "leader.campaign_interval",
            NatsKvConfig {
                campaign_interval: Duration::ZERO,
                ..base.clone()
            },
        ),
        (
            "leader.bucket",
            NatsKvConfig {
                bucket: String::new(),
                ..base.clone()
            },
        ),
        (
            "leader.url",
            NatsKvConfig {
                url: "http://127.0.0.1:4222".into(),
                ..base.clone()
            },
        ),
    ];
    for (field, c) in cases {
        let p = c.problems("leader");
        assert_eq!(
            p.iter().map(|p| p.field.as_str()).collect::<Vec<_>>(),
            [field],
            "{p:?}"
        );
        let e = NatsKv::start(&c).await.unwrap_err();
        assert_eq!(problem_fields(&e), [field]);
        println!("{field}: {}", p[0].message);
    }
}

#[tokio::test]
async fn a_missing_bucket_or_a_ttl_unlike_the_buckets_is_invalid_config() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-missing");
    let mut c = config(&url, &b, "x");
    c.create_bucket = false;
    let e = NatsKv::start(&c).await.unwrap_err();
    println!("missing bucket: {e}");
    assert_eq!(problem_fields(&e), ["leader.bucket"]);

    make_bucket(&url, &b, TTL * 3).await;
    let e = NatsKv::start(&c).await.unwrap_err();
    println!("bucket ttl unlike the setting: {e}");
    assert_eq!(problem_fields(&e), ["leader.ttl"]);
    drop_bucket(&url, &b).await;
}

#[tokio::test]
async fn a_bucket_deleted_under_a_leader_that_may_not_create_one_fails_the_elector() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-gone");
    make_bucket(&url, &b, TTL).await;
    let mut c = config(&url, &b, "g");
    c.create_bucket = false;
    let elector = NatsKv::start(&c).await.unwrap();
    let mut events = elector.take_events().unwrap();
    acquired(&mut events, testkit::within(elector.settings().stand_down)).await;

    let client = async_nats::connect(&url).await.unwrap();
    async_nats::jetstream::new(client)
        .delete_stream(format!("KV_{b}"))
        .await
        .unwrap();
    let deleted = Instant::now();
    // Its next renewal finds no bucket (and may not create one).
    let renew_interval = elector.settings().renew_interval;
    match next_event(&mut events, testkit::within(renew_interval)).await {
        ElectionEvent::Fenced { .. } => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = deleted.elapsed();
    assert!(!elector.is_leader());
    let outcome = tokio::time::timeout(PROMPT, elector.closed())
        .await
        .expect("the elector ends");
    let failed_after = deleted.elapsed();
    println!(
        "bucket deleted: fenced after {fenced_after:?}, failed after {failed_after:?}: {outcome:?}"
    );
    match outcome {
        Err(Error::Election { source, .. }) => assert!(
            matches!(source.as_ref(), Error::Coordination { system: "nats", .. }),
            "{source:?}"
        ),
        other => panic!("expected an election failure, got {other:?}"),
    }
    assert_eq!(elector.state(), ElectorState::Closed);
    assert!(
        events.recv().await.is_none(),
        "the stream ends with the elector"
    );
}
