//! NELI against tansu, an independent Kafka-compatible broker whose group coordinator has been
//! seen to hand partition 0 of the leader topic to a new member before the old owner was
//! revoked. Opt-in (tansu takes about 12 minutes to build: `cargo install tansu --features
//! dynostore`): `scripts/services.sh up --with tansu`, then
//! `cargo test -p harvester --test neli_tansu -- --ignored --nocapture`.
//!
//! Churn for 45 s with 3 contenders (every 8 s the leader is stopped with SIGTERM and a fresh
//! contender joins), observed from outside: the time two processes said `leader: true` at once
//! (status lines every 25 ms) and whether two terms' leader actions interleaved. The first
//! figure is what the generation rule exists for (a leader that reads a heartbeat of a newer
//! group generation fences itself at once); the second must be zero. `HARVEST_ELECTOR_BIN`
//! runs another build's contender (e.g. an older `neli` binary) for a before/after comparison.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::process::{Observed, Signal};
use testkit::{coord, names, Broker};

const RUN: Duration = Duration::from_secs(45);
const CHURN_EVERY: Duration = Duration::from_secs(8);

fn contender(bin: &str, bootstrap: &str, group: &str, name: &str) -> Observed {
    let mut cmd = Command::new(bin);
    cmd.args([
        "run",
        "--bootstrap",
        bootstrap,
        "--group",
        group,
        "--name",
        name,
    ])
    .args(["--heartbeat-timeout", "1s", "--min-poll-interval", "50ms"])
    .args(["--status-interval", "25ms"]);
    Observed::spawn(name, cmd).expect("spawn a contender")
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Milliseconds (10 ms steps) in [from, to] during which two or more processes' latest status
/// said `leader: true`, and the longest such stretch.
fn double_leadership(procs: &[&Observed], from: u64, to: u64) -> (u64, u64) {
    let statuses: Vec<Vec<(u64, bool)>> = procs
        .iter()
        .map(|p| {
            p.lines_of("status")
                .iter()
                .filter_map(|l| Some((l.value["t"].as_u64()?, l.value["leader"].as_bool()?)))
                .collect()
        })
        .collect();
    let (mut total, mut longest, mut current) = (0, 0, 0);
    for t in (from..=to).step_by(10) {
        let leaders = statuses
            .iter()
            .filter(|s| {
                s.iter()
                    .rev()
                    .find(|(st, _)| *st <= t)
                    .is_some_and(|(st, l)| *l && t - st < 200)
            })
            .count();
        if leaders >= 2 {
            total += 10;
            current += 10;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    (total, longest)
}

/// Pairs of terms whose leader actions interleave (first term, its last action, second term,
/// its first action).
fn interleaved(procs: &[&Observed]) -> Vec<(String, u64, String, u64)> {
    let mut windows: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for p in procs {
        for l in p.lines_of("action") {
            let (Some(term), Some(t)) = (l.value["term"].as_str(), l.value["t"].as_u64()) else {
                continue;
            };
            let w = windows.entry(term.to_owned()).or_insert((t, t));
            w.0 = w.0.min(t);
            w.1 = w.1.max(t);
        }
    }
    let mut w: Vec<_> = windows.into_iter().collect();
    w.sort_by_key(|(_, (a, _))| *a);
    w.windows(2)
        .filter(|p| p[0].1 .1 >= p[1].1 .0)
        .map(|p| (p[0].0.clone(), p[0].1 .1, p[1].0.clone(), p[1].1 .0))
        .collect()
}

#[tokio::test]
#[ignore = "opt-in: needs tansu (cargo install tansu; scripts/services.sh up --with tansu)"]
async fn churn_on_tansu_never_has_two_leaders_acting() {
    let bootstrap = coord::address("TANSU_BROKERS", "");
    assert!(
        !bootstrap.is_empty(),
        "TANSU_BROKERS is not set: scripts/services.sh up --with tansu"
    );
    let bin = std::env::var("HARVEST_ELECTOR_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_elector").to_owned());
    let broker = Broker::external(&bootstrap);
    let group = names::unique("tansu");
    broker
        .create_topic(&format!("{group}.neli"), 1)
        .await
        .expect("create the leader topic on tansu");
    let mut procs: Vec<Observed> = (0..3)
        .map(|i| contender(&bin, &bootstrap, &group, &format!("c{i}")))
        .collect();
    let started = Instant::now();
    let from = now_ms();
    let mut next = 3;
    let mut churned = 0;
    while started.elapsed() < RUN {
        tokio::time::sleep(CHURN_EVERY).await;
        let horizon = now_ms().saturating_sub(300);
        let leader = procs.iter().position(|p| {
            p.lines_of("action")
                .iter()
                .any(|l| l.value["t"].as_u64().is_some_and(|t| t >= horizon))
        });
        if let Some(i) = leader {
            procs[i].signal(Signal::Term).unwrap();
            churned += 1;
        }
        procs.push(contender(&bin, &bootstrap, &group, &format!("c{next}")));
        next += 1;
    }
    let to = now_ms();
    let refs: Vec<&Observed> = procs.iter().collect();
    let (double_ms, longest_ms) = double_leadership(&refs, from, to);
    let overlaps = interleaved(&refs);
    let terms = refs
        .iter()
        .flat_map(|p| p.lines_of("action"))
        .filter_map(|l| l.value["term"].as_str().map(str::to_owned))
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    println!(
        "tansu churn ({bin}): {:?} run, {churned} leaders stopped, {} contenders, {terms} terms; two leaders by status for {double_ms} ms in total (longest {longest_ms} ms); interleaved leader actions: {overlaps:?}",
        RUN,
        procs.len()
    );
    for p in &procs {
        let _ = p.signal(Signal::Term);
    }
    assert!(
        terms > 1,
        "leadership never moved: the churn did not happen"
    );
    assert!(
        overlaps.is_empty(),
        "two leaders acted at once: {overlaps:?}"
    );
}
