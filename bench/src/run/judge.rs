//! A run's last phase: the judgement. From the evidence it computes the figures (drain and
//! delivered rates, the failover's timings), splits whatever is missing by cause, and decides
//! the verdict's two parts: correctness (passed, failed, or inconclusive when the only missing
//! records are ones the broker deleted before the verifier read them, which proves nothing
//! about the harvester), and for an open-loop run whether it kept up ([`Pace`]).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use testkit::Broker;

use super::collect::Evidence;
use super::drain::Ends;
use super::measure::Measured;
use super::{rewinds, Case};
use crate::analysis::{failover_gap, longest_pause_after, Correctness};
use crate::result::{Drain, Failover, Pace, RunResult, TopicSizing, Verdict};
use crate::scenario::Kind;
use crate::BenchError;

/// The run's result, from what the phases before it measured and gathered.
pub(super) fn judge(
    case: Case<'_>,
    broker: &Broker,
    measured: Measured,
    ev: Evidence,
    mut drained: Drain,
    ends: Ends,
) -> Result<RunResult, BenchError> {
    let scenario = case.scenario;
    let after = case.topic.verify_after;
    let receipts = &ev.collected.receipts;
    let mut events = measured.events;
    let failover = failover(&measured.faulted, &ev, &mut events);
    let (sustained, write_rate) = sustained(measured.window, &ev);
    let decision = decide(&case, broker, &ev, measured.committed, &drained)?;
    let drain = drain_rate(&case, &ev, ends);
    drained.startup_s = startup(&ev, ends);
    let (left_in_outbox, quarantined, quarantine_reasons) = ev.leftovers;
    let delivered = ev.delivered;
    let a = ev.analysis;
    Ok(RunResult {
        scenario: case.label.to_owned(),
        kind: Some(scenario.kind),
        description: scenario.description.clone(),
        started_at: String::new(),
        committed: measured.committed,
        rolled_back: measured.rolled_back,
        correctness: decision.correctness,
        passed: decision.verdict == Verdict::Passed,
        verdict: decision.verdict,
        verdict_note: decision.note,
        pace: Some(Pace::judge(ev.target, sustained.zip(write_rate))),
        rewinds_allowed: decision.allowed.any_depth,
        zombie_in_flight: ev.zombie_in_flight,
        key_window: decision.allowed.key_window,
        problems: a.problems,
        left_in_outbox,
        quarantined,
        quarantine_reasons,
        harvester_acks: ev.harvester_acks,
        log_records: ev.log_records,
        undelivered: decision.loss.undelivered,
        broker_lost: decision.loss.broker_lost,
        broker_evicted: decision.evicted,
        lost_to_eviction: decision.loss.evicted,
        log: ev.collected.partitions.clone(),
        topic: case.topic,
        drain: Some(drained),
        cpu: ev.cpu,
        outbox_after: ev.outbox_after,
        db_work: Some(ev.db_work),
        latency_ms: a.latency,
        latency_from_commit_ms: a.latency_from_commit,
        drain_records_per_s: drain,
        sustained_records_per_s: sustained,
        write_records_per_s: write_rate,
        target_records_per_s: ev.target,
        failover,
        stall_ms: measured
            .disturbed
            .and_then(|at| longest_pause_after(receipts, at))
            .map(|d| d.as_secs_f64() * 1000.0),
        recovery_ms: measured
            .disturbed
            .and_then(|at| crate::recovery::recovered_after(&ev.committed_records, receipts, at))
            .map(|d| d.as_secs_f64() * 1000.0),
        harvester_cpu_seconds: ev.procs.cpu_seconds,
        cpu_seconds_per_million: Some(ev.procs.cpu_seconds / delivered * 1e6),
        peak_rss_mib: ev.procs.peak_rss_bytes as f64 / 1024.0 / 1024.0,
        wal_bytes_per_record: (ev.wal > 0).then(|| ev.wal as f64 / delivered),
        transactions_per_record: (ev.txs > 0).then(|| ev.txs as f64 / delivered),
        per_second: if after {
            let series: Vec<_> = ev
                .fleet
                .members
                .iter()
                .map(crate::fleet::Member::published_series)
                .collect();
            crate::analysis::per_second_from_counts(&series, ev.t0)
        } else {
            a.per_second
        },
        settings: ev.settings,
        events: events
            .into_iter()
            .map(|(l, at)| (l, at.saturating_duration_since(ev.t0).as_secs_f64()))
            .collect(),
        rolling: measured.rolled,
        stages: ev.stages,
        batching: ev.batching,
        backlog: scenario.backlog.map(|b| crate::scenario::BacklogSpec {
            keys: case.keys.unwrap_or(b.keys),
            ..b
        }),
        broker_note: None,
        listener: scenario.listener,
    })
}

