//! The same run's ceilings side by side, as the report reads the harvester's figures against
//! them; each is measured by `crate::ceiling`.

use serde::{Deserialize, Serialize};

use crate::ceiling::delete_only::DeleteOnly;
use crate::ceiling::kafka_perf::KafkaProducerPerf;
use crate::ceiling::Ceiling;

/// The same-run ceilings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    pub db_mark_purge: Option<Ceiling>,
    /// Batched DELETE by id alone (the best point, see [`crate::ceiling::delete_only`]).
    #[serde(default)]
    pub delete_only: Option<DeleteOnly>,
    pub producer: Option<Ceiling>,
    /// Kafka's own ProducerPerformance with the same settings (a real cluster only; see
    /// [`crate::ceiling::kafka_perf`]).
    #[serde(default)]
    pub kafka_producer: Option<KafkaProducerPerf>,
    pub writers: Option<Ceiling>,
    /// The mark batch of the DB-only ceiling's best point (the harvesters' effective mark
    /// batch when the ceilings were not measured).
    pub batch: usize,
}

impl Ceilings {
    /// Whether any ceiling was measured (none with `--no-ceilings`).
    pub fn any(&self) -> bool {
        self.db_mark_purge.is_some()
            || self.delete_only.is_some()
            || self.producer.is_some()
            || self.kafka_producer.is_some()
            || self.writers.is_some()
    }

    /// The lower of the DB-only and producer-only ceilings.
    pub fn lower(&self) -> Option<f64> {
        match (self.db_mark_purge, self.producer) {
            (Some(a), Some(b)) => Some(a.per_second.min(b.per_second)),
            (Some(a), None) | (None, Some(a)) => Some(a.per_second),
            _ => None,
        }
    }
}
