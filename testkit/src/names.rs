//! Names that never collide between tests, test processes or reruns against the same services.

use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// `<prefix>-<pid>-<counter>-<random>`, valid as a Kafka topic or group name.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let salt: u32 = rand::random();
    format!("{prefix}-{}-{n}-{salt:08x}", std::process::id())
}

/// A unique topic name.
pub fn topic(prefix: &str) -> String {
    unique(&format!("t.{prefix}"))
}

/// A unique lower-case identifier usable unquoted as a Postgres schema name.
pub fn schema(prefix: &str) -> String {
    unique(prefix).replace(['-', '.'], "_").to_lowercase()
}