/// A backlog's drain rate: its rows over the time from the first purge to the outbox empty,
/// when the drain watched the outbox (as `bench versus` times both relays); else from the
/// first leader to the last receipt.
fn drain_rate(case: &Case<'_>, ev: &Evidence, ends: Ends) -> Option<f64> {
    case.scenario.backlog.and_then(|b| {
        let (start, end) = if case.topic.verify_after {
            (ends.first_purge.or(ev.fleet.first_acquired())?, ends.end)
        } else {
            (ev.fleet.first_acquired()?, ev.analysis.last_receipt?)
        };
        Some(b.rows as f64 / end.saturating_duration_since(start).as_secs_f64().max(1e-6))
    })
}

/// From the first leader to the first purge, where the drain watched for it.
fn startup(ev: &Evidence, ends: Ends) -> Option<f64> {
    let purged = ends.first_purge?;
    Some(
        purged
            .saturating_duration_since(ev.fleet.first_acquired()?)
            .as_secs_f64(),
    )
}

/// First deliveries per second while the writers wrote, and the writers' commit rate.
fn sustained(window: Option<(Instant, Instant, f64)>, ev: &Evidence) -> (Option<f64>, Option<f64>) {
    match window {
        Some((ws, we, rate)) => {
            let mut seen = HashSet::new();
            let n = ev
                .collected
                .receipts
                .iter()
                .filter(|r| seen.insert((r.key, r.seq)) && r.at >= ws && r.at <= we)
                .count();
            (
                Some(n as f64 / we.duration_since(ws).as_secs_f64()),
                Some(rate),
            )
        }
        None => (None, None),
    }
}

/// A failover's timings: from the fault (the old leader stopped) to the new leader's
/// acquisition and first publish, and the gap in deliveries; notes the new leader on the
/// timeline.
fn failover(
    faulted: &Option<(usize, Instant)>,
    ev: &Evidence,
    events: &mut Vec<super::faults::Event>,
) -> Option<Failover> {
    let (old, fault) = (*faulted)?;
    let new = ev
        .acquired
        .iter()
        .filter(|(i, at)| *i != old && *at > fault)
        .map(|(_, at)| *at)
        .min()?;
    let (before, after) = failover_gap(&ev.collected.receipts, new)?;
    events.push(("new leader".into(), new));
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Some(Failover {
        fault_to_acquired_ms: ms(new.saturating_duration_since(fault)),
        gap_ms: ms(after.saturating_duration_since(before)),
        fault_to_first_publish_ms: ms(after.saturating_duration_since(fault)),
    })
}

/// The verdict and the figures it rests on.
#[derive(Debug)]
struct Decision {
    verdict: Verdict,
    note: String,
    /// Reported correctness and loss: none when the topic was not read.
    correctness: Correctness,
    loss: Loss,
    allowed: rewinds::Allowed,
    evicted: u64,
}

