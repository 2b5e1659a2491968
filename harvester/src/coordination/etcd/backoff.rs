//! Pauses between retries, so that an unreachable or refusing server never makes the elector (or
//! a Rink member, `assign::rink`) spin, while the first retries after a blip still come quickly.

use std::time::Duration;

/// From 100ms, doubling up to `max`.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);

    pub fn new(max: Duration) -> Backoff {
        Backoff {
            next: Backoff::FIRST.min(max),
            max,
        }
    }

    /// The next pause.
    pub fn next(&mut self) -> Duration {
        let pause = self.next;
        self.next = (pause * 2).min(self.max);
        pause
    }

    /// Back to the first pause (after a success).
    pub fn reset(&mut self) {
        self.next = Backoff::FIRST.min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(1000));
        let pauses: Vec<_> = (0..6).map(|_| b.next().as_millis()).collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next(), Duration::from_millis(100));
        assert_eq!(
            Backoff::new(Duration::from_millis(50)).next(),
            Duration::from_millis(50)
        );
    }
}
