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

#[path = "common/electors.rs"]
mod electors;

use electors::{acquired, leaders, next_event, wait_leader, Sampler};

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

#[tokio::test]
async fn one_contender_acquires_after_the_stand_down_and_closes_cleanly() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-one");
    let started = Instant::now();
    let elector = start(&url, &b, "solo").await;
    let started_in = started.elapsed();
    let mut events = elector.take_events().unwrap();
    assert!(elector.take_events().is_none(), "single consumer");
    let stand_down = elector.settings().stand_down;
    let term = acquired(&mut events, stand_down + Duration::from_secs(5)).await;
    let acquired_in = started.elapsed();
    println!(
        "one contender: started in {started_in:?}, acquired after {acquired_in:?} (stand-down {stand_down:?})"
    );
    assert!(
        acquired_in >= stand_down,
        "a winner over a free key acts only after the stand-down"
    );
    assert!(elector.is_leader());
    assert_eq!(elector.term(), Some(term));
    assert_eq!(elector.state(), ElectorState::Live);
    // Renewals keep it leading well past the TTL.
    tokio::time::sleep(TTL * 2).await;
    assert!(elector.is_leader(), "renewals keep the lease");
    assert_eq!(elector.term(), Some(term), "same term while renewing");

    elector.close();
    assert!(!elector.is_leader(), "closing ends leadership at once");
    match next_event(&mut events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term: t, ack } => {
            assert_eq!(t, Some(term));
            ack.ack();
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(5), elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    assert_eq!(elector.state(), ElectorState::Closed);
    assert!(events.recv().await.is_none(), "the stream ends once closed");
    elector.close(); // idempotent
    drop_bucket(&url, &b).await;
}

#[tokio::test]
async fn three_contenders_have_exactly_one_leader_and_distinct_terms() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-three");
    let mut electors = Vec::new();
    let mut terms = Vec::new();
    for i in 0..3 {
        let e = start(&url, &b, &format!("m{i}")).await;
        terms.push(collect(e.take_events().unwrap()));
        electors.push(Arc::new(e));
    }
    let t0 = Instant::now();
    let first = wait_leader(&electors, Duration::from_secs(10)).await;
    println!("three contenders: m{first} leads after {:?}", t0.elapsed());

    // Stable: exactly one leader at every sample, over three TTLs (several renewals).
    let until = Instant::now() + TTL * 3;
    let (mut samples, mut changes, mut current) = (0, 0, first);
    while Instant::now() < until {
        let l = leaders(&electors);
        assert_eq!(l.len(), 1, "exactly one leader at every sample: {l:?}");
        if l[0] != current {
            changes += 1;
            current = l[0];
        }
        samples += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("three contenders: exactly one leader in all {samples} samples over {:?}; {changes} changes", TTL * 3);
    assert_eq!(changes, 0, "leadership is stable");

    // Hand over twice; never two at once.
    let sampler = Sampler::start(&electors, Duration::from_millis(2));
    let mut order = vec![first];
    for _ in 0..2 {
        let leader = *order.last().unwrap();
        let closed_at = Instant::now();
        electors[leader].close();
        let next = wait_leader(&electors, Duration::from_secs(10)).await;
        println!(
            "three contenders: m{leader} closed, m{next} leads after {:?}",
            closed_at.elapsed()
        );
        assert!(!order.contains(&next));
        order.push(next);
    }
    let (most, n) = sampler.finish();
    println!(
        "three contenders: at most {most} leader(s) at once over {n} samples during hand-overs"
    );
    assert!(most <= 1, "never two leaders at once");

    // The collectors run on their own tasks: let them catch up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let all: Vec<Term> = terms.iter().flat_map(|t| t.lock().clone()).collect();
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    println!(
        "three contenders: {} terms acquired, {} distinct",
        all.len(),
        distinct.len()
    );
    assert_eq!(all.len(), 3, "one term per leadership: {all:?}");
    assert_eq!(distinct.len(), all.len(), "terms are never reused");
    for e in &electors {
        e.close();
        tokio::time::timeout(Duration::from_secs(10), e.closed())
            .await
            .unwrap()
            .unwrap();
    }
    drop_bucket(&url, &b).await;
}