/// Splits the loss and decides the verdict.
fn decide(
    case: &Case<'_>,
    broker: &Broker,
    ev: &Evidence,
    committed: u64,
    drained: &Drain,
) -> Result<Decision, BenchError> {
    let scenario = case.scenario;
    let topic = &case.topic;
    // Split the loss: rows still in the outbox were not delivered in time; rows gone (the
    // harvester deletes only acknowledged rows) were acknowledged by the broker, and either
    // deleted by it before the verifier read them (evicted) or never kept.
    let received: HashSet<(u32, u64)> = ev
        .collected
        .receipts
        .iter()
        .map(|r| (r.key, r.seq))
        .collect();
    let loss = split_loss(
        &ev.committed_records,
        &received,
        &ev.remaining,
        &ev.collected,
        topic.partitions,
        u64::try_from(ev.leftovers.1).unwrap_or(0),
    );
    let c = ev.analysis.correctness;
    // Rows gone and records missing are the broker's loss only where a member's acknowledgement
    // log shows Kafka acknowledged them (Produce errors injected into the mock); the rest were
    // deleted without an acknowledgement: the harvester's.
    let forgiven = match &ev.ack_log {
        Some(acks) if scenario.kind == Kind::BrokerFaults && !scenario.fault_errors.is_empty() => {
            let read: HashSet<(i32, i64)> = ev.collected.offsets.iter().copied().collect();
            let gone = gone_by_key(&ev.committed_records, &received, &ev.remaining);
            loss.broker_lost
                .min(crate::acks::acknowledged(&gone, acks, &read))
        }
        _ => 0,
    };
    let harvester = crate::session::resolved(&ev.settings)?;
    let fenced = broker.embedded().is_none() && harvester.publish.transactional().is_some();
    let allowed = rewinds::Allowed::of(
        scenario.kind,
        harvester.limits.max_in_flight_per_key as u64,
        ev.zombie_in_flight,
        fenced,
    );
    let clean = c.reordered == 0
        && allowed.admits(&c)
        && c.unexpected == 0
        && c.delivered + c.lost == c.expected;
    let evicted = ev.collected.evicted();
    if ev.unverifiable {
        // Nothing was read: report no deliveries and no losses rather than every record lost.
        return Ok(Decision {
            verdict: Verdict::Inconclusive,
            note: format!(
                "inconclusive: not verified; the embedded broker keeps at most {} of this backlog's {} records, so the verifier did not read the topic (the drain rate is measured: the outbox emptied with {} acknowledgements); verify this size with `--brokers`",
                topic.lag_tolerance.unwrap_or_default(),
                committed,
                ev.harvester_acks
            ),
            correctness: Correctness {
                expected: c.expected,
                ..Default::default()
            },
            loss: Loss::default(),
            allowed,
            evicted,
        });
    }
    let tally = Tally {
        clean,
        lost: c.lost,
        forgiven,
        evicted,
        logged: ev.ack_log.is_some(),
    };
    let (verdict, note) = verdict(tally, &loss, topic, broker.embedded().is_some(), drained);
    Ok(Decision {
        verdict,
        note,
        correctness: c,
        loss,
        allowed,
        evicted,
    })
}

/// Per key, the records neither received nor left in the outbox: their rows are gone.
fn gone_by_key(
    committed: &[workloads::Committed],
    received: &HashSet<(u32, u64)>,
    remaining: &HashSet<(u32, u64)>,
) -> std::collections::HashMap<u32, u64> {
    let mut gone = std::collections::HashMap::new();
    for c in committed {
        let id = (c.key, c.seq);
        if !received.contains(&id) && !remaining.contains(&id) {
            *gone.entry(c.key).or_default() += 1;
        }
    }
    gone
}

/// Missing records by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Loss {
    /// Still in the outbox: the harvester never got them acknowledged.
    undelivered: u64,
    /// Gone from the outbox and explained by records the broker deleted unread.
    evicted: u64,
    /// Gone from the outbox, not quarantined and not explained by eviction: the broker
    /// acknowledged them without keeping them.
    broker_lost: u64,
}

