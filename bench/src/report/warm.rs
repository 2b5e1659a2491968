//! The "Warm-up" section: what the run did to the broker before measuring anything, how long it
//! took and what the broker's cost per record fell to, apart from every scenario; or, for a run
//! that did not warm, that its figures are a cold start's.

use std::fmt::Write as _;

use crate::result::{Provenance, Round, Warming};

/// The section (empty on the embedded broker, which is not warmed).
pub(super) fn section(p: &Provenance) -> String {
    let Some(w) = &p.warm_up else {
        return if p.cold {
            "\n## Warm-up\n\n> **Not warmed (`--cold`): every scenario drained to a topic created for it, on whatever warmth the broker had. These are cold-start figures.**\n".into()
        } else {
            String::new()
        };
    };
    let mut s = format!(
        "\n## Warm-up (before anything was measured; charged to no scenario)\n\n{:.0} s in all.\n\n",
        w.seconds()
    );
    for (listener, b) in &w.broker {
        let _ = writeln!(
            s,
            "- **The broker**, by drains of the `warm-up` scenario through its {listener} listener, until the median broker CPU per record of the last 3 drains was within 10 % of the 3 before: {}. Per drain (rec/s, broker µs/rec): {}.",
            b.describe(),
            rounds(b)
        );
    }
    if !w.topics.is_empty() {
        s.push_str(
            "\n| warm topic | partitions | publishing | created and led s | rounds | records | warm-up s | broker µs/rec produced, first -> last | broker µs/rec read | settled |\n|---|---:|---|---:|---:|---:|---:|---|---:|---|\n",
        );
        for t in &w.topics {
            let wm = &t.warming;
            let cost = |r: Option<&Round>| {
                r.and_then(|r| r.produce_broker_us)
                    .map_or_else(|| "–".into(), |us| format!("{us:.1}"))
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.1} | {} | {} | {:.1} | {} -> {} | {} | {} |",
                t.name,
                t.need.partitions,
                if t.need.transactional {
                    "transactional"
                } else {
                    "idempotent"
                },
                t.created_seconds,
                wm.rounds.len(),
                wm.records(),
                wm.seconds,
                cost(wm.rounds.first()),
                cost(wm.rounds.last()),
                wm.read_broker_us()
                    .map_or_else(|| "–".into(), |us| format!("{us:.1}")),
                if wm.settled { "yes" } else { "**no**" }
            );
        }
        s.push_str(
            "\nEach scenario on the run's broker publishes to the warm topic of its shape and reads only its own records (from the log ends when it starts).\n",
        );
    }
    let _ = writeln!(
        s,
        "\nThe verifier is not part of a deployment: drains are read after them (no reader beside the harvesters); runs with writers are read while the harvesters publish, and their broker CPU includes those reads{}.",
        w.topics
            .iter()
            .filter_map(|t| t.warming.read_broker_us())
            .reduce(f64::min)
            .map_or_else(String::new, |us| format!(
                " (reading back the warm topics in large batches cost the broker {us:.1} µs per record; a reader keeping pace with small batches costs more)"
            ))
    );
    s
}

/// `36775/18.2, 44408/14.3, ...`.
fn rounds(w: &Warming) -> String {
    w.rounds
        .iter()
        .map(|r| {
            format!(
                "{:.0}/{}",
                r.produce_rate(),
                r.produce_broker_us
                    .map_or_else(|| "–".into(), |us| format!("{us:.1}"))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
