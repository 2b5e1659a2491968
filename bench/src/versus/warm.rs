//! The private broker's warm-up before anything is compared: drains of the `drain` workload by
//! our reaper (the same rows, table shape and broker as the cases) until the broker's CPU per
//! record stops falling ([`crate::warm::BROKER_RULE`]). The broker is a JVM started for the
//! run: measured cold, whichever relay ran first would pay for its warm-up (issue 52: 28 against
//! 4-5 µs of broker CPU per record on Kafka 4.1), and the ratio between the relays would carry
//! the order they ran in.

use crate::result::{Round, Warming};
use crate::warm::load::{record, round_line};
use crate::warm::BROKER_RULE;
use crate::BenchError;

use super::case::{self, Ground};
use super::{Relay, Workload, WORKLOADS};

/// Drains until the broker's cost settles; every drain must have emptied the table.
pub(super) async fn warm(ground: &Ground<'_>, scale: f64) -> Result<Warming, BenchError> {
    let w = &WORKLOADS[0];
    let workload = Workload {
        name: "warm-up",
        rows: ((w.rows as f64 * scale.min(1.0)) as u64).max(10_000) / 2,
        ..w.clone()
    };
    let started = std::time::Instant::now();
    let mut warming = Warming {
        topic: format!("a topic of {} partitions per drain", workload.partitions),
        partitions: workload.partitions,
        ..Warming::default()
    };
    loop {
        let o = case::run(ground, &workload, Relay::Ours).await;
        if !o.drained {
            return Err(BenchError::Run(format!(
                "a warm-up drain of the private broker did not empty the table ({} rows left)",
                o.left
            )));
        }
        let round = Round {
            records: o.rows,
            produce_seconds: o.drain_s,
            read_seconds: 0.0,
            produce_broker_us: o.broker_cpu_s.map(|s| s * 1e6 / o.rows.max(1) as f64),
            read_broker_us: None,
        };
        eprintln!(
            "bench versus: warm-up {}",
            round_line(warming.rounds.len() + 1, &round)
        );
        if record(&mut warming, round, &BROKER_RULE, started) {
            break;
        }
    }
    Ok(warming)
}
