//! Exponential backoff with jitter, and the one source of jitter: the rule every growing
//! wait in the tree follows (GitHub calls, cleanups, the coordinator link, the holds,
//! GitHub's header-less rate limits). A retry at a steady pace (the store's busy
//! handler, a scale set lookup) names its constant where it is declared instead. The
//! jitter is a number in `[0, 1)` handed in, so a test pins it; [`Jitter`] makes them.
//! Where a schedule must be the same every time (a hold that `status` shows and a test
//! pins), [`Backoff::after_failures`] is its form with no jitter.

use std::time::Duration;

/// Steps that double from `base` to at most `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    pub const fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff { base, cap }
    }

    /// Step `n` (0 first): `base * 2^n`, at most `cap`.
    pub fn step(&self, n: u32) -> Duration {
        self.base.saturating_mul(1u32 << n.min(16)).min(self.cap)
    }

    /// The wait after `failures` failures in a row (1 the first, 0 counted as 1), with
    /// no jitter: `base`, doubling to `cap`, the same every time. A caller that wants
    /// spread draws its jitter itself and passes it to [`Backoff::equal`] instead.
    pub fn after_failures(&self, failures: u32) -> Duration {
        self.step(failures.saturating_sub(1))
    }

    /// "Equal jitter": half of step `n` fixed, half spread by `jitter`, so clients that
    /// failed together do not retry together, yet each waits a little.
    pub fn equal(&self, n: u32, jitter: f64) -> Duration {
        let half = self.step(n) / 2;
        half + half.mul_f64(jitter.clamp(0.0, 1.0))
    }

    /// "Full jitter" above the base: uniform in `[base, step(n)]`.
    pub fn full(&self, n: u32, jitter: f64) -> Duration {
        let span = self.step(n).saturating_sub(self.base);
        self.base + span.mul_f64(jitter.clamp(0.0, 1.0))
    }
}

/// xorshift64: jitter only needs to spread retries, not be unpredictable.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    /// A fixed sequence, for tests and reproducible runs.
    pub fn seeded(seed: u64) -> Jitter {
        Jitter(seed | 1)
    }

    /// Seeded from the clock and the process id: two daemons started together differ.
    pub fn from_clock() -> Jitter {
        let now = crate::timefmt::now_millis() as u64;
        Jitter::seeded(now ^ ((std::process::id() as u64) << 32))
    }

    /// The next number in `[0, 1)`.
    pub fn draw(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn steps_double_to_the_cap_and_jitter_stays_in_its_bounds() {
        let b = Backoff::new(MS(200), MS(2000));
        assert_eq!(
            (b.step(0), b.step(3), b.step(40)),
            (MS(200), MS(1600), MS(2000))
        );
        assert_eq!((b.equal(0, 0.0), b.equal(0, 1.0)), (MS(100), MS(200)));
        assert_eq!(
            (b.full(0, 0.7), b.full(2, 0.0), b.full(2, 1.0)),
            (MS(200), MS(200), MS(800))
        );
        let mut j = Jitter::seeded(7);
        for n in 0..40 {
            let x = j.draw();
            assert!((0.0..1.0).contains(&x));
            let (e, f) = (b.equal(n, x), b.full(n, x));
            assert!(e >= b.step(n) / 2 && e <= b.step(n), "{n}: {e:?}");
            assert!(f >= b.base && f <= b.step(n), "{n}: {f:?}");
        }
        // Out-of-range jitter is clamped, never past the step.
        assert_eq!(b.equal(1, 7.0), b.step(1));
    }

    #[test]
    fn the_no_jitter_schedule_doubles_from_the_first_failure_to_the_cap_every_time() {
        let b = Backoff::new(MS(30_000), MS(600_000));
        let waits: Vec<u64> = (1..=7)
            .map(|f| b.after_failures(f).as_millis() as u64)
            .collect();
        assert_eq!(
            waits,
            vec![30_000, 60_000, 120_000, 240_000, 480_000, 600_000, 600_000]
        );
        // The same answer twice, for a count of 0 as for 1, and no overflow far out.
        assert_eq!(b.after_failures(3), b.after_failures(3));
        assert_eq!(b.after_failures(0), b.after_failures(1));
        assert_eq!(b.after_failures(u32::MAX), b.cap);
    }

    #[test]
    fn jitter_varies_and_a_seed_repeats() {
        let v: Vec<f64> = {
            let mut j = Jitter::seeded(42);
            (0..100).map(|_| j.draw()).collect()
        };
        assert!(v.windows(2).any(|w| w[0] != w[1]));
        let mut again = Jitter::seeded(42);
        assert_eq!(again.draw(), v[0]);
        let mut c = Jitter::from_clock();
        assert!((0.0..1.0).contains(&c.draw()));
    }
}
