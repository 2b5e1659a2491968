//! NELI across real OS processes on the embedded broker: exclusivity observed from outside,
//! graceful hand-off, kill -9 failover, and a SIGSTOPped zombie that must not act on resume.
//!
//! Each contender is `elector run` (NELI), printing `status` lines and one `action` line per unit of leader
//! work (gated by `is_leader()`, stamped with term and wall-clock ms). The observer here merges
//! the lines of all processes into one timeline.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use testkit::process::{Observed, Signal};
use testkit::{names, wait_for, Broker};

/// Contenders run with a 1 s heartbeat timeout; session.timeout.ms is forced to 3x that.
const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

fn contender(broker: &Broker, group: &str, name: &str) -> Observed {
    contender_with(broker, group, name, "1s")
}

fn contender_with(broker: &Broker, group: &str, name: &str, heartbeat_timeout: &str) -> Observed {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_elector"));
    cmd.args([
        "run",
        "--bootstrap",
        broker.bootstrap(),
        "--group",
        group,
        "--name",
        name,
    ])
    .args([
        "--heartbeat-timeout",
        heartbeat_timeout,
        "--min-poll-interval",
        "50ms",
    ])
    .args(["--status-interval", "25ms"]);
    Observed::spawn(name, cmd).expect("spawn elector")
}

