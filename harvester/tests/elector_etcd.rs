#![cfg(feature = "etcd")]
//! The etcd elector against a real etcd: the shared one (`scripts/services.sh up`,
//! `ETCD_ENDPOINTS`) for elections, a private one for stopping and restarting the server under
//! a leader, and one started with a long election timeout for a server that raises the TTL.
//! Each test uses a prefix of its own.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, SortOrder, SortTarget};
use harvester::election::etcd::{Etcd, EtcdConfig};
use harvester::election::{ElectionEvent, Elector, ElectorState, EventStream, Term};
use harvester::Error;
use testkit::names;

#[path = "common/electors.rs"]
mod electors;

use electors::{acquired, leaders, next_event, wait_leader, Sampler};

const TTL: Duration = Duration::from_secs(2);

/// The shared etcd: `ETCD_ENDPOINTS`, else the `export ETCD_ENDPOINTS=...` line of
/// `.state/services.env`, else the port `scripts/services.sh` uses.
fn endpoints() -> Vec<String> {
    let from_env = std::env::var("ETCD_ENDPOINTS")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let value = from_env.unwrap_or_else(|| {
        let env =
            std::fs::read_to_string(testkit::state_dir().join("services.env")).unwrap_or_default();
        env.lines()
            .find_map(|l| l.strip_prefix("export ETCD_ENDPOINTS="))
            .map(|v| v.trim().trim_matches('"').to_owned())
            .unwrap_or_else(|| "http://127.0.0.1:23790".into())
    });
    value
        .split(',')
        .map(|e| e.trim().to_owned())
        .filter(|e| !e.is_empty())
        .collect()
}

fn prefix(test: &str) -> String {
    format!("/harvester-tests/{}", names::unique(test))
}

fn config(endpoints: &[String], prefix: &str, name: &str) -> EtcdConfig {
    EtcdConfig {
        endpoints: endpoints.to_vec(),
        prefix: Some(prefix.into()),
        ttl: TTL,
        name: Some(name.into()),
        connect_timeout: Duration::from_secs(3),
        ..Default::default()
    }
}

async fn start(endpoints: &[String], prefix: &str, name: &str) -> Etcd {
    Etcd::start(&config(endpoints, prefix, name)).await.unwrap()
}

async fn client(endpoints: &[String]) -> Client {
    Client::connect(endpoints, None).await.unwrap()
}

/// The candidacies under `prefix`, oldest first: (key, lease, create revision, value).
async fn candidacies(c: &Client, prefix: &str) -> Vec<(String, i64, i64, String)> {
    let options = GetOptions::new()
        .with_prefix()
        .with_sort(SortTarget::Create, SortOrder::Ascend);
    let response = c
        .kv_client()
        .get(format!("{prefix}/"), Some(options))
        .await
        .unwrap();
    response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_owned(),
                kv.lease(),
                kv.create_revision(),
                kv.value_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// What one elector's events said, collected on a task; revocations acknowledged at once.
#[derive(Default)]
struct Seen {
    acquired: parking_lot::Mutex<Vec<Term>>,
    fenced: AtomicUsize,
}

fn collect(events: EventStream) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let s = Arc::clone(&seen);
    harvester::election::on_event(events, move |e| match e {
        ElectionEvent::Acquired { term } => s.acquired.lock().push(term),
        ElectionEvent::Revoked { ack, .. } => ack.ack(),
        ElectionEvent::Fenced { .. } => {
            s.fenced.fetch_add(1, Ordering::SeqCst);
        }
    });
    seen
}

fn all_terms(seen: &[Arc<Seen>]) -> (usize, usize) {
    let all: Vec<Term> = seen
        .iter()
        .flat_map(|s| s.acquired.lock().clone())
        .collect();
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    (all.len(), distinct.len())
}

async fn close_all(electors: &[Arc<Etcd>]) {
    for e in electors {
        e.close();
    }
    for e in electors {
        tokio::time::timeout(Duration::from_secs(10), e.closed())
            .await
            .expect("closed in time")
            .expect("an orderly close is Ok");
    }
}

