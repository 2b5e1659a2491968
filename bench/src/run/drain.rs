//! The drain: after the measured part, waiting for the last records as long as they keep
//! arriving. It ends when every committed record arrived (or every missing one is accounted
//! for by the broker's eviction and the outbox is empty), when nothing arrived for the
//! scenario's no-progress window, or at a cap derived from the backlog and the lowest
//! acceptable rate; a backlog verified after its drain watches the outbox instead, and the
//! verifier then reads the whole topic once. Watching the outbox times the drain as `bench
//! versus` times both relays: from the first purge (the backlog's lowest id moved) to the last.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use testkit::verify::ClientSettings;

use super::start::Started;
use super::Case;
use crate::broker::BrokerKind;
use crate::ground::Ground;
use crate::receipts::{Offsets, Receiver};
use crate::result::{Drain, DrainEnd};
use crate::scenario::Scenario;
use crate::BenchError;

/// The instants that time a drain.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ends {
    /// The first probe that saw the backlog's lowest id move (a drain watching the outbox).
    pub first_purge: Option<Instant>,
    /// When the wait ended.
    pub end: Instant,
}

/// Waits for the `committed` records with a progress bar: what ended the wait, and when.
pub(super) async fn wait_for_records(
    case: &Case<'_>,
    ground: &Ground,
    started: &Started,
    committed: u64,
) -> Result<(Drain, Ends), BenchError> {
    let bar = ProgressBar::new(committed).with_message(case.label.to_owned());
    let counted = if case.topic.verify_after {
        "acknowledged"
    } else {
        "received"
    };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{msg:>24}} [{{bar:40}}] {{pos}}/{{len}} {counted} ({{per_sec}})"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let published = || {
        started
            .fleet
            .members
            .iter()
            .map(crate::fleet::Member::last_published)
            .sum::<u64>()
    };
    let watch = started
        .during
        .as_ref()
        .map_or(Watch::Outbox, Watch::Verifier);
    let head = started.backlog_head;
    let (drained, first_purge) = drain(
        watch,
        ground,
        case.scenario,
        (committed, head),
        &bar,
        published,
    )
    .await?;
    let end = Instant::now();
    bar.finish_and_clear();
    Ok((drained, Ends { first_purge, end }))
}

/// What a drain watches: the verifier's reads, or (a backlog verified after its drain) the
/// harvesters' acknowledged counts and the outbox itself.
#[derive(Clone, Copy)]
enum Watch<'a> {
    Verifier(&'a Receiver),
    Outbox,
}

/// How often the outbox is probed until the first purge, and once the end is near, which times
/// a drain verified after it to within a probe (an index probe, well under a millisecond of
/// Postgres CPU): the harvesters' meter, which says the end is near, reports every 100 ms and
/// would time it to within that.
const START_POLL: Duration = Duration::from_millis(10);
const END_POLL: Duration = Duration::from_millis(20);

/// Whether the harvesters' acknowledgements, as last metered, put the end of a drain within a
/// meter interval or two: nine tenths of its records.
fn near_end(acked: u64, committed: u64) -> bool {
    acked.saturating_mul(10) >= committed.saturating_mul(9)
}

