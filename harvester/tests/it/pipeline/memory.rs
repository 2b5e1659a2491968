//! The pipeline's failure handling, deterministically and without services: the in-memory store
//! (with planned faults), the mock elector, and librdkafka's mock cluster inside this process.
//!
//! Each test drives one failure path named by the ports issue and ends, like every harvester
//! test, with the verifying consumer: zero lost, zero reordered or rewound per key; duplicates
//! counted and bounded.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use harvester::config::{KafkaConfig, Limits};
use harvester::election::mock::MockElector;
use harvester::election::Term;
use harvester::outbox::StashRecord;
use harvester::stats::StatsSnapshot;
use harvester::store::memory::{Fault, Gate, MemoryStore, Op, Row};
use harvester::store::OutboxStore;
use harvester::{Config, HarvestEvent, Harvester, HarvesterHandle};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use testkit::verify::{consume, ConsumeOptions};
use testkit::{envelope, wait_for, Report, Verifier};

const KEYS: usize = 4;
const PER_KEY: u64 = 10;

/// A mock cluster in this process, a topic, a store and the records expected on the topic.
struct Bed {
    cluster: MockCluster<'static, DefaultProducerContext>,
    topic: String,
    run: String,
    store: MemoryStore,
    verifier: Verifier,
}

impl Bed {
    fn new() -> Bed {
        testkit::init_tracing();
        let cluster = MockCluster::new(1).unwrap();
        let topic = testkit::names::topic("mem");
        cluster.create_topic(&topic, 4, 1).unwrap();
        Bed {
            cluster,
            topic,
            run: testkit::names::unique("run"),
            store: MemoryStore::new(),
            verifier: Verifier::new(),
        }
    }

    fn record(&self, key: &str, seq: u64, value_len: usize) -> StashRecord {
        let mut r = StashRecord::new(&self.topic, key, vec![b'v'; value_len]);
        for (k, v) in envelope::headers(&self.run, seq) {
            r = r.header(k, v);
        }
        r
    }

    /// Inserts `PER_KEY` records for each of `KEYS` keys named `<prefix><n>`, round-robin, so
    /// every mark batch mixes keys.
    fn write(&mut self, prefix: &str) {
        self.write_from(prefix, 0);
    }

    /// As [`Bed::write`], the keys' sequence numbers from `first` on.
    fn write_from(&mut self, prefix: &str, first: u64) {
        let mut records = Vec::new();
        for seq in first..first + PER_KEY {
            for k in 0..KEYS {
                let key = format!("{prefix}{k}");
                records.push(self.record(&key, seq, 16));
                self.verifier.expect(&self.topic, key.as_bytes(), seq);
            }
        }
        self.store.insert(&records);
    }

