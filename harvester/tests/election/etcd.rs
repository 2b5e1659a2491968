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

use crate::electors::{
    acquired, assert_leads_for, assert_sole_leader, leaders, next_event, wait_count, wait_leader,
    Sampler, PROMPT,
};

const TTL: Duration = Duration::from_secs(2);

/// The shared etcd (`testkit::coord`).
fn endpoints() -> Vec<String> {
    testkit::coord::etcd_endpoints()
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
        tokio::time::timeout(testkit::within(e.settings().revoke_timeout), e.closed())
            .await
            .expect("closed in time")
            .expect("an orderly close is Ok");
    }
}

/// A lease's remaining TTL on the server (`None` once it is gone): a lease still alive more than
/// a TTL after it was granted proves that keep-alives reached the server meanwhile.
async fn lease_remaining(c: &Client, lease: i64) -> Option<i64> {
    let r = c.lease_client().time_to_live(lease, None).await.ok()?;
    (r.ttl() > 0).then_some(r.ttl())
}

/// Waits until the candidacies under `p` number `n` (a member entering or leaving the line).
async fn wait_candidacies(c: &Client, p: &str, n: usize) -> Vec<(String, i64, i64, String)> {
    let keys = parking_lot::Mutex::new(Vec::new());
    testkit::wait_for(&format!("{n} candidacies"), PROMPT, || async {
        *keys.lock() = candidacies(c, p).await;
        keys.lock().len() == n
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", keys.lock()));
    keys.into_inner()
}

/// A candidacy is a key named after its lease, carrying the member and its term; the lease is
/// kept alive while it leads and revoked at close, taking the key with it; the settings derive
/// from the TTL (the port's lifecycle clauses run in `tests/election/contract`).
#[tokio::test]
async fn a_candidacy_is_a_key_on_its_lease_kept_alive_and_revoked_at_close() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-one");
    let elector = start(&eps, &p, "solo").await;
    let mut events = elector.take_events().unwrap();
    let term = acquired(&mut events, testkit::within(TTL)).await;
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
    // Keep-alives keep it leading, same term, for two TTLs; the lease still alive on the server
    // afterwards proves they reached it (it would have expired a TTL after the last one).
    assert_leads_for(&elector, term, TTL * 2).await;
    assert!(
        lease_remaining(&c, *lease).await.is_some(),
        "the server kept the lease alive"
    );

    elector.close();
    drop(events);
    tokio::time::timeout(PROMPT, elector.closed())
        .await
        .expect("closed in time")
        .expect("an orderly close is Ok");
    assert!(
        candidacies(&c, &p).await.is_empty(),
        "the lease was revoked, taking the key with it"
    );
}

/// Three contenders: the oldest candidacy leads on a lease kept alive while the others stand
/// in line, and leadership passes in the order of entry, at once on a revoked lease (never two
/// leaders and distinct terms: `tests/election/contract`).
#[tokio::test]
async fn leadership_passes_in_the_order_of_entry() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-three");
    let mut electors = Vec::new();
    for i in 0..3 {
        let e = start(&eps, &p, &format!("m{i}")).await;
        collect(e.take_events().unwrap());
        electors.push(Arc::new(e));
    }
    let first = wait_leader(&electors, testkit::within(TTL)).await;
    assert_eq!(first, 0, "the oldest candidacy leads");

    // Stable once all three stand in line: exactly one leader at every sample over three TTLs,
    // and the leader's lease still on the server after them (kept alive, not lapsed).
    let c = client(&eps).await;
    let line = wait_candidacies(&c, &p, 3).await;
    let samples = assert_sole_leader(&electors, first, TTL * 3).await;
    // The leader's key on the same lease (a follower may lose its lease under load and enter
    // again behind: no change of leader).
    let head = |keys: &[(String, i64, i64, String)]| keys.first().map(|k| (k.0.clone(), k.1));
    assert_eq!(
        head(&candidacies(&c, &p).await),
        head(&line),
        "the leader's lease, kept alive"
    );
    println!(
        "three contenders: m{first} alone in all {samples} samples over {:?}",
        TTL * 3
    );

    let mut order = vec![first];
    for _ in 0..2 {
        let leader = *order.last().unwrap();
        let closed_at = Instant::now();
        electors[leader].close();
        // The collector acknowledges at once; the revoked lease takes the key with it.
        let next = wait_leader(&electors, PROMPT).await;
        println!(
            "three contenders: m{leader} closed, m{next} leads after {:?}",
            closed_at.elapsed()
        );
        order.push(next);
    }
    assert_eq!(order, [0, 1, 2], "leadership passes in the order of entry");
    close_all(&electors).await;
}