/// Waits for the `committed` records while they keep arriving; says what ended the wait and,
/// watching the outbox, when the backlog's lowest id (`head`) first moved. `published` is what
/// the harvesters counted as acknowledged so far, for the verifier's lag (or, watching the
/// outbox, for progress).
async fn drain(
    watch: Watch<'_>,
    ground: &Ground,
    scenario: &Scenario,
    (committed, head): (u64, Option<i64>),
    bar: &ProgressBar,
    published: impl Fn() -> u64,
) -> Result<(Drain, Option<Instant>), BenchError> {
    let start = Instant::now();
    let progress = || match watch {
        Watch::Verifier(r) => r.position(),
        Watch::Outbox => published(),
    };
    let done = match watch {
        Watch::Verifier(r) => r.unique(),
        Watch::Outbox => published(),
    };
    let cap = scenario.drain_cap(committed.saturating_sub(done));
    let (mut position, mut progressed) = (progress(), start);
    let mut outbox_checked: Option<Instant> = None;
    let mut first_purge: Option<Instant> = None;
    let mut max_lag = 0u64;
    let ended_by = loop {
        let now = Instant::now();
        let mut nap = Duration::from_millis(50);
        match watch {
            Watch::Verifier(receiver) => {
                let unique = receiver.unique();
                bar.set_position(unique);
                max_lag = max_lag.max(published().saturating_sub(receiver.position()));
                if unique >= committed {
                    break DrainEnd::Complete;
                }
                // Every missing record was skipped as deleted by the broker: if the outbox is
                // empty too, nothing more will come (checked at most once a second).
                if unique + receiver.evicted() >= committed
                    && outbox_checked
                        .is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1))
                {
                    outbox_checked = Some(now);
                    if ground.is_empty().await? {
                        break DrainEnd::Accounted;
                    }
                }
            }
            Watch::Outbox => {
                // The meter says when the end is near; the outbox says when it is there (rows
                // quarantined or acknowledged twice make the count an estimate either way).
                let acked = published();
                bar.set_position(acked.min(committed));
                let every = outbox_poll(first_purge.is_some(), acked, committed);
                if outbox_checked.is_none_or(|at| now.duration_since(at) >= every) {
                    outbox_checked = Some(now);
                    let lowest = ground.lowest_id().await?;
                    if first_purge.is_none() && lowest != head {
                        first_purge = Some(now);
                    }
                    if lowest.is_none() {
                        break DrainEnd::Emptied;
                    }
                }
                nap = nap.min(outbox_poll(first_purge.is_some(), acked, committed));
            }
        }
        let p = progress();
        if p > position {
            (position, progressed) = (p, now);
        }
        if now.duration_since(progressed) >= scenario.no_progress_timeout {
            break DrainEnd::NoProgress;
        }
        if now.duration_since(start) >= cap {
            break DrainEnd::Cap;
        }
        tokio::time::sleep(nap).await;
    };
    let drained = Drain {
        ended_by,
        seconds: start.elapsed().as_secs_f64(),
        no_progress_window_s: scenario.no_progress_timeout.as_secs_f64(),
        cap_s: cap.as_secs_f64(),
        max_verifier_lag: matches!(watch, Watch::Verifier(_)).then_some(max_lag),
        verified_after_s: None,
        startup_s: None,
    };
    Ok((drained, first_purge))
}

/// How often a drain watching the outbox probes it: often until the first purge and near the
/// end, once a second between.
fn outbox_poll(purged: bool, acked: u64, committed: u64) -> Duration {
    if !purged {
        START_POLL
    } else if near_end(acked, committed) {
        END_POLL
    } else {
        Duration::from_secs(1)
    }
}

/// Reads the whole topic once the drain is over (see [`crate::scenario::VerifyWhen`]): starts
/// the verifier and waits while it makes progress until it reached the log end.
pub(super) async fn verify_after(
    client: &ClientSettings,
    topic: &str,
    starts: &[i64],
    run_id: &str,
    offsets: Offsets,
    broker: BrokerKind,
    no_progress: Duration,
) -> Result<Receiver, BenchError> {
    let end = tokio::task::block_in_place(|| crate::receipts::log_end(client, topic, starts))?;
    let receiver = Receiver::start(client, topic, starts, run_id, offsets, broker)?;
    let bar = ProgressBar::new(end).with_message("verifying");
    bar.set_style(
        ProgressStyle::with_template("{msg:>24} [{bar:40}] {pos}/{len} offsets read ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut position, mut progressed) = (0, Instant::now());
    while receiver.position() < end && progressed.elapsed() < no_progress {
        let p = receiver.position();
        bar.set_position(p);
        if p > position {
            (position, progressed) = (p, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bar.finish_and_clear();
    Ok(receiver)
}
