//! How fast this machine is right now: a fixed single-threaded CPU loop, timed at a run's start
//! and end. On the shared 2-core machine of `results/warm-20261202/README.md` the same build's
//! Postgres and harvester CPU per record rose by 45-55 % and its DB-only ceiling fell from 90.0k
//! to 62.6k rows/s between two runs minutes apart, with nothing else running: the host's own
//! speed. A report that says how long the loop took at both ends lets a reader tell the
//! harvester's changes from the machine's.

use std::time::Instant;

/// Iterations of the loop (about 50 ms here).
const ITERATIONS: u64 = 50_000_000;

/// The loop's time in milliseconds: the fastest of three tries (the least disturbed).
pub fn loop_ms() -> f64 {
    (0..3).map(|_| once()).fold(f64::INFINITY, f64::min)
}

fn once() -> f64 {
    let t = Instant::now();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..ITERATIONS {
        // xorshift with the counter folded in: nothing for the compiler to hoist.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    std::hint::black_box(x);
    t.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_loop_takes_time() {
        let ms = super::loop_ms();
        assert!(ms > 0.0 && ms.is_finite(), "{ms}");
    }
}
