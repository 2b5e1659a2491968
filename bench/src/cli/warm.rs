//! The broker's warm-up, by the workload itself: drains of the `warm-up` scenario (the quick
//! drain's shape, half its backlog, verified after it) until the broker's CPU per record
//! delivered stops falling, then the run's warm topics ([`crate::warm`]).
//!
//! Why drains and not a producer loop: a producer filling large batches warmed the JVM's
//! per-byte paths in four rounds (16 -> 5 µs/rec) while the harvester's first drains after it
//! still cost the broker 16-24 µs/rec, falling to 7-9 only after several more; the broker's
//! per-request and per-batch paths are what an outbox relay's traffic (one record per key in
//! flight, many small batches) runs through, and only that traffic warms them.

use testkit::verify::ClientSettings;

use super::options::selected;
use super::RunOptions;
use crate::result::{Need, Round, Warming};
use crate::run::{Bench, Variant};
use crate::scenario::{Listener, Scenario, ScenarioFile};
use crate::warm::load::{record, round_line};
use crate::warm::{TopicPool, BROKER_RULE, TOPIC_RULE, VALUE_BYTES};
use crate::BenchError;

/// The scenario whose drains warm the broker (a user's file may reshape it).
pub const WARM_UP: &str = "warm-up";

/// Warms the run's broker and makes its warm topics (into `bench.topics`), unless the broker
/// is the embedded one or the command asked for a cold broker (`--cold`): what it did, for the
/// report, or `None`.
pub(super) async fn warm(
    o: &RunOptions,
    file: &ScenarioFile,
    bench: &mut Bench,
) -> Result<Option<crate::result::WarmUp>, BenchError> {
    if o.cold || bench.broker.embedded().is_some() {
        return Ok(None);
    }
    quiet_disk();
    let selected = selected(o, file);
    let warm_up = warm_up_scenario(file, o.scale)?;
    let mut needs = needs(o, file, &selected, &bench.extra);
    // The warm-up's drains go to a warm topic too: a topic deleted after each drain would be
    // deleted from the disk a minute later (`file.delete.delay.ms`), in the middle of a later
    // drain, and charged to it.
    needs.push(Need {
        partitions: warm_up.partitions,
        transactional: false,
    });
    needs.sort();
    needs.dedup();
    // The topics first (each by producer rounds), then the broker by drains into them.
    let pids = crate::run::listeners::broker_pids(bench.broker.bootstrap());
    let cpu = move || crate::run::cpu::kafka_cpu_seconds(&pids);
    bench.topics =
        TopicPool::prepare(&bench.broker, &needs, VALUE_BYTES, &TOPIC_RULE, &cpu).await?;
    let mut warm = crate::result::WarmUp {
        topics: bench.topics.topics().to_vec(),
        ..Default::default()
    };
    for listener in listeners(file, &selected, bench) {
        eprintln!(
            "== warm-up: the broker, by drains through its {} listener",
            listener.name()
        );
        let scenario = Scenario {
            listener,
            ..warm_up.clone()
        };
        let w = warm_broker(bench, &scenario).await?;
        eprintln!("   {}", w.describe());
        warm.broker.push((listener.name().to_owned(), w));
    }
    Ok(Some(warm))
}

