//! The "Rolling restart" section: per step of a rolling restart, the buckets that moved and
//! how long they were without an owner (figures from `crate::rolling`).

use std::fmt::Write as _;

use crate::result::RunResult;
use crate::rolling::RollingRestart;

/// The Markdown "Rolling restart" section: empty unless a run restarted its members.
pub(super) fn section(runs: &[RunResult]) -> String {
    let rolled: Vec<(&RunResult, &RollingRestart)> = runs
        .iter()
        .filter_map(|r| Some((r, r.rolling.as_ref()?)))
        .collect();
    if rolled.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Rolling restart: buckets moved per step\n\n\
         | scenario | step | new member's first bucket s | new owned at stop | moved | reassigned | unowned after | stall p50 ms | stall max ms | step s |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (r, roll) in &rolled {
        for (i, st) in roll.steps.iter().enumerate() {
            let _ = writeln!(
                s,
                "| {} | {}. start {}, stop {}{} | {} | {} | {} | {} | {} | {:.0} | {:.0} | {:.1} |",
                r.scenario,
                i + 1,
                st.new,
                st.old,
                if st.settled { "" } else { " (did not settle)" },
                st.first_owned_s
                    .map_or_else(|| "-".into(), |t| format!("{:.1}", t - st.started_s)),
                st.new_owned_at_stop,
                st.moved,
                st.reassigned,
                st.unowned_at_end,
                st.stall_p50_ms,
                st.stall_max_ms,
                st.settled_s - st.started_s
            );
        }
        let _ = writeln!(
            s,
            "| {} | **all {}** | | | **{}** | {} | | {:.0} | {:.0} | |",
            r.scenario,
            roll.steps.len(),
            roll.moved,
            roll.steps.iter().map(|s| s.reassigned).sum::<usize>(),
            roll.stall_p50_ms,
            roll.stall_max_ms
        );
    }
    for (r, roll) in &rolled {
        let _ = writeln!(
            s,
            "\n{}: B = {}, {} owner-map samples every {:.0} ms (median), settle window {:.0} ms, join wait {:.0} ms; {} (sample, bucket) pairs owned by two members at once; verified {} lost, {} reordered, {} duplicates; longest pause in deliveries from the first step on {}.",
            r.scenario,
            roll.buckets,
            roll.samples,
            roll.sample_interval_ms,
            roll.settle_ms,
            roll.join_wait_ms,
            roll.double_owned,
            r.correctness.lost,
            r.correctness.reordered,
            r.correctness.duplicates,
            r.stall_ms
                .map_or_else(|| "-".into(), |ms| format!("{ms:.0} ms")),
        );
    }
    s.push_str(
        "\nEach step starts a new member, waits until it owns a bucket (or the join wait passed: a rebalance delay holds its rank back) and the owner maps (every live member's `/buckets`, sampled every ~50 ms) settled (every bucket owned, nothing changed for the settle window), SIGTERMs an original member, waits for it to exit and for the maps to settle again. \
         `moved`: buckets whose owner set changed at any sample of the step (a bucket revoked and handed back counts); `reassigned`: those owned by someone else at the end. \
         `stall`: per moved bucket, from the last sample in which an owner held it to the first in which its next owner did (0 when the two overlapped in a sample; otherwise at most one sampling interval longer than the real gap). \
         `new owned at stop`: the new member's buckets when the old one was stopped (0 while a rebalance delay holds its rank back).\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::rolling::{Sample, Step};

    fn at(ms: u64, answers: &[(&str, &[u16])]) -> Sample {
        crate::rolling::sample_at(ms, answers)
    }

    #[test]
    fn the_section_shows_each_step_and_the_total() {
        let samples = [at(0, &[("a", &[0])]), at(50, &[]), at(120, &[("b", &[0])])];
        let mut step = Step {
            old: "reaper-0".into(),
            new: "reaper-3".into(),
            settled: true,
            settled_s: 4.0,
            started_s: 1.5,
            first_owned_s: Some(2.5),
            ..Step::default()
        };
        step.measure(&samples, 1);
        let run = RunResult {
            scenario: "rolling-restart-rink".into(),
            rolling: Some(RollingRestart::new(
                1,
                (Duration::from_secs(1), Duration::ZERO),
                &samples,
                vec![step],
            )),
            ..RunResult::default()
        };
        let md = section(std::slice::from_ref(&run));
        assert!(
            md.contains("| rolling-restart-rink | 1. start reaper-3, stop reaper-0 | 1.0 | 0 | 1 | 1 | 0 | 120 | 120 | 2.5 |"),
            "{md}"
        );
        assert!(md.contains("| **all 1** | | | **1** |"), "{md}");
        assert!(section(&[RunResult::default()]).is_empty());
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["rolling"]["steps"][0]["moved"], 1);
    }
}
