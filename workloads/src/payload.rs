//! Value sizes: payload bytes dominate Kafka throughput and Postgres row width, so a capacity
//! plan must use the application's real size distribution.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// How value sizes are drawn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PayloadDist {
    /// Every value has `bytes` bytes.
    Fixed { bytes: usize },
    /// Uniform between `min` and `max` bytes, inclusive.
    Uniform { min: usize, max: usize },
}

impl Default for PayloadDist {
    fn default() -> Self {
        PayloadDist::Fixed { bytes: 200 }
    }
}

impl PayloadDist {
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match self {
            PayloadDist::Fixed { bytes } => *bytes,
            PayloadDist::Uniform { min, max } => rng.gen_range(*min..=*max),
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            PayloadDist::Fixed { bytes } => *bytes as f64,
            PayloadDist::Uniform { min, max } => (*min + *max) as f64 / 2.0,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match self {
            PayloadDist::Uniform { min, max } if min > max => {
                Err(format!("payload: min ({min}) exceeds max ({max})"))
            }
            _ => Ok(()),
        }
    }
}
