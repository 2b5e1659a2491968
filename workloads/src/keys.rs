//! Key choice. Skew matters because MP/R keeps one record per key in flight: a Zipf or single
//! hot key turns the harvester's per-key round trip (publish + purge) into the bottleneck.

use rand::Rng;
use serde::{Deserialize, Serialize};

/// How keys are drawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyDist {
    /// Uniform over `n` keys.
    Uniform { n: u32 },
    /// Zipf over `n` keys with exponent `s` (1.0 is classic; higher is more skewed).
    Zipf { n: u32, s: f64 },
    /// One key for everything.
    Hot,
}

impl KeyDist {
    /// Number of distinct keys.
    pub fn keys(&self) -> u32 {
        match self {
            KeyDist::Uniform { n } | KeyDist::Zipf { n, .. } => *n,
            KeyDist::Hot => 1,
        }
    }

    pub fn validate(&self) -> Result<(), String> {
        match self {
            KeyDist::Uniform { n: 0 } | KeyDist::Zipf { n: 0, .. } => {
                Err("keys: n must be at least 1".into())
            }
            KeyDist::Zipf { s, .. } if !s.is_finite() || *s <= 0.0 => {
                Err("keys: zipf s must be above 0".into())
            }
            _ => Ok(()),
        }
    }

    /// A sampler (precomputes the Zipf CDF once).
    pub fn sampler(&self) -> KeySampler {
        let cdf = match self {
            KeyDist::Zipf { n, s } => {
                let weights: Vec<f64> = (1..=*n).map(|k| 1.0 / f64::from(k).powf(*s)).collect();
                let total: f64 = weights.iter().sum();
                let mut acc = 0.0;
                weights
                    .iter()
                    .map(|w| {
                        acc += w / total;
                        acc
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        KeySampler {
            dist: self.clone(),
            cdf,
        }
    }
}

/// Draws key indices.
#[derive(Debug, Clone)]
pub struct KeySampler {
    dist: KeyDist,
    cdf: Vec<f64>,
}

impl KeySampler {
    pub fn sample(&self, rng: &mut impl Rng) -> u32 {
        match &self.dist {
            KeyDist::Uniform { n } => rng.gen_range(0..*n),
            KeyDist::Hot => 0,
            KeyDist::Zipf { .. } => {
                let u: f64 = rng.gen();
                (self.cdf.partition_point(|c| *c < u) as u32).min(self.cdf.len() as u32 - 1)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let s = KeyDist::Zipf { n: 100, s: 1.2 }.sampler();
        let mut rng = rand::thread_rng();
        let mut counts = [0u32; 100];
        for _ in 0..20_000 {
            counts[s.sample(&mut rng) as usize] += 1;
        }
        assert!(counts[0] > counts[10] * 5, "{:?}", &counts[..12]);
        assert!(counts.iter().sum::<u32>() == 20_000);
    }

    #[test]
    fn uniform_and_hot() {
        let mut rng = rand::thread_rng();
        assert_eq!(KeyDist::Hot.sampler().sample(&mut rng), 0);
        let u = KeyDist::Uniform { n: 3 }.sampler();
        assert!((0..100).all(|_| u.sample(&mut rng) < 3));
        assert!(KeyDist::Uniform { n: 0 }.validate().is_err());
    }
}
