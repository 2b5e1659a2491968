#![cfg(feature = "etcd")]
//! Rink on etcd against a real etcd (`scripts/services.sh up`, `ETCD_ENDPOINTS`): several
//! members in one process, each test under a prefix of its own, B = 16, a TTL of 2s. An
//! observer samples every member's `owned()` every 10ms throughout each test and fails it if
//! a bucket was ever owned by two members at once; every member's events are logged with their
//! times (revocations are acknowledged 30ms after they arrive, as a drain would). Bounds come
//! from the rig's settings (TTL, rebalance delay, revoke timeout) plus testkit's load margin.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etcd_client::Client;
use harvester::assign::rink::{Rink, RinkConfig};
use harvester::assign::{AssignmentEvent, Assignor, Buckets};
use parking_lot::Mutex;
use testkit::names;

use crate::overlap::overlap;

const TTL: Duration = Duration::from_secs(2);
const B: u16 = 16;
/// How long a member's logger takes to acknowledge a revocation (a drain).
const ACK_DELAY: Duration = Duration::from_millis(30);
const REVOKE_TIMEOUT: Duration = Duration::from_secs(3);

/// The bound for a closing member's buckets to reach the others: its barrier is acknowledged
/// after [`ACK_DELAY`], its key goes with its lease, and the leader ranks again at once.
const HAND_OVER: Duration = testkit::within(ACK_DELAY);

/// The shared etcd (`testkit::coord`).
fn endpoints() -> Vec<String> {
    testkit::coord::etcd_endpoints()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acquired,
    Revoked,
    Acked,
    Fenced,
}

#[derive(Debug, Clone)]
struct Logged {
    at: Instant,
    member: String,
    kind: Kind,
    buckets: Buckets,
}

/// The members of a rig, by name.
type Members = Arc<Mutex<Vec<(String, Arc<Rink>)>>>;

/// Members of one rink, their event log and the overlap observer.
struct Rig {
    prefix: String,
    delay: Duration,
    ttl: Duration,
    members: Members,
    log: Arc<Mutex<Vec<Logged>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
    samples: Arc<Mutex<u64>>,
    stop: Arc<AtomicBool>,
    observer: Option<std::thread::JoinHandle<()>>,
}

