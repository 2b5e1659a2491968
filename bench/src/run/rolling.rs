//! The rolling restart (scenario kind `rolling_restart`): every original member is replaced,
//! one at a time, as a deploy does it: start a new member, wait until it owns buckets (or,
//! while a rebalance delay holds its rank back, until `join_wait` passed) and the owner maps
//! settled (every bucket owned, nothing changed for the settle window), SIGTERM the old member,
//! wait for it to exit and for the maps to settle again.
//!
//! A sampler thread reads every live member's `GET /buckets` every [`SAMPLE_EVERY`] and keeps
//! each owner map; the figures of each step (buckets moved, stall per moved bucket) are
//! computed from its samples by [`crate::rolling`]. A member that does not answer one probe
//! keeps its previous answer until it has been signalled; after that it owns nothing it does
//! not say it owns.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use testkit::process::Signal;

use super::faults::Event;
use crate::fleet::{Fleet, Member};
use crate::rolling::{RollingRestart, Sample, Step};
use crate::BenchError;

/// How often every live member's `/buckets` is read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// The longest a step waits for the maps to settle (it then goes on, marked unsettled).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a SIGTERMed member may take to drain, purge and leave.
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The writers go on this long after the last step, so the last hand-over is under load too.
pub const TAIL: Duration = Duration::from_secs(2);

/// `GET /buckets`: `Ok(Some(owned))`, `Ok(None)` for a member that does not share by bucket
/// (404), `Err` when it did not answer.
fn owned(http: SocketAddr) -> Result<Option<BTreeSet<u16>>, String> {
    let (status, body) = testkit::http::get(http, "/buckets").map_err(|e| e.to_string())?;
    match status {
        200 => {}
        404 => return Ok(None),
        s => return Err(format!("status {s}")),
    }
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    let owned = v["owned"]
        .as_array()
        .ok_or_else(|| format!("no `owned` in {body:.80}"))?
        .iter()
        .filter_map(|b| u16::try_from(b.as_u64()?).ok())
        .collect();
    Ok(Some(owned))
}

/// A member as the sampler sees it.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    http: SocketAddr,
    /// Signalled: a probe it does not answer counts as owning nothing.
    stopping: bool,
    last: BTreeSet<u16>,
}

/// The sampler thread's loop: every [`SAMPLE_EVERY`], each roster member's answer (or its
/// last one, or nothing once it is stopping) into one owner map.
fn sample(
    base: Instant,
    roster: &Mutex<Vec<Entry>>,
    samples: &Mutex<Vec<Sample>>,
    changed: &Mutex<Instant>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let entries: Vec<Entry> = roster.lock().clone();
        let mut answers: Vec<(String, BTreeSet<u16>)> = Vec::new();
        for e in entries {
            let set = match owned(e.http) {
                Ok(Some(set)) => {
                    if let Some(r) = roster.lock().iter_mut().find(|r| r.name == e.name) {
                        r.last.clone_from(&set);
                    }
                    set
                }
                _ if e.stopping => BTreeSet::new(),
                _ => e.last,
            };
            answers.push((e.name, set));
        }
        let sample = Sample::from_answers(
            t.duration_since(base),
            answers.iter().map(|(n, b)| (n.as_str(), b)),
        );
        {
            let mut all = samples.lock();
            if all.last().is_some_and(|l| l.owners != sample.owners) {
                *changed.lock() = Instant::now();
            }
            all.push(sample);
        }
        std::thread::sleep(SAMPLE_EVERY.saturating_sub(t.elapsed()));
    }
}

/// The sampler thread and what it shares.
struct Sampler {
    roster: Arc<Mutex<Vec<Entry>>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// When the owner map last differed from the sample before.
    changed: Arc<Mutex<Instant>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// What the samples' `at` counts from.
    base: Instant,
    /// B: a map is settled only once every bucket has an owner.
    buckets: u16,
}

