//! The run's ceilings: the database's and the producer's best alone, Kafka's own producer and
//! the writers, measured on the run's ground before any scenario.

use std::time::Duration;

use workloads::Backend;

use crate::ground::{DataTopic, Ground};
use crate::result::Ceilings;
use crate::run::Bench;
use crate::BenchError;

/// The mark batch the harvester drains a backlog with: `limits.mark_query_records` from the
/// settings, else the largest `"auto"` grows to.
pub(super) fn effective_mark_batch(bench: &Bench) -> usize {
    bench
        .base
        .settings
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .chain(bench.extra.iter().cloned())
        .filter(|(k, _)| k == "limits.mark_query_records")
        .map(|(_, v)| v.trim_matches('"').parse::<usize>().ok())
        .next_back()
        .flatten()
        .unwrap_or(harvester::config::AUTO_BATCH_MAX)
}

/// Value bytes of the ceilings' records: the drain scenario's.
const CEILING_VALUE_BYTES: usize = 200;

pub(super) async fn measure_ceilings(
    bench: &Bench,
    scale: f64,
    partitions: i32,
) -> Result<Ceilings, BenchError> {
    let need = crate::result::Need {
        partitions,
        transactional: false,
    };
    let data = match bench.topics.get(need) {
        Some(warm) => DataTopic::Shared {
            name: warm.name.clone(),
            partitions,
        },
        None => DataTopic::Own { partitions },
    };
    let ground = Ground::new(
        &bench.database_url,
        &bench.broker,
        data,
        8,
        harvester::store::OutboxMode::MarkPurge,
    )
    .await?;
    let rows = ((100_000.0 * scale) as u64).max(5_000);
    let on = match bench.backend {
        Backend::Postgres => String::new(),
        other => format!(", {}", other.name()),
    };
    eprintln!("== ceilings: DB-only mark+purge of {rows} rows, concurrently (best of mark batch {:?}{on})", crate::ceiling::MARK_BATCHES);
    let outcome = async {
        let (db, batch) = crate::ceiling::db_mark_purge(&ground, rows, CEILING_VALUE_BYTES).await?;
        eprintln!("   {:.0} rows/s (batch {batch})", db.per_second);
        eprintln!("== ceilings: DB-only batched DELETE alone of {rows} rows (best of batch x connections)");
        let delete_only = crate::ceiling::delete_only::delete_only(&ground, rows, CEILING_VALUE_BYTES).await?;
        eprintln!(
            "   {:.0} rows/s (batch {}, {} connections)",
            delete_only.best.per_second, delete_only.batch, delete_only.connections
        );
        eprintln!("== ceilings: producer-only, {rows} records");
        let producer = crate::ceiling::producer(
            bench.broker.bootstrap(),
            &ground.topic,
            rows,
            CEILING_VALUE_BYTES,
            Vec::new(),
        )
        .await?;
        eprintln!("   {:.0} records/s", producer.per_second);
        let kafka_producer = kafka_producer_ceiling(bench, rows, &ground).await;
        eprintln!("== ceilings: writers (4 writers, 10 rows/tx, closed loop, 3s)");
        let writers = crate::ceiling::writers(
            &ground,
            &workloads::WriterConfig::default(),
            Duration::from_secs(3),
        )
        .await?;
        eprintln!("   {:.0} records/s", writers.per_second);
        Ok::<_, BenchError>(Ceilings {
            db_mark_purge: Some(db),
            delete_only: Some(delete_only),
            producer: Some(producer),
            kafka_producer,
            writers: Some(writers),
            batch,
        })
    }
    .await;
    ground.drop_topics(&bench.broker).await;
    ground.drop_schema().await;
    outcome
}

/// Kafka's own ProducerPerformance on a real cluster (`None` on the mock, or when the tool
/// cannot run: said on stderr, and the report says it was not measured).
async fn kafka_producer_ceiling(
    bench: &Bench,
    rows: u64,
    ground: &Ground,
) -> Option<crate::ceiling::kafka_perf::KafkaProducerPerf> {
    let partitions = ground.partitions();
    if bench.broker.embedded().is_some() {
        return None;
    }
    eprintln!(
        "== ceilings: Kafka's ProducerPerformance, {rows} records ({}, {partitions} partitions)",
        crate::ceiling::kafka_perf::PRODUCER_PROPS.join(" ")
    );
    match crate::ceiling::kafka_perf::measure(
        &bench.broker,
        &ground.topic,
        rows,
        CEILING_VALUE_BYTES,
        partitions,
    )
    .await
    {
        Ok(k) => {
            eprintln!(
                "   {:.0} records/s ({:.2} MB/s, avg latency {:.0} ms)",
                k.ceiling.per_second, k.mb_per_second, k.avg_latency_ms
            );
            Some(k)
        }
        Err(e) => {
            eprintln!("   not measured: {e}");
            None
        }
    }
}