/// The TTL of the tests that tell a prompt hand-over from a lapsed lease by time: at 8 s a
/// lease kept alive every TTL/4 lapses no sooner than 6 s after its last keep-alive, more than
/// [`testkit::LOAD_MARGIN`] after the prompt path.
const HAND_OVER_TTL: Duration = Duration::from_secs(8);

#[tokio::test]
async fn close_waits_for_the_ack_then_a_successor_leads_before_the_lease_could_lapse() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-close");
    let ttl_config = |name: &str| EtcdConfig {
        ttl: HAND_OVER_TTL,
        ..config(&eps, &p, name)
    };
    let a = Etcd::start(&ttl_config("a")).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    let a_term = acquired(&mut a_events, testkit::within(HAND_OVER_TTL)).await;
    let b = Etcd::start(&ttl_config("b")).await.unwrap();
    let mut b_events = b.take_events().unwrap();
    let c = client(&eps).await;
    let line = wait_candidacies(&c, &p, 2).await;
    assert!(a.is_leader() && !b.is_leader());

    a.close();
    let ack = match next_event(&mut a_events, PROMPT).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(a_term));
            ack
        }
        other => panic!("expected revoked, got {other:?}"),
    };
    // Hold the barrier past a TTL: nobody leads meanwhile, and a's lease still alive on the
    // server afterwards proves it was kept alive through the hold (so b had no opening).
    let held = HAND_OVER_TTL + Duration::from_millis(500);
    testkit::assert_holds_for(
        "no leader while the barrier is held",
        held,
        Duration::from_millis(5),
        || async { !a.is_leader() && !b.is_leader() },
    )
    .await;
    assert!(
        lease_remaining(&c, line[0].1).await.is_some(),
        "the closing leader's lease is kept alive until the ack"
    );
    let acked_at = Instant::now();
    ack.ack();
    // Revoking the lease deletes a's key at once; had it lapsed instead, that would have taken
    // at least a TTL less one keep-alive interval.
    let lapse = HAND_OVER_TTL - HAND_OVER_TTL / 4;
    let b_term = acquired(&mut b_events, lapse).await;
    let latency = acked_at.elapsed();
    println!(
        "close: barrier held {held:?} with no successor; successor acquired {latency:?} after the ack (ttl {HAND_OVER_TTL:?})"
    );
    assert!(
        latency < lapse,
        "successor before a's lease could lapse ({lapse:?}): {latency:?}"
    );
    assert_ne!(a_term, b_term);
    tokio::time::timeout(PROMPT, a.closed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(a.state(), ElectorState::Closed);
    b.close();
    match next_event(&mut b_events, PROMPT).await {
        ElectionEvent::Revoked { term, ack } => {
            assert_eq!(term, Some(b_term));
            drop(ack); // dropping releases the barrier too
        }
        other => panic!("expected revoked, got {other:?}"),
    }
    tokio::time::timeout(PROMPT, b.closed())
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_unacknowledged_revocation_hands_over_after_the_revoke_timeout() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-revoke-timeout");
    let revoke_timeout = Duration::from_millis(1500);
    let c = EtcdConfig {
        ttl: HAND_OVER_TTL,
        revoke_timeout: Some(revoke_timeout),
        ..config(&eps, &p, "slow")
    };
    let a = Etcd::start(&c).await.unwrap();
    let mut a_events = a.take_events().unwrap();
    acquired(&mut a_events, testkit::within(HAND_OVER_TTL)).await;
    let b = Etcd::start(&EtcdConfig {
        ttl: HAND_OVER_TTL,
        ..config(&eps, &p, "next")
    })
    .await
    .unwrap();
    let mut b_events = b.take_events().unwrap();
    wait_candidacies(&client(&eps).await, &p, 2).await;

    let closed_at = Instant::now();
    a.close();
    let _held = match next_event(&mut a_events, PROMPT).await {
        ElectionEvent::Revoked { ack, .. } => ack, // held, never acknowledged
        other => panic!("expected revoked, got {other:?}"),
    };
    // After the timeout a revokes its lease, deleting its key: b leads at once. A lapse would
    // take a TTL less one keep-alive interval more, beyond this bound at HAND_OVER_TTL.
    acquired(&mut b_events, testkit::within(revoke_timeout)).await;
    let after = closed_at.elapsed();
    println!("revoke timeout: successor acquired {after:?} after close (revoke_timeout {revoke_timeout:?})");
    assert!(after >= revoke_timeout, "not before the timeout");
    tokio::time::timeout(PROMPT, a.closed())
        .await
        .unwrap()
        .unwrap();
    b.close();
}

