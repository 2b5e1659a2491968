//! criterion micro-benchmarks of the hot paths (wall clock; the instruction-count gate in
//! `scripts/gate.sh` runs the same workloads under callgrind), plus a Postgres-backed
//! mark+purge cycle at several batch sizes when a database answers.
//!
//! `cargo bench -p hotpaths --bench hot_paths`; set `DATABASE_URL` or run `scripts/services.sh up`
//! for the Postgres group (it is skipped, with a line saying so, when none answers).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use harvester::outbox::{Shape, TableName};
use harvester::stats::Stats;
use harvester::store::postgres::{migrate, Statements};
use hotpaths::{pipeline, pipeline::Shared};
use sqlx::Row;

fn cpu_paths(c: &mut Criterion) {
    const N: usize = 10_000;
    let mut g = c.benchmark_group("hot_paths");
    g.throughput(Throughput::Elements(N as u64));
    for name in hotpaths::WORKLOADS {
        g.bench_function(*name, |b| b.iter(|| hotpaths::run(name, N)));
    }
    g.bench_function("hdrhistogram_record", |b| {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        b.iter(|| {
            for i in 0..N as u64 {
                let _ = h.record(1 + i % 100_000);
            }
        })
    });
    g.finish();
}

/// The bookkeeping every stage shares (relaxed counters and lock-free histograms), hammered
/// from two threads at once as the shards and the purger do; and a shard's per-key in-flight
/// bookkeeping run by two shards at once.
fn contended_bookkeeping(c: &mut Criterion) {
    const N: u64 = 100_000;
    let mut g = c.benchmark_group("contended");
    g.throughput(Throughput::Elements(2 * N));
    g.bench_function("stats_2_threads", |b| {
        b.iter_batched(
            || Arc::new(Stats::default()),
            |stats| {
                let worker = |s: Arc<Stats>| {
                    move || {
                        for i in 0..N {
                            Stats::add(&s.published, 1);
                            s.in_flight_records
                                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                            s.publish_seconds.0.observe((i % 1000) as f64 * 1e-5);
                        }
                    }
                };
                let t = std::thread::spawn(worker(Arc::clone(&stats)));
                worker(Arc::clone(&stats))();
                t.join().unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    // Two shards on two threads, each with its own per-key queues (keys are partitioned by
    // hash, so those never contend) sharing the permit semaphore and the counters, against the
    // same two shards' work done by one thread.
    const RECORDS: usize = 20_000;
    g.throughput(Throughput::Elements(2 * RECORDS as u64));
    g.bench_function("shard_bookkeeping_2_threads", |b| {
        b.iter_batched(
            || Arc::new(Shared::new(2 * hotpaths::WINDOW)),
            |shared| {
                let other = Arc::clone(&shared);
                let t = std::thread::spawn(move || {
                    pipeline::shard_cycle(RECORDS, 1000, hotpaths::WINDOW, &other)
                });
                pipeline::shard_cycle(RECORDS, 1000, hotpaths::WINDOW, &shared);
                t.join().unwrap()
            },
            BatchSize::SmallInput,
        )
    });
    g.bench_function("shard_bookkeeping_1_thread", |b| {
        b.iter_batched(
            || Shared::new(2 * hotpaths::WINDOW),
            |shared| {
                pipeline::shard_cycle(RECORDS, 1000, hotpaths::WINDOW, &shared);
                pipeline::shard_cycle(RECORDS, 1000, hotpaths::WINDOW, &shared)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn mark_purge(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let url = testkit::pg::database_url();
    let Ok(pool) = rt.block_on(sqlx::PgPool::connect(&url)) else {
        eprintln!("mark_purge: no Postgres at {url}; skipped (scripts/services.sh up)");
        return;
    };
    let schema = testkit::names::schema("crit");
    rt.block_on(sqlx::query(&format!("CREATE SCHEMA {schema}")).execute(&pool))
        .unwrap();
    let table = TableName::parse(&format!("{schema}.outbox")).unwrap();
    let quarantine = table.sibling("_quarantine");
    rt.block_on(migrate(&pool, &table, &quarantine, Shape::Native))
        .unwrap();
    let statements = Statements::new(&table, &quarantine, Shape::Native);
    let mut g = c.benchmark_group("mark_purge");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for batch in [10usize, 100, 1000] {
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(format!("batch_{batch}"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    // Fill (untimed) exactly what the timed cycles will mark and purge.
                    let backlog =
                        workloads::prefill::Backlog::uniform(iters * batch as u64, 1000, 200);
                    let ledger = Arc::new(workloads::Ledger::new());
                    workloads::prefill::prefill(&pool, &table, "crit", "crit", backlog, &ledger)
                        .await
                        .unwrap();
                    let generation = uuid::Uuid::new_v4();
                    let start = Instant::now();
                    for _ in 0..iters {
                        let rows = sqlx::query(&statements.mark)
                            .bind(generation)
                            .bind(batch as i64)
                            .bind(0i64)
                            .fetch_all(&pool)
                            .await
                            .unwrap();
                        let ids: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>("id")).collect();
                        sqlx::query(&statements.purge)
                            .bind(&ids)
                            .bind(vec![generation])
                            .execute(&pool)
                            .await
                            .unwrap();
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
    let _ = rt.block_on(sqlx::query(&format!("DROP SCHEMA {schema} CASCADE")).execute(&pool));
}

criterion_group!(benches, cpu_paths, contended_bookkeeping, mark_purge);
criterion_main!(benches);