/// Splits the missing records. Eviction explains a missing record only within its own
/// partition (the one its key was read from, else the default partitioner's), and only as many
/// as that partition's evicted offsets: an evicted offset's record is unknown, and it may have
/// been a duplicate, so this counts, it does not identify.
fn split_loss(
    committed: &[workloads::Committed],
    received: &std::collections::HashSet<(u32, u64)>,
    remaining: &std::collections::HashSet<(u32, u64)>,
    collected: &crate::receipts::Collected,
    partitions: i32,
    quarantined: u64,
) -> Loss {
    let slots = usize::try_from(partitions.max(1)).unwrap_or(1);
    let mut gone = vec![0u64; slots];
    let mut undelivered = 0;
    for c in committed {
        if received.contains(&(c.key, c.seq)) {
            continue;
        }
        if remaining.contains(&(c.key, c.seq)) {
            undelivered += 1;
            continue;
        }
        let p = collected
            .key_partitions
            .get(&c.key)
            .copied()
            .unwrap_or_else(|| {
                testkit::broker::limits::default_partition(
                    workloads::key_name(c.key).as_bytes(),
                    partitions,
                )
            });
        gone[usize::try_from(p).unwrap_or(0).min(slots - 1)] += 1;
    }
    let evicted: u64 = gone
        .iter()
        .enumerate()
        .map(|(p, g)| {
            let e = collected.partitions.get(p).map_or(0, |l| l.evicted);
            (*g).min(e)
        })
        .sum();
    let unexplained = gone.iter().sum::<u64>() - evicted;
    Loss {
        undelivered,
        evicted,
        broker_lost: unexplained.saturating_sub(quarantined),
    }
}

/// The counts a verdict weighs.
#[derive(Debug, Clone, Copy)]
struct Tally {
    /// Nothing reordered, rewound beyond what is allowed, unexpected, or unaccounted for.
    clean: bool,
    /// Records missing, and of those, forgiven (lost by a mock with injected Produce errors).
    lost: u64,
    forgiven: u64,
    /// Offsets the broker deleted before the verifier read them.
    evicted: u64,
    /// The harvesters kept acknowledgement logs: what they do not show acknowledged is
    /// theirs.
    logged: bool,
}

