//! The capacity plan at the end of a capacity run: what one member sustains on this hardware
//! for the workload's shape (keys, skew, partitions, value size: the profile's, or what the
//! command line names), what a stated target rate needs, from the costs per record the run
//! measured, and how the rate moves with keys and partitions (the run's `shapes` sweep).
//!
//! Why: a planner asks how many harvesters, and how many cores for Postgres and the brokers, a
//! rate needs; the run measured every cost per record that answer is made of. The plan keeps
//! the two kinds of figure apart: what one member drained here, and what each process spent per
//! record, are measured; anything for the target rate assumes those costs per record hold at
//! that rate (scale-out by bucket was measured only up to 4 members on these 2 cores).

use std::fmt::Write as _;

use crate::plot::{line_chart, Extras, Series};
use crate::result::RunResult;

/// Share of each resource kept free: a member planned at 70 % of what it drained.
pub const HEADROOM: f64 = 0.3;

/// What the largest drain of the run measured.
#[derive(Debug, Clone, PartialEq)]
struct Costs {
    scenario: String,
    rows: u64,
    /// The drain's shape: its backlog (keys, skew, value size) and partitions.
    backlog: Option<crate::scenario::BacklogSpec>,
    partitions: i32,
    cores: usize,
    rate: f64,
    harvester_us: f64,
    postgres_us: Option<f64>,
    broker_us: Option<f64>,
    wal_bytes: Option<f64>,
}

fn costs(runs: &[RunResult]) -> Option<Costs> {
    let r = *crate::capacity::drains(runs).last()?;
    let n = r.records();
    if n == 0 {
        return None;
    }
    let us = |s: f64| s / n as f64 * 1e6;
    Some(Costs {
        scenario: r.scenario.clone(),
        rows: r.committed,
        backlog: r.backlog,
        partitions: r.topic.partitions,
        cores: r.cpu.cores.max(1),
        rate: r.drain_records_per_s?,
        harvester_us: us(r.cpu.harvester_cpu_seconds),
        postgres_us: r.cpu.postgres_cpu_seconds.map(us),
        broker_us: r.cpu.broker_cpu_seconds.map(us),
        wal_bytes: r.wal_bytes_per_record,
    })
}

/// Cores a process needs for `rate` records/s at `us` µs each, with the headroom kept free.
fn cores_for(rate: f64, us: f64) -> f64 {
    rate * us / 1e6 / (1.0 - HEADROOM)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "not measured".into(), f)
}

/// The Markdown "Capacity plan" section: empty without a drain to plan from.
pub fn section(runs: &[RunResult], target: Option<f64>) -> String {
    let Some(c) = costs(runs) else {
        return String::new();
    };
    let mut s = String::new();
    let _ = write!(
        s,
        "\n## Capacity plan (from {}, {} rows; shape: {})\n\n**Measured** in this run, one member on {} cores \
         shared with Postgres and the broker, on a warm topic of {} partitions: drain {:.0} rec/s; CPU per record: \
         harvester {:.1} µs, Postgres {}, broker {}; WAL {}.\n\n",
        c.scenario,
        c.rows,
        shape_of(&c),
        c.cores,
        c.partitions,
        c.rate,
        c.harvester_us,
        opt(c.postgres_us, |v| format!("{v:.1} µs")),
        opt(c.broker_us, |v| format!("{v:.1} µs")),
        opt(c.wal_bytes, |v| format!("{v:.0} B/rec")),
    );
    let all_us = c.harvester_us + c.postgres_us.unwrap_or(0.0) + c.broker_us.unwrap_or(0.0);
    let cpu_rate = c.cores as f64 * 1e6 / all_us.max(1e-9);
    let (member, binds) = if c.rate < cpu_rate * (1.0 - HEADROOM) {
        (
            c.rate * (1.0 - HEADROOM),
            format!(
                "round trips, not CPU: the three processes together would saturate the {} cores \
                 at {cpu_rate:.0} rec/s, and the member drained {:.0}, {:.2} of that",
                c.cores,
                c.rate,
                c.rate / cpu_rate.max(1e-9)
            ),
        )
    } else {
        (
            cpu_rate * (1.0 - HEADROOM),
            format!(
                "this machine's CPU: the three processes together saturate the {} cores at \
                 {cpu_rate:.0} rec/s ({}); the member drained {:.2} of that",
                c.cores,
                heaviest(&c),
                c.rate / cpu_rate.max(1e-9)
            ),
        )
    };
    let _ = writeln!(
        s,
        "**One member on this hardware**, with {:.0} % headroom: {member:.0} rec/s. What binds it: \
         {binds}.\n",
        HEADROOM * 100.0
    );
    s.push_str(&crate::plan_shapes::section(runs, &c.backlog, c.partitions));
    if let Some(t) = target {
        s.push_str(&target_plan(&c, member, t));
    }
    s
}

