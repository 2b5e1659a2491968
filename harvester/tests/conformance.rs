//! One conformance suite for every elector kind (NELI, NATS KV, ZooKeeper, etcd), across real
//! OS processes and real servers, judged by an outside observer.
//!
//! Each contender is `elector run` with `--set leader.kind=...`, printing `status` lines and one
//! `action` line per unit of leader work (gated by `is_leader()`, stamped with term and
//! wall-clock ms). The observer merges the lines of all processes into one timeline and checks:
//! exactly one leader once stable (1 and 3 contenders), a graceful stop hands over sooner than
//! a lapse could, `kill -9` fails over within the elector's succession plus a stated margin, a
//! SIGSTOPped
//! leader resumed after its lease never acts while another leads, a stopped server fences the
//! leader within its lease and leadership returns with the server, and bad settings fail
//! `elector run` at once with an error naming the field. Every measured figure is printed.
//!
//! All kinds run at the same 3 s: NELI's session (heartbeat timeout 1 s), the NATS bucket's
//! TTL, the ZooKeeper session timeout, the etcd lease TTL. The embedded broker is shared, so
//! NELI's server-loss case lives in `neli_faults.rs` (a broker of its own); the mock elector,
//! which has no process or server to lose, is covered by the in-process tests (`handoff.rs`,
//! `memory.rs`).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use testkit::coord::{self, PrivateServer, Server};
use testkit::process::{Observed, Signal};
use testkit::{names, wait_for, Broker};

/// Every kind's TTL / session timeout.
const TTL: Duration = Duration::from_secs(3);

/// NATS KV candidates' campaign interval.
const CAMPAIGN: Duration = Duration::from_millis(200);

/// The TTL of the graceful hand-over test for the kinds other than NELI: a lapse then takes at
/// least 9 s (an etcd lease kept alive every TTL/4 lapses 3/4 TTL after its last keep-alive;
/// ZooKeeper's session and NATS KV's key outlive it), more than [`testkit::LOAD_MARGIN`] beyond
/// a hand-over.
const HAND_OVER_TTL: Duration = Duration::from_secs(12);

// A kind's tests run only when its feature is built.
#[cfg_attr(
    not(all(feature = "nats", feature = "zookeeper", feature = "etcd")),
    allow(dead_code)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Neli,
    NatsKv,
    ZooKeeper,
    Etcd,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Neli => "neli",
            Kind::NatsKv => "nats_kv",
            Kind::ZooKeeper => "zookeeper",
            Kind::Etcd => "etcd",
        }
    }

    /// How long a leader acts after it last heard from its server (it fences by then).
    fn lease(self) -> Duration {
        match self {
            Kind::Neli => TTL / 3,
            Kind::NatsKv => TTL * 19 / 20,
            Kind::ZooKeeper | Kind::Etcd => TTL / 2,
        }
    }

    /// From a leader's silence to a successor acting, by the elector's own rules.
    fn succession(self) -> Duration {
        match self {
            Kind::Neli | Kind::ZooKeeper | Kind::Etcd => TTL,
            // The key expires after the TTL; the winner stands down 3/4 TTL + 50 ms.
            Kind::NatsKv => TTL + TTL * 3 / 4 + Duration::from_millis(50),
        }
    }

    /// What the protocol adds on top of the succession before a successor can act (the load
    /// margin comes on top, by `testkit::within`).
    fn protocol(self) -> Duration {
        match self {
            // The mock coordinator checks sessions once a second, then waits (session - 1 s)
            // for the survivors to rejoin.
            Kind::Neli => Duration::from_secs(1) + (TTL - Duration::from_secs(1)),
            // Candidates campaign every 200 ms.
            Kind::NatsKv => CAMPAIGN,
            // The server expires sessions on its tick (500 ms here).
            Kind::ZooKeeper => Duration::from_millis(500),
            Kind::Etcd => Duration::ZERO,
        }
    }

    /// The bound for a successor to act after the leader's silence: the succession, what the
    /// protocol adds, and the load margin.
    fn failover(self) -> Duration {
        testkit::within(self.succession() + self.protocol())
    }

    /// A contender's connect bound, as it runs here: the electors' default connect_timeout
    /// (5 s), NELI's the harvester's limits.connect_timeout (10 s).
    fn connect(self) -> Duration {
        match self {
            Kind::Neli => Duration::from_secs(10),
            _ => Duration::from_secs(5),
        }
    }

    /// The bound for a first election: the contenders connect, then no longer than a failover
    /// takes; plus the load margin.
    fn first_election(self) -> Duration {
        testkit::within(self.connect() + self.succession() + self.protocol())
    }

    /// How long a graceful stop may take to hand over: NELI on the mock leaves the group and
    /// the coordinator waits (session - 1 s) for the others to rejoin, with `neli_heartbeat` the
    /// heartbeat timeout (the session is 3x); NATS KV's resigned key goes to the next campaign;
    /// ZooKeeper and etcd successors are woken by their watch at once.
    fn hand_over(self, neli_heartbeat: Duration) -> Duration {
        match self {
            Kind::Neli => neli_heartbeat * 3 - Duration::from_secs(1),
            Kind::NatsKv => CAMPAIGN,
            Kind::ZooKeeper | Kind::Etcd => Duration::ZERO,
        }
    }

    fn server(self) -> Option<Server> {
        match self {
            Kind::Neli => None,
            Kind::NatsKv => Some(Server::Nats),
            Kind::ZooKeeper => Some(Server::ZooKeeper),
            Kind::Etcd => Some(Server::Etcd),
        }
    }
}