#[tokio::test]
async fn one_contender_acquires_and_closes_cleanly() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-one");
    let started = Instant::now();
    let elector = start(&eps, &p, "solo").await;
    let started_in = started.elapsed();
    let mut events = elector.take_events().unwrap();
    assert!(elector.take_events().is_none(), "single consumer");
    let term = acquired(&mut events, Duration::from_secs(5)).await;
    let acquired_in = started.elapsed();
    println!("one contender: started in {started_in:?}, acquired after {acquired_in:?}");
    assert!(elector.is_leader());
    assert_eq!(elector.term(), Some(term));
    assert_eq!(elector.state(), ElectorState::Live);
    assert_eq!(
        elector.describe(),
        format!("etcd member=solo prefix={p} endpoints={}", eps.join(","))
    );
    let s = elector.settings();
    assert_eq!(
        (s.lease, s.succession, s.keep_alive_interval),
        (TTL / 2, TTL, TTL / 4)
    );

    let c = client(&eps).await;
    let keys = candidacies(&c, &p).await;
    println!("one contender: candidacy {keys:?}");
    assert_eq!(keys.len(), 1);
    let (key, lease, _, value) = &keys[0];
    assert_eq!(key, &format!("{p}/{lease:x}"), "the key names its lease");
    assert!(
        value.contains("solo") && value.contains(&term.to_string()),
        "{value}"
    );

    // Keep-alives keep it leading well past the TTL.
    tokio::time::sleep(TTL * 2).await;
    assert!(elector.is_leader(), "keep-alives keep the lease");
    assert_eq!(elector.term(), Some(term), "same term while kept alive");

    elector.close();
    assert!(!elector.is_leader(), "closing ends leadership at once");
    assert_eq!(elector.state(), ElectorState::Closing);
    match next_event(&mut events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term: t, ack } => {
            assert_eq!(t, Some(term));
            ack.ack();
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    let closing = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    println!(
        "one contender: closed {:?} after the ack",
        closing.elapsed()
    );
    assert_eq!(elector.state(), ElectorState::Closed);
    assert!(events.recv().await.is_none(), "the stream ends once closed");
    assert!(
        candidacies(&c, &p).await.is_empty(),
        "the lease was revoked, taking the key with it"
    );
    elector.close(); // idempotent
    assert!(elector.closed().await.is_ok());
}

#[tokio::test]
async fn three_contenders_have_exactly_one_leader_and_distinct_terms() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-three");
    let mut electors = Vec::new();
    let mut seen = Vec::new();
    for i in 0..3 {
        let e = start(&eps, &p, &format!("m{i}")).await;
        seen.push(collect(e.take_events().unwrap()));
        electors.push(Arc::new(e));
    }
    let t0 = Instant::now();
    let first = wait_leader(&electors, Duration::from_secs(5)).await;
    println!("three contenders: m{first} leads after {:?}", t0.elapsed());
    assert_eq!(first, 0, "the oldest candidacy leads");

    // Stable: exactly one leader at every sample (every 20ms), over three TTLs.
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "three contenders: exactly one leader in all {samples} samples over {:?}; {changes} changes",
        TTL * 3
    );
    assert_eq!(changes, 0, "leadership is stable");

    // Hand over twice; never two at once.
    let sampler = Sampler::start(&electors, Duration::from_millis(2));
    let mut order = vec![first];
    for _ in 0..2 {
        let leader = *order.last().unwrap();
        let closed_at = Instant::now();
        electors[leader].close();
        let next = wait_leader(&electors, Duration::from_secs(5)).await;
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
    assert_eq!(order, [0, 1, 2], "leadership passes in the order of entry");

    // The collectors run on their own tasks: let them catch up.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (all, distinct) = all_terms(&seen);
    println!("three contenders: {all} terms acquired, {distinct} distinct");
    assert_eq!(all, 3, "one term per leadership");
    assert_eq!(distinct, all, "terms are never reused");
    close_all(&electors).await;
}