    /// The first Produce request is rejected with a "suspect" error handed back to the
    /// pipeline: its keys are reset.
    fn reject_first_produce(&self) {
        self.cluster.request_errors(
            RDKafkaApiKey::Produce,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_INVALID_RECORD],
        );
    }

    fn config(&self) -> Config {
        Config {
            kafka: KafkaConfig::with_bootstrap(&self.cluster.bootstrap_servers()),
            limits: Limits {
                send_concurrency: 2.into(),
                mark_query_records: 10.into(),
                drain_timeout: Some(Duration::from_secs(1)),
                io_error_backoff: Duration::from_millis(50),
                idle_poll_interval: Duration::from_millis(100),
                min_metrics_interval: Duration::from_millis(100),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A harvester leading with the default config, once its first purge (of the first
    /// records acknowledged) is reached and held: their keys wait behind it.
    async fn leading_with_first_purge_held(&self) -> (HarvesterHandle, MockElector, Gate) {
        let gate = self.store.hold_next(Op::Purge);
        let elector = MockElector::new();
        let handle = self.harvester(self.config(), &elector).await;
        elector.acquire();
        gate.reached().await;
        (handle, elector, gate)
    }

    /// Opens `gate`, waits until the store is empty, stops the harvester and verifies: the
    /// report (correct) and the harvester's counters.
    async fn release_and_drain(
        &mut self,
        gate: Gate,
        handle: HarvesterHandle,
    ) -> (Report, StatsSnapshot) {
        gate.open();
        self.emptied().await;
        let report = self.verify().await;
        let stats = handle.harvester.stats();
        handle.stop().await.unwrap();
        report.assert_correct();
        (report, stats)
    }

    async fn harvester(&self, config: Config, elector: &MockElector) -> HarvesterHandle {
        let h = Harvester::new(
            config,
            Arc::new(self.store.clone()),
            Arc::new(elector.clone()),
        )
        .await
        .unwrap();
        Arc::new(h).spawn()
    }

    async fn emptied(&self) {
        wait_for("the outbox to empty", Duration::from_secs(20), || async {
            self.store.is_empty()
        })
        .await
        .unwrap();
    }

    /// Reads the topic until everything expected arrived (plus a short settle) and reports.
    async fn verify(&mut self) -> Report {
        let mut options =
            ConsumeOptions::new(&self.cluster.bootstrap_servers(), &[&self.topic], &self.run);
        options.timeout = Duration::MAX;
        options.stall = Some(Duration::from_secs(20));
        options.settle = Duration::from_millis(300);
        let verifier = std::mem::take(&mut self.verifier);
        consume(options, verifier, |_, _, _| {})
            .await
            .unwrap()
            .report()
    }
}

const RECORDS: u64 = KEYS as u64 * PER_KEY;

/// What one harvester did with the bed's store: the verified delivery, its counters, its term
/// and the leader ids it refreshed to.
struct Outcome {
    report: Report,
    stats: StatsSnapshot,
    db_errors: u64,
    term: Term,
    refreshed: Vec<uuid::Uuid>,
}

impl Bed {
    /// One harvester with `config` leads until the store is empty; the topic is verified (zero
    /// lost, zero reordered or rewound, or the test fails here) and the harvester stopped.
    async fn drain(&mut self, config: Config) -> Outcome {
        let elector = MockElector::new();
        let handle = self.harvester(config, &elector).await;
        let mut events = handle.harvester.subscribe();
        let term = elector.acquire();
        self.emptied().await;
        let report = self.verify().await;
        let stats = handle.harvester.stats();
        let db_errors = handle.harvester.live_stats().db_errors.load(Relaxed);
        let refreshed = std::iter::from_fn(|| events.try_recv().ok())
            .filter_map(|e| match e {
                HarvestEvent::Refreshed { leader_id } => Some(leader_id),
                _ => None,
            })
            .collect();
        handle.stop().await.unwrap();
        report.assert_correct();
        Outcome {
            report,
            stats,
            db_errors,
            term,
            refreshed,
        }
    }
}

#[tokio::test]
async fn a_leader_drains_the_store_in_key_order() {
    let mut bed = Bed::new();
    bed.write("k");
    let o = bed.drain(bed.config()).await;
    assert_eq!((o.report.delivered, o.report.duplicates), (RECORDS, 0));
    assert_eq!(
        (o.stats.purged, o.stats.remarks, o.stats.purge_misses),
        (RECORDS, 0, 0)
    );
}

#[tokio::test]
async fn a_mark_whose_outcome_is_lost_forces_a_full_re_mark_under_a_fresh_leader_id() {
    let mut bed = Bed::new();
    bed.write("k");
    // The first mark commits but reports a failure: memory and table disagree.
    bed.store.plan(Op::Mark, Fault::UnknownOutcome);
    let o = bed.drain(bed.config()).await;
    assert_eq!(o.report.delivered, RECORDS);
    assert_eq!(
        o.report.duplicates, 0,
        "the lost mark's rows were never sent"
    );
    assert_eq!((o.stats.remarks, o.db_errors), (1, 1));
    assert_eq!(
        o.refreshed.len(),
        1,
        "one Refreshed event with the new leader id"
    );
    assert_ne!(
        o.refreshed[0],
        o.term.id(),
        "a fresh leader id, never the term's"
    );
}

#[tokio::test]
async fn a_failed_delivery_resets_its_key_and_a_delayed_reset_keeps_the_key_blocked() {
    let mut bed = Bed::new();
    bed.write("k");
    // The first produce request is rejected (a "suspect" error handed back to the pipeline):
    // its keys are reset, and the reset itself is slow, while the marker goes on marking.
    bed.reject_first_produce();
    bed.store
        .plan(Op::Reset, Fault::Delay(Duration::from_millis(300)));
    let o = bed.drain(bed.config()).await;
    assert_eq!(o.report.delivered, RECORDS);
    assert!(
        o.stats.delivery_failures > 0,
        "the fault reached the pipeline"
    );
    assert!(o.stats.reset > 0, "the failed key's rows were reset");
    assert!(bed.store.calls(Op::Reset) >= 1);
    assert_eq!(
        o.stats.remarks, 0,
        "a reset that succeeds needs no full re-mark"
    );
    assert_eq!(o.stats.quarantined, 0);
}

#[tokio::test]
async fn a_reset_that_fails_forces_a_full_re_mark_and_loses_nothing() {
    let mut bed = Bed::new();
    bed.write("k");
    bed.reject_first_produce();
    bed.store.plan(Op::Reset, Fault::Fail);
    let o = bed.drain(bed.config()).await;
    assert_eq!(o.report.delivered, RECORDS);
    assert!(o.stats.reset > 0);
    assert_eq!(o.stats.remarks, 1, "the failed reset forced one re-mark");
    assert_eq!(o.refreshed.len(), 1);
    assert!(o.db_errors >= 1);
}

#[tokio::test]
async fn reset_rows_not_back_within_the_patience_restart_the_pipeline_before_later_rows_go() {
    let mut bed = Bed::new();
    bed.write("k");
    bed.reject_first_produce();
    let mut config = bed.config();
    config.limits.reset_patience = Duration::from_secs(1);
    let patience = config.limits.reset_patience;
    // The reset statement outlasts the patience: the failed keys' rows stay marked by this
    // leader meanwhile, so no mark brings them back, while later rows of the same keys are
    // written and marked (the idle poll, 100ms, well inside the patience).
    bed.store.plan(Op::Reset, Fault::Delay(patience * 3));
    let elector = MockElector::new();
    let handle = bed.harvester(config, &elector).await;
    elector.acquire();
    wait_for(
        "the failed keys' reset",
        Duration::from_secs(10),
        || async { bed.store.calls(Op::Reset) >= 1 },
    )
    .await
    .unwrap();
    bed.write_from("k", PER_KEY);
    // At the patience the pipeline ends (its later rows unsent) and restarts once the reset
    // statement returns; the new one reads every key's rows in id order.
    bed.emptied().await;
    let report = bed.verify().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    report.assert_correct();
    assert_eq!(report.delivered, 2 * RECORDS);
    assert_eq!(stats.pipeline_restarts, 1, "the patience ran out once");
    assert!(stats.reset > 0, "the failed keys were reset");
}

#[tokio::test]
async fn failed_purges_are_retried_while_their_keys_wait() {
    let mut bed = Bed::new();
    bed.write("k");
    bed.store.plan(Op::Purge, Fault::Fail);
    bed.store.plan(Op::Purge, Fault::Fail);
    let o = bed.drain(bed.config()).await;
    assert_eq!((o.report.delivered, o.report.duplicates), (RECORDS, 0));
    assert_eq!(o.db_errors, 2);
    assert_eq!(
        (o.stats.purged, o.stats.purge_misses, o.stats.remarks),
        (RECORDS, 0, 0)
    );
}

#[tokio::test]
async fn a_stale_leaders_late_purge_finds_the_rows_its_successor_purged_gone() {
    let mut bed = Bed::new();
    bed.write("k");
    // The old leader's first purge is held (a statement stuck on its way to the database).
    let gate = bed.store.hold_next(Op::Purge);
    let (old_elector, new_elector) = (MockElector::new(), MockElector::new());
    let old = bed.harvester(bed.config(), &old_elector).await;
    old_elector.acquire();
    gate.reached().await;
    // The old leader lapses; a successor re-marks everything, publishes and purges it.
    old_elector.fence();
    let new = bed.harvester(bed.config(), &new_elector).await;
    new_elector.acquire();
    bed.emptied().await;
    // Only now does the stale purge reach the table: its rows are gone already.
    gate.open();
    wait_for(
        "the stale purge to run",
        Duration::from_secs(10),
        || async { old.harvester.stats().purge_misses > 0 },
    )
    .await
    .unwrap();
    let report = bed.verify().await;
    let (old_stats, new_stats) = (old.harvester.stats(), new.harvester.stats());
    old.stop().await.unwrap();
    new.stop().await.unwrap();
    report.assert_correct();
    assert_eq!(report.delivered, RECORDS);
    assert_eq!(old_stats.purged, 0, "the stale leader deleted nothing");
    assert_eq!(new_stats.purged, RECORDS, "the successor purged every row");
    assert!(
        report.duplicates <= KEYS as u64,
        "at most one duplicate per key (the stale leader's one in flight): {report}"
    );
}

/// A stalled leader that resumes with its mark statement already past its leadership check
/// re-marks every row under its own id, the rows this leader acknowledged and has not purged yet
/// included. Those are delivered: this leader's purge deletes them all the same, so no later
/// mark sends them again after newer records of their keys (the rewinds of the failover-zombie
/// scenario on Kafka).
#[tokio::test]
async fn acknowledged_rows_a_resumed_stale_leader_re_marked_are_purged_not_sent_again() {
    let mut bed = Bed::new();
    bed.write("k");
    let (handle, _elector, gate) = bed.leading_with_first_purge_held().await;
    let stale = bed.store.mark(uuid::Uuid::new_v4(), RECORDS as usize).await;
    assert_eq!(
        stale.unwrap().len() as u64,
        RECORDS,
        "the stale mark took every row"
    );
    let (report, stats) = bed.release_and_drain(gate, handle).await;
    assert_eq!(
        (report.delivered, report.duplicates, report.rewinds),
        (RECORDS, 0, 0),
        "nothing sent twice: {stats:?}"
    );
    assert_eq!(stats.purged, RECORDS);
}

#[tokio::test]
async fn acks_of_an_older_generation_still_purge_after_a_re_mark() {
    let mut bed = Bed::new();
    bed.write("k");
    // A crashed predecessor left rows marked with its id: they are this term's to re-mark.
    bed.store.mark(uuid::Uuid::new_v4(), 5).await.unwrap();
    let (handle, _elector, gate) = bed.leading_with_first_purge_held().await;
    // While acknowledged rows wait for their purge, a mark fails: a fresh generation re-marks
    // every row, including those held and acknowledged under the first generation.
    bed.store.plan(Op::Mark, Fault::Fail);
    let h = Arc::clone(&handle.harvester);
    wait_for(
        "the re-mark to catch up",
        Duration::from_secs(10),
        || async {
            let s = h.stats();
            s.remarks == 1 && s.duplicate_marks > 0
        },
    )
    .await
    .unwrap();
    let (report, stats) = bed.release_and_drain(gate, handle).await;
    assert_eq!((report.delivered, report.duplicates), (RECORDS, 0));
    assert_eq!(stats.purge_misses, 0, "the term's generations all purge");
    assert_eq!(stats.purged, RECORDS);
}

#[tokio::test]
async fn a_row_purged_while_a_re_mark_that_read_it_is_on_its_way_is_not_sent_again() {
    let mut bed = Bed::new();
    bed.write("k");
    // The first purge is held: the rows acknowledged first wait for it, their keys with them.
    let purge = bed.store.hold_next(Op::Purge);
    let elector = MockElector::new();
    let handle = bed.harvester(bed.config(), &elector).await;
    let h = Arc::clone(&handle.harvester);
    elector.acquire();
    purge.reached().await;
    wait_for(
        "every row to be marked",
        Duration::from_secs(10),
        || async { h.stats().marked == RECORDS },
    )
    .await
    .unwrap();
    // A mark fails, so the next is a full re-mark under a fresh generation: it reads the head of
    // the table, rows held and acknowledged included, and its answer is held on its way back.
    bed.store.plan(Op::Mark, Fault::Fail);
    let re_mark = bed.store.hold_next_answer(Op::Mark);
    re_mark.reached().await;
    // Meanwhile the purge (conditioned on both generations) deletes the rows the re-mark read,
    // and the shards, told so, send their keys' next records, until the table is empty.
    purge.open();
    bed.emptied().await;
    // Only now do the re-mark's rows reach the shards: every one published and purged already.
    re_mark.open();
    wait_for(
        "the re-mark's rows to reach the shards",
        Duration::from_secs(10),
        || async {
            let s = h.stats();
            s.marked > RECORDS && s.duplicate_marks + s.published >= s.marked
        },
    )
    .await
    .unwrap();
    let report = bed.verify().await;
    let stats = handle.harvester.stats();
    handle.stop().await.unwrap();
    report.assert_correct();
    assert_eq!((report.delivered, report.duplicates), (RECORDS, 0));
    assert_eq!(stats.remarks, 1);
    assert_eq!(
        stats.duplicate_marks,
        stats.marked - RECORDS,
        "each row the re-mark read was finished before it arrived, and dropped"
    );
    assert_eq!((stats.published, stats.purged), (RECORDS, RECORDS));
}

#[tokio::test]
async fn poison_rows_are_quarantined_while_other_keys_flow() {
    let mut bed = Bed::new();
    bed.write("k");
    let mut mismatched = Row::from(&bed.record("bad", 0, 8));
    mismatched.header_values.pop();
    let mismatched = bed.store.insert_raw(mismatched);
    let mut keyless = Row::from(&bed.record("none", 0, 8));
    keyless.key = None;
    let keyless = bed.store.insert_raw(keyless);
    let too_large = bed.store.insert(&[bed.record("huge", 0, 50_000)])[0];
    bed.write("after");
    // The first quarantine attempt fails and is retried.
    bed.store.plan(Op::Quarantine, Fault::Fail);
    let mut config = bed.config();
    config.kafka = config.kafka.set("message.max.bytes", "20000");
    let o = bed.drain(config).await;
    assert_eq!(o.report.delivered, 2 * RECORDS);
    assert_eq!(o.stats.quarantined, 3);
    let q = bed.store.quarantined();
    let reason = |id: i64| {
        q.iter()
            .find(|q| q.row.id == id)
            .map(|q| q.reason.clone())
            .unwrap_or_default()
    };
    assert!(reason(mismatched).contains("header arrays differ"));
    assert!(reason(keyless).contains("key is NULL"));
    assert!(reason(too_large).to_lowercase().contains("too large"));
    for q in &q {
        assert!(
            q.reason.contains(&format!("row {}", q.row.id)),
            "{}",
            q.reason
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_waits_for_its_buckets_records_while_the_others_keep_flowing() {
    use harvester::assign::mock::MockAssignor;
    const B: u16 = 8;
    let mut bed = Bed::new();
    bed.write("k");
    let keys: Vec<Option<Vec<u8>>> = (0..KEYS)
        .map(|k| Some(format!("k{k}").into_bytes()))
        .collect();
    let buckets = bed.store.buckets_of(&keys, B).await.unwrap();
    let revoked = buckets[0];
    assert!(
        buckets.iter().any(|b| *b != revoked),
        "the keys span more than one bucket: {buckets:?}"
    );
    // The production drain bound: the narrowing must finish within it, and a busy machine can
    // take more than the bed's 1 s once the purge is released.
    let mut config = bed.config();
    config.limits.drain_timeout = Some(harvester::config::DEFAULT_DRAIN_TIMEOUT);
    let member = |assignor: &MockAssignor| {
        let (config, store, assignor) = (
            config.clone(),
            Arc::new(bed.store.clone()),
            Arc::new(assignor.clone()),
        );
        async move {
            let h = Harvester::with_assignor(config, store, assignor)
                .await
                .unwrap();
            Arc::new(h).spawn()
        }
    };
    // a owns everything; its first purge is held, so records of every key stay in its pipeline.
    let gate = bed.store.hold_next(Op::Purge);
    let a = MockAssignor::new(B);
    let ha = member(&a).await;
    a.acquire(0..B);
    gate.reached().await;
    let leader_a = ha.harvester.leader_id();
    let drain = harvester::config::DEFAULT_DRAIN_TIMEOUT;
    let revoke = {
        let a = a.clone();
        tokio::spawn(async move { a.revoke([revoked], testkit::within(drain)).await })
    };
    // The barrier holds while a still holds records of the revoked bucket: over half the drain
    // bound (after which a correct member would give up on the drain), it is not acknowledged.
    testkit::assert_holds_for(
        "the revoke unacknowledged while records of its bucket are in flight",
        drain / 2,
        Duration::from_millis(20),
        || async { !revoke.is_finished() },
    )
    .await;
    gate.open();
    assert!(revoke.await.unwrap(), "a acknowledged the revoke");
    assert_eq!(
        ha.harvester.live_stats().narrowings.load(Relaxed),
        1,
        "narrowed, not restarted"
    );
    assert_eq!(ha.harvester.leader_id(), leader_a, "no restart");
    // Nothing of the revoked bucket is marked by a any more, and the other buckets drain.
    let revoked_key = |row: &Row| row.bucket(B) == revoked;
    assert!(
        bed.store
            .rows()
            .iter()
            .filter(|r| revoked_key(r))
            .all(|r| r.leader_id != leader_a),
        "a still has rows of the revoked bucket marked"
    );
    wait_for(
        "the other buckets drain",
        Duration::from_secs(20),
        || async { bed.store.rows().iter().all(revoked_key) },
    )
    .await
    .unwrap();
    // b takes the revoked bucket over and drains it: nothing lost, no key out of order.
    let b = MockAssignor::new(B);
    let hb = member(&b).await;
    b.acquire([revoked]);
    bed.emptied().await;
    let report = bed.verify().await;
    ha.stop().await.unwrap();
    hb.stop().await.unwrap();
    report.assert_correct();
    assert_eq!(report.delivered, RECORDS);
}