/// One election: a kind, its server address and a namespace of its own (group, bucket, path,
/// prefix), and the contenders' arguments.
struct Election {
    args: Vec<String>,
    /// A server of the test's own, when it is to be stopped.
    server: Option<PrivateServer>,
}

/// The `elector` binary: `HARVEST_ELECTOR_BIN` if set (a target directory shared by several
/// worktrees uplifts one `debug/elector` for all of them, so a run may name its own build),
/// else cargo's.
fn elector_bin() -> String {
    std::env::var("HARVEST_ELECTOR_BIN")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_elector").to_owned())
}

fn set(args: &mut Vec<String>, path: &str, value: impl Into<String>) {
    args.push("--set".into());
    args.push(format!("{path}={}", value.into()));
}

impl Election {
    async fn shared(kind: Kind) -> Election {
        Election::new(kind, None, "1s", TTL).await
    }

    async fn private(kind: Kind) -> Election {
        let server = kind.server().expect("a server of its own");
        let server = tokio::task::spawn_blocking(move || PrivateServer::start(server))
            .await
            .unwrap()
            .expect("start a private server");
        Election::new(kind, Some(server), "1s", TTL).await
    }

    /// `neli_heartbeat`: NELI's heartbeat timeout (its session is 3x); the other kinds run at
    /// `ttl`.
    async fn new(
        kind: Kind,
        server: Option<PrivateServer>,
        neli_heartbeat: &str,
        ttl: Duration,
    ) -> Election {
        let ns = names::unique(&format!("conf{}", kind.name()));
        let ttl = format!("{}s", ttl.as_secs());
        let mut args = Vec::new();
        set(&mut args, "leader.kind", kind.name());
        let address = server.as_ref().map(|s| s.address().to_owned());
        match kind {
            Kind::Neli => {
                let broker = Broker::discover().unwrap();
                broker.create_topic(&format!("{ns}.neli"), 1).await.unwrap();
                args.extend(["--bootstrap".into(), broker.bootstrap().to_owned()]);
                args.extend(["--group".into(), ns.clone()]);
                args.extend(["--heartbeat-timeout".into(), neli_heartbeat.into()]);
                args.extend(["--min-poll-interval".into(), "50ms".into()]);
            }
            Kind::NatsKv => {
                set(
                    &mut args,
                    "leader.url",
                    address.unwrap_or_else(coord::nats_url),
                );
                set(&mut args, "leader.bucket", ns.replace('.', "_"));
                set(&mut args, "leader.key", "leader");
                set(&mut args, "leader.ttl", ttl);
                set(
                    &mut args,
                    "leader.campaign_interval",
                    format!("{}ms", CAMPAIGN.as_millis()),
                );
            }
            Kind::ZooKeeper => {
                let addr = address.unwrap_or_else(coord::zookeeper_addr);
                set(&mut args, "leader.servers", format!("[\"{addr}\"]"));
                set(&mut args, "leader.path", format!("/conformance/{ns}"));
                set(&mut args, "leader.session_timeout", ttl);
            }
            Kind::Etcd => {
                let url = address.unwrap_or_else(coord::etcd_endpoint);
                set(&mut args, "leader.endpoints", format!("[\"{url}\"]"));
                set(&mut args, "leader.prefix", format!("/conformance/{ns}"));
                set(&mut args, "leader.ttl", ttl);
            }
        }
        Election { args, server }
    }

    fn contender(&self, name: &str) -> Observed {
        let mut cmd = Command::new(elector_bin());
        cmd.arg("run")
            .args(&self.args)
            .args(["--name", name, "--status-interval", "25ms"]);
        Observed::spawn(name, cmd).expect("spawn elector")
    }
}

#[derive(Debug, Clone)]
struct Action {
    member: String,
    term: String,
    t: u64,
}

fn actions(procs: &[&Observed]) -> Vec<Action> {
    let mut all: Vec<Action> = procs
        .iter()
        .flat_map(|p| p.lines_of("action"))
        .map(|l| Action {
            member: l.value["member"].as_str().unwrap().to_owned(),
            term: l.value["term"].as_str().unwrap().to_owned(),
            t: l.value["t"].as_u64().unwrap(),
        })
        .collect();
    all.sort_by_key(|a| a.t);
    all
}

