//! Retry policy: which failures retry, and the jittered exponential backoff between
//! tries. Also the clock and jitter source, injectable so tests control both.

use crate::backoff::{Backoff, Jitter};
use crate::timefmt::Millis;
use std::sync::Mutex;
use std::time::Duration;

/// Bounds for retrying transient failures (5xx, transport errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total tries, the first included.
    pub tries: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            tries: 3,
            base: Duration::from_millis(200),
            cap: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (0 for the first retry), given a jitter in
    /// [0, 1). "Equal jitter": half the exponential step is fixed, half random, so
    /// clients that failed together do not retry together, yet each waits a little.
    pub fn delay(&self, retry: u32, jitter: f64) -> Duration {
        Backoff::new(self.base, self.cap).equal(retry, jitter)
    }

    /// Whether a failure on try number `tried` (1-based) gets another try.
    pub fn should_retry(&self, tried: u32) -> bool {
        tried < self.tries
    }
}

/// Where the client gets the wall clock and jitter. Tests pass a fixed clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
    /// A number in [0, 1).
    fn jitter(&self) -> f64;
}

/// The real clock, and [`Jitter`] for jitter.
pub struct SystemClock {
    jitter: Mutex<Jitter>,
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock {
            jitter: Mutex::new(Jitter::from_clock()),
        }
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        crate::timefmt::now_millis()
    }

    fn jitter(&self) -> f64 {
        self.jitter.lock().unwrap_or_else(|e| e.into_inner()).draw()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_cap() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(0, 0.0), Duration::from_millis(100));
        assert_eq!(p.delay(0, 1.0), Duration::from_millis(200));
        assert_eq!(p.delay(1, 0.0), Duration::from_millis(200));
        assert_eq!(p.delay(3, 1.0), Duration::from_millis(1600));
        assert_eq!(p.delay(4, 1.0), Duration::from_secs(2));
        assert_eq!(p.delay(40, 1.0), Duration::from_secs(2));
        assert!(p.delay(2, 0.5) > p.delay(2, 0.0));
    }

    #[test]
    fn tries_are_bounded() {
        let p = RetryPolicy::default();
        assert!(p.should_retry(1));
        assert!(p.should_retry(2));
        assert!(!p.should_retry(3));
    }

    #[test]
    fn jitter_stays_in_range_and_varies() {
        let c = SystemClock::default();
        let v: Vec<f64> = (0..100).map(|_| c.jitter()).collect();
        assert!(v.iter().all(|x| (0.0..1.0).contains(x)));
        assert!(v.windows(2).any(|w| w[0] != w[1]));
    }
}