#[tokio::test]
async fn close_waits_for_the_ack_then_a_successor_leads_within_a_second() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-close");
    let a = start(&eps, &p, "a").await;
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, Duration::from_secs(5)).await;
    let b = start(&eps, &p, "b").await;
    let mut b_events = b.take_events().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(a.is_leader() && !b.is_leader());

    a.close();
    let ack = match next_event(&mut a_events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(a_term));
            ack
        }
        other => panic!("expected revoked, got {other:?}"),
    };
    // Hold the barrier well past a TTL: the lease is kept alive, so nobody else may lead.
    let held = TTL + Duration::from_millis(500);
    let hold_until = Instant::now() + held;
    while Instant::now() < hold_until {
        assert!(!a.is_leader(), "the closing leader no longer leads");
        assert!(!b.is_leader(), "no successor before the ack");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let acked_at = Instant::now();
    ack.ack();
    let b_term = acquired(&mut b_events, Duration::from_secs(5)).await;
    let latency = acked_at.elapsed();
    println!(
        "close: barrier held {held:?} with no successor; successor acquired {latency:?} after the ack (ttl {TTL:?})"
    );
    assert!(
        latency < Duration::from_secs(1),
        "successor within 1s: {latency:?}"
    );
    assert_ne!(a_term, b_term);
    tokio::time::timeout(Duration::from_secs(5), a.closed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.state(), ElectorState::Closed);
    b.close();
    match next_event(&mut b_events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(b_term));
            drop(ack); // dropping releases the barrier too
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(5), b.closed())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_unacknowledged_revocation_hands_over_after_the_revoke_timeout() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-revoke-timeout");
    let mut c = config(&eps, &p, "slow");
    c.revoke_timeout = Some(Duration::from_millis(1500));
    let a = Etcd::start(&c).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    acquired(&mut a_events, Duration::from_secs(5)).await;
    let b = start(&eps, &p, "next").await;
    let mut b_events = b.take_events().unwrap();

    let closed_at = Instant::now();
    a.close();
    let _held = match next_event(&mut a_events, Duration::from_secs(5)).await {
        ElectionEvent::Revoked { ack, .. } => ack, // held, never acknowledged
        other => panic!("expected revoked, got {other:?}"),
    };
    acquired(&mut b_events, Duration::from_secs(5)).await;
    let after = closed_at.elapsed();
    println!("revoke timeout: successor acquired {after:?} after close (revoke_timeout 1.5s)");
    assert!(
        after >= Duration::from_millis(1500),
        "not before the timeout"
    );
    assert!(after < Duration::from_millis(2500), "soon after it");
    tokio::time::timeout(Duration::from_secs(5), a.closed())
        .await
        .unwrap()
        .unwrap();
    b.close();
}

/// The leader among `electors` by its key: (index, key, lease).
async fn leader_key(c: &Client, p: &str, electors: &[Arc<Etcd>]) -> (usize, String, i64) {
    let leader = wait_leader(electors, Duration::from_secs(5)).await;
    let keys = candidacies(c, p).await;
    let (key, lease, _, value) = keys.first().expect("a candidacy").clone();
    let name = electors[leader].settings().name.clone();
    assert!(value.contains(&name), "the oldest key is the leader's");
    (leader, key, lease)
}