/// Leadership windows per term, in time order: (member, term, first ms, last ms).
fn windows(actions: &[Action]) -> Vec<(String, String, u64, u64)> {
    let mut by_term: BTreeMap<String, (String, u64, u64)> = BTreeMap::new();
    for a in actions {
        let e = by_term
            .entry(a.term.clone())
            .or_insert((a.member.clone(), a.t, a.t));
        e.1 = e.1.min(a.t);
        e.2 = e.2.max(a.t);
    }
    let mut w: Vec<_> = by_term
        .into_iter()
        .map(|(term, (m, a, b))| (m, term, a, b))
        .collect();
    w.sort_by_key(|x| x.2);
    w
}

/// No two terms' leader actions interleave: exclusivity as an outside observer sees it. Terms
/// are never reused, so one term per window.
fn assert_no_overlap(procs: &[&Observed]) -> Vec<(String, String, u64, u64)> {
    let w = windows(&actions(procs));
    for pair in w.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.3 < b.2,
            "leader actions overlap: {} (term {}) acted until {} but {} (term {}) started at {}",
            a.0,
            a.1,
            a.3,
            b.0,
            b.1,
            b.2
        );
    }
    w
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The first status line of each of `procs` (its elector started), once all have one.
fn all_started(procs: &[&Observed]) -> Option<u64> {
    procs
        .iter()
        .map(|p| p.lines_of("status").first()?.value["t"].as_u64())
        .collect::<Option<Vec<u64>>>()?
        .into_iter()
        .max()
}

/// The first status line of `procs` saying "leader" stamped after `after`: (member, t).
fn first_leading_status_after(procs: &[&Observed], after: u64) -> Option<(String, u64)> {
    procs
        .iter()
        .flat_map(|p| p.lines_of("status"))
        .filter(|l| l.value["leader"].as_bool() == Some(true))
        .filter_map(|l| {
            let t = l.value["t"].as_u64()?;
            (t > after).then(|| (l.value["member"].as_str().unwrap_or_default().to_owned(), t))
        })
        .min_by_key(|(_, t)| *t)
}

/// Waits until every one of `procs` runs its elector and a leader has said so in a status line
/// since the last of them started (so every contender was in the election), up to `bound`:
/// that leader, and the status's stamp (from which on the statuses show it leading).
async fn settled_at(procs: &[&Observed], bound: Duration) -> (String, u64) {
    let leader = parking_lot::Mutex::new(None);
    wait_for("every contender up and a leader", bound, || async {
        let Some(up) = all_started(procs) else {
            return false;
        };
        *leader.lock() = first_leading_status_after(procs, up);
        leader.lock().is_some()
    })
    .await
    .unwrap();
    leader.into_inner().unwrap()
}

/// [`settled_at`]'s leader.
async fn settled(procs: &[&Observed], bound: Duration) -> String {
    settled_at(procs, bound).await.0
}

/// Waits until each of `procs` has printed a status line stamped `t` or later: each ran up to
/// then, and its lines up to then have been read.
async fn statuses_reach(procs: &[&Observed], t: u64, bound: Duration) {
    wait_for(&format!("every status past {t}"), bound, || async {
        procs.iter().all(|p| {
            p.lines_of("status")
                .iter()
                .any(|l| l.value["t"].as_u64().is_some_and(|s| s >= t))
        })
    })
    .await
    .unwrap();
}

/// The bound for a leader's next action: it acts every 20 ms while leading, so only the load
/// margin.
const PROMPT_ACTION: Duration = testkit::LOAD_MARGIN;

fn first_action_after(procs: &[&Observed], member: &str, after_ms: u64) -> Option<u64> {
    actions(procs)
        .into_iter()
        .find(|a| a.member == member && a.t > after_ms)
        .map(|a| a.t)
}

/// The last instant a status line of `procs` said `leader: true`.
fn last_leader_status(procs: &[&Observed]) -> Option<u64> {
    procs
        .iter()
        .flat_map(|p| p.lines_of("status"))
        .filter(|l| l.value["leader"].as_bool() == Some(true))
        .filter_map(|l| l.value["t"].as_u64())
        .max()
}

/// Samples the status lines of every process at 50 ms steps over [from, to] and counts leaders.
fn leaders_per_sample(procs: &[&Observed], from: u64, to: u64) -> Vec<(u64, usize)> {
    let statuses: Vec<Vec<(u64, bool)>> = procs
        .iter()
        .map(|p| {
            p.lines_of("status")
                .iter()
                .map(|l| {
                    (
                        l.value["t"].as_u64().unwrap(),
                        l.value["leader"].as_bool().unwrap(),
                    )
                })
                .collect()
        })
        .collect();
    (from..=to)
        .step_by(50)
        .map(|t| {
            let leaders = statuses
                .iter()
                .filter(|s| {
                    s.iter()
                        .rev()
                        .find(|(st, _)| *st <= t)
                        .is_some_and(|(_, l)| *l)
                })
                .count();
            (t, leaders)
        })
        .collect()
}

fn stop_all(procs: &[&Observed]) {
    for p in procs {
        let _ = p.signal(Signal::Term);
    }
}

/// NELI's heartbeat timeout in the stable-leadership tests: a leader that does not read its
/// own heartbeat back within it fences itself, by design; at 1 s a loaded machine (one core
/// kept busy) stalled that read-back now and then, which is no instability of the election.
const STEADY_NELI_HEARTBEAT: &str = "2500ms";

