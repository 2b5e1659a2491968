//! The report's head: the title, how to reproduce the run (command, commit, machine) and what
//! it ran against (database, broker, harvester settings).

use std::fmt::Write as _;

use crate::result::{Provenance, RunResult};

/// A report's title and its first lines: the command, the commit and the machine.
pub fn head(p: &Provenance, title: &str) -> String {
    format!(
        "# {title}\n\n- command: `{}`\n- commit: {}\n- machine: {}\n",
        p.command, p.commit, p.machine
    )
}

/// The database's, the broker's and the harvesters' lines under the head.
pub(super) fn lines(p: &Provenance, runs: &[RunResult]) -> String {
    let mut s = String::new();
    let pg = &p.postgres;
    if let Some(m) = &p.mariadb {
        let _ = writeln!(s, "- {}", m.line());
    } else {
        let _ = writeln!(
            s,
            "- postgres {}: fsync={}, synchronous_commit={}, full_page_writes={}, wal_level={}, shared_buffers={}",
            pg.version, pg.fsync, pg.synchronous_commit, pg.full_page_writes, pg.wal_level, pg.shared_buffers
        );
        let _ = writeln!(
            s,
            "- autovacuum={} ({}; {}); the outbox tables have their own row thresholds (migration 0004)",
            pg.autovacuum, pg.autovacuum_note, pg.autovacuum_settings
        );
    }
    let _ = writeln!(s, "- broker: {}", p.broker);
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
