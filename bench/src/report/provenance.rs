//! The report's head: a banner when the run's tree was not a commit (its figures cannot be
//! reproduced, so they must not be quoted), the title, how to reproduce the run (command,
//! commit), the machine and broker it ran on, and what else it ran against (database,
//! harvester settings).

use std::fmt::Write as _;

use crate::result::{Provenance, RunResult, Tree};

/// A report's banner, title and first lines: the command, the commit, the machine and the
/// broker.
pub fn head(p: &Provenance, title: &str) -> String {
    format!("{}{}", banner(p), title_lines(p, title))
}

/// The warning a report opens with when no commit reproduces it; empty for a committed tree.
pub fn banner(p: &Provenance) -> String {
    tree_warning(p)
        .map(|w| format!("> **{w}**\n\n"))
        .unwrap_or_default()
}

/// The banner's sentence, when no commit reproduces the run: for a report's top and the
/// command's last lines.
pub fn tree_warning(p: &Provenance) -> Option<String> {
    match p.tree() {
        Tree::Committed => None,
        Tree::Uncommitted => Some(format!(
            "NOT FROM A COMMITTED TREE: built from {}, so no commit reproduces these figures — do not quote them.",
            p.commit
        )),
        Tree::Unknown => Some("NOT FROM A KNOWN COMMIT: git named no commit for the tree this was built from, so nothing reproduces these figures — do not quote them.".to_owned()),
    }
}

/// The title and the lines that say how to reproduce the run and where it ran.
pub(super) fn title_lines(p: &Provenance, title: &str) -> String {
    format!(
        "# {title}\n\n- command: `{}`\n- commit: {}\n- machine: {}\n- broker: {}\n",
        p.command,
        if p.commit.is_empty() {
            "unknown"
        } else {
            &p.commit
        },
        p.machine,
        p.broker
    )
}

/// The connections' TLS as the run negotiated it (nothing for reports that did not record it).
fn connection_note(pg: &crate::pg::PgSettings) -> String {
    if pg.connection.is_empty() {
        return String::new();
    }
    format!(
        "; the bench's and the harvesters' connections (one URL): {}",
        pg.connection
    )
}

/// The database's and the harvesters' lines under the head.
pub(super) fn lines(p: &Provenance, runs: &[RunResult]) -> String {
    let mut s = String::new();
    if let Some(line) = speed_line(p) {
        let _ = writeln!(s, "- {line}");
    }
    let pg = &p.postgres;
    if let Some(m) = &p.mariadb {
        let _ = writeln!(s, "- {}", m.line());
    } else {
        let _ = writeln!(
            s,
            "- postgres {}: fsync={}, synchronous_commit={}, full_page_writes={}, wal_level={}, shared_buffers={}{}",
            pg.version, pg.fsync, pg.synchronous_commit, pg.full_page_writes, pg.wal_level, pg.shared_buffers,
            connection_note(pg)
        );
        let _ = writeln!(
            s,
            "- autovacuum={} ({}; {}); the outbox tables have their own row thresholds (migration 0004) and fillfactor 50 (migration 0006)",
            pg.autovacuum, pg.autovacuum_note, pg.autovacuum_settings
        );
    }
    if let Some(r) = runs.first() {
        let shown: Vec<String> = r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            s,
            "- harvester: library defaults plus {}; {}",
            shown.join(", "),
            effective_settings(&r.settings)
        );
    }
    s
}

/// The machine's speed at the run's start and end, from the calibration loop.
pub fn speed_line(p: &Provenance) -> Option<String> {
    let (start, end) = p.loop_ms;
    let start = start?;
    Some(match end {
        Some(end) => format!(
            "machine speed: a fixed CPU loop took {start:.0} ms at the start and {end:.0} ms at the end ({:+.0} %); figures of runs whose loop times differ were measured on a faster or slower machine",
            (end / start - 1.0) * 100.0
        ),
        None => format!("machine speed: a fixed CPU loop took {start:.0} ms at the start"),
    })
}

/// The settings a capacity plan depends on, as the harvester resolves them.
pub fn effective_settings(settings: &[(String, String)]) -> String {
    let pairs = settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    match harvester::Config::default().with_overrides(pairs) {
        Ok(c) => {
            use harvester::config::{
                AUTO_BATCH_MAX, AUTO_BATCH_MIN, AUTO_WINDOW_MAX, AUTO_WINDOW_MIN,
            };
            let l = &c.limits;
            let auto = |a: harvester::config::Adaptive, lo: usize, hi: usize| match a.fixed() {
                Some(n) => n.to_string(),
                None => format!("auto ({lo}-{hi})"),
            };
            let transactional = c.publish.transactional().is_some();
            let shards = l.shards();
            format!(
                "effective: mark batch {} rows, max in flight {} records, {shards} producer shards{}, purge batch up to {}, producers {} (acks=all), linger.ms {}, delivery.timeout.ms {}",
                auto(l.mark_query_records, AUTO_BATCH_MIN, AUTO_BATCH_MAX),
                auto(l.max_in_flight_records, AUTO_WINDOW_MIN, AUTO_WINDOW_MAX),
                if l.send_concurrency.is_auto() { " (auto)" } else { "" },
                l.purge_batch_records,
                if transactional { "transactional" } else { "idempotent" },
                c.producer_kafka.get("linger.ms").unwrap_or(if transactional {
                    "5 (librdkafka default)"
                } else {
                    "5 (librdkafka default), cut short for lone records"
                }),
                if c.unbounded_delivery() {
                    "0 (none: a key window above 1)".to_owned()
                } else {
                    c.producer_kafka
                        .get("delivery.timeout.ms")
                        .map_or_else(|| format!("{} (leader succession - lease)", c.leader.delivery_timeout().as_millis()), str::to_owned)
                }
            )
        }
        Err(e) => format!("settings do not resolve: {e}"),
    }
}