async fn exactly_one_leader_when_stable(kind: Kind, n: usize) {
    let election = Election::new(kind, None, STEADY_NELI_HEARTBEAT, TTL).await;
    exactly_one_leader_in(&election, kind, n).await;
}

async fn exactly_one_leader_in(election: &Election, kind: Kind, n: usize) {
    let procs: Vec<Observed> = (0..n)
        .map(|i| election.contender(&format!("c{i}")))
        .collect();
    let refs: Vec<&Observed> = procs.iter().collect();
    let started = Instant::now();
    let (_, from) = settled_at(&refs, kind.first_election()).await;
    let first = started.elapsed();
    // Observe from the leader's first status over more than a TTL (every lease, key and
    // session renewed meanwhile), until every member has reported past the window's end.
    let window = TTL + TTL / 3;
    let to = from + window.as_millis() as u64;
    statuses_reach(&refs, to, testkit::within(window)).await;
    let samples = leaders_per_sample(&refs, from, to);
    let bad: Vec<_> = samples.iter().filter(|(_, n)| *n != 1).collect();
    println!(
        "{}: {n} contenders: first leader acted {} ms after the start; {} samples, {} without exactly one leader",
        kind.name(),
        first.as_millis(),
        samples.len(),
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "samples without exactly one leader: {bad:?}"
    );
    let w = assert_no_overlap(&refs);
    println!("{}: leadership windows: {w:?}", kind.name());
    stop_all(&refs);
}

/// NELI on the mock broker: a graceful stop leaves the group at once, and librdkafka's mock
/// coordinator then waits (session timeout - 1 s) for the remaining members to rejoin, where
/// Kafka finishes the join as soon as all known members are back; a 700 ms heartbeat timeout
/// (2.1 s session) bounds the mock's hand-off at about 1.1 s, which a lapse (a session, the
/// check, the rejoin wait) is not far beyond. The other kinds hand over by resigning (deleting
/// the key, the znode, revoking the lease) at [`HAND_OVER_TTL`], where a lapse is far slower.
async fn graceful_stop_hands_over_sooner_than_a_lapse(kind: Kind) {
    let neli_heartbeat = Duration::from_millis(700);
    let election = Election::new(kind, None, "700ms", HAND_OVER_TTL).await;
    let a = election.contender("a");
    let b = election.contender("b");
    // A first election: the connect, then no longer than a succession at this TTL.
    let first_election = testkit::within(kind.connect() + HAND_OVER_TTL + kind.protocol());
    let leader = settled(&[&a, &b], first_election).await;
    let (mut old, new) = if leader == "a" { (a, b) } else { (b, a) };
    let stopped_at = now_ms();
    old.signal(Signal::Term).unwrap();
    let successor = new.name.clone();
    let bound = testkit::within(kind.hand_over(neli_heartbeat));
    wait_for("successor leads", bound, || async {
        first_action_after(&[&new], &successor, stopped_at).is_some()
    })
    .await
    .unwrap();
    let gap = first_action_after(&[&new], &successor, stopped_at).unwrap() - stopped_at;
    let status = old
        .wait_exit(testkit::within(kind.hand_over(neli_heartbeat)))
        .expect("old leader exits");
    let old_last = actions(&[&old])
        .last()
        .map(|a| a.t as i64 - stopped_at as i64);
    println!(
        "{}: graceful hand-off: SIGTERM to {} (last action at {old_last:?} ms) -> {} leads after {gap} ms; exit {status}",
        kind.name(),
        old.name,
        successor
    );
    assert!(status.success());
    assert_no_overlap(&[&old, &new]);
    assert!(
        Duration::from_millis(gap) < bound,
        "successor took {gap} ms after a graceful stop, more than the hand-over + margin ({bound:?})"
    );
    new.signal(Signal::Term).unwrap();
}

async fn kill_9_fails_over_within_the_succession(kind: Kind) {
    let election = Election::shared(kind).await;
    let a = election.contender("a");
    let b = election.contender("b");
    let leader = settled(&[&a, &b], kind.first_election()).await;
    let (mut old, new) = if leader == "a" { (a, b) } else { (b, a) };
    let killed_at = now_ms();
    old.signal(Signal::Kill).unwrap();
    old.wait_exit(testkit::LOAD_MARGIN).expect("killed");
    let successor = new.name.clone();
    let bound = kind.failover();
    wait_for("successor leads", bound, || async {
        first_action_after(&[&new], &successor, killed_at).is_some()
    })
    .await
    .unwrap();
    let gap = first_action_after(&[&new], &successor, killed_at).unwrap() - killed_at;
    println!(
        "{}: kill -9 failover: {} killed -> {} leads after {gap} ms (succession {} ms, bound {} ms)",
        kind.name(),
        old.name,
        successor,
        kind.succession().as_millis(),
        bound.as_millis()
    );
    assert_no_overlap(&[&old, &new]);
    assert!(
        Duration::from_millis(gap) < bound,
        "failover took {gap} ms, more than the succession + margin ({bound:?})"
    );
    new.signal(Signal::Term).unwrap();
}