/// Writes what the page cache holds to the disk before anything is warmed or measured, and says
/// how much that was: a fresh clone's release build leaves gigabytes to write, which the kernel
/// would otherwise write back under the first scenarios (suspected, not shown, in a first run
/// whose Postgres purges stalled: acknowledged -> purged p99 500 ms against 50 in the next).
fn quiet_disk() {
    let dirty = || {
        std::fs::read_to_string("/proc/meminfo").ok().map(|m| {
            m.lines()
                .filter(|l| l.starts_with("Dirty:") || l.starts_with("Writeback:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
                / 1024
        })
    };
    let before = dirty();
    let t = std::time::Instant::now();
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    eprintln!(
        "== the disk: {} MiB dirty, written back in {:.1} s{}",
        before.map_or_else(|| "?".into(), |m| m.to_string()),
        t.elapsed().as_secs_f64(),
        if synced { "" } else { " (`sync` failed)" }
    );
}

/// The [`WARM_UP`] scenario at the run's scale.
fn warm_up_scenario(file: &ScenarioFile, scale: f64) -> Result<Scenario, BenchError> {
    Ok(file
        .scenario
        .get(WARM_UP)
        .cloned()
        .ok_or_else(|| super::options::bad(format!("no scenario {WARM_UP}")))?
        .scaled(scale))
}

/// Drains of `scenario` (the [`WARM_UP`] scenario through one listener) until the broker's CPU per record stops falling by
/// [`BROKER_RULE`] (where the broker is not on this machine: the drain's wall time per record).
async fn warm_broker(bench: &Bench, scenario: &Scenario) -> Result<Warming, BenchError> {
    let started = std::time::Instant::now();
    let mut w = Warming {
        topic: format!("a topic of {} partitions per drain", scenario.partitions),
        partitions: scenario.partitions,
        ..Warming::default()
    };
    loop {
        let r = crate::run::run(bench, WARM_UP, scenario, Variant::default()).await?;
        if !r.passed {
            return Err(BenchError::Run(format!(
                "a warm-up drain did not verify ({}): {}",
                r.verdict, r.verdict_note
            )));
        }
        let records = r.records().max(1);
        let per_record = |s: f64| s * 1e6 / records as f64;
        let drain = r.drain.unwrap_or_default();
        let round = Round {
            records,
            produce_seconds: r.cpu.wall_seconds,
            read_seconds: drain.verified_after_s.unwrap_or(0.0),
            produce_broker_us: r.cpu.broker_cpu_seconds.map(per_record),
            read_broker_us: None,
        };
        eprintln!("   {}", round_line(w.rounds.len() + 1, &round));
        if record(&mut w, round, &BROKER_RULE, started) {
            break;
        }
    }
    Ok(w)
}

/// The warm topics the selected scenarios need on the run's broker (each variant's partitions,
/// idempotent or transactional), and the ceilings' (the drain's partitions).
/// `extra` are the command line's settings.
fn needs(
    o: &RunOptions,
    file: &ScenarioFile,
    selected: &[String],
    extra: &[(String, String)],
) -> Vec<Need> {
    let mut needs = std::collections::BTreeSet::new();
    if o.ceilings {
        let drain = file.scenario.get("drain").map_or(8, |d| d.partitions);
        needs.insert(Need {
            partitions: o.shape.partitions.unwrap_or(drain),
            transactional: false,
        });
    }
    for name in selected {
        let Some(s) = file.scenario.get(name) else {
            continue;
        };
        let s = s.clone().shaped(&o.shape);
        if !s.on_run_broker() {
            continue;
        }
        let transactional = s.transactional(&file.base, extra);
        for v in Variant::all(&s) {
            needs.insert(Need {
                partitions: v.partitions.unwrap_or(s.partitions),
                transactional,
            });
        }
    }
    needs.into_iter().collect()
}

/// The listeners the broker is warmed through: the plaintext one, and the SASL_SSL one when a
/// selected scenario uses it (and the broker has it).
fn listeners(file: &ScenarioFile, selected: &[String], bench: &Bench) -> Vec<Listener> {
    let secured = selected.iter().any(|n| {
        file.scenario
            .get(n)
            .is_some_and(|s| s.listener == Listener::SaslSsl)
    });
    let usable: Result<&ClientSettings, _> = bench.sasl_ssl.as_ref();
    if secured && usable.is_ok() {
        vec![Listener::Plaintext, Listener::SaslSsl]
    } else {
        vec![Listener::Plaintext]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(ceilings: bool, shape: crate::scenario::Shape) -> RunOptions {
        RunOptions {
            profile: String::new(),
            scenarios: Vec::new(),
            file: None,
            set: Vec::new(),
            scale: 1.0,
            brokers: None,
            embedded: false,
            database_url: None,
            reaper: None,
            out: std::path::PathBuf::new(),
            ceilings,
            private_pg_port: 0,
            autovacuum: crate::pg::AutovacuumMode::AsFound,
            target_rate: None,
            shape,
            cold: false,
        }
    }

    fn need(partitions: i32, transactional: bool) -> Need {
        Need {
            partitions,
            transactional,
        }
    }

    #[test]
    fn a_warm_topic_per_shape_the_selected_scenarios_publish_to_on_the_run_s_broker() {
        let f = ScenarioFile::builtin();
        let names = |p: &str| f.profile(p).unwrap();
        let plain = options(false, Default::default());
        assert_eq!(needs(&plain, &f, &names("quick"), &[]), [need(8, false)]);
        assert_eq!(
            needs(&plain, &f, &names("shapes"), &[]),
            [need(8, false), need(64, false), need(256, false)]
        );
        // Transactional scenarios get topics of their own.
        assert_eq!(
            needs(&plain, &f, &names("transactional"), &[]),
            [need(8, false), need(8, true)]
        );
        // The command line's publishing mode counts; private clusters and the mock need none.
        let txn = [("publish.mode".to_owned(), "transactional".to_owned())];
        assert_eq!(needs(&plain, &f, &["drain".into()], &txn), [need(8, true)]);
        assert!(needs(&plain, &f, &names("cluster-faults"), &[]).is_empty());
        assert!(needs(&plain, &f, &["broker-faults".into()], &[]).is_empty());
        // The ceilings' topic, in the shape the command line names.
        let shaped = options(
            true,
            crate::scenario::Shape {
                partitions: Some(32),
                ..Default::default()
            },
        );
        assert_eq!(
            needs(&shaped, &f, &["drain".into()], &[]),
            [need(32, false)]
        );
    }
}
