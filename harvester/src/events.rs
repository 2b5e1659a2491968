//! Harvester events as JSON lines, the machine-readable form the reaper prints with
//! `--events-json` and tests and the benchmark read to build timelines across processes.

use crate::HarvestEvent;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

impl HarvestEvent {
    /// `{"kind": ..., "t": <unix ms>, ...}`.
    pub fn to_json(&self) -> serde_json::Value {
        let t = now_ms();
        match self {
            HarvestEvent::Acquired { leader_id } => {
                serde_json::json!({"kind": "acquired", "leader_id": leader_id, "t": t})
            }
            HarvestEvent::Refreshed { leader_id } => {
                serde_json::json!({"kind": "refreshed", "leader_id": leader_id, "t": t})
            }
            HarvestEvent::Revoked => serde_json::json!({"kind": "revoked", "t": t}),
            HarvestEvent::Fenced => serde_json::json!({"kind": "fenced", "t": t}),
            HarvestEvent::Buckets { owned } => {
                serde_json::json!({"kind": "buckets", "owned": owned, "t": t})
            }
            HarvestEvent::Meter(s) => serde_json::json!({
                "kind": "meter", "t": t, "published": s.published, "purged": s.purged,
                "in_flight_records": s.in_flight_records, "in_flight_keys": s.in_flight_keys,
                "reset": s.reset, "quarantined": s.quarantined, "remarks": s.remarks,
                "marked": s.marked, "mark_queries": s.mark_queries, "purge_queries": s.purge_queries,
                "txn_committed": s.txn_committed, "txn_aborted": s.txn_aborted,
            }),
        }
    }
}

/// A JSON line of the reaper's own (not a harvester event), with the same `kind`/`t` shape.
pub fn line(kind: &str, fields: serde_json::Value) -> serde_json::Value {
    let mut v = serde_json::json!({"kind": kind, "t": now_ms()});
    if let (Some(map), serde_json::Value::Object(extra)) = (v.as_object_mut(), fields) {
        map.extend(extra);
    }
    v
}