async fn sigstopped_leader_acts_not_after_resume(kind: Kind) {
    let election = Election::shared(kind).await;
    let a = election.contender("a");
    let b = election.contender("b");
    let leader = settled(&[&a, &b], kind.first_election()).await;
    let (zombie, other) = if leader == "a" { (a, b) } else { (b, a) };
    let stopped_at = now_ms();
    zombie.signal(Signal::Stop).unwrap();
    let other_name = other.name.clone();
    // The other process takes over while the zombie is frozen.
    wait_for(
        "successor leads during the stall",
        kind.failover(),
        || async { first_action_after(&[&other], &other_name, stopped_at).is_some() },
    )
    .await
    .unwrap();
    let took_over = first_action_after(&[&other], &other_name, stopped_at).unwrap();
    // The fault's shape: resume well past the lease, with the successor leading.
    let stall = (kind.succession() + Duration::from_secs(2))
        .max(Duration::from_millis(took_over - stopped_at + 500));
    let resume_after = stall.saturating_sub(Duration::from_millis(now_ms() - stopped_at));
    tokio::time::sleep(resume_after).await;
    let resumed_at = now_ms();
    zombie.signal(Signal::Cont).unwrap();
    // The zombie's chance: it runs again (its status lines resume) for a full lease, time to
    // act on its old term had it gone on trusting it; the successor is still acting after.
    let chance = resumed_at + kind.lease().as_millis() as u64;
    statuses_reach(&[&zombie], chance, testkit::within(kind.lease())).await;
    wait_for("the successor acting after that", PROMPT_ACTION, || async {
        first_action_after(&[&other], &other_name, chance).is_some()
    })
    .await
    .unwrap();

    let zombie_after: Vec<_> = actions(&[&zombie])
        .into_iter()
        .filter(|a| a.t >= resumed_at)
        .collect();
    let zombie_last_before = actions(&[&zombie])
        .into_iter()
        .filter(|a| a.t < resumed_at)
        .map(|a| a.t)
        .max();
    let other_acting = actions(&[&other])
        .into_iter()
        .filter(|a| a.t >= resumed_at)
        .count();
    println!(
        "{}: SIGSTOP failover: zombie {} stopped at +0 ms, last action at {:?} ms, successor {} leads at +{} ms, \
         resumed at +{} ms; zombie actions after resume: {}; successor actions after resume: {}",
        kind.name(),
        zombie.name,
        zombie_last_before.map(|t| t as i64 - stopped_at as i64),
        other_name,
        took_over - stopped_at,
        resumed_at - stopped_at,
        zombie_after.len(),
        other_acting
    );
    assert!(
        zombie_after.is_empty(),
        "zombie acted after resume: {:?}",
        &zombie_after[..zombie_after.len().min(5)]
    );
    assert!(
        other_acting > 0,
        "the successor keeps leading after the zombie resumes"
    );
    assert_no_overlap(&[&zombie, &other]);
    stop_all(&[&zombie, &other]);
}

/// The server goes away under a leader: it must stop acting within its lease (plus slack for
/// the status interval and a loaded machine), nobody leads while the server is down, and
/// leadership returns once it is back.
async fn a_stopped_server_fences_the_leader_and_leadership_returns(kind: Kind) {
    let mut election = Election::private(kind).await;
    let a = election.contender("a");
    let b = election.contender("b");
    let procs = [&a, &b];
    let leader = settled(&procs, kind.first_election()).await;
    let server = election.server.as_mut().unwrap();
    let stopping = now_ms();
    server.stop().expect("stop the server");
    // Nothing was answered after the server exited, so every deadline falls within a lease of
    // that; a status line is stamped before is_leader() is asked, so one saying "leader" was
    // stamped before the deadline, however loaded the machine.
    let stopped_at = now_ms();
    let fenced_by = stopped_at + kind.lease().as_millis() as u64;
    // The outage's shape: down for two TTLs, past every lease; every status read up to then.
    let down_for = TTL * 2;
    statuses_reach(
        &procs,
        stopped_at + down_for.as_millis() as u64,
        testkit::within(down_for),
    )
    .await;
    let last_leading = last_leader_status(&procs).unwrap_or(0);
    let fenced_after = last_leading as i64 - stopped_at as i64;
    let restarted_at = now_ms();
    server.restart().expect("restart the server");
    // What outlived the outage (a key, a revived lease, a session) lapses, then an election:
    // two successions (the clients' reconnect back-offs are shorter at this TTL).
    let back = wait_for(
        "a leader again",
        testkit::within(kind.succession() * 2 + kind.protocol()),
        || async { actions(&procs).iter().any(|a| a.t > restarted_at) },
    )
    .await;
    let recovered = actions(&procs)
        .iter()
        .find(|a| a.t > restarted_at)
        .map(|a| (a.member.clone(), a.t - restarted_at));
    println!(
        "{}: server stopped under leader {leader} (taking {} ms): last leader status at {fenced_after} ms after (lease {} ms); \
         restarted after {} ms; a leader again: {recovered:?}",
        kind.name(),
        stopped_at - stopping,
        kind.lease().as_millis(),
        restarted_at - stopped_at
    );
    assert!(
        last_leading < fenced_by,
        "still leading {fenced_after} ms after the server stopped (lease {:?})",
        kind.lease()
    );
    back.expect("leadership returns with the server");
    assert_no_overlap(&procs);
    stop_all(&procs);
}

