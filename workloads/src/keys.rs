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

/// How a backlog's rows spread over its keys: the shape a user names for a capacity plan
/// (`uniform`, or `zipf:S` with exponent S above 0, 1.0 classic Zipf, higher more skewed).
/// Written as that string in TOML and on the command line.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Skew {
    /// Every key gets the same share (rows go round the keys).
    #[default]
    Uniform,
    /// Key `k` (from 0) gets a share proportional to `1 / (k + 1)^s`.
    Zipf { s: f64 },
}

impl Skew {
    /// The distribution of keys drawn with this skew over `n` keys.
    pub fn over(self, n: u32) -> KeyDist {
        match self {
            Skew::Uniform => KeyDist::Uniform { n },
            Skew::Zipf { s } => KeyDist::Zipf { n, s },
        }
    }

    pub fn is_uniform(&self) -> bool {
        *self == Skew::Uniform
    }
}

impl std::fmt::Display for Skew {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skew::Uniform => f.write_str("uniform"),
            Skew::Zipf { s } => write!(f, "zipf:{s}"),
        }
    }
}

impl std::str::FromStr for Skew {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("uniform") {
            return Ok(Skew::Uniform);
        }
        let bad = || {
            format!(
                "key skew `{text}`: use `uniform` or `zipf:S` with an exponent S above 0 (`zipf:1.1`)"
            )
        };
        let s = text
            .strip_prefix("zipf:")
            .ok_or_else(bad)?
            .trim()
            .parse::<f64>()
            .map_err(|_| bad())?;
        if !s.is_finite() || s <= 0.0 {
            return Err(bad());
        }
        Ok(Skew::Zipf { s })
    }
}

impl Serialize for Skew {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Skew {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
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
    fn skew_reads_and_writes_as_text() {
        assert_eq!("uniform".parse::<Skew>(), Ok(Skew::Uniform));
        assert_eq!("zipf:1.1".parse::<Skew>(), Ok(Skew::Zipf { s: 1.1 }));
        assert_eq!(Skew::Zipf { s: 0.9 }.to_string(), "zipf:0.9");
        for bad in ["zipf", "zipf:0", "zipf:-1", "zipf:x", "pareto:1"] {
            let e = bad.parse::<Skew>().unwrap_err();
            assert!(e.contains("uniform") && e.contains("zipf:S"), "{e}");
        }
        assert_eq!(
            Skew::Zipf { s: 1.2 }.over(7),
            KeyDist::Zipf { n: 7, s: 1.2 }
        );
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
