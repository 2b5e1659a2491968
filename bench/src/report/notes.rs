//! The notes under the tables: inconclusive runs, runs that fell behind and failed runs in a
//! sentence each, failovers' timings, the plots, and the legend that says how every column is
//! measured.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::result::{RunResult, Verdict, KEEP_UP_SHARE};

/// Each inconclusive run's verdict in bold.
pub(super) fn inconclusive(runs: &[RunResult]) -> String {
    let mut s = String::new();
    for r in runs.iter().filter(|r| r.verdict == Verdict::Inconclusive) {
        let _ = writeln!(s, "\n**{} {}**", r.scenario, r.verdict_note);
    }
    s
}

/// Each open-loop run that fell behind (its deliveries or its writers short), in bold with its
/// figures.
pub(super) fn fell_behind(runs: &[RunResult]) -> String {
    let mut s = String::new();
    for r in runs {
        let Some(p) = r.pace else { continue };
        if p.fell_behind() {
            let _ = writeln!(s, "\n**{} {} ({})**", r.label(), p.describe(), r.verdict);
        }
    }
    s
}

/// Each failover's timings.
pub(super) fn failovers(runs: &[RunResult]) -> String {
    let mut s = String::new();
    for r in runs.iter().filter(|r| r.failover.is_some()) {
        let f = r.failover.unwrap_or_default();
        let _ = writeln!(
            s,
            "\n{}: fault -> new leader acquired {:.0} ms; fault -> its first publish {:.0} ms; publish gap {:.0} ms.",
            r.scenario, f.fault_to_acquired_ms, f.fault_to_first_publish_ms, f.gap_ms
        );
        if let Some(n) = r.zombie_in_flight {
            let _ = writeln!(
                s,
                "{}: the stalled leader had {n} records in flight at the freeze.",
                r.scenario
            );
        }
    }
    s
}

/// Each failed run's verdict in bold, with every count that explains it.
pub(super) fn failures(runs: &[RunResult]) -> String {
    let mut s = String::new();
    for r in runs
        .iter()
        .filter(|r| !r.passed && r.verdict != Verdict::Inconclusive)
    {
        let _ = writeln!(
            s,
            "\n**{} {}**: {} (undelivered, still in the outbox: {}; acknowledged but not in the log: {}; evicted by the broker before the verifier read them: {}, explaining {} missing; quarantined: {} {:?}; harvester acks: {}; records in the log: {})",
            r.scenario, r.verdict_note, r.problems, r.undelivered, r.broker_lost, r.broker_evicted, r.lost_to_eviction, r.quarantined, r.quarantine_reasons, r.harvester_acks, r.log_records
        );
    }
    s
}

/// Links to the plots, when there are any.
pub(super) fn plots(plots: &[PathBuf]) -> String {
    let mut s = String::new();
    if !plots.is_empty() {
        let _ = writeln!(s, "\n## Plots\n");
        for p in plots {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let _ = writeln!(s, "- [{name}]({name})");
        }
    }
    s
}

/// How every column is measured.
pub(super) fn legend() -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nLatency is commit -> consumer receipt on one clock (open loop: from the transaction's intended start, coordinated-omission aware). \
         `drain rec/s`: a backlog's rows over the time from the first purge (the backlog's lowest id moved, probed every 10 ms) to the outbox empty (probed every 20 ms near the end), as `bench versus` times both relays; the term's start-up before the first purge is given in the drain's line, not in the rate. `x lower ceiling` divides drain throughput by the lower of the DB-only and producer-only ceilings measured in this run; `x delete-only` by the delete-only ceiling (batched DELETE by id alone, the database's best case for any relay); `x Kafka producer` by Kafka's own ProducerPerformance on the same broker (a real cluster only: what Kafka's reference producer gets from this broker with the harvester's producer settings; a reference, not a bound: on a small machine the Java client can fall below the librdkafka producer-only ceiling). \
         `lost (n by broker)`: n lost records' rows were deleted, which the harvester does only after the broker acknowledged them, and the log never held them: the broker dropped them (forgiven only where Produce errors are injected into the mock, and only as many as the harvesters' acknowledgement logs, `audit.ack_log`, show acknowledged at offsets the verifier never read; any other is a row deleted without an acknowledgement, the harvester's loss, and fails the run); `undelivered`: rows still in the outbox when the drain ended. \
         `evicted`: records the broker deleted before the verifier read them (the embedded broker keeps 5 MiB per partition; a real one, its retention), not counted in `lost`; a run whose only missing records are evicted ones is *inconclusive*, neither passed nor failed. \
         `broker busy`: share of the measured part the embedded broker's mock-cluster thread (it serves every request on that one thread) was on a CPU or runnable waiting for one; `bound by`: broker when that thread was at least 90 % busy, else database or harvester by the larger share of the machine's cores it used if at least half, else none (round trips or the offered load). `reord (n rewound, ≤ m allowed)`: n steps back in a key's deliveries (an older record after a newer one); allowed only in failover-zombie, at most m: the records the stalled leader had in flight, and none at all in transactional mode on a real broker (the successor fences the zombie). \
         `failover gap / stall ms`: the gap in deliveries around a new leader's start, or the longest pause in deliveries from a fault on; `(recovered s)`: from the fault's start until the last record it delayed arrived (late: more than twice the p99 before the fault from commit to receipt, at least 1 s). \
         Delivered rec/s counts first deliveries while writers wrote (written = the writers' commit rate, target = the open-loop rate). \
         A verdict has two parts: `correctness` (lost, reordered, rewinds beyond what is allowed, unexpected records; the exit code fails on it) and `keeping up` (open-loop runs only: kept up when delivered rec/s reached {KEEP_UP_SHARE} of written rec/s, else *fell behind* with the share; a drain or closed-loop writers have no target rate, n/a). \
         WAL and transactions per record include the writers' own."
    );
    s
}