/// `elector run` with bad settings: a non-zero exit within `within`, and stderr naming `field`
/// (returned, for further checks).
fn fails_naming(kind: Kind, sets: &[(&str, &str)], field: &str, within: Duration) -> String {
    let mut args = Vec::new();
    set(&mut args, "leader.kind", kind.name());
    for (path, value) in sets {
        set(&mut args, path, *value);
    }
    let started = Instant::now();
    let mut child = Command::new(elector_bin())
        .arg("run")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > within {
            let _ = child.kill();
            panic!(
                "{}: elector run {sets:?} still running after {within:?}",
                kind.name()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    println!(
        "{}: {sets:?} -> {status} after {} ms: {}",
        kind.name(),
        took.as_millis(),
        stderr.trim()
    );
    assert!(!status.success());
    assert!(stderr.contains(field), "{field} not named in: {stderr}");
    assert!(took < within, "took {took:?}, more than {within:?}");
    stderr
}

fn bad_settings_fail_at_start_naming_the_field(kind: Kind) {
    // A bounded connect (connect_timeout 2 s here), plus the margin (process start-up).
    let within = testkit::within(Duration::from_secs(2));
    let ttl_bad = match kind {
        Kind::Neli => ("leader.heartbeat_timeout", "0s"),
        Kind::NatsKv | Kind::Etcd => ("leader.ttl", "0s"),
        Kind::ZooKeeper => ("leader.session_timeout", "100ms"),
    };
    let _ = fails_naming(kind, &[ttl_bad], ttl_bad.0, within);
    let closed = "127.0.0.1:9"; // discard port: nothing listens
    match kind {
        Kind::Neli => {}
        Kind::NatsKv => {
            let _ = fails_naming(
                kind,
                &[
                    ("leader.url", &format!("nats://{closed}")),
                    ("leader.connect_timeout", "2s"),
                ],
                "leader.url",
                within,
            );
            let url = coord::nats_url();
            let bucket = names::unique("missing").replace('.', "_");
            let _ = fails_naming(
                kind,
                &[
                    ("leader.url", &url),
                    ("leader.bucket", &bucket),
                    ("leader.create_bucket", "false"),
                ],
                "leader.bucket",
                within,
            );
        }
        Kind::ZooKeeper => {
            let _ = fails_naming(
                kind,
                &[
                    ("leader.servers", &format!("[\"{closed}\"]")),
                    ("leader.connect_timeout", "2s"),
                ],
                "leader.servers",
                within,
            );
            let servers = format!("[\"{}\"]", coord::zookeeper_addr());
            let path = format!("/conformance/{}", names::unique("missing"));
            let _ = fails_naming(
                kind,
                &[
                    ("leader.servers", &servers),
                    ("leader.path", &path),
                    ("leader.create_path", "false"),
                ],
                "leader.path",
                within,
            );
        }
        Kind::Etcd => {
            let _ = fails_naming(
                kind,
                &[
                    ("leader.endpoints", &format!("[\"http://{closed}\"]")),
                    ("leader.connect_timeout", "2s"),
                ],
                "leader.endpoints",
                within,
            );
        }
    }
}

macro_rules! conformance {
    ($module:ident, $kind:expr, server_loss: $server_loss:tt) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn one_contender_leads_alone() {
                exactly_one_leader_when_stable($kind, 1).await;
            }

            #[tokio::test]
            async fn three_contenders_exactly_one_leads() {
                exactly_one_leader_when_stable($kind, 3).await;
            }

            #[tokio::test]
            async fn graceful_stop_hands_over_sooner_than_a_lapse() {
                super::graceful_stop_hands_over_sooner_than_a_lapse($kind).await;
            }

            #[tokio::test]
            async fn kill_9_fails_over_within_the_succession() {
                super::kill_9_fails_over_within_the_succession($kind).await;
            }

            #[tokio::test]
            async fn sigstopped_leader_acts_not_after_resume() {
                super::sigstopped_leader_acts_not_after_resume($kind).await;
            }

            #[test]
            fn bad_settings_fail_at_start_naming_the_field() {
                super::bad_settings_fail_at_start_naming_the_field($kind);
            }

            conformance!(@server_loss $kind, $server_loss);
        }
    };
    (@server_loss $kind:expr, true) => {
        #[tokio::test]
        async fn a_stopped_server_fences_the_leader_and_leadership_returns() {
            super::a_stopped_server_fences_the_leader_and_leadership_returns($kind).await;
        }
    };
    (@server_loss $kind:expr, false) => {};
}