/// Passed, failed, or inconclusive: a run whose only fault is records the broker deleted
/// before the verifier read them proves nothing either way about the harvester.
fn verdict(
    tally: Tally,
    loss: &Loss,
    topic: &TopicSizing,
    embedded: bool,
    drained: &Drain,
) -> (Verdict, String) {
    let Tally {
        clean,
        lost,
        forgiven,
        evicted,
        logged,
    } = tally;
    if clean && lost <= forgiven {
        let note = if evicted > 0 {
            format!("passed; the broker deleted {evicted} records before the verifier read them, all of them delivered otherwise (duplicates)")
        } else {
            "passed".into()
        };
        return (Verdict::Passed, note);
    }
    if clean && loss.evicted > 0 && lost - loss.evicted <= forgiven {
        let (who, fix) = if embedded {
            (
                "the embedded broker",
                format!(
                    "give the scenario more partitions (this topic had {}; {}) or run against a real cluster with `--brokers`",
                    topic.partitions,
                    topic
                        .lag_tolerance
                        .map(|t| format!("the broker held {t} records of verifier lag"))
                        .unwrap_or_default()
                ),
            )
        } else {
            (
                "the cluster",
                "raise the topic's retention (retention.bytes, retention.ms) or let the verifier keep up".to_owned(),
            )
        };
        return (
            Verdict::Inconclusive,
            format!(
                "inconclusive: {who} evicted {evicted} records before the verifier read them, which explains all {} missing; {fix}",
                loss.evicted
            ),
        );
    }
    let mut why = Vec::new();
    if loss.undelivered > 0 {
        why.push(format!(
            "{} still in the outbox when the drain ended ({})",
            loss.undelivered,
            drained.ended_by.describe()
        ));
    }
    if loss.broker_lost > forgiven && logged {
        why.push(format!(
            "{} deleted from the outbox with no acknowledgement in the harvesters' logs (the harvester's loss; {forgiven} acknowledged and lost by the broker)",
            loss.broker_lost - forgiven
        ));
    } else if loss.broker_lost > 0 {
        why.push(format!(
            "{} acknowledged but not in the log",
            loss.broker_lost
        ));
    }
    if loss.evicted > 0 {
        why.push(format!("{} evicted by the broker unread", loss.evicted));
    }
    if !clean {
        why.push("reordered, rewound or unexpected records".into());
    }
    (Verdict::Failed, format!("failed: {}", why.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receipts::{Collected, PartitionLog};
    use std::collections::HashSet;

    fn committed(n: u64) -> Vec<workloads::Committed> {
        let now = Instant::now();
        (0..n)
            .map(|i| workloads::Committed {
                key: (i % 2) as u32,
                seq: i / 2,
                committed: now,
                intended: None,
            })
            .collect()
    }

    fn collected(evicted: [u64; 2]) -> Collected {
        let mut c = Collected::default();
        c.key_partitions.insert(0, 0);
        c.key_partitions.insert(1, 1);
        c.partitions = (0..2)
            .map(|p| PartitionLog {
                partition: p,
                evicted: evicted[p as usize],
                ..PartitionLog::default()
            })
            .collect();
        c
    }

    #[test]
    fn eviction_explains_missing_records_only_in_its_partition() {
        let all = committed(20);
        // Key 0 (partition 0) lost seqs 0..3, key 1 (partition 1) lost seq 0.
        let received: HashSet<(u32, u64)> = all
            .iter()
            .map(|c| (c.key, c.seq))
            .filter(|(k, s)| !((*k == 0 && *s < 3) || (*k == 1 && *s == 0)))
            .collect();
        let none = HashSet::new();
        // Partition 0 evicted 3, partition 1 none: key 1's missing record is a real loss.
        let l = split_loss(&all, &received, &none, &collected([3, 0]), 2, 0);
        assert_eq!(
            l,
            Loss {
                undelivered: 0,
                evicted: 3,
                broker_lost: 1
            }
        );
        // Eviction elsewhere does not explain it.
        let l = split_loss(&all, &received, &none, &collected([10, 0]), 2, 0);
        assert_eq!((l.evicted, l.broker_lost), (3, 1));
        // Rows still in the outbox are undelivered whatever was evicted.
        let remaining: HashSet<(u32, u64)> = [(1, 0)].into();
        let l = split_loss(&all, &received, &remaining, &collected([3, 5]), 2, 0);
        assert_eq!(
            l,
            Loss {
                undelivered: 1,
                evicted: 3,
                broker_lost: 0
            }
        );
    }

    fn tally(clean: bool, lost: u64, forgiven: u64, evicted: u64) -> Tally {
        Tally {
            clean,
            lost,
            forgiven,
            evicted,
            logged: false,
        }
    }

    /// A row deleted without an acknowledgement in the logs fails a broker-faults run, and the
    /// note says whose loss it is; one the logs show acknowledged is forgiven.
    #[test]
    fn a_loss_without_an_acknowledgement_is_the_harvesters() {
        let topic = TopicSizing::default();
        let d = Drain::default();
        let lost = Loss {
            broker_lost: 3,
            ..Loss::default()
        };
        let logged = |forgiven| Tally {
            logged: true,
            ..tally(true, 3, forgiven, 0)
        };
        let (v, note) = verdict(logged(2), &lost, &topic, true, &d);
        assert_eq!(v, Verdict::Failed);
        assert!(
            note.contains("1 deleted from the outbox with no acknowledgement"),
            "{note}"
        );
        assert_eq!(
            verdict(logged(3), &lost, &topic, true, &d).0,
            Verdict::Passed
        );
    }

    #[test]
    fn only_a_loss_wholly_explained_by_eviction_is_inconclusive() {
        let topic = TopicSizing {
            partitions: 8,
            ..Default::default()
        };
        let d = Drain::default();
        let evicted = Loss {
            evicted: 5,
            ..Loss::default()
        };
        let (v, note) = verdict(tally(true, 5, 0, 7), &evicted, &topic, true, &d);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(
            note.contains("evicted 7") && note.contains("--brokers"),
            "{note}"
        );
        // One more missing, not explained: failed.
        let mixed = Loss {
            broker_lost: 1,
            ..evicted
        };
        assert_eq!(
            verdict(tally(true, 6, 0, 7), &mixed, &topic, true, &d).0,
            Verdict::Failed
        );
        // Reordered as well: failed.
        assert_eq!(
            verdict(tally(false, 5, 0, 7), &evicted, &topic, true, &d).0,
            Verdict::Failed
        );
        // Nothing missing, some evicted (duplicates): passed.
        assert_eq!(
            verdict(tally(true, 0, 0, 3), &Loss::default(), &topic, true, &d).0,
            Verdict::Passed
        );
    }
}