async fn setup(prefix: &str) -> (Broker, String) {
    let broker = Broker::discover().unwrap();
    let group = names::unique(prefix);
    broker
        .create_topic(&format!("{group}.neli"), 1)
        .await
        .unwrap();
    (broker, group)
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

/// No two terms' leader actions interleave: exclusivity as an outside observer sees it.
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

/// The member that has acted most recently (within `within`), if any.
fn current_leader(procs: &[&Observed], within: Duration) -> Option<String> {
    let horizon = now_ms().saturating_sub(within.as_millis() as u64);
    actions(procs)
        .into_iter()
        .rev()
        .find(|a| a.t >= horizon)
        .map(|a| a.member)
}

async fn wait_leader(procs: &[&Observed], timeout: Duration) -> String {
    wait_for("a leader", timeout, || async {
        current_leader(procs, Duration::from_millis(200)).is_some()
    })
    .await
    .unwrap();
    current_leader(procs, Duration::from_millis(200)).unwrap()
}

fn first_action_after(procs: &[&Observed], member: &str, after_ms: u64) -> Option<u64> {
    actions(procs)
        .into_iter()
        .find(|a| a.member == member && a.t > after_ms)
        .map(|a| a.t)
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

async fn exactly_one_leader_when_stable(n: usize) {
    let (broker, group) = setup(&format!("neli{n}")).await;
    let procs: Vec<Observed> = (0..n)
        .map(|i| contender(&broker, &group, &format!("c{i}")))
        .collect();
    let refs: Vec<&Observed> = procs.iter().collect();
    wait_leader(&refs, Duration::from_secs(30)).await;
    // Stable once every member has joined: let the group settle, then observe.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let from = now_ms();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let to = now_ms() - 100;
    let samples = leaders_per_sample(&refs, from, to);
    let bad: Vec<_> = samples.iter().filter(|(_, n)| *n != 1).collect();
    println!(
        "{n} contenders: {} samples, {} without exactly one leader",
        samples.len(),
        bad.len()
    );
    assert!(samples.len() >= 70);
    assert!(
        bad.is_empty(),
        "samples without exactly one leader: {bad:?}"
    );
    let w = assert_no_overlap(&refs);
    println!("leadership windows: {w:?}");
    for p in &procs {
        p.signal(Signal::Term).unwrap();
    }
}

#[tokio::test]
async fn one_contender_leads_alone() {
    exactly_one_leader_when_stable(1).await;
}

#[tokio::test]
async fn three_contenders_exactly_one_leads() {
    exactly_one_leader_when_stable(3).await;
}

/// A graceful stop leaves the group at once. librdkafka's mock coordinator then waits
/// (session timeout - 1 s) for the remaining members to rejoin, where Kafka finishes the join as
/// soon as all known members are back; with a 700 ms heartbeat timeout (2.1 s session) that
/// bounds the mock's hand-off at about 1.2 s, against about 5 s for a session expiry.
#[tokio::test]
async fn graceful_stop_hands_over_within_two_seconds() {
    let (broker, group) = setup("neligrace").await;
    let a = contender_with(&broker, &group, "a", "700ms");
    let b = contender_with(&broker, &group, "b", "700ms");
    let leader = wait_leader(&[&a, &b], Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut old, new) = if leader == "a" { (a, b) } else { (b, a) };
    let stopped_at = now_ms();
    old.signal(Signal::Term).unwrap();
    let successor = new.name.clone();
    wait_for("successor leads", Duration::from_secs(20), || async {
        first_action_after(&[&new], &successor, stopped_at).is_some()
    })
    .await
    .unwrap();
    let gap = first_action_after(&[&new], &successor, stopped_at).unwrap() - stopped_at;
    let status = old
        .wait_exit(Duration::from_secs(10))
        .expect("old leader exits");
    println!(
        "graceful hand-off: SIGTERM to {} -> {} leads after {gap} ms; exit {status}",
        old.name, successor
    );
    assert!(status.success());
    assert_no_overlap(&[&old, &new]);
    assert!(gap < 2000, "successor took {gap} ms after a graceful stop");
    new.signal(Signal::Term).unwrap();
}

#[tokio::test]
async fn kill_9_fails_over_within_session_timeout() {
    let (broker, group) = setup("nelikill").await;
    let a = contender(&broker, &group, "a");
    let b = contender(&broker, &group, "b");
    let leader = wait_leader(&[&a, &b], Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut old, new) = if leader == "a" { (a, b) } else { (b, a) };
    let killed_at = now_ms();
    old.signal(Signal::Kill).unwrap();
    old.wait_exit(Duration::from_secs(5)).expect("killed");
    let successor = new.name.clone();
    // After a session expiry the mock coordinator checks sessions once a second and then waits
    // (session timeout - 1 s) for the survivors to rejoin: the bound is session timeout plus
    // those two, plus 2 s of slack for a loaded machine.
    let margin = Duration::from_secs(1)
        + (SESSION_TIMEOUT - Duration::from_secs(1))
        + Duration::from_secs(2);
    wait_for(
        "successor leads",
        SESSION_TIMEOUT + margin + Duration::from_secs(10),
        || async { first_action_after(&[&new], &successor, killed_at).is_some() },
    )
    .await
    .unwrap();
    let gap = first_action_after(&[&new], &successor, killed_at).unwrap() - killed_at;
    println!(
        "kill -9 failover: {} killed -> {} leads after {gap} ms (session timeout {} ms)",
        old.name,
        successor,
        SESSION_TIMEOUT.as_millis()
    );
    assert_no_overlap(&[&old, &new]);
    assert!(
        Duration::from_millis(gap) < SESSION_TIMEOUT + margin,
        "failover took {gap} ms, more than session timeout + {margin:?}"
    );
    new.signal(Signal::Term).unwrap();
}

#[tokio::test]
async fn sigstopped_leader_acts_not_after_resume() {
    let (broker, group) = setup("nelizombie").await;
    let a = contender(&broker, &group, "a");
    let b = contender(&broker, &group, "b");
    let leader = wait_leader(&[&a, &b], Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (zombie, other) = if leader == "a" { (a, b) } else { (b, a) };
    let stopped_at = now_ms();
    zombie.signal(Signal::Stop).unwrap();
    let stall = SESSION_TIMEOUT + Duration::from_secs(2);
    let other_name = other.name.clone();
    // The other process takes over while the zombie is frozen.
    wait_for(
        "successor leads during the stall",
        stall + Duration::from_secs(10),
        || async { first_action_after(&[&other], &other_name, stopped_at).is_some() },
    )
    .await
    .unwrap();
    let took_over = first_action_after(&[&other], &other_name, stopped_at).unwrap();
    let resume_after = stall.saturating_sub(Duration::from_millis(now_ms() - stopped_at));
    tokio::time::sleep(resume_after).await;
    let resumed_at = now_ms();
    zombie.signal(Signal::Cont).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;

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
        "zombie {}: stopped at +0 ms, last action at {:?} ms, successor {} leads at +{} ms, \
         resumed at +{} ms; zombie actions after resume: {}; successor actions after resume: {}",
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
    zombie.signal(Signal::Term).unwrap();
    other.signal(Signal::Term).unwrap();
}