impl Sampler {
    fn start(members: &[Member], buckets: u16) -> Sampler {
        let roster: Arc<Mutex<Vec<Entry>>> = Arc::new(Mutex::new(
            members
                .iter()
                .map(|m| Entry {
                    name: m.name.clone(),
                    http: m.http,
                    stopping: false,
                    last: BTreeSet::new(),
                })
                .collect(),
        ));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let changed = Arc::new(Mutex::new(Instant::now()));
        let stop = Arc::new(AtomicBool::new(false));
        let base = Instant::now();
        let thread = {
            let (roster, samples, changed, stop) = (
                Arc::clone(&roster),
                Arc::clone(&samples),
                Arc::clone(&changed),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || sample(base, &roster, &samples, &changed, &stop))
        };
        Sampler {
            roster,
            samples,
            changed,
            stop,
            thread: Some(thread),
            base,
            buckets,
        }
    }

    fn add(&self, m: &Member) {
        self.roster.lock().push(Entry {
            name: m.name.clone(),
            http: m.http,
            stopping: false,
            last: BTreeSet::new(),
        });
    }

    fn stopping(&self, name: &str) {
        if let Some(e) = self.roster.lock().iter_mut().find(|e| e.name == name) {
            e.stopping = true;
        }
    }

    /// No longer probed (it exited): it owns nothing.
    fn remove(&self, name: &str) {
        self.roster.lock().retain(|e| e.name != name);
    }

    /// The index of the first sample with an index of at least `n`, once taken.
    async fn sample_at_least(&self, n: usize) -> usize {
        while self.samples.lock().len() <= n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        n
    }

    /// The index of the latest sample (waiting for the first).
    async fn last(&self) -> usize {
        let n = self.samples.lock().len();
        self.sample_at_least(n.saturating_sub(1)).await
    }

    /// The index of the first sample begun after this call (the one being taken may have begun
    /// before it, so the one after that).
    async fn next(&self) -> usize {
        let n = self.samples.lock().len();
        self.sample_at_least(n + 1).await
    }