/// The leader among `electors` by its key: (index, key, lease).
async fn leader_key(c: &Client, p: &str, electors: &[Arc<Etcd>]) -> (usize, String, i64) {
    let leader = wait_leader(electors, testkit::within(electors[0].settings().succession)).await;
    let keys = wait_candidacies(c, p, electors.len()).await;
    let (key, lease, _, value) = keys.first().expect("a candidacy").clone();
    let name = electors[leader].settings().name.clone();
    assert!(value.contains(&name), "the oldest key is the leader's");
    (leader, key, lease)
}

/// The TTL of the test that tells a fence by the watch or a keep-alive (TTL/4 at the latest)
/// from one by the lease's own deadline (TTL/2): 24 s leaves 6 s between them, more than
/// [`testkit::LOAD_MARGIN`].
const FENCE_TTL: Duration = Duration::from_secs(24);

#[tokio::test]
async fn revoking_the_leaders_lease_from_another_client_fences_it_and_another_leads() {
    testkit::init_tracing();
    let eps = endpoints();
    let p = prefix("etcd-foreign-revoke");
    let fence_config = |name: &str| EtcdConfig {
        ttl: FENCE_TTL,
        ..config(&eps, &p, name)
    };
    let electors = vec![
        Arc::new(Etcd::start(&fence_config("r0")).await.unwrap()),
        Arc::new(Etcd::start(&fence_config("r1")).await.unwrap()),
    ];
    let mut events: Vec<_> = electors.iter().map(|e| e.take_events().unwrap()).collect();
    let c = client(&eps).await;
    let (leader, _, lease) = leader_key(&c, &p, &electors).await;
    let old_term = acquired(&mut events[leader], PROMPT).await;
    let other = 1 - leader;
    let s = electors[leader].settings();
    let (keep_alive, own_deadline) = (s.keep_alive_interval, s.lease);

    let revoked = Instant::now();
    c.lease_client().revoke(lease).await.unwrap();
    match next_event(&mut events[leader], testkit::within(keep_alive)).await {
        ElectionEvent::Fenced { term } => assert_eq!(term, old_term),
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = revoked.elapsed();
    assert!(!electors[leader].is_leader());
    // The revoke deleted the key: the successor's watch fires at once.
    let new_term = acquired(&mut events[other], PROMPT).await;
    let successor_after = revoked.elapsed();
    println!(
        "foreign revoke: r{leader} fenced {fenced_after:?} after it, r{other} leads after {successor_after:?}"
    );
    assert!(
        fenced_after < own_deadline,
        "fenced by the watch or the next keep-alive (every {keep_alive:?}), before its own deadline ({own_deadline:?})"
    );
    assert_ne!(new_term, old_term);

    // The fenced member enters again on a new lease, behind the new leader.
    let keys = wait_candidacies(&c, &p, 2).await;
    assert!(keys.iter().all(|(_, l, _, _)| *l != lease), "{keys:?}");
    assert!(keys[1].3.contains(&format!("r{leader}")), "{keys:?}");
    println!(
        "foreign revoke: r{leader} entered again {:?} after the revoke",
        revoked.elapsed()
    );
    // Back in line, it stays behind for a keep-alive round of both.
    assert_sole_leader(&electors, other, keep_alive).await;
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
    let old_term = acquired(&mut events[leader], PROMPT).await;
    let other = 1 - leader;

    // The lease lives on, so only the watch can tell: at once, or never.
    let deleted = Instant::now();
    c.kv_client().delete(key.as_str(), None).await.unwrap();
    match next_event(&mut events[leader], PROMPT).await {
        ElectionEvent::Fenced { term } => assert_eq!(term, old_term),
        other => panic!("expected fenced, got {other:?}"),
    }
    let fenced_after = deleted.elapsed();
    acquired(&mut events[other], PROMPT).await;
    let successor_after = deleted.elapsed();
    println!(
        "foreign delete: d{leader} fenced {fenced_after:?} after it, d{other} leads after {successor_after:?}"
    );
    // Back in line on the same (live) lease, at the back.
    let keys = wait_candidacies(&c, &p, 2).await;
    assert_eq!(keys[1].0, key, "the same key, on the same lease: {keys:?}");
    assert_eq!(keys[1].1, lease);
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

/// How long leadership may take to return once a private server is back: a revived lease's TTL
/// (etcd revives old leases for a full TTL after a restart, and their keys hold the line until
/// the sweeper revokes them or they lapse), then a retry's back-off (at most TTL/2) and its
/// request (bounded by the lease, TTL/2).
const RECOVERY: Duration = Duration::from_secs(TTL.as_secs() * 2);

/// After a server outage: one leader again, stable for a TTL once both members stand in line
/// on new leases (the old ones revoked), never two at once, one new term.
async fn leadership_returns(electors: &[Arc<Etcd>], seen: &[Arc<Seen>], eps: &[String], p: &str) {
    let back_at = Instant::now();
    let next = wait_leader(electors, testkit::within(RECOVERY)).await;
    println!(
        "server back: {} leads {:?} after it resumed",
        electors[next].settings().name,
        back_at.elapsed()
    );
    let c = client(eps).await;
    let keys = wait_candidacies(&c, p, 2).await;
    println!("server back: candidacies {keys:?}");
    assert_sole_leader(electors, next, TTL).await;
    wait_count("a second term collected", 2, || all_terms(seen).0).await;
    let (all, distinct) = all_terms(seen);
    println!("server back: {all} terms acquired, {distinct} distinct");
    assert_eq!(
        (all, distinct),
        (2, 2),
        "a new term after recovery, never reused"
    );
}

/// Nobody leads for a TTL while the server is away (the leader fenced, the other without it).
async fn nobody_leads_without_the_server(electors: &[Arc<Etcd>]) {
    testkit::assert_holds_for(
        "nobody leads without the server",
        TTL,
        Duration::from_millis(20),
        || async { leaders(electors).is_empty() },
    )
    .await;
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
    let leader = wait_leader(&electors, testkit::within(TTL)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    let stopping = Instant::now();
    tokio::task::spawn_blocking({
        let etcd = etcd.clone();
        move || etcd.script("down")
    })
    .await
    .unwrap();
    // The server answered nothing after it exited: the leader's deadline is at most a lease
    // after that, and is_leader() answers by the deadline whoever asks, however late.
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
        "server down: p{leader} last seen leading {:?} after the stop began (etcd took {:?} to exit; lease {lease:?})",
        last_leading.saturating_duration_since(stopping),
        stopped_at - stopping
    );
    assert!(
        last_leading < stopped_at + lease,
        "fenced within the lease of the server's last answer"
    );
    wait_count("a Fenced event", 1, || {
        seen[leader].fenced.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(
        seen[leader].fenced.load(Ordering::SeqCst),
        1,
        "one Fenced event"
    );
    nobody_leads_without_the_server(&electors).await;

    tokio::task::spawn_blocking({
        let etcd = etcd.clone();
        move || etcd.script("up")
    })
    .await
    .unwrap();
    leadership_returns(&electors, &seen, &eps, &p).await;
    let (most, n) = sampler.finish();
    println!("server down/up: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
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
    let leader = wait_leader(&electors, testkit::within(TTL)).await;
    let lease = electors[leader].settings().lease;
    let sampler = Sampler::start(&electors, Duration::from_millis(2));

    // SIGSTOP: the connections stay up but nothing is answered, so only the deadline fences:
    // at most a lease after the last keep-alive sent, which was before the signal landed.
    signal(&etcd, "STOP");
    let frozen_at = Instant::now();
    let thaw = Thaw(etcd.clone());
    testkit::wait_until(
        "the leader stops leading",
        frozen_at + testkit::within(lease),
        || async { !electors[leader].is_leader() },
    )
    .await
    .unwrap();
    let last_leading = sampler.last_leading(leader).expect("it led");
    println!(
        "server frozen: f{leader} last seen leading {:?} after the freeze (lease {lease:?}, keep-alive every {:?})",
        last_leading.saturating_duration_since(frozen_at),
        electors[leader].settings().keep_alive_interval
    );
    assert!(
        last_leading < frozen_at + lease,
        "is_leader turns false by the deadline"
    );
    wait_count("a Fenced event", 1, || {
        seen[leader].fenced.load(Ordering::SeqCst)
    })
    .await;
    assert_eq!(
        seen[leader].fenced.load(Ordering::SeqCst),
        1,
        "one Fenced event once the deadline passed"
    );
    // Frozen past the TTL (the server would have expired the leader's lease by then, had it
    // been running): nobody leads meanwhile.
    nobody_leads_without_the_server(&electors).await;

    drop(thaw);
    leadership_returns(&electors, &seen, &eps, &p).await;
    let (most, n) = sampler.finish();
    println!("server frozen/thawed: at most {most} leader(s) at once over {n} samples");
    assert!(most <= 1, "never two leaders at once");
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
    // On an endpoint that accepts connections but never answers, any request would take the
    // connect timeout: a refusal sooner than that was made before any request.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("http://{}", silent.local_addr().unwrap());
    let base = config(&[silent], "/harvester-tests/bad", "x");
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
            t.elapsed() < base.connect_timeout,
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
    assert!(refused_in < testkit::within(c.connect_timeout));

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
    assert!(silent_in < testkit::within(c.connect_timeout));
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
    acquired(&mut events, testkit::within(ok.ttl)).await;
    elector.close();
    drop(events);
    tokio::time::timeout(testkit::within(ok.revoke_timeout()), elector.closed())
        .await
        .unwrap()
        .unwrap();
}