#[tokio::test]
async fn revoking_the_leaders_lease_from_another_client_fences_it_and_another_leads() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-foreign-revoke");
    let electors = vec![
        Arc::new(start(&eps, &p, "r0").await),
        Arc::new(start(&eps, &p, "r1").await),
    ];
    let mut events: Vec<_> = electors.iter().map(|e| e.take_events().unwrap()).collect();
    let c = client(&eps).await;
    let (leader, _, lease) = leader_key(&c, &p, &electors).await;
    let old_term = acquired(&mut events[leader], Duration::from_secs(1)).await;
    let other = 1 - leader;

    let revoked = Instant::now();
    c.lease_client().revoke(lease).await.unwrap();
    match next_event(&mut events[leader], TTL).await {
        ElectionEvent::Fenced { term } => assert_eq!(term, old_term),
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = revoked.elapsed();
    assert!(!electors[leader].is_leader());
    let new_term = acquired(&mut events[other], Duration::from_secs(5)).await;
    let successor_after = revoked.elapsed();
    println!(
        "foreign revoke: r{leader} fenced {fenced_after:?} after it, r{other} leads after {successor_after:?}"
    );
    assert!(
        fenced_after < TTL / 4 + Duration::from_millis(500),
        "fenced by the watch or the next keep-alive"
    );
    assert_ne!(new_term, old_term);

    // The fenced member enters again on a new lease, behind the new leader.
    let back = Instant::now();
    loop {
        let keys = candidacies(&c, &p).await;
        if keys.len() == 2 {
            assert!(keys.iter().all(|(_, l, _, _)| *l != lease), "{keys:?}");
            assert!(keys[1].3.contains(&format!("r{leader}")), "{keys:?}");
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "not back: {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "foreign revoke: r{leader} entered again {:?} after the revoke",
        revoked.elapsed()
    );
    tokio::time::sleep(TTL).await;
    assert!(electors[other].is_leader() && !electors[leader].is_leader());
    drop(events); // releases the barriers of the revocations to come
    close_all(&electors).await;
}

#[tokio::test]
async fn a_deleted_key_fences_its_leader_which_enters_again_at_the_back() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-foreign-delete");
    let electors = vec![
        Arc::new(start(&eps, &p, "d0").await),
        Arc::new(start(&eps, &p, "d1").await),
    ];
    let mut events: Vec<_> = electors.iter().map(|e| e.take_events().unwrap()).collect();
    let c = client(&eps).await;
    let (leader, key, lease) = leader_key(&c, &p, &electors).await;
    let old_term = acquired(&mut events[leader], Duration::from_secs(1)).await;
    let other = 1 - leader;

    let deleted = Instant::now();
    c.kv_client().delete(key.as_str(), None).await.unwrap();
    match next_event(&mut events[leader], TTL).await {
        ElectionEvent::Fenced { term } => assert_eq!(term, old_term),
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = deleted.elapsed();
    acquired(&mut events[other], Duration::from_secs(5)).await;
    let successor_after = deleted.elapsed();
    println!(
        "foreign delete: d{leader} fenced {fenced_after:?} after it, d{other} leads after {successor_after:?}"
    );
    assert!(
        fenced_after < Duration::from_millis(500),
        "fenced by the watch"
    );
    // Back in line on the same (live) lease, at the back.
    let back = Instant::now();
    loop {
        let keys = candidacies(&c, &p).await;
        if keys.len() == 2 {
            assert_eq!(keys[1].0, key, "the same key, on the same lease: {keys:?}");
            assert_eq!(keys[1].1, lease);
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "not back: {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!electors[leader].is_leader() && electors[other].is_leader());
    drop(events); // releases the barriers of the revocations to come
    close_all(&electors).await;
}

/// A port that nothing listens on, nor on `port + 10` (etcd's peer port here).
fn free_port_pair() -> u16 {
    for _ in 0..50 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if port < 65000 && TcpListener::bind(("127.0.0.1", port + 10)).is_ok() {
            return port;
        }
    }
    panic!("no free port pair");
}

/// A private etcd (`scripts/services.sh private-etcd`), data under a temp dir.
#[derive(Clone)]
struct PrivateEtcd {
    root: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl PrivateEtcd {
    fn up() -> (PrivateEtcd, String) {
        let etcd = PrivateEtcd {
            root: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."),
            dir: std::env::temp_dir().join(names::unique("etcd-private")),
            port: free_port_pair(),
        };
        let url = etcd.script("up");
        (etcd, url)
    }

    fn script(&self, action: &str) -> String {
        let out = Command::new(self.root.join("scripts/services.sh"))
            .args(["private-etcd", action])
            .arg(&self.dir)
            .arg(self.port.to_string())
            .output()
            .expect("run scripts/services.sh");
        assert!(
            out.status.success(),
            "private-etcd {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

/// Stops the server and removes its data when the test ends, however it ends.
struct Cleanup(PrivateEtcd);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Command::new(self.0.root.join("scripts/services.sh"))
            .args(["private-etcd", "down"])
            .arg(&self.0.dir)
            .arg(self.0.port.to_string())
            .output();
        let _ = std::fs::remove_dir_all(&self.0.dir);
    }
}

#[tokio::test]
async fn a_stopped_server_fences_the_leader_and_leadership_returns_with_it() {
    testkit::init_tracing();
    let (etcd, url) = tokio::task::spawn_blocking(PrivateEtcd::up).await.unwrap();
    let _cleanup = Cleanup(etcd.clone());
    let eps = vec![url];
    let p = prefix("etcd-down");
    let electors = vec![
        Arc::new(start(&eps, &p, "p0").await),
        Arc::new(start(&eps, &p, "p1").await),
    ];
    let seen: Vec<_> = electors
        .iter()
        .map(|e| collect(e.take_events().unwrap()))
        .collect();
    let leader = wait_leader(&electors, Duration::from_secs(5)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    // Stop it on another thread and watch meanwhile: etcd may take a while to exit.
    let stopped_at = Instant::now();
    let stopping = std::thread::spawn({
        let etcd = etcd.clone();
        move || {
            etcd.script("down");
            stopped_at.elapsed()
        }
    });
    while electors[leader].is_leader() {
        assert!(
            stopped_at.elapsed() < Duration::from_secs(10),
            "still leading after {:?}",
            stopped_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let fenced_after = stopped_at.elapsed();
    let stop_took = stopping.join().unwrap();
    println!(
        "server down: p{leader} stopped leading {fenced_after:?} after the stop began (etcd took {stop_took:?} to exit; lease {lease:?})"
    );
    assert!(
        fenced_after < stop_took + lease + Duration::from_millis(100),
        "fenced within the lease of the server's last answer"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        seen[leader].fenced.load(Ordering::SeqCst),
        1,
        "a Fenced event"
    );
    // Nobody leads while the server is down (well past everyone's lease).
    let down_until = Instant::now() + TTL;
    while Instant::now() < down_until {
        assert!(
            leaders(&electors).is_empty(),
            "nobody leads without the server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let restarted_at = Instant::now();
    tokio::task::spawn_blocking({
        let etcd = etcd.clone();
        move || etcd.script("up")
    })
    .await
    .unwrap();
    let up_took = restarted_at.elapsed();
    let next = wait_leader(&electors, Duration::from_secs(15)).await;
    println!(
        "server back: p{next} leads {:?} after the restart began (etcd took {up_took:?} to come up)",
        restarted_at.elapsed()
    );
    // Stable again, one leader.
    tokio::time::sleep(TTL).await;
    assert_eq!(leaders(&electors).len(), 1);
    let (most, n) = sampler.finish();
    println!("server down/up: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (all, distinct) = all_terms(&seen);
    println!("server down/up: {all} terms acquired, {distinct} distinct");
    assert_eq!(all, 2, "a new term after recovery");
    assert_eq!(distinct, 2, "terms are never reused");
    let c = client(&eps).await;
    let keys = candidacies(&c, &p).await;
    println!("server back: candidacies {keys:?}");
    assert_eq!(keys.len(), 2, "one candidacy each, the old ones revoked");
    close_all(&electors).await;
}

/// Sends `signal` to the private etcd (its pid file is `DIR/pid`).
fn signal(etcd: &PrivateEtcd, signal: &str) {
    let pid = std::fs::read_to_string(etcd.dir.join("pid")).expect("the pid of the private etcd");
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.trim())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal}");
}

/// Resumes a frozen server however the test ends (so that it can be stopped).
struct Thaw(PrivateEtcd);

impl Drop for Thaw {
    fn drop(&mut self) {
        signal(&self.0, "CONT");
    }
}

#[tokio::test]
async fn a_frozen_server_fences_the_leader_by_its_deadline_and_leadership_returns_after() {
    testkit::init_tracing();
    let (etcd, url) = tokio::task::spawn_blocking(PrivateEtcd::up).await.unwrap();
    let _cleanup = Cleanup(etcd.clone());
    let eps = vec![url];
    let p = prefix("etcd-frozen");
    let electors = vec![
        Arc::new(start(&eps, &p, "f0").await),
        Arc::new(start(&eps, &p, "f1").await),
    ];
    let seen: Vec<_> = electors
        .iter()
        .map(|e| collect(e.take_events().unwrap()))
        .collect();
    let leader = wait_leader(&electors, Duration::from_secs(5)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    // SIGSTOP: the connections stay up but nothing is answered, so only the deadline fences.
    let frozen_at = Instant::now();
    signal(&etcd, "STOP");
    let thaw = Thaw(etcd.clone());
    while electors[leader].is_leader() {
        assert!(
            frozen_at.elapsed() < lease * 3,
            "still leading after {:?}",
            frozen_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let fenced_after = frozen_at.elapsed();
    println!(
        "server frozen: f{leader} stopped leading {fenced_after:?} after the freeze (lease {lease:?}, keep-alive every {:?})",
        electors[leader].settings().keep_alive_interval
    );
    assert!(
        fenced_after < lease + Duration::from_millis(200),
        "is_leader turns false by the deadline"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        seen[leader].fenced.load(Ordering::SeqCst),
        1,
        "a Fenced event once the deadline passed"
    );
    // Frozen well past the TTL: nobody leads meanwhile.
    let frozen_until = frozen_at + TTL * 2;
    while Instant::now() < frozen_until {
        assert!(leaders(&electors).is_empty(), "nobody leads while frozen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let thawed_at = Instant::now();
    drop(thaw);
    let next = wait_leader(&electors, Duration::from_secs(15)).await;
    println!(
        "server thawed: f{next} leads {:?} after it resumed",
        thawed_at.elapsed()
    );
    tokio::time::sleep(TTL).await;
    assert_eq!(leaders(&electors).len(), 1);
    let (most, n) = sampler.finish();
    println!("server frozen/thawed: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (all, distinct) = all_terms(&seen);
    println!("server frozen/thawed: {all} terms acquired, {distinct} distinct");
    assert_eq!(
        (all, distinct),
        (2, 2),
        "a new term after recovery, never reused"
    );
    close_all(&electors).await;
}

fn problem_fields(e: &Error) -> Vec<String> {
    match e {
        Error::InvalidConfig(p) => p.iter().map(|p| p.field.clone()).collect(),
        other => panic!("expected invalid config, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_settings_are_invalid_config_naming_each_field() {
    let base = config(&endpoints(), "/harvester-tests/bad", "x");
    let cases: Vec<(&str, EtcdConfig)> = vec![
        (
            "leader.ttl",
            EtcdConfig {
                ttl: Duration::from_secs(1),
                ..base.clone()
            },
        ),
        (
            "leader.ttl",
            EtcdConfig {
                ttl: Duration::from_secs(7200),
                ..base.clone()
            },
        ),
        (
            "leader.ttl",
            EtcdConfig {
                ttl: Duration::from_millis(2500),
                ..base.clone()
            },
        ),
        (
            "leader.endpoints",
            EtcdConfig {
                endpoints: vec![],
                ..base.clone()
            },
        ),
        (
            "leader.endpoints",
            EtcdConfig {
                endpoints: vec!["https://127.0.0.1:2379".into()],
                ..base.clone()
            },
        ),
        (
            "leader.endpoints",
            EtcdConfig {
                endpoints: vec!["http://127.0.0.1".into()],
                ..base.clone()
            },
        ),
        (
            "leader.prefix",
            EtcdConfig {
                prefix: Some("/harvester/".into()),
                ..base.clone()
            },
        ),
        (
            "leader.prefix",
            EtcdConfig {
                prefix: Some(String::new()),
                ..base.clone()
            },
        ),
        (
            "leader.revoke_timeout",
            EtcdConfig {
                revoke_timeout: Some(Duration::ZERO),
                ..base.clone()
            },
        ),
        (
            "leader.connect_timeout",
            EtcdConfig {
                connect_timeout: Duration::ZERO,
                ..base.clone()
            },
        ),
        (
            "leader.name",
            EtcdConfig {
                name: Some("  ".into()),
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
        let t = Instant::now();
        let e = Etcd::start(&c).await.unwrap_err();
        assert_eq!(problem_fields(&e), [field]);
        assert!(
            t.elapsed() < Duration::from_millis(100),
            "refused before any request"
        );
        println!("{field}: {}", p[0].message);
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_invalid_config_naming_the_endpoints_within_the_timeout() {
    testkit::init_tracing();
    // Refused: nobody listens.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut c = config(&[format!("http://127.0.0.1:{port}")], "/x", "x");
    c.connect_timeout = Duration::from_secs(2);
    let t = Instant::now();
    let e = Etcd::start(&c).await.unwrap_err();
    let refused_in = t.elapsed();
    println!(
        "unreachable (refused): {refused_in:?} with connect_timeout {:?}: {e}",
        c.connect_timeout
    );
    assert_eq!(problem_fields(&e), ["leader.endpoints"]);
    assert!(refused_in < c.connect_timeout + Duration::from_secs(1));

    // Silent: accepts connections (the kernel does) but never speaks HTTP/2.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = EtcdConfig {
        endpoints: vec![format!("http://{}", silent.local_addr().unwrap())],
        connect_timeout: Duration::from_secs(1),
        ..c
    };
    let t = Instant::now();
    let e = Etcd::start(&c).await.unwrap_err();
    let silent_in = t.elapsed();
    println!(
        "unreachable (silent): {silent_in:?} with connect_timeout {:?}: {e}",
        c.connect_timeout
    );
    assert_eq!(problem_fields(&e), ["leader.endpoints"]);
    assert!(silent_in < c.connect_timeout + Duration::from_secs(1));
}

/// An etcd with a long election timeout (3s: its minimum lease TTL is 4.5s, granted as 5s),
/// killed when dropped.
struct SlowEtcd {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl SlowEtcd {
    fn start() -> SlowEtcd {
        let port = free_port_pair();
        let dir = std::env::temp_dir().join(names::unique("etcd-slow"));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let peer = format!("http://127.0.0.1:{}", port + 10);
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", "slow", "--data-dir"])
            .arg(dir.join("data"))
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &format!("slow={peer}")])
            .args(["--heartbeat-interval", "300", "--election-timeout", "3000"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("run etcd (scripts/services.sh up installs it)");
        SlowEtcd { child, dir, url }
    }
}

impl Drop for SlowEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_server_that_raises_the_ttl_is_invalid_config_naming_the_ttl() {
    testkit::init_tracing();
    let etcd = SlowEtcd::start();
    let eps = vec![etcd.url.clone()];
    // Wait until it answers (a single member elects itself after an election timeout).
    let c = client(&eps).await;
    let up = Instant::now();
    let granted = loop {
        let attempt = tokio::time::timeout(Duration::from_secs(1), async {
            c.lease_client().grant(TTL.as_secs() as i64, None).await
        });
        if let Ok(Ok(g)) = attempt.await {
            break g;
        }
        assert!(
            up.elapsed() < Duration::from_secs(30),
            "etcd did not come up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "slow etcd: up after {:?}; asked {TTL:?}, granted {}s",
        up.elapsed(),
        granted.ttl()
    );
    assert!(granted.ttl() > TTL.as_secs() as i64);
    c.lease_client().revoke(granted.id()).await.unwrap();

    let p = prefix("etcd-raised");
    let leases = |c: Client| async move {
        let listed = c.lease_client().leases().await.unwrap();
        let mut ids: Vec<i64> = listed.leases().iter().map(|l| l.id()).collect();
        ids.sort();
        ids
    };
    // (Grants abandoned above by their timeout may have created leases of their own.)
    let before = leases(c.clone()).await;
    let e = Etcd::start(&config(&eps, &p, "x")).await.unwrap_err();
    println!("raised ttl: {e}");
    assert_eq!(problem_fields(&e), ["leader.ttl"]);
    assert!(candidacies(&c, &p).await.is_empty(), "no candidacy left");
    let after = leases(c.clone()).await;
    assert!(
        after.iter().all(|l| before.contains(l)),
        "the lease granted to the elector was revoked: {before:?} then {after:?}"
    );

    // A TTL the server grants as asked is accepted.
    let ok = EtcdConfig {
        ttl: Duration::from_secs(granted.ttl() as u64),
        ..config(&eps, &p, "x")
    };
    let elector = Etcd::start(&ok).await.unwrap();
    let mut events = elector.take_events().unwrap();
    acquired(&mut events, Duration::from_secs(5)).await;
    elector.close();
    drop(events);
    tokio::time::timeout(Duration::from_secs(10), elector.closed())
        .await
        .unwrap()
        .unwrap();
}