    /// Waits until every bucket has an owner and the owner map has not changed for `settle`,
    /// counted from `since` at the earliest, and, with `joining = Some((member, wait))`, until
    /// that member owns a bucket or `wait` passed since `since`; false when [`SETTLE_TIMEOUT`]
    /// (after `wait`) passed first.
    async fn settled(
        &self,
        since: Instant,
        settle: Duration,
        joining: Option<(&str, Duration)>,
    ) -> bool {
        let wait = joining.map_or(Duration::ZERO, |(_, w)| w);
        loop {
            let quiet_from = (*self.changed.lock()).max(since);
            let (all_owned, joined) = self.samples.lock().last().map_or((false, false), |s| {
                (
                    (0..self.buckets).all(|b| s.owners.get(&b).is_some_and(|o| !o.is_empty())),
                    joining.is_none_or(|(m, _)| s.owned_by(m) > 0),
                )
            });
            if all_owned && quiet_from.elapsed() >= settle && (joined || since.elapsed() >= wait) {
                return true;
            }
            if since.elapsed() >= wait + SETTLE_TIMEOUT {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn between(&self, from: usize, to: usize) -> Vec<Sample> {
        self.samples.lock()[from..=to].to_vec()
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.samples.lock())
    }
}

impl Drop for Sampler {
    /// A step that failed half-way leaves no thread behind.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The members' shared bucket count: `leader.buckets` from the settings, else the default.
pub fn buckets(settings: &[(String, String)]) -> u16 {
    settings
        .iter()
        .rev()
        .find(|(k, _)| k == "leader.buckets")
        .and_then(|(_, v)| v.trim_matches('"').parse().ok())
        .unwrap_or(harvester::assign::DEFAULT_BUCKETS)
}

/// Replaces every member of `fleet` in turn (see the module docs); new members get `settings`.
/// `t0` is the instant the figures' seconds count from.
pub async fn restart_all(
    fleet: &mut Fleet,
    reaper: &Path,
    settings: &[(String, String)],
    (settle, join_wait): (Duration, Duration),
    t0: Instant,
    label: &str,
) -> Result<(RollingRestart, Vec<Event>), BenchError> {
    let b = buckets(settings);
    for m in &fleet.members {
        let answer = tokio::task::block_in_place(|| owned(m.http));
        if matches!(answer, Ok(None)) {
            return Err(BenchError::Run(format!(
                "rolling_restart needs members that share the outbox by bucket (leader.kind = \"neli_buckets\" or \"rink\"); {} does not",
                m.name
            )));
        }
    }
    let originals = fleet.members.len();
    let sampler = Sampler::start(&fleet.members, b);
    let since = |at: Instant| at.saturating_duration_since(t0).as_secs_f64();
    let mut events: Vec<Event> = Vec::new();
    let mut steps = Vec::new();
    if !sampler.settled(Instant::now(), settle, None).await {
        eprintln!("[{label}] the owner maps did not settle before the first step");
    }
    for old in 0..originals {
        let started = Instant::now();
        let from = sampler.last().await;
        let new = tokio::task::block_in_place(|| fleet.add(reaper, settings))?;
        let up = Instant::now();
        sampler.add(&fleet.members[new]);
        let new_name = fleet.members[new].name.clone();
        let old_name = fleet.members[old].name.clone();
        let joined = sampler
            .settled(up, settle, Some((&new_name, join_wait)))
            .await;
        let at_stop = sampler.next().await;
        let new_owned_at_stop = sampler.between(at_stop, at_stop)[0].owned_by(&new_name);
        sampler.stopping(&old_name);
        let stopped = Instant::now();
        fleet.members[old].signal(Signal::Term)?;
        let exit = tokio::task::block_in_place(|| fleet.members[old].wait_exit(EXIT_TIMEOUT));
        let exited = Instant::now();
        match exit {
            Some(s) if s.success() => {}
            Some(s) => eprintln!("[{label}] {old_name} exited with {s} after SIGTERM"),
            None => eprintln!(
                "[{label}] {old_name} did not exit within {EXIT_TIMEOUT:?} of SIGTERM; going on"
            ),
        }
        if exit.is_some() {
            sampler.remove(&old_name);
        }
        let left = sampler.settled(exited, settle, None).await;
        let settled = Instant::now();
        let to = sampler.next().await;
        let mut step = Step {
            old: old_name.clone(),
            new: new_name.clone(),
            started_s: since(started),
            up_s: since(up),
            stopped_s: since(stopped),
            exited_s: exit.map(|_| since(exited)),
            settled_s: since(settled),
            settled: joined && left,
            new_owned_at_stop,
            ..Step::default()
        };
        let during = sampler.between(from, to);
        step.first_owned_s = during
            .iter()
            .find(|s| s.owned_by(&new_name) > 0)
            .map(|s| since(sampler.base + s.at));
        step.measure(&during, b);
        eprintln!(
            "[{label}] step {}: start {new_name} (owned {new_owned_at_stop} when {old_name} was stopped), stop {old_name}: {} buckets moved ({} reassigned, {} unowned after), stall p50 {:.0} ms, max {:.0} ms{}",
            old + 1,
            step.moved,
            step.reassigned,
            step.unowned_at_end,
            step.stall_p50_ms,
            step.stall_max_ms,
            if step.settled { "" } else { "; did not settle" }
        );
        events.push((format!("start {new_name}"), started));
        events.push((format!("SIGTERM {old_name}"), stopped));
        steps.push(step);
    }
    let samples = sampler.finish();
    Ok((
        RollingRestart::new(b, (settle, join_wait), &samples, steps),
        events,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_count_comes_from_the_settings() {
        let s = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(buckets(&s(&[])), harvester::assign::DEFAULT_BUCKETS);
        assert_eq!(
            buckets(&s(&[("leader.buckets", "16"), ("leader.kind", "rink")])),
            16
        );
    }
}