impl Rig {
    fn new(test: &str, delay: Duration) -> Rig {
        let members: Members = Arc::default();
        let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
        let samples: Arc<Mutex<u64>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let observer = std::thread::spawn({
            let (members, overlaps, samples, stop) = (
                Arc::clone(&members),
                Arc::clone(&overlaps),
                Arc::clone(&samples),
                Arc::clone(&stop),
            );
            move || {
                while !stop.load(Ordering::SeqCst) {
                    let rinks = members.lock().clone();
                    let owners: Vec<&dyn Assignor> =
                        rinks.iter().map(|(_, r)| &**r as &dyn Assignor).collect();
                    if let Some((both, x, y)) = overlap(&owners) {
                        overlaps.lock().push(format!(
                            "{both:?} owned by {} and {}",
                            rinks[x].0, rinks[y].0
                        ));
                    }
                    *samples.lock() += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        Rig {
            prefix: format!("/harvester-tests/{}", names::unique(test)),
            delay,
            ttl: TTL,
            members,
            log: Arc::default(),
            overlaps,
            samples,
            stop,
            observer: Some(observer),
        }
    }

    /// Members started from now on hold leases of `ttl` (TTL otherwise).
    fn with_ttl(mut self, ttl: Duration) -> Rig {
        self.ttl = ttl;
        self
    }

    fn config(&self, name: &str) -> RinkConfig {
        RinkConfig {
            endpoints: endpoints(),
            prefix: Some(self.prefix.clone()),
            name: Some(name.into()),
            ttl: self.ttl,
            rebalance_delay: self.delay,
            buckets: B,
            revoke_timeout: Some(REVOKE_TIMEOUT),
            connect_timeout: Duration::from_secs(5),
            ..RinkConfig::default()
        }
    }

    async fn start(&self, name: &str) -> Arc<Rink> {
        let rink = Arc::new(
            Rink::start(&self.config(name))
                .await
                .expect("a member starts"),
        );
        let mut events = rink.take_events().expect("the events");
        let log = Arc::clone(&self.log);
        let member = name.to_owned();
        tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let entry = |kind, buckets: &Buckets| Logged {
                    at: Instant::now(),
                    member: member.clone(),
                    kind,
                    buckets: buckets.clone(),
                };
                match event {
                    AssignmentEvent::Acquired { buckets } => {
                        log.lock().push(entry(Kind::Acquired, &buckets))
                    }
                    AssignmentEvent::Fenced { buckets } => {
                        log.lock().push(entry(Kind::Fenced, &buckets))
                    }
                    AssignmentEvent::Revoked { buckets, ack } => {
                        log.lock().push(entry(Kind::Revoked, &buckets));
                        tokio::time::sleep(ACK_DELAY).await;
                        log.lock().push(entry(Kind::Acked, &buckets));
                        ack.ack();
                    }
                }
            }
        });
        self.members
            .lock()
            .push((name.to_owned(), Arc::clone(&rink)));
        rink
    }

    fn rink(&self, name: &str) -> Arc<Rink> {
        let members = self.members.lock();
        let (_, rink) = members
            .iter()
            .find(|(n, _)| n == name)
            .expect("a member of that name");
        Arc::clone(rink)
    }

    /// Closes a member and waits for it: Ok, in time.
    async fn close(&self, name: &str) {
        let rink = self.rink(name);
        rink.close();
        tokio::time::timeout(testkit::within(REVOKE_TIMEOUT), rink.closed())
            .await
            .expect("closed in time")
            .expect("closed in order");
        assert!(rink.owned().is_empty());
        self.members.lock().retain(|(n, _)| n != name);
    }

    /// The bound for the rig to converge after a member joins or leaves: a joiner waits the
    /// rebalance delay before it is ranked, a hand-over at most the revoke timeout, a member
    /// gone without closing holds its rank for its lease's TTL; plus the load margin.
    fn convergence(&self) -> Duration {
        testkit::within(self.delay + REVOKE_TIMEOUT + self.ttl)
    }

    /// Bucket -> owners, among the members still in the rig.
    fn owners(&self) -> BTreeMap<u16, Vec<String>> {
        let mut owners: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for (name, rink) in self.members.lock().iter() {
            for b in rink.owned() {
                owners.entry(b).or_default().push(name.clone());
            }
        }
        owners
    }

    /// Every bucket owned by exactly one of `names`, and each of them owning one at least.
    fn converged(&self, names: &[&str]) -> bool {
        let owners = self.owners();
        let single = (0..B).all(|b| owners.get(&b).is_some_and(|o| o.len() == 1));
        let each = names
            .iter()
            .all(|n| owners.values().any(|o| o.iter().any(|x| x == n)));
        let only = owners
            .values()
            .flatten()
            .all(|o| names.contains(&o.as_str()));
        single && each && only
    }

    /// Waits (up to [`Rig::convergence`]) until `names` converged; how long it took.
    async fn converge(&self, names: &[&str]) -> Duration {
        self.converge_within(names, self.convergence()).await
    }

    async fn converge_within(&self, names: &[&str], within: Duration) -> Duration {
        testkit::wait_for(&format!("{names:?} converged"), within, || async {
            self.converged(names)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}", self.owners()))
    }

    /// Whether every member's logged events add up to what it owns: `owned()` changes as its
    /// event is sent, the logger records it a little later. (Only once converged: a lapsed
    /// member owns nothing while its log still says what it held.)
    fn logs_match(&self) -> bool {
        let log = self.log.lock();
        self.members.lock().iter().all(|(name, rink)| {
            let mut held = Buckets::new();
            for e in log.iter().filter(|e| &e.member == name) {
                match e.kind {
                    Kind::Acquired => held.extend(e.buckets.iter().copied()),
                    Kind::Revoked | Kind::Fenced => held.retain(|b| !e.buckets.contains(b)),
                    Kind::Acked => {}
                }
            }
            held == rink.owned()
        })
    }

    /// Waits until the loggers have caught up with `owned()` (each revocation they hold up
    /// costs [`ACK_DELAY`]).
    async fn caught_up(&self) {
        testkit::wait_for(
            "the loggers caught up",
            testkit::within(ACK_DELAY * u32::from(B)),
            || async { self.logs_match() },
        )
        .await
        .unwrap();
    }

    /// The events logged since `since`, once the loggers have caught up.
    async fn events_since(&self, since: Instant) -> Vec<Logged> {
        self.caught_up().await;
        self.logged_since(since)
    }

    fn logged_since(&self, since: Instant) -> Vec<Logged> {
        self.log
            .lock()
            .iter()
            .filter(|e| e.at >= since)
            .cloned()
            .collect()
    }

    /// Waits up to `deadline` for `member`'s Fenced event since `since`.
    async fn fenced_since(&self, member: &str, since: Instant, deadline: Instant) -> Logged {
        testkit::wait_until(&format!("{member} fenced"), deadline, || async {
            self.logged_since(since)
                .iter()
                .any(|e| e.member == member && e.kind == Kind::Fenced)
        })
        .await
        .unwrap();
        self.logged_since(since)
            .into_iter()
            .find(|e| e.member == member && e.kind == Kind::Fenced)
            .unwrap()
    }

    /// Buckets acquired since `since`: how many moved.
    async fn moved_since(&self, since: Instant) -> usize {
        self.events_since(since)
            .await
            .iter()
            .filter(|e| e.kind == Kind::Acquired)
            .map(|e| e.buckets.len())
            .sum()
    }

    /// Every acquisition since `since` of a bucket revoked from another member came after that
    /// revocation was acknowledged.
    async fn assert_acks_before_acquisitions(&self, since: Instant) {
        let events = self.events_since(since).await;
        for acquired in events.iter().filter(|e| e.kind == Kind::Acquired) {
            for b in &acquired.buckets {
                for revoked in events.iter().filter(|e| {
                    e.kind == Kind::Revoked && e.member != acquired.member && e.buckets.contains(b)
                }) {
                    let acked = events.iter().find(|e| {
                        e.kind == Kind::Acked
                            && e.member == revoked.member
                            && e.at >= revoked.at
                            && e.buckets.contains(b)
                    });
                    if revoked.at < acquired.at {
                        let acked = acked.expect("the revocation was acknowledged");
                        assert!(
                            acked.at <= acquired.at,
                            "bucket {b}: {} acquired it before {} acknowledged its revocation",
                            acquired.member,
                            revoked.member
                        );
                    }
                }
            }
        }
    }

    /// Stops the observer and fails on any overlap seen.
    async fn finish(mut self) {
        let names: Vec<String> = self.members.lock().iter().map(|(n, _)| n.clone()).collect();
        for name in names {
            self.close(&name).await;
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Some(observer) = self.observer.take() {
            observer.join().expect("the observer ran");
        }
        let overlaps = self.overlaps.lock().clone();
        assert!(
            overlaps.is_empty(),
            "buckets owned twice at once in {} samples, first: {:?}",
            overlaps.len(),
            &overlaps[..overlaps.len().min(3)]
        );
        assert!(*self.samples.lock() > 50, "the observer sampled");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

async fn lease_of(prefix: &str, name: &str) -> i64 {
    let client = Client::connect(endpoints(), None).await.unwrap();
    let key = format!("{prefix}/members/{name}");
    let got = client.kv_client().get(key.as_str(), None).await.unwrap();
    got.kvs().first().expect("the member key").lease()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_converge_on_disjoint_shares_of_every_bucket() {
    let rig = Rig::new("rink-converge", Duration::from_secs(1));
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    let took = rig.converge(&["m1", "m2", "m3"]).await;
    println!("3 members converged in {took:?}");
    // And stay so, through a TTL of keep-alives.
    testkit::assert_holds_for("converged", TTL, Duration::from_millis(20), || async {
        rig.converged(&["m1", "m2", "m3"])
    })
    .await;
    assert!(rig
        .rink("m1")
        .owns(*rig.rink("m1").owned().first().unwrap()));
    assert!(!rig.rink("m1").owns(B), "no bucket beyond B");
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_member_waits_its_delay_then_takes_about_a_quarter() {
    let delay = Duration::from_millis(1500);
    let rig = Rig::new("rink-join", delay);
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    // `owned()` changes before its event is delivered: the last acquisitions' events are to be
    // logged before the join, so they are not counted as moves the join caused.
    rig.caught_up().await;
    let before = rig.owners();
    let joined = Instant::now();
    rig.start("m4").await;
    // Nothing moves before the delay (less a margin for the join itself); that buckets do
    // move afterwards shows the leader was running meanwhile.
    while joined.elapsed() < delay - Duration::from_millis(300) {
        assert_eq!(rig.owners(), before, "moved before the rebalance delay");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.converge(&["m1", "m2", "m3", "m4"]).await;
    assert!(
        joined.elapsed() >= delay - Duration::from_millis(100),
        "{:?}",
        joined.elapsed()
    );
    let after = rig.owners();
    let moved: Vec<u16> = (0..B).filter(|b| before.get(b) != after.get(b)).collect();
    println!("m4 joined: {} of {B} buckets moved: {moved:?}", moved.len());
    assert!((1..=8).contains(&moved.len()), "{moved:?}");
    assert!(
        moved.iter().all(|b| after[b] == ["m4"]),
        "buckets move only to the new member: {after:?}"
    );
    assert_eq!(rig.moved_since(joined).await, moved.len());
    rig.assert_acks_before_acquisitions(joined).await;
    rig.finish().await;
}

/// The TTL of the test that tells a hand-over from a lapse by time: at 8 s a lease kept alive
/// every TTL/4 lapses no sooner than 6 s after its last keep-alive, beyond [`HAND_OVER`].
const HAND_OVER_TTL: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_closing_hands_its_buckets_over_at_once() {
    let rig = Rig::new("rink-close", Duration::from_secs(1)).with_ttl(HAND_OVER_TTL);
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    // Close the leader (the oldest) one time, then another member.
    for (leaving, staying) in [("m1", ["m2", "m3"]), ("m2", ["m3", "m3"])] {
        let since = Instant::now();
        let had = rig.rink(leaving).owned();
        rig.close(leaving).await;
        let closed = since.elapsed();
        let took = rig.converge_within(&staying, HAND_OVER).await + closed;
        println!(
            "{leaving} closed in {closed:?}; its {} buckets moved in {took:?}",
            had.len()
        );
        assert!(
            took < HAND_OVER_TTL * 3 / 4,
            "{leaving}'s buckets moved after {took:?}, as late as a lapse"
        );
        rig.assert_acks_before_acquisitions(since).await;
    }
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_member_lapses_by_itself_and_its_buckets_move_after_its_lease() {
    let rig = Rig::new("rink-stall", Duration::from_secs(1));
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    let victim = rig.rink("m2");
    let had = victim.owned();
    assert!(!had.is_empty());
    let lease = lease_of(&rig.prefix, "m2").await;
    let stall = Duration::from_secs(5);
    let stalled = Instant::now();
    victim.stall_for_tests(stall);
    // Its ownership lapses on its own deadline (half a TTL after its last answered keep-alive)
    // while its thread is still stalled.
    testkit::wait_until(
        "m2's ownership lapses during its stall",
        stalled + stall,
        || async { victim.owned().is_empty() },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: still owned {:?}", victim.owned()));
    // The others take its buckets only once its lease is over (at least 3/4 TTL after the
    // stall began: its last keep-alive may have been sent a quarter TTL before), and at most
    // its TTL after.
    testkit::wait_until(
        "m2's buckets taken by the others",
        stalled + testkit::within(TTL),
        || async {
            let owners = rig.owners();
            had.iter()
                .all(|b| owners.get(b).is_some_and(|o| o.len() == 1 && o[0] != "m2"))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", rig.owners()));
    let taken = stalled.elapsed();
    println!("m2 stalled; its buckets moved after {taken:?}");
    assert!(taken >= TTL * 3 / 4, "taken after {taken:?}");
    let client = Client::connect(endpoints(), None).await.unwrap();
    let left = client
        .lease_client()
        .time_to_live(lease, None)
        .await
        .unwrap()
        .ttl();
    assert!(
        left <= 0,
        "the stalled member's lease is over ({left}s left)"
    );
    // Resumed, it hears at its next keep-alive that the lease is gone, fences, and joins again.
    let keep_alive = victim.settings().keep_alive_interval();
    let fenced = rig
        .fenced_since("m2", stalled, stalled + stall + testkit::within(keep_alive))
        .await;
    assert_eq!(fenced.buckets, had);
    rig.converge(&["m1", "m2", "m3"]).await;
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_revoked_from_outside_fences_its_member() {
    let rig = Rig::new("rink-revoked", Duration::from_secs(1));
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    let victim = rig.rink("m3");
    let had = victim.owned();
    let lease = lease_of(&rig.prefix, "m3").await;
    let since = Instant::now();
    let client = Client::connect(endpoints(), None).await.unwrap();
    client.lease_client().revoke(lease).await.unwrap();
    // Its next keep-alive finds the lease gone.
    let keep_alive = victim.settings().keep_alive_interval();
    let fenced = rig
        .fenced_since("m3", since, since + testkit::within(keep_alive))
        .await;
    println!(
        "m3 fenced {:?} after its lease was revoked",
        fenced.at - since
    );
    assert_eq!(fenced.buckets, had);
    assert!(victim.owned().is_empty() || lease_of(&rig.prefix, "m3").await != lease);
    rig.converge(&["m1", "m2", "m3"]).await;
    rig.finish().await;
}

/// A rolling restart of three members (start a new one, then close an old one, one at a
/// time); returns how many buckets moved in all.
async fn rolling_restart(delay: Duration) -> usize {
    let rig = Rig::new("rink-rolling", delay);
    for name in ["old1", "old2", "old3"] {
        rig.start(name).await;
    }
    rig.converge(&["old1", "old2", "old3"]).await;
    // As in the join test: the last acquisitions' events are logged after `owned()` changed.
    rig.caught_up().await;
    let since = Instant::now();
    let mut live = vec!["old1", "old2", "old3"];
    for (old, new) in [("old1", "new1"), ("old2", "new2"), ("old3", "new3")] {
        let step = Instant::now();
        rig.start(new).await;
        if delay.is_zero() {
            // Ranked at once: let it take its share before the old one goes, as a deploy
            // waits for readiness.
            let mut with: Vec<&str> = live.clone();
            with.push(new);
            rig.converge(&with).await;
        } else {
            // A deploy's pacing: the old one goes shortly after the new one started.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        rig.close(old).await;
        live.retain(|n| *n != old);
        live.push(new);
        rig.converge(&live).await;
        println!(
            "delay {delay:?}: {old} -> {new} moved {} buckets",
            rig.moved_since(step).await
        );
        rig.assert_acks_before_acquisitions(step).await;
    }
    let moved = rig.moved_since(since).await;
    rig.finish().await;
    moved
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_moves_fewer_buckets_with_a_rebalance_delay() {
    // The old member's close (200 ms after the new one starts, then its hand-over) has to land
    // within the new one's delay, or the new one is ranked first and buckets move twice.
    let delay = Duration::from_millis(200) + HAND_OVER;
    let sticky = rolling_restart(delay).await;
    let eager = rolling_restart(Duration::ZERO).await;
    println!("rolling restart of 3 members, B = {B}: {sticky} buckets moved with a {delay:?} rebalance delay, {eager} without");
    assert_eq!(sticky, B as usize, "with the delay each bucket moves once");
    assert!(sticky < eager, "{sticky} vs {eager}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_unreachable_servers_and_taken_names_fail_at_start_naming_the_field() {
    let rig = Rig::new("rink-bad", Duration::from_secs(1));
    let fields = |e: harvester::Error| match e {
        harvester::Error::InvalidConfig(problems) => {
            problems.into_iter().map(|p| p.field).collect::<Vec<_>>()
        }
        other => panic!("expected invalid config, got {other:?}"),
    };
    let bad = RinkConfig {
        buckets: 0,
        ttl: Duration::from_secs(1),
        ..rig.config("x")
    };
    let e = Rink::start(&bad).await.expect_err("refused");
    assert_eq!(fields(e), ["leader.ttl", "leader.buckets"]);
    let unreachable = RinkConfig {
        endpoints: vec!["http://127.0.0.1:9".into()],
        connect_timeout: Duration::from_millis(500),
        ..rig.config("x")
    };
    let e = Rink::start(&unreachable).await.expect_err("refused");
    assert_eq!(fields(e), ["leader.endpoints"]);
    rig.start("m1").await;
    let twin = RinkConfig {
        connect_timeout: Duration::from_secs(1),
        ..rig.config("m1")
    };
    let e = Rink::start(&twin).await.expect_err("the name is taken");
    assert_eq!(fields(e), ["leader.name"]);
    rig.converge(&["m1"]).await;
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_member_does_not_hold_back_buckets_it_never_owned() {
    // The hand-over (bounded by HAND_OVER) lands inside m3's stall, which lasts that long; leases
    // of 12s (6 s of ownership) let m3 stall so without lapsing. w's rebalance delay is as long,
    // so that m2's close, not the delay, is what ranks it.
    let stall = HAND_OVER;
    let rig = Rig::new("rink-stall-handoff", HAND_OVER).with_ttl(Duration::from_secs(12));
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    rig.start("w").await; // waits its delay
    let leaving = rig.rink("m2").owned();
    assert!(rig.rink("m3").settings().lease() > stall);
    let stalled = Instant::now();
    rig.rink("m3").stall_for_tests(stall);
    rig.close("m2").await;
    // w takes m2's rank (and exactly its buckets) while m3 is still stalled, one version behind.
    testkit::wait_until("w owns m2's buckets", stalled + stall, || async {
        rig.rink("w").owned() == leaving
    })
    .await
    .unwrap_or_else(|e| panic!("{e}: w owns {:?}, not {leaving:?}", rig.rink("w").owned()));
    println!(
        "w took m2's buckets {:?} into m3's stall",
        stalled.elapsed()
    );
    rig.converge(&["m1", "w", "m3"]).await;
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_member_whose_lease_is_revoked_keeps_its_buckets_from_others_until_its_deadline()
{
    let rig = Rig::new("rink-stall-revoked", Duration::from_secs(1));
    for name in ["m1", "m2", "m3"] {
        rig.start(name).await;
    }
    rig.converge(&["m1", "m2", "m3"]).await;
    let victim = rig.rink("m3");
    let had = victim.owned();
    let lease = lease_of(&rig.prefix, "m3").await;
    // Stalled, it cannot hear that its lease is gone: it owns its buckets until its deadline.
    let stall = Duration::from_secs(3);
    victim.stall_for_tests(stall);
    let since = Instant::now();
    let client = Client::connect(endpoints(), None).await.unwrap();
    client.lease_client().revoke(lease).await.unwrap();
    // Taken once m3's deadline passed (during the stall), or at the latest once it resumed and
    // heard its lease was gone.
    testkit::wait_until(
        "m3's buckets taken by the others",
        since + testkit::within(stall),
        || async {
            let owners = rig.owners();
            had.iter()
                .all(|b| owners.get(b).is_some_and(|o| o.iter().any(|x| x != "m3")))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}: {:?}", rig.owners()));
    let taken = since.elapsed();
    println!("m3's lease revoked while it was stalled: its buckets moved after {taken:?}");
    rig.converge(&["m1", "m2", "m3"]).await;
    rig.finish().await; // fails if m3 still owned them when the others took them
}

/// Rink over a secured etcd (TLS with client certificates, authentication on, the user
/// `harvester` whose role may write under `/harvester/`): a member starts with the same access
/// settings as the etcd elector and owns every bucket; a wrong password fails the start within
/// connect_timeout plus the load margin, naming `leader.password` and printing neither password.
#[tokio::test]
async fn a_member_over_tls_with_a_login_owns_the_buckets_and_a_wrong_password_is_named() {
    use harvester::election::etcd::EtcdTls;
    use harvester::secret::Secret;
    use testkit::coord::{PrivateServer, Server};
    use testkit::tls::files;

    let server = tokio::task::spawn_blocking(|| PrivateServer::start(Server::EtcdTls))
        .await
        .unwrap()
        .expect("a secured etcd");
    let tls = server.tls_dir();
    let password = std::fs::read_to_string(server.password_file("harvester")).unwrap();
    let config = RinkConfig {
        endpoints: vec![server.address().to_owned()],
        tls: Some(EtcdTls {
            ca: Some(tls.join(files::CA)),
            cert: Some(tls.join(files::CLIENT_CERT)),
            key: Some(tls.join(files::CLIENT_KEY)),
        }),
        user: Some("harvester".into()),
        password: Some(Secret::from_file(server.password_file("harvester"))),
        prefix: Some(format!("/harvester/rink/{}", names::unique("tls"))),
        name: Some("m1".into()),
        ttl: TTL,
        rebalance_delay: Duration::ZERO,
        buckets: B,
        revoke_timeout: Some(REVOKE_TIMEOUT),
        connect_timeout: Duration::from_secs(5),
    };
    let rink = Arc::new(
        Rink::start(&config)
            .await
            .expect("a member over TLS starts"),
    );
    let mut events = rink.take_events().expect("the events");
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if let AssignmentEvent::Revoked { ack, .. } = event {
                ack.ack();
            }
        }
    });
    // The lone member is the leader and ranks itself at once (no rebalance delay): all its
    // buckets within a TTL of starting, plus the load margin.
    testkit::wait_for("every bucket owned", testkit::within(TTL), || {
        let rink = Arc::clone(&rink);
        async move { rink.owned().len() == usize::from(B) }
    })
    .await
    .expect("the member owns every bucket");
    rink.close();
    tokio::time::timeout(testkit::within(REVOKE_TIMEOUT), rink.closed())
        .await
        .expect("closed in time")
        .expect("closed in order");

    let wrong_password = format!("wrong-{}", names::unique("pw"));
    let wrong = RinkConfig {
        name: Some("m2".into()),
        password: Some(Secret::inline(wrong_password.clone())),
        connect_timeout: Duration::from_secs(2),
        ..config.clone()
    };
    let started = Instant::now();
    let error = Rink::start(&wrong)
        .await
        .expect_err("a wrong password is refused");
    let took = started.elapsed();
    let text = harvester::chain(&error);
    println!(
        "wrong password: refused after {} ms: {text}",
        took.as_millis()
    );
    assert!(took < testkit::within(wrong.connect_timeout), "{took:?}");
    let problems = error.config_problems().expect("a configuration problem");
    assert_eq!(problems[0].field, "leader.password", "{text}");
    assert!(
        !text.contains(password.trim()) && !text.contains(&wrong_password),
        "{text}"
    );
}