#[tokio::test]
async fn close_waits_for_the_ack_then_a_successor_leads_at_once() {
    testkit::init_tracing();
    let url = nats_url();
    let b = bucket("nkv-close");
    let a = start(&url, &b, "a").await;
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, Duration::from_secs(10)).await;
    let b_el = start(&url, &b, "b").await;
    let mut b_events = b_el.take_events().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(a.is_leader() && !b_el.is_leader());

    a.close();
    let ack = match next_event(&mut a_events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(a_term));
            ack
        }
        other => panic!("expected revoked, got {other:?}"),
    };
    // Hold the barrier well past a TTL: the key is kept, so nobody else may lead.
    let held = TTL + Duration::from_millis(500);
    let hold_until = Instant::now() + held;
    while Instant::now() < hold_until {
        assert!(!a.is_leader(), "the closing leader no longer leads");
        assert!(!b_el.is_leader(), "no successor before the ack");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let acked_at = Instant::now();
    ack.ack();
    let b_term = acquired(&mut b_events, Duration::from_secs(5)).await;
    let latency = acked_at.elapsed();
    println!(
        "close: barrier held {held:?} with no successor; successor acquired {latency:?} after the ack (stand-down would be {:?})",
        b_el.settings().stand_down
    );
    assert!(
        latency < Duration::from_secs(2),
        "successor within 2s: {latency:?}"
    );
    assert_ne!(a_term, b_term);
    tokio::time::timeout(Duration::from_secs(5), a.closed())
        .await
        .unwrap()
        .unwrap();
    b_el.close();
    match next_event(&mut b_events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(b_term));
            ack.ack();
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(5), b_el.closed())
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
    acquired(&mut events, Duration::from_secs(10)).await;
    let client = async_nats::connect(&url).await.unwrap();
    let kv = async_nats::jetstream::new(client)
        .get_key_value(b.as_str())
        .await
        .unwrap();
    let written = Instant::now();
    kv.put("leader", "intruder".into()).await.unwrap();
    match next_event(&mut events, TTL * 2).await {
        ElectionEvent::Fenced { .. } => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = written.elapsed();
    println!(
        "foreign write: fenced {fenced_after:?} after it (renewal interval {:?})",
        leader.settings().renew_interval
    );
    assert!(!leader.is_leader());
    assert!(fenced_after <= leader.settings().renew_interval + Duration::from_millis(500));
    leader.close();
    tokio::time::timeout(Duration::from_secs(5), leader.closed())
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
    let leader = wait_leader(&electors, Duration::from_secs(10)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    // Stop it on another thread and watch meanwhile: nats-server may take a while to exit.
    let stopped_at = Instant::now();
    let stopping = std::thread::spawn({
        let nats = nats.handle();
        move || {
            nats.script("down");
            stopped_at.elapsed()
        }
    });
    while electors[leader].is_leader() {
        assert!(
            stopped_at.elapsed() < lease * 2,
            "still leading after {:?}",
            stopped_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let fenced_after = stopped_at.elapsed();
    let stop_took = stopping.join().unwrap();
    println!(
        "server down: p{leader} stopped leading {fenced_after:?} after the stop began (nats-server took {stop_took:?} to exit; lease {lease:?})"
    );
    assert!(fenced_after < lease, "fenced within the lease");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fenced[leader].load(Ordering::SeqCst), 1, "a Fenced event");
    assert!(
        leaders(&electors).is_empty(),
        "nobody leads without the server"
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    let restarted_at = Instant::now();
    nats.script("up");
    let next = wait_leader(&electors, Duration::from_secs(12)).await;
    println!(
        "server back: p{next} leads {:?} after the restart began",
        restarted_at.elapsed()
    );
    let (most, n) = sampler.finish();
    println!("server down/up: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let terms: Vec<Term> = all_terms.iter().flat_map(|t| t.lock().clone()).collect();
    let mut distinct = terms.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(terms.len(), 2, "a new term after recovery: {terms:?}");
    assert_eq!(distinct.len(), 2, "terms are never reused");
    for e in &electors {
        e.close();
    }
    for e in &electors {
        tokio::time::timeout(Duration::from_secs(10), e.closed())
            .await
            .unwrap()
            .unwrap();
    }
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
    assert!(refused_in < c.connect_timeout);

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
    assert!(silent_in < c.connect_timeout + Duration::from_millis(500));
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
    acquired(&mut events, Duration::from_secs(10)).await;

    let client = async_nats::connect(&url).await.unwrap();
    async_nats::jetstream::new(client)
        .delete_stream(format!("KV_{b}"))
        .await
        .unwrap();
    let deleted = Instant::now();
    match next_event(&mut events, TTL * 2).await {
        ElectionEvent::Fenced { .. } => {}
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = deleted.elapsed();
    assert!(!elector.is_leader());
    let outcome = tokio::time::timeout(Duration::from_secs(5), elector.closed())
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
