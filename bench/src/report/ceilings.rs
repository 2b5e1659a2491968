//! The "Ceilings (same run)" section: the machine's own limits measured in the run, which the
//! scenarios table reads the harvester's figures against.

use std::fmt::Write as _;

use super::opt;
use crate::ceiling::Ceiling;
use crate::result::{Ceilings, Provenance};

/// The ceilings table: a row per ceiling measured.
pub(super) fn section(p: &Provenance, ceilings: &Ceilings) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n## Ceilings (same run)\n");
    if !ceilings.any() {
        let _ = writeln!(
            s,
            "Not measured (the run was given `--no-ceilings`): the scenarios' `x lower ceiling`, `x delete-only` and `x Kafka producer` columns are empty."
        );
        return s;
    }
    let _ = writeln!(s, "| ceiling | records | records/s |\n|---|---:|---:|");
    let store = if p.mariadb.is_some() {
        "MariaDB store, "
    } else {
        ""
    };
    row(
        &mut s,
        &format!(
            "DB-only mark+purge, concurrently ({store}best of mark batch {}: {})",
            join(&crate::ceiling::MARK_BATCHES),
            ceilings.batch
        ),
        ceilings.db_mark_purge,
    );
    if let Some(d) = ceilings.delete_only {
        row(
            &mut s,
            &format!(
                "DB-only batched DELETE alone ({store}best of {} ids x {} connections: {} x {})",
                join(&crate::ceiling::delete_only::BATCHES),
                join(&crate::ceiling::delete_only::CONNECTIONS),
                d.batch,
                d.connections
            ),
            Some(d.best),
        );
    }
    row(&mut s, "producer-only (idempotent)", ceilings.producer);
    s.push_str(&kafka_producer_row(p, ceilings));
    row(
        &mut s,
        "writers (closed loop, no harvester)",
        ceilings.writers,
    );
    s
}

/// A ceiling's row, when it was measured.
fn row(s: &mut String, name: &str, c: Option<Ceiling>) {
    if let Some(c) = c {
        let _ = writeln!(s, "| {name} | {} | {:.0} |", c.records, c.per_second);
    }
}

/// The ceilings table's row for Kafka's own ProducerPerformance: measured (a real cluster), not
/// measured (a real cluster where the tool failed, or the ceilings were skipped), or nothing
/// (the mock).
fn kafka_producer_row(p: &Provenance, c: &Ceilings) -> String {
    match c.kafka_producer {
        Some(k) => format!(
            "| producer-only, Kafka's own ProducerPerformance (Java client; {}; {} B values without keys, {} partitions; avg latency {:.0} ms, p99 {} ms): Kafka's reference producer on this broker | {} | {:.0} |\n",
            crate::ceiling::kafka_perf::PRODUCER_PROPS.join(", "),
            k.record_bytes,
            k.partitions,
            k.avg_latency_ms,
            opt(k.p99_latency_ms, 0),
            k.ceiling.records,
            k.ceiling.per_second
        ),
        None if p.broker_facts.is_cluster() && c.producer.is_some() => {
            "| producer-only, Kafka's own ProducerPerformance: not measured (the run's stderr says why) | - | - |\n".to_owned()
        }
        None => String::new(),
    }
}

/// `100/1000`.
fn join(values: &[usize]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("/")
}