/// `10000 keys (uniform), 256 partitions, 200 B values`.
fn shape_of(c: &Costs) -> String {
    match c.backlog {
        Some(b) => format!(
            "{} keys ({}), {} partitions, {} B values",
            b.keys, b.key_skew, c.partitions, b.value_bytes
        ),
        None => format!("{} partitions", c.partitions),
    }
}

/// The process with the largest cost per record, and its share of the sum.
fn heaviest(c: &Costs) -> String {
    let all = [
        ("harvester", Some(c.harvester_us)),
        ("Postgres", c.postgres_us),
        ("broker", c.broker_us),
    ];
    let sum: f64 = all.iter().filter_map(|(_, v)| *v).sum();
    all.iter()
        .filter_map(|(n, v)| Some((*n, (*v)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or_else(String::new, |(n, v)| {
            format!(
                "{n} the heaviest, {v:.1} µs/rec, {:.0} % of it",
                v / sum.max(1e-9) * 100.0
            )
        })
}

/// The extrapolated needs of `target` records/s, `member` records/s a member (the one-member
/// figure: one with cores of its own may do more, which this run did not measure).
fn target_plan(c: &Costs, member: f64, target: f64) -> String {
    let members = (target / member.max(1e-9)).ceil();
    let harvester = cores_for(target, c.harvester_us);
    let pg = c.postgres_us.map(|us| cores_for(target, us));
    let broker = c.broker_us.map(|us| cores_for(target, us));
    let mut s = format!(
        "**Target {target:.0} rec/s (extrapolated**: each cost per record held at the target \
         rate, {:.0} % headroom):\n\n\
         | resource | needs | basis |\n|---|---:|---|\n\
         | harvester members | {members:.0} | {member:.0} rec/s each (one member, above), sharing the outbox by bucket |\n\
         | harvester cores, all members | {harvester:.1} | {:.1} µs/rec |\n",
        HEADROOM * 100.0,
        c.harvester_us,
    );
    let _ = writeln!(
        s,
        "| Postgres cores, one primary | {} | {} |",
        opt(pg, |v| format!("{v:.1}")),
        opt(c.postgres_us, |v| format!("{v:.1} µs/rec"))
    );
    let _ = writeln!(
        s,
        "| broker cores, whole cluster (replication 1 here) | {} | {} |",
        opt(broker, |v| format!("{v:.1}")),
        opt(c.broker_us, |v| format!("{v:.1} µs/rec"))
    );
    let _ = writeln!(
        s,
        "| Postgres WAL written | {} | {} |",
        opt(c.wal_bytes, |w| format!("{:.1} MB/s", target * w / 1e6)),
        opt(c.wal_bytes, |w| format!("{w:.0} B/rec"))
    );
    let first = binds_first(c, pg, broker);
    let _ = write!(
        s,
        "\nBinds first: {first}. Partitions and keys are not extrapolated: this run used {} \
         partitions, and the grid above says what other counts measured here; replicas \
         (replication 3) add the followers' fetches to the broker cores above.\n",
        c.partitions
    );
    s
}

/// The resource that runs out first as the rate grows: Postgres, a single primary, when it
/// needs more cores than this machine has; else the one needing the most cores.
fn binds_first(c: &Costs, pg: Option<f64>, broker: Option<f64>) -> String {
    let cores = c.cores as f64;
    match (pg, broker) {
        (Some(p), _) if p > cores => format!(
            "Postgres, the one resource members cannot spread: {p:.1} cores on one primary, \
             {:.1}x this machine's {cores:.0}",
            p / cores
        ),
        (Some(p), Some(b)) if b >= p => {
            format!("the brokers ({b:.1} cores over the cluster; Postgres {p:.1} on one primary)")
        }
        (Some(p), _) => format!("Postgres ({p:.1} cores on one primary)"),
        _ => "not known: Postgres's CPU was not measured (a remote database)".into(),
    }
}

/// Cores each process needs against the rate, from 0 to the target (or twice the one-member
/// rate without one), beside this machine's cores: where each line crosses the machine's is
/// where that process alone would fill it. `None` without a drain to plan from.
pub fn cores_by_rate(runs: &[RunResult], target: Option<f64>) -> Option<Vec<Series>> {
    Some(lines_of(&costs(runs)?, target))
}

fn lines_of(c: &Costs, target: Option<f64>) -> Vec<Series> {
    let top = target.unwrap_or(2.0 * c.rate).max(c.rate);
    let line = |name: &str, us: f64| Series {
        name: name.to_owned(),
        points: (0..=10)
            .map(|i| {
                let rate = top * f64::from(i) / 10.0;
                (rate, cores_for(rate, us))
            })
            .collect(),
    };
    let mut series = vec![line("harvesters", c.harvester_us)];
    series.extend(c.postgres_us.map(|us| line("Postgres (one primary)", us)));
    series.extend(c.broker_us.map(|us| line("brokers", us)));
    series.push(Series {
        name: format!("this machine ({} cores)", c.cores),
        points: vec![(0.0, c.cores as f64), (top, c.cores as f64)],
    });
    series
}

/// The plot of [`cores_by_rate`], with the measured rate marked.
pub fn plot(runs: &[RunResult], target: Option<f64>) -> Option<String> {
    let c = costs(runs)?;
    let series = lines_of(&c, target);
    let mut markers = vec![(format!("measured {:.0} rec/s", c.rate), c.rate)];
    markers.extend(target.map(|t| (format!("target {t:.0}"), t)));
    Some(line_chart(
        &format!(
            "Cores needed by rate, {:.0} % headroom (from {}; extrapolated past the measured rate)",
            HEADROOM * 100.0,
            c.scenario
        ),
        "records/s",
        "cores",
        &series,
        &Extras {
            markers,
            ..Default::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(rate: f64) -> Costs {
        Costs {
            scenario: "drain-10m".into(),
            rows: 10_000_000,
            backlog: None,
            partitions: 256,
            cores: 2,
            rate,
            harvester_us: 86.0,
            postgres_us: Some(72.0),
            broker_us: Some(149.0),
            wal_bytes: Some(947.0),
        }
    }

    #[test]
    fn a_target_needs_members_cores_and_wal_in_proportion() {
        let c = costs(4233.0);
        let plan = target_plan(&c, c.rate * (1.0 - HEADROOM), 50_000.0);
        // 50,000 / (4,233 x 0.7) = 16.9 -> 17 members; Postgres 50,000 x 72 µs / 0.7 = 5.1 cores.
        assert!(plan.contains("| harvester members | 17 |"), "{plan}");
        assert!(
            plan.contains("| Postgres cores, one primary | 5.1 |"),
            "{plan}"
        );
        assert!(
            plan.contains("| Postgres WAL written | 47.4 MB/s |"),
            "{plan}"
        );
        assert!(
            plan.contains("Binds first: Postgres, the one resource"),
            "{plan}"
        );
    }

    #[test]
    fn cores_grow_in_proportion_to_the_rate() {
        let series = lines_of(&costs(4233.0), Some(50_000.0));
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "harvesters",
                "Postgres (one primary)",
                "brokers",
                "this machine (2 cores)"
            ]
        );
        // At 50,000 rec/s, 72 µs of Postgres per record with 30 % headroom: 5.14 cores.
        let pg = &series[1].points;
        assert_eq!(pg.last().unwrap().0, 50_000.0);
        assert!((pg[10].1 - 50_000.0 * 72e-6 / 0.7).abs() < 1e-9);
        assert!((pg[5].1 * 2.0 - pg[10].1).abs() < 1e-9);
        assert_eq!(series[3].points, [(0.0, 2.0), (50_000.0, 2.0)]);
        // Without a target: up to twice the measured rate.
        let own = lines_of(&costs(4233.0), None);
        assert_eq!(own[0].points.last().unwrap().0, 8466.0);
    }

    #[test]
    fn the_binding_resource_follows_the_costs() {
        let c = costs(4233.0);
        assert!(binds_first(&c, Some(1.5), Some(1.9)).starts_with("the brokers"));
        assert!(binds_first(&c, Some(1.5), Some(1.0)).starts_with("Postgres (1.5"));
        assert!(binds_first(&c, None, Some(1.0)).starts_with("not known"));
    }
}