conformance!(neli, Kind::Neli, server_loss: false);
// Each kind runs when the harvester is built with it (the tests build the binaries' features,
// which have every elector).
#[cfg(feature = "nats")]
conformance!(nats_kv, Kind::NatsKv, server_loss: true);
#[cfg(feature = "zookeeper")]
conformance!(zookeeper, Kind::ZooKeeper, server_loss: true);
#[cfg(feature = "etcd")]
conformance!(etcd, Kind::Etcd, server_loss: true);

/// The secured servers: etcd over TLS with client certificates and authentication on, NATS
/// over TLS with a user, ZooKeeper with digest auth. Each kind leads over the secured
/// connection (one contender, and exactly one of three), and bad input (a wrong password, an
/// unknown CA, a CA file that is missing or not PEM) fails `elector run` within its
/// connect_timeout plus a margin, naming the field, never printing a password.
#[cfg(all(feature = "nats", feature = "zookeeper", feature = "etcd"))]
mod secured {
    use std::path::{Path, PathBuf};

    use super::*;
    use testkit::tls::files;

    /// An election on a secured server: its settings without and with the security ones.
    struct Secured {
        kind: Kind,
        base: Vec<(String, String)>,
        secure: Vec<(String, String)>,
        password: String,
        /// Files of the test's own (wrong passwords, a non-PEM CA).
        scratch: PathBuf,
        tls: PathBuf,
        _server: Option<PrivateServer>,
    }

    fn pair(k: &str, v: impl Into<String>) -> (String, String) {
        (k.to_owned(), v.into())
    }

    fn shown(path: &Path) -> String {
        path.display().to_string()
    }

    impl Secured {
        async fn start(kind: Kind) -> Secured {
            let ns = names::unique(&format!("sec{}", kind.name()));
            let scratch = testkit::state_dir().join("private").join(&ns);
            std::fs::create_dir_all(&scratch).unwrap();
            let server = match kind {
                Kind::Etcd => Some(Server::EtcdTls),
                Kind::NatsKv => Some(Server::NatsTls),
                _ => None,
            };
            let server = match server {
                Some(s) => Some(
                    tokio::task::spawn_blocking(move || PrivateServer::start(s))
                        .await
                        .unwrap()
                        .expect("start a secured private server"),
                ),
                None => None,
            };
            let tls = match &server {
                Some(s) => s.tls_dir(),
                None => scratch.join("tls"),
            };
            let ttl = format!("{}s", TTL.as_secs());
            let (base, secure, password) = match (kind, &server) {
                (Kind::Etcd, Some(server)) => {
                    let path = |f: &str| tls.join(f).display().to_string();
                    let pw = server.password_file("harvester");
                    (
                        vec![
                            pair("leader.endpoints", format!("[\"{}\"]", server.address())),
                            pair("leader.prefix", format!("/conformance/{ns}")),
                            pair("leader.ttl", ttl),
                        ],
                        vec![
                            pair("leader.tls.ca", path(files::CA)),
                            pair("leader.tls.cert", path(files::CLIENT_CERT)),
                            pair("leader.tls.key", path(files::CLIENT_KEY)),
                            pair("leader.user", "harvester"),
                            pair("leader.password.file", pw.display().to_string()),
                        ],
                        std::fs::read_to_string(&pw).unwrap(),
                    )
                }
                (Kind::NatsKv, Some(server)) => {
                    let pw = server.password_file("harvester");
                    (
                        vec![
                            pair("leader.url", server.address()),
                            pair("leader.bucket", ns.replace('.', "_")),
                            pair("leader.key", "leader"),
                            pair("leader.ttl", ttl),
                            pair("leader.campaign_interval", "200ms"),
                        ],
                        vec![
                            pair("leader.tls.ca", tls.join(files::CA).display().to_string()),
                            pair("leader.user", "harvester"),
                            pair("leader.password.file", pw.display().to_string()),
                        ],
                        std::fs::read_to_string(&pw).unwrap(),
                    )
                }
                (Kind::ZooKeeper, None) => {
                    let password = format!("pw-{}", uuid_like());
                    let pw = scratch.join("zk.password");
                    std::fs::write(&pw, &password).unwrap();
                    (
                        vec![
                            pair(
                                "leader.servers",
                                format!("[\"{}\"]", coord::zookeeper_addr()),
                            ),
                            // A top node of its own: the parents a member creates take its
                            // ACL (creator only, as Curator's do), so a parent shared with the
                            // other tests would refuse their users.
                            pair("leader.path", format!("/{ns}/election")),
                            pair("leader.session_timeout", ttl),
                        ],
                        vec![
                            pair("leader.auth.user", "harvester"),
                            pair("leader.auth.password.file", shown(&pw)),
                        ],
                        password,
                    )
                }
                _ => unreachable!("no secured server for {}", kind.name()),
            };
            Secured {
                kind,
                base,
                secure,
                password,
                scratch,
                tls,
                _server: server,
            }
        }

        fn election(&self) -> Election {
            let mut args = Vec::new();
            set(&mut args, "leader.kind", self.kind.name());
            for (k, v) in self.base.iter().chain(&self.secure) {
                set(&mut args, k, v.as_str());
            }
            Election { args, server: None }
        }

        /// A file of the test's own holding `content`.
        fn scratch_file(&self, name: &str, content: &str) -> PathBuf {
            let path = self.scratch.join(name);
            std::fs::write(&path, content).unwrap();
            path
        }

        /// `elector run` with the secured settings, `changes` replacing (or adding, or with the
        /// value `-` removing) some, and a 2 s connect_timeout: fails within that plus the load
        /// margin (process start-up), naming
        /// `field`, and prints neither the real password nor `wrong`.
        fn fails_naming(&self, changes: &[(&str, String)], field: &str, wrong: &str) {
            let mut sets: Vec<(String, String)> = self
                .base
                .iter()
                .chain(&self.secure)
                .filter(|(k, _)| !changes.iter().any(|(c, _)| c == k))
                .cloned()
                .collect();
            sets.extend(
                changes
                    .iter()
                    .filter(|(_, v)| v != "-")
                    .map(|(k, v)| ((*k).to_owned(), v.clone())),
            );
            sets.push(pair("leader.connect_timeout", "2s"));
            let refs: Vec<(&str, &str)> =
                sets.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let within = testkit::within(Duration::from_secs(2));
            let stderr = super::fails_naming(self.kind, &refs, field, within);
            assert!(
                !stderr.contains(self.password.trim()),
                "the password is in: {stderr}"
            );
            assert!(
                !stderr.contains(wrong),
                "the wrong password is in: {stderr}"
            );
        }
    }

    impl Drop for Secured {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.scratch);
        }
    }

    fn uuid_like() -> String {
        names::unique("z").replace('.', "")
    }

    async fn leads_over_the_secured_connection(kind: Kind) {
        let secured = Secured::start(kind).await;
        exactly_one_leader_in(&secured.election(), kind, 1).await;
        exactly_one_leader_in(&secured.election(), kind, 3).await;
    }

    /// The bad input every kind shares: a wrong password (`password_field`), and for the TLS
    /// kinds a CA that did not sign the server's certificate, a missing CA file and one that
    /// holds no PEM.
    async fn bad_input_fails_the_start_naming_the_field(kind: Kind) {
        let secured = Secured::start(kind).await;
        let wrong = format!("wrong-{}", uuid_like());
        let wrong_file = secured.scratch_file("wrong.password", &wrong);
        match kind {
            Kind::ZooKeeper => {
                // The node's ACL is the right user's once a contender created it.
                let election = secured.election();
                let first = election.contender("c0");
                settled(&[&first], Kind::ZooKeeper.first_election()).await;
                let password = "leader.auth.password.file";
                secured.fails_naming(
                    &[(password, shown(&wrong_file))],
                    "leader.auth.password",
                    &wrong,
                );
                secured.fails_naming(
                    &[(password, "/nonexistent/zk.password".into())],
                    "leader.auth.password",
                    &wrong,
                );
                let no_auth = [("leader.auth.user", "-".into()), (password, "-".into())];
                secured.fails_naming(&no_auth, "leader.auth", &wrong);
                stop_all(&[&first]);
                return;
            }
            Kind::Etcd | Kind::NatsKv => {}
            Kind::Neli => unreachable!(),
        }
        secured.fails_naming(
            &[("leader.password.file", shown(&wrong_file))],
            "leader.password",
            &wrong,
        );
        let not_pem = secured.scratch_file("ca.der", "\u{30}\u{82} not a certificate");
        let other_ca = secured.tls.join(files::OTHER_CA);
        for ca in [
            other_ca.as_path(),
            Path::new("/nonexistent/ca.pem"),
            not_pem.as_path(),
        ] {
            secured.fails_naming(&[("leader.tls.ca", shown(ca))], "leader.tls.ca", &wrong);
        }
        if kind == Kind::Etcd {
            // The server checks client certificates (--client-cert-auth).
            let no_client = [
                ("leader.tls.cert", "-".into()),
                ("leader.tls.key", "-".into()),
            ];
            secured.fails_naming(&no_client, "leader.tls.cert", &wrong);
            // The user's role may read and write under /harvester/ and /conformance/ only.
            let elsewhere = [("leader.prefix", format!("/elsewhere/{}", uuid_like()))];
            secured.fails_naming(&elsewhere, "leader.user", &wrong);
        }
    }

    macro_rules! secured {
        ($module:ident, $kind:expr) => {
            mod $module {
                use super::*;

                #[tokio::test]
                async fn leads_over_the_secured_connection() {
                    super::leads_over_the_secured_connection($kind).await;
                }

                #[tokio::test]
                async fn bad_input_fails_the_start_naming_the_field() {
                    super::bad_input_fails_the_start_naming_the_field($kind).await;
                }
            }
        };
    }

    secured!(etcd, Kind::Etcd);
    secured!(nats_kv, Kind::NatsKv);
    secured!(zookeeper, Kind::ZooKeeper);
}
